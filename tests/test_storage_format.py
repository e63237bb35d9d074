"""Roles, quorum settings and ``kafkawire format``, with Kafka 4.3.1's rules and messages.

The expected messages are what Kafka 4.3.1's ``kafka-storage format`` printed for the same
properties. Formatted directories are read back with Kafka's ``kafka-dump-log`` where java and
the jars are available. A node of a configured cluster that is not formatted, or is formatted
for another node, refuses to start with one line; the implicit single node formats itself.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkawire.config.broker_config import BrokerConfig, ConfigError
from kafkawire.storage.format import (
    FormatOptions,
    StorageError,
    base64_to_uuid,
    format_storage,
    parse_initial_controllers,
    random_uuid,
    read_meta,
)
from kafkawire.tools.testing import (
    BrokerProcess,
    api_versions_ok,
    describe_quorum_leader,
    free_port,
)
from kraft.snapshot import SnapshotId, decode_snapshot

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("KAFKAWIRE_CACHE", Path.home() / ".cache" / "kafkawire"))
LIBS = CACHE / "kafka-4.3.1" / "libs"
L = "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"
MAP = "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
VOTERS = "1@127.0.0.1:19093"


def props(**kv: str) -> dict[str, str]:
    base = {"process.roles": "broker,controller", "node.id": "1",
            "controller.quorum.voters": VOTERS, "controller.listener.names": "CONTROLLER",
            "listeners": L, "listener.security.protocol.map": MAP}
    base.update({k.replace("_", "."): v for k, v in kv.items()})
    return {k: v for k, v in base.items() if v != "<unset>"}


KAFKA_MESSAGES = [
    (props(process_roles="broker,foo"),
     "Invalid value foo for configuration process.roles: String must be one of: broker, "
     "controller"),
    (props(process_roles=""),
     "Configuration 'process.roles' must not be empty. Valid values include: "
     "[broker, controller]"),
    (props(process_roles="<unset>"),
     'Missing required configuration "process.roles" which has no default value.'),
    (props(node_id="<unset>"),
     'Missing required configuration "node.id" which has no default value.'),
    (props(node_id="-1"), "Invalid value -1 for configuration node.id: Value must be at least 0"),
    (props(node_id="2"),
     "If process.roles contains the 'controller' role, the node id 2 must be included in the "
     "set of voters controller.quorum.voters=Set(1)"),
    (props(process_roles="broker", listeners="PLAINTEXT://127.0.0.1:19092"),
     "If process.roles contains just the 'broker' role, the node id 1 must not be included in "
     "the set of voters controller.quorum.voters=Set(1)"),
    (props(process_roles="broker", node_id="2"),
     "controller.listener.names must not contain a value appearing in the 'listeners' "
     "configuration when running KRaft with just the broker role"),
    (props(process_roles="controller"),
     "The listeners config must only contain KRaft controller listeners from "
     "controller.listener.names when process.roles=controller"),
    (props(listeners="PLAINTEXT://127.0.0.1:19092"),
     "controller.listener.names must contain at least one value appearing in the 'listeners' "
     "configuration when running the KRaft controller role"),
    (props(listener_security_protocol_map="PLAINTEXT:PLAINTEXT"),
     "Error creating broker listeners from '[PLAINTEXT://127.0.0.1:19092, "
     "CONTROLLER://127.0.0.1:19093]': No security protocol defined for listener CONTROLLER"),
    (props(process_roles="broker", node_id="2", listeners="PLAINTEXT://127.0.0.1:19092",
           listener_security_protocol_map="PLAINTEXT:PLAINTEXT"),
     "Controller listener with name CONTROLLER defined in controller.listener.names not found "
     "in listener.security.protocol.map  (an explicit security mapping for each controller "
     "listener is required if listener.security.protocol.map is non-empty, or if there are "
     "security protocols other than PLAINTEXT in use)"),
    (props(listener_security_protocol_map="CONTROLLER:PLAINTEXT,PLAINTEXT:FOO"),
     "Invalid security protocol `FOO` defined in listener.security.protocol.map"),
    (props(controller_quorum_voters="1@127.0.0.1"),
     "Failed to parse host name from entry 1@127.0.0.1 for the configuration "
     "controller.quorum.voters. Each entry should be in the form `{id}@{host}:{port}`."),
    (props(controller_quorum_voters="x@127.0.0.1:19093"),
     "Failed to parse voter ID as an integer from x"),
    (props(controller_listener_names="<unset>"),
     'Missing required configuration "controller.listener.names" which has no default value.'),
    (props(controller_quorum_voters="<unset>", controller_quorum_bootstrap_servers="nope"),
     'Failed to parse host name from nope for the configuration '
     'controller.quorum.bootstrap.servers. Each entry should be in the form "{host}:{port}"'),
]


@pytest.mark.parametrize(("raw", "message"), KAFKA_MESSAGES)
def test_kraft_settings_refused_with_kafkas_message(raw: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        BrokerConfig.from_dict(raw)
    assert str(e.value) == message


def test_valid_kraft_settings_and_the_implicit_single_node() -> None:
    cfg = BrokerConfig.from_dict(props())
    assert cfg.names_a_quorum and cfg.process_roles == {"broker", "controller"}
    assert [lst.name for lst in cfg.broker_listeners] == ["PLAINTEXT"]
    dyn = BrokerConfig.from_dict(props(controller_quorum_voters="<unset>",
                                       controller_quorum_bootstrap_servers="127.0.0.1:19093"))
    assert dyn.names_a_quorum
    broker = BrokerConfig.from_dict(props(process_roles="broker", node_id="2",
                                          listeners="PLAINTEXT://127.0.0.1:19092"))
    assert broker.process_roles == {"broker"}
    # no quorum named: today's single node, no controller listener needed
    single = BrokerConfig.from_dict({"process.roles": "broker,controller", "node.id": "1"})
    assert not single.names_a_quorum
    with pytest.raises(ConfigError, match="String must be one of"):
        BrokerConfig.from_dict({"process.roles": "zookeeper"})
    with pytest.raises(ConfigError, match="metadata.log.segment.bytes: Value must be at "
                       "least 8388608"):
        BrokerConfig.from_dict({"metadata.log.segment.bytes": "1000"})
    small = BrokerConfig.from_dict({"internal.metadata.log.segment.bytes": "1000"})
    assert small.metadata_log_segment_bytes == 1000  # Kafka's internal override for tests


def test_random_uuid_and_initial_controllers() -> None:
    ids = {random_uuid() for _ in range(2000)}
    assert len(ids) == 2000
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)
    got = parse_initial_controllers(
        "1@127.0.0.1:19093:AAAAAAAAAAAAAAAAAAAAAw,2@[::1]:19094:AAAAAAAAAAAAAAAAAAAABA")
    assert [(c.node_id, c.host, c.port) for c in got] == [(1, "127.0.0.1", 19093),
                                                          (2, "::1", 19094)]
    assert base64_to_uuid(got[0].directory_id).int == 3
    with pytest.raises(StorageError, match="No colon following port could be found."):
        parse_initial_controllers("1@127.0.0.1:19093")


def _fmt(tmp: Path, opts: FormatOptions, **kv: str) -> tuple[BrokerConfig, list[str]]:
    cfg = BrokerConfig.from_dict({**props(**kv), "log.dirs": f"{tmp}/a,{tmp}/b"})
    lines: list[str] = []
    format_storage(cfg, opts, lines.append, 1_000)
    return cfg, lines


CID = "MkU3OEVBNTcwNTJENDM2Qg"


def test_format_static_quorum(tmp_path: Path) -> None:
    _cfg, lines = _fmt(tmp_path, FormatOptions(CID))
    assert lines[0] == f"Formatting metadata directory {tmp_path}/a with metadata.version 4.3-IV0."
    assert lines[1] == f"Formatting data directory {tmp_path}/b with metadata.version 4.3-IV0."
    for d in ("a", "b"):
        meta = read_meta(tmp_path / d / "meta.properties")
        assert meta["cluster.id"] == CID and meta["node.id"] == "1" and meta["version"] == "1"
        assert len(meta["directory.id"]) == 22
        boot = decode_snapshot((tmp_path / d / "bootstrap.checkpoint").read_bytes(),
                               SnapshotId(0, 0))
        assert {r.name: r.feature_level for r in boot.records}["metadata.version"] == 30
    assert not (tmp_path / "a" / "__cluster_metadata-0").exists()
    with pytest.raises(StorageError, match=f"Log directory {tmp_path}/a is already formatted. "
                       "Use --ignore-formatted to ignore this directory and format the others."):
        _fmt(tmp_path, FormatOptions(CID))
    _cfg, lines = _fmt(tmp_path, FormatOptions(CID, ignore_formatted=True))
    assert lines == ["All of the log directories are already formatted."]


def test_format_dynamic_quorum(tmp_path: Path) -> None:
    dyn = {"controller_quorum_voters": "<unset>",
           "controller_quorum_bootstrap_servers": "127.0.0.1:19093"}
    with pytest.raises(StorageError, match="you must specify one of the following: "
                       "--standalone, --initial-controllers, or --no-initial-controllers."):
        _fmt(tmp_path / "x", FormatOptions(CID), **dyn)
    with pytest.raises(StorageError, match="You cannot specify controller.quorum.voters"):
        _fmt(tmp_path / "x", FormatOptions(CID, standalone=True))
    with pytest.raises(StorageError, match="You can only use --standalone on a controller."):
        _fmt(tmp_path / "x", FormatOptions(CID, standalone=True), process_roles="broker",
             node_id="2", listeners="PLAINTEXT://127.0.0.1:19092", **dyn)
    _cfg, lines = _fmt(tmp_path / "s", FormatOptions(CID, standalone=True), **dyn)
    assert lines[0].startswith("Formatting dynamic metadata voter directory")
    meta = read_meta(tmp_path / "s" / "a" / "meta.properties")
    snap = tmp_path / "s" / "a" / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint"
    got = decode_snapshot(snap.read_bytes(), SnapshotId(0, 0))
    assert got.kraft_version == 1 and got.voters is not None and not got.records
    (voter,) = got.voters.voters
    assert voter.voter_id == 1 and voter.voter_directory_id == base64_to_uuid(meta["directory.id"])
    assert [(e.name, e.host, e.port) for e in voter.endpoints] == [("CONTROLLER", "127.0.0.1",
                                                                    19093)]
    init = "1@127.0.0.1:19093:AAAAAAAAAAAAAAAAAAAAAw,2@127.0.0.1:19094:AAAAAAAAAAAAAAAAAAAABA"
    _cfg, lines = _fmt(tmp_path / "i", FormatOptions(CID, initial_controllers=init), **dyn)
    assert read_meta(tmp_path / "i" / "a" / "meta.properties")["directory.id"] == \
        "AAAAAAAAAAAAAAAAAAAAAw"
    _cfg, lines = _fmt(tmp_path / "n", FormatOptions(CID, initial_controllers=init), node_id="3",
                       **dyn)
    assert lines[0].startswith("Formatting dynamic metadata directory ")
    if shutil.which("java") and any(LIBS.glob("kafka-tools-*")):
        out = _kafka_tool("org.apache.kafka.tools.DumpLogSegments",
                          "--cluster-metadata-decoder", "--files", str(snap))
        assert 'KRaftVersion {"version":0,"kRaftVersion":1}' in out
        assert f'"voterDirectoryId":"{meta["directory.id"]}"' in out


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkawire", *args], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})


def _server_properties(tmp_path: Path, port: int, cport: int, quorum: str) -> Path:
    """A combined node's server.properties: ``quorum`` is its controller.quorum.* line."""
    conf = tmp_path / "server.properties"
    conf.write_text(
        f"process.roles=broker,controller\nnode.id=1\n{quorum}\n"
        f"controller.listener.names=CONTROLLER\nlisteners=PLAINTEXT://127.0.0.1:{port},"
        f"CONTROLLER://127.0.0.1:{cport}\nlistener.security.protocol.map={MAP}\n"
        f"log.dirs={tmp_path}/data\nmetrics.port=0\n")
    return conf


