"""Client quotas, SCRAM credentials, feature levels and AlterReplicaLogDirs against a real broker.

Kafka's own tools (kafka-configs, kafka-features, kafka-log-dirs, kafka-reassign-partitions) of
both client lines (4.3.1 and 3.9.2, from the compat harness's jars), confluent-kafka's and
kafka-python's AdminClients (SCRAM; neither has a quota API), raw requests for what the tools do not reach, and restarts (clean
and kill -9): everything set lives in ``__cluster_metadata`` and comes back.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from kafkawire.tools.testing import BrokerProcess
from protocol._generated.alter_client_quotas_request import AlterClientQuotasRequest
from protocol._generated.alter_replica_log_dirs_request import AlterReplicaLogDirsRequest
from protocol._generated.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
)
from protocol._generated.api_versions_request import ApiVersionsRequest
from protocol._generated.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from protocol._generated.describe_client_quotas_request import DescribeClientQuotasRequest
from protocol._generated.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
)
from protocol._generated.update_features_request import UpdateFeaturesRequest
from protocol.errors import ErrorCode
from tests.conftest import RawClient
from tests.javatools import JavaTools, require_line

LINES = {"4.3.1": "4.x", "3.9.2": "3.9"}


@pytest.fixture(params=list(LINES))
def kafka_line(request: pytest.FixtureRequest) -> str:
    require_line(LINES[request.param])
    return LINES[str(request.param)]


def tool(line: str, name: str, *args: str, check: bool = True) -> str:
    return JavaTools(line).run(name, *args, check=check).output


def ask(bootstrap: str, req: Any, version: int) -> Any:
    """One request on a fresh connection."""
    c = RawClient(bootstrap)
    try:
        return c.request(req, version)
    finally:
        c.close()


def finalized(bootstrap: str) -> dict[str, int]:
    r = ask(bootstrap, ApiVersionsRequest(client_software_name="t", client_software_version="1"), 4)
    return {f.name: f.max_version_level for f in r.finalized_features}


def quotas(bootstrap: str, etype: str, name: str | None) -> dict[str, float]:
    D = DescribeClientQuotasRequest  # noqa: N806
    comp = D.ComponentData(entity_type=etype, match_type=0 if name else 1, match=name)
    r = ask(bootstrap, D(components=[comp], strict=True), 1)
    assert r.error_code == 0
    return {v.key: v.value for e in r.entries for v in e.values}


def scram(bootstrap: str, user: str) -> tuple[int, list[tuple[int, int]]]:
    D = DescribeUserScramCredentialsRequest  # noqa: N806
    res = ask(bootstrap, D(users=[D.UserName(name=user)]), 0).results[0]
    return res.error_code, [(i.mechanism, i.iterations) for i in res.credential_infos]


# ---- Kafka's tools, both lines ------------------------------------------------------------


@pytest.mark.slow
def test_kafka_configs_client_quotas(broker: BrokerProcess, kafka_line: str) -> None:
    bs = ["--bootstrap-server", broker.bootstrap]
    client = f"cq-{uuid.uuid4().hex[:6]}"
    ent = ["--entity-type", "clients", "--entity-name", client]
    out = tool(kafka_line, "configs", *bs, "--alter", *ent,
               "--add-config", "producer_byte_rate=1024,request_percentage=12.5")
    assert f"Completed updating config for client {client}." in out
    out = tool(kafka_line, "configs", *bs, "--describe", *ent)
    assert (f"Quota configs for client-id '{client}' are producer_byte_rate=1024.0, "
            "request_percentage=12.5") in out
    tool(kafka_line, "configs", *bs, "--alter", *ent, "--delete-config", "request_percentage")
    out = tool(kafka_line, "configs", *bs, "--describe", *ent)
    assert f"Quota configs for client-id '{client}' are producer_byte_rate=1024.0" in out
    assert "request_percentage" not in out
    # user + client-id, and the default user
    user = f"u-{client}"
    tool(kafka_line, "configs", *bs, "--alter", "--entity-type", "users", "--entity-name", user,
         "--entity-type", "clients", "--entity-name", client, "--add-config",
         "consumer_byte_rate=2048")
    out = tool(kafka_line, "configs", *bs, "--describe", "--entity-type", "users",
               "--entity-name", user, "--entity-type", "clients", "--entity-name", client)
    assert "consumer_byte_rate=2048.0" in out
    out = tool(kafka_line, "configs", *bs, "--alter", *ent, "--add-config",
               "producer_byte_rate=1.5", check=False)
    assert "producer_byte_rate cannot be a fractional value." in out
    out = tool(kafka_line, "configs", *bs, "--alter", *ent, "--add-config",
               "producer_byte_rate=-5", check=False)
    assert "Quota producer_byte_rate must be greater than 0" in out
    assert quotas(broker.bootstrap, "client-id", client) == {"producer_byte_rate": 1024.0}


@pytest.mark.slow
def test_kafka_configs_scram_credentials(broker: BrokerProcess, kafka_line: str) -> None:
    bs = ["--bootstrap-server", broker.bootstrap]
    user = f"alice-{uuid.uuid4().hex[:6]}"
    ent = ["--entity-type", "users", "--entity-name", user]
    out = tool(kafka_line, "configs", *bs, "--alter", *ent,
               "--add-config", "SCRAM-SHA-256=[iterations=8192,password=pw]")
    assert f"Completed updating config for user {user}." in out
    tool(kafka_line, "configs", *bs, "--alter", *ent, "--add-config", "SCRAM-SHA-512=[password=x]")
    out = tool(kafka_line, "configs", *bs, "--describe", *ent)
    assert (f"SCRAM credential configs for user-principal '{user}' are "
            "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096") in out
    tool(kafka_line, "configs", *bs, "--alter", *ent, "--delete-config", "SCRAM-SHA-512")
    assert scram(broker.bootstrap, user) == (0, [(1, 8192)])
    out = tool(kafka_line, "configs", *bs, "--alter", *ent, "--delete-config", "SCRAM-SHA-512",
               check=False)
    assert "Attempt to delete a user credential that does not exist" in out
    out = tool(kafka_line, "configs", *bs, "--alter", *ent, "--add-config",
               "SCRAM-SHA-256=[iterations=100,password=pw]", check=False)
    assert "Iterations 100 is less than the minimum 4096" in out  # the tool's own check
    tool(kafka_line, "configs", *bs, "--alter", *ent, "--delete-config", "SCRAM-SHA-256")
    assert scram(broker.bootstrap, user)[0] == ErrorCode.RESOURCE_NOT_FOUND


@pytest.mark.slow
def test_kafka_features_describe_and_dry_runs(broker: BrokerProcess, kafka_line: str) -> None:
    bs = ["--bootstrap-server", broker.bootstrap]
    out = tool(kafka_line, "features", *bs, "describe")
    tv = next(ln for ln in out.splitlines() if ln.startswith("Feature: transaction.version"))
    assert "SupportedMaxVersion: 2" in tv and "FinalizedVersionLevel: 2" in tv
    out = tool(kafka_line, "features", *bs, "upgrade", "--feature", "group.version=1",
               "--dry-run")
    assert "group.version can be upgraded to 1." in out
    out = tool(kafka_line, "features", *bs, "downgrade", "--feature", "transaction.version=1",
               "--dry-run")
    assert "transaction.version can be downgraded to 1." in out
    out = tool(kafka_line, "features", *bs, "upgrade", "--feature", "transaction.version=5",
               "--dry-run", check=False)
    assert ("Invalid update version 5 for feature transaction.version. Local controller 1 only "
            "supports versions 0-2") in out
    assert finalized(broker.bootstrap)["transaction.version"] == 2  # dry runs change nothing


@pytest.mark.slow
def test_kafka_features_downgrade_survives_restart(own_broker: BrokerProcess) -> None:
    require_line("4.x")
    bs = ["--bootstrap-server", own_broker.bootstrap]
    out = tool("4.x", "features", *bs, "downgrade", "--feature", "group.version=0",
               "--feature", "transaction.version=1")
    assert "group.version was downgraded to 0." in out
    assert "transaction.version was downgraded to 1." in out
    feats = finalized(own_broker.bootstrap)
    assert "group.version" not in feats and feats["transaction.version"] == 1
    c = RawClient(own_broker.bootstrap)
    try:
        r = c.request(ConsumerGroupHeartbeatRequest(
            group_id="g", member_id=uuid.uuid4().hex, member_epoch=0, rebalance_timeout_ms=1000,
            subscribed_topic_names=["t"], topic_partitions=[]), 0)
        assert r.error_code == ErrorCode.UNSUPPORTED_VERSION
    finally:
        c.close()
    own_broker.stop()
    own_broker.start()
    feats = finalized(own_broker.bootstrap)  # start-up defaults do not undo the downgrade
    assert "group.version" not in feats and feats["transaction.version"] == 1
    out = tool("4.x", "features", *bs, "upgrade", "--feature", "group.version=1",
               "--feature", "transaction.version=2")
    assert "group.version was upgraded to 1." in out
    assert finalized(own_broker.bootstrap)["group.version"] == 1


@pytest.mark.slow
def test_kafka_log_dirs_and_reassign_to_log_dir(tmp_path: Path) -> None:
    require_line("4.x")
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    d2.mkdir(parents=True)
    bp = BrokerProcess(d1, overrides={"log.dirs": f"{d1},{d2}"}).start()
    try:
        bs = ["--bootstrap-server", bp.bootstrap]
        tool("4.x", "topics", *bs, "--create", "--topic", "ldt", "--partitions", "2")
        out = tool("4.x", "log-dirs", *bs, "--describe", "--topic-list", "ldt")
        doc = json.loads(out.strip().splitlines()[-1])
        dirs = {d["logDir"]: d for d in doc["brokers"][0]["logDirs"]}
        # JBOD: each new partition goes to the directory holding the fewest
        assert [p["partition"] for p in dirs[str(d1.resolve())]["partitions"]] == ["ldt-0"]
        assert [p["partition"] for p in dirs[str(d2.resolve())]["partitions"]] == ["ldt-1"]
        assert dirs[str(d2.resolve())]["error"] is None
        plan = tmp_path / "plan.json"
        # ldt-0 to its own directory, then to the other one (it moves: test_log_dir_moves.py)
        for dest, expect in ((d1, None), (d2, None), (tmp_path / "d3", "LogDirNotFound")):
            plan.write_text(json.dumps({"version": 1, "partitions": [
                {"topic": "ldt", "partition": 0, "replicas": [1], "log_dirs": [str(dest)]}]}))
            out = tool("4.x", "reassign-partitions", *bs, "--execute",
                       "--reassignment-json-file", str(plan), check=False)
            if expect is None:
                assert "Successfully started partition reassignment" in out, out
            else:
                assert expect in out, out
    finally:
        bp.close()


# ---- stock AdminClients -------------------------------------------------------------------


def test_confluent_scram_credentials(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    user = f"ck-{uuid.uuid4().hex[:6]}"
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 10000)
    futs = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, info, b"secret", b"salty-salt")])
    futs[user].result(30)
    described = admin.describe_user_scram_credentials([user])[user].result(30)
    infos = described.scram_credential_infos
    assert [(i.mechanism, i.iterations) for i in infos] == [(ScramMechanism.SCRAM_SHA_512, 10000)]
    futs = admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)])
    with pytest.raises(Exception, match="does not exist"):
        futs[user].result(30)
    bad = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100)
    futs = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(f"{user}-x", bad, b"pw", b"salt")])
    with pytest.raises(Exception, match="Too few iterations"):
        futs[f"{user}-x"].result(30)
    every = admin.describe_user_scram_credentials().result(30)  # every user: one future
    assert user in every
    with pytest.raises(Exception, match="does not exist"):
        admin.describe_user_scram_credentials([f"{user}-none"])[f"{user}-none"].result(30)


def test_kafka_python_scram_credentials(broker: BrokerProcess) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import (
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin: Any = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        user = f"kp-{uuid.uuid4().hex[:6]}"
        errors = admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion(user, ScramMechanism.SCRAM_SHA_256, "pw", iterations=8192),
        ])
        assert errors[user] is None
        got = admin.describe_user_scram_credentials([user])[user]
        assert got["error"] is None
        assert [(int(i["mechanism"]), i["iterations"]) for i in got["credential_infos"]] == [
            (1, 8192)]
        errors = admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)])
        assert errors[user] is None
        assert admin.describe_user_scram_credentials([user])[user]["error"]
    finally:
        admin.close()


# ---- raw requests and restarts ------------------------------------------------------------


def test_state_survives_clean_restart_and_kill9(own_broker: BrokerProcess) -> None:
    A = AlterClientQuotasRequest  # noqa: N806
    S = AlterUserScramCredentialsRequest  # noqa: N806
    U = UpdateFeaturesRequest  # noqa: N806
    c = RawClient(own_broker.bootstrap)
    try:
        ent = [A.EntityData(entity_type="client-id", entity_name="app")]
        r = c.request(A(entries=[A.EntryData(entity=ent, ops=[
            A.OpData(key="producer_byte_rate", value=1024.0, remove=False),
            A.OpData(key="request_percentage", value=50.5, remove=False)])],
            validate_only=False), 1)
        assert r.entries[0].error_code == 0
        r = c.request(A(entries=[A.EntryData(entity=[A.EntityData(entity_type="user",
                                                                   entity_name="vo")], ops=[
            A.OpData(key="producer_byte_rate", value=1.0, remove=False)])],
            validate_only=True), 1)
        assert r.entries[0].error_code == 0
        r = c.request(S(deletions=[], upsertions=[S.ScramCredentialUpsertion(
            name="bob", mechanism=1, iterations=4096, salt=b"s", salted_password=b"k" * 32)]), 0)
        assert r.results[0].error_code == 0
        r = c.request(U(timeout_ms=1000, feature_updates=[U.FeatureUpdateKey(
            feature="eligible.leader.replicas.version", max_version_level=0, upgrade_type=2)],
            validate_only=False), 2)
        assert r.error_code == 0
    finally:
        c.close()
    for restart in ("clean", "kill9"):
        if restart == "clean":
            own_broker.stop()
        else:
            own_broker.kill()
        own_broker.start()
        assert quotas(own_broker.bootstrap, "client-id", "app") == {
            "producer_byte_rate": 1024.0, "request_percentage": 50.5}
        assert quotas(own_broker.bootstrap, "user", "vo") == {}
        assert scram(own_broker.bootstrap, "bob") == (0, [(1, 4096)])
        assert "eligible.leader.replicas.version" not in finalized(own_broker.bootstrap)


def test_alter_replica_log_dirs_errors(broker: BrokerProcess) -> None:
    from tests.test_admin_wire import creatable, create

    R = AlterReplicaLogDirsRequest  # noqa: N806
    here = str(Path(broker.data_dir).resolve())
    c = RawClient(broker.bootstrap)
    try:
        create(c, creatable("arld"))

        def move(path: str, topic: str, part: int) -> int:
            r = c.request(R(dirs=[R.AlterReplicaLogDir(path=path, topics=[
                R.AlterReplicaLogDirTopic(name=topic, partitions=[part])])]), 2)
            return int(r.results[0].partitions[0].error_code)

        assert move(here, "arld", 0) == ErrorCode.NONE
        assert move("/no/such/dir", "arld", 0) == ErrorCode.LOG_DIR_NOT_FOUND
        assert move("relative", "arld", 0) == ErrorCode.LOG_DIR_NOT_FOUND
        assert move(here, "arld", 9) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert move(here, "no-such-topic", 0) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    finally:
        c.close()