def _kafka_tool(main_class: str, *args: str) -> str:
    """stdout of one of Kafka 4.3.1's tool classes (the caller checks the jars are there)."""
    return subprocess.run(
        ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx256m", "-cp",
         f"{LIBS}/*", main_class, *args], capture_output=True, text=True, timeout=120).stdout


def test_cluster_node_must_be_formatted_to_start(tmp_path: Path) -> None:
    port, cport = free_port(), free_port()
    conf = _server_properties(tmp_path, port, cport,
                              f"controller.quorum.voters=1@127.0.0.1:{cport}")
    p = _cli("serve", str(conf))
    assert p.returncode != 0
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("kafkawire: No readable meta.properties"), \
        p.stderr
    p = _cli("format", "--cluster-id", CID, str(conf), "--override", "node.id=1")
    assert p.returncode == 0 and "Formatting metadata directory" in p.stdout, p.stderr
    p = _cli("serve", str(conf), "--override", "node.id=2",
             "--override", f"controller.quorum.voters=2@127.0.0.1:{cport}")
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode != 0 and len(lines) == 1 and "does not match node.id 2" in lines[0], \
        p.stderr
    uuid_out = _cli("random-uuid")
    assert uuid_out.returncode == 0 and len(uuid_out.stdout.strip()) == 22


def test_implicit_single_node_formats_itself(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with BrokerProcess(data):
        pass
    meta = read_meta(data / "meta.properties")
    assert meta["node.id"] == "1" and len(meta["cluster.id"]) == 22
    assert (data / "bootstrap.checkpoint").exists()
    qs = (data / "__cluster_metadata-0" / "quorum-state").read_text()
    assert qs.startswith('{"clusterId":"","leaderId":1,"leaderEpoch":1,')


def test_node_formatted_standalone_starts_with_its_voters(tmp_path: Path) -> None:
    port, cport = free_port(), free_port()
    conf = _server_properties(tmp_path, port, cport,
                              f"controller.quorum.bootstrap.servers=127.0.0.1:{cport}")
    p = _cli("format", "-t", CID, "-c", str(conf), "--standalone")
    assert p.returncode == 0, p.stderr
    overrides = {k: v for k, v in (ln.split("=", 1) for ln in conf.read_text().splitlines())}
    overrides.pop("listeners")
    overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}"
    from confluent_kafka.admin import AdminClient

    b = BrokerProcess(tmp_path / "data", port=port, overrides=overrides)
    with b:
        md = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=30)
        assert md.cluster_id == CID
        if shutil.which("java") and any(LIBS.glob("kafka-tools-*")):
            directory_id = read_meta(tmp_path / "data" / "meta.properties")["directory.id"]
            out = _kafka_tool("org.apache.kafka.tools.MetadataQuorumCommand",
                              "--bootstrap-server", b.bootstrap, "describe", "--status")
            assert "LeaderId:               1" in out, out
            assert f'"directoryId": "{directory_id}"' in out, out
            assert f'"endpoints": ["CONTROLLER://127.0.0.1:{cport}"]' in out, out
            cid = _kafka_tool("org.apache.kafka.tools.ClusterTool", "cluster-id",
                              "--bootstrap-server", b.bootstrap)
            assert f"Cluster ID: {CID}" in cid, cid
    meta = tmp_path / "data" / "__cluster_metadata-0"
    qs = (meta / "quorum-state").read_text()
    assert qs == ('{"leaderId":1,"leaderEpoch":1,"votedId":-1,"votedDirectoryId":'
                  '"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}')
    assert (meta / "00000000000000000000-0000000000.checkpoint").exists()


# ---- bootstrap: --release-version, --feature, --add-scram --------------------------------


def test_format_options_refused_with_kafkas_messages(tmp_path: Path) -> None:
    cases = [
        (FormatOptions(CID, features=("foo.version=1",)),
         "Unsupported feature: foo.version. Supported features are: eligible.leader.replicas."
         "version, group.version, kraft.version, share.version, streams.version, "
         "transaction.version"),
        (FormatOptions(CID, features=("group.version=9",)),
         "No feature:group.version with feature level 9"),
        (FormatOptions(CID, features=("group.version",)),
         "Can't parse feature=level string group.version: equals sign not found."),
        (FormatOptions(CID, release_version="9.9"),
         "Unknown metadata.version '9.9'. Supported metadata.version are: 4.3-IV0"),
        (FormatOptions(CID, add_scram=("SCRAM-SHA-1=[name=alice,password=x]",)),
         "The add-scram mechanism SCRAM-SHA-1 is not supported."),
        (FormatOptions(CID, add_scram=("SCRAM-SHA-256=[name=alice]",)),
         "You must supply one of 'password' or 'saltedpassword' to add-scram"),
    ]
    for opts, message in cases:
        with pytest.raises(StorageError) as e:
            _fmt(tmp_path / "x", opts)
        assert str(e.value) == message
        assert not (tmp_path / "x").exists()  # nothing written on a refusal


def test_format_features_and_scram_reach_the_cluster(tmp_path: Path) -> None:
    from protocol._generated.api_versions_request import ApiVersionsRequest
    from protocol._generated.describe_user_scram_credentials_request import (
        DescribeUserScramCredentialsRequest as D,
    )
    from tests.conftest import RawClient

    data = tmp_path / "data"
    p = _cli("format", "-t", CID, "--override", f"log.dir={data}", "--release-version", "4.3",
             "--feature", "group.version=0", "--feature", "transaction.version=1",
             "--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]",
             "--add-scram", "SCRAM-SHA-512=[name=bob,iterations=8192,password=b]")
    assert p.returncode == 0, p.stderr
    with BrokerProcess(data) as b:
        c = RawClient(b.bootstrap)
        try:
            r = c.request(ApiVersionsRequest(client_software_name="t",
                                             client_software_version="1"), 4)
            feats = {f.name: f.max_version_level for f in r.finalized_features}
            res = c.request(D(users=[D.UserName(name="alice"), D.UserName(name="bob")]), 0)
        finally:
            c.close()
        assert feats.get("metadata.version") == 30 and feats.get("transaction.version") == 1
        assert "group.version" not in feats  # format said 0: the start-up default keeps off
        got = {u.user: [(i.mechanism, i.iterations) for i in u.credential_infos]
               for u in res.results}
        assert got == {"alice": [(1, 4096)], "bob": [(2, 8192)]}
    with BrokerProcess(data) as b:  # and a restart does not change them
        c = RawClient(b.bootstrap)
        try:
            r = c.request(ApiVersionsRequest(client_software_name="t",
                                             client_software_version="1"), 4)
        finally:
            c.close()
        assert "group.version" not in {f.name for f in r.finalized_features}


def test_add_scram_matches_kafka() -> None:
    from kafkawire.metadata.bootstrap import parse_add_scram

    # kafka-storage format --add-scram with the same argument wrote these keys (Kafka 4.3.1)
    rec = parse_add_scram('SCRAM-SHA-256=[name=alice,salt="MWx2NHBkbnc0ZndxN25vdGN4bTB5eTFrN3E='
                          '",password=alice-secret,iterations=8192]')
    assert (rec.name, rec.mechanism, rec.iterations) == ("alice", 1, 8192)
    assert rec.salt == b"1lv4pdnw4fwq7notcxm0yy1k7q"
    assert rec.stored_key.hex() == STORED
    assert rec.server_key.hex() == SERVER


STORED = "01308d9b405dcb0e232f219c36541ad4135452953be0d087db8d643169cbfc48"
SERVER = "690eaf2152ad361f8e33d684ee84a280173423af7b35304145c2761bf38bb0a9"


def test_bootstrap_with_a_feature_we_do_not_serve_is_refused(tmp_path: Path) -> None:
    """Kafka 4.3.1's own bootstrap.checkpoint finalizes share.version and streams.version 1;
    share groups are served (share.version 1), streams groups are not."""
    from kafkawire.metadata.bootstrap import BootstrapError, read_bootstrap

    golden = Path(__file__).parent / "golden" / "metadata" / "bootstrap.checkpoint"
    shutil.copy(golden, tmp_path / "bootstrap.checkpoint")
    with pytest.raises(BootstrapError, match="finalizes streams.version at level 1, which this "
                       "node does not support"):
        read_bootstrap(tmp_path)


def test_a_voter_alone_in_a_quorum_of_three_never_leads(tmp_path: Path) -> None:
    """One node of a 3-voter quorum has no majority: it campaigns (pre-votes) but never
    leads, so it commits nothing alone; its broker side waits for an active controller."""
    port, cport = free_port(), free_port()
    voters = f"1@127.0.0.1:{cport},2@127.0.0.1:{free_port()},3@127.0.0.1:{free_port()}"
    bp = BrokerProcess(tmp_path / "data", port, overrides={
        "process.roles": "broker,controller", "node.id": "1",
        "controller.quorum.voters": voters, "controller.listener.names": "CONTROLLER",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}",
        "listener.security.protocol.map": MAP}, metrics_port=0)
    bp.format(CID)
    bp.launch()
    try:
        deadline = time.monotonic() + 6  # three times the longest election timeout (2 s)
        answered = 0
        while time.monotonic() < deadline:
            assert bp.proc is not None and bp.proc.poll() is None, bp.log()
            leader, _epoch = describe_quorum_leader("127.0.0.1", cport, 2.0)
            assert leader == -1, bp.log()
            answered += api_versions_ok("127.0.0.1", cport)
            time.sleep(0.2)
        assert answered > 0, bp.log()
        assert "Prospective" in bp.log()
    finally:
        bp.close()
