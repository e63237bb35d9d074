"""Scenarios for client quotas, SCRAM credentials, UpdateFeatures and AlterReplicaLogDirs.

Registered into ``compat_tests.scenarios.SCENARIOS`` when that module is imported. Entity and
user names are unique to each scenario (the Kafka broker is shared by the whole session);
lists whose order Kafka takes from a HashMap are sorted before comparing.
"""

# ruff: noqa: B023
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from compat_tests.scenarios import (
    Outcome,
    Steps,
    build_batch,
    connect,
    create_topic,
    err,
    produce,
    scenario,
    simple_records,
)
from protocol._generated.alter_client_quotas_request import AlterClientQuotasRequest as ACQ
from protocol._generated.alter_replica_log_dirs_request import AlterReplicaLogDirsRequest as ARLD
from protocol._generated.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest as AUSC,
)
from protocol._generated.api_versions_request import ApiVersionsRequest
from protocol._generated.describe_client_quotas_request import DescribeClientQuotasRequest as DCQ
from protocol._generated.describe_log_dirs_request import DescribeLogDirsRequest
from protocol._generated.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest as DUSC,
)
from protocol._generated.update_features_request import UpdateFeaturesRequest as UF

P = "cq_"  # this scenario's entity names
SETTLE_PAUSE_S = 0.2
SETTLE_TRIES = 25


def settled(fn: Callable[[], Any]) -> Any:
    """``fn()`` once two calls SETTLE_PAUSE_S apart agree: Kafka's broker answers describes from
    its metadata image, which may trail the controller's commit that answered the alter."""
    last = fn()
    for _ in range(SETTLE_TRIES):
        time.sleep(SETTLE_PAUSE_S)
        cur = fn()
        if cur == last:
            return cur
        last = cur
    return last


def _alter_outcome(r: Any) -> list[Any]:
    return sorted(
        [[[e.entity_type, e.entity_name] for e in x.entity], err(x.error_code), x.error_message]
        for x in r.entries
    )


def _describe_outcome(r: Any) -> dict[str, Any]:
    entries = None
    if r.entries is not None:
        entries = sorted(
            [
                sorted([e.entity_type, e.entity_name or ""] for e in x.entity),
                sorted([v.key, "NaN" if v.value != v.value else v.value] for v in x.values),
            ]
            for x in r.entries
            # only this scenario's entities (defaults and ip entities: only it sets them)
            if all((e.entity_name or P).startswith(P) or e.entity_type == "ip"
                   for e in x.entity)
        )
    return {"error_code": err(r.error_code), "error_message": r.error_message, "entries": entries}


@scenario
def client_quotas(bootstrap: str) -> Outcome:
    """AlterClientQuotas / DescribeClientQuotas: entity kinds, default entities, Kafka's
    validation messages, validate_only, removal, and describe filters (exact, default,
    specified, strict)."""
    out = Steps()

    def ent(*pairs: tuple[str, str | None]) -> list[ACQ.EntityData]:
        return [ACQ.EntityData(entity_type=t, entity_name=n) for t, n in pairs]

    def op(key: str, value: float, remove: bool = False) -> ACQ.OpData:
        return ACQ.OpData(key=key, value=value, remove=remove)

    with connect(bootstrap) as c:
        def alter(entries: list[tuple[list[Any], list[Any]]], validate_only: bool = False,
                  v: int = 1) -> list[Any]:
            req = ACQ(entries=[ACQ.EntryData(entity=e, ops=o) for e, o in entries],
                      validate_only=validate_only)
            return _alter_outcome(c.request(req, v))

        def describe(comps: list[tuple[str, int, str | None]], strict: bool = False,
                     v: int = 1) -> dict[str, Any]:
            req = DCQ(components=[DCQ.ComponentData(entity_type=t, match_type=m, match=x)
                                  for t, m, x in comps], strict=strict)
            return settled(lambda: _describe_outcome(c.request(req, v)))

        cases: list[tuple[str, list[tuple[list[Any], list[Any]]]]] = [
            ("client", [(ent(("client-id", P + "c")), [op("producer_byte_rate", 1024)])]),
            ("user", [(ent(("user", P + "u")), [op("consumer_byte_rate", 2048),
                                                op("request_percentage", 12.5)])]),
            ("user_client", [(ent(("user", P + "u"), ("client-id", P + "c")),
                              [op("controller_mutation_rate", 0.5)])]),
            ("ip", [(ent(("ip", "127.0.0.7")), [op("connection_creation_rate", 7)])]),
            ("unknown_key", [(ent(("client-id", P + "x")), [op("bogus", 1)])]),
            ("negative", [(ent(("client-id", P + "x")), [op("producer_byte_rate", -1)])]),
            ("zero", [(ent(("client-id", P + "x")), [op("request_percentage", 0)])]),
            ("fractional", [(ent(("client-id", P + "x")), [op("producer_byte_rate", 1.5)])]),
            ("too_large", [(ent(("client-id", P + "x")), [op("producer_byte_rate", 1e20)])]),
            ("int_too_large", [(ent(("ip", "127.0.0.8")),
                                [op("connection_creation_rate", 3e9)])]),
            ("wrong_key_for_ip", [(ent(("ip", "127.0.0.8")), [op("producer_byte_rate", 5)])]),
            ("bad_ip", [(ent(("ip", "not a host!!")), [op("connection_creation_rate", 3)])]),
            ("ip_and_user", [(ent(("ip", "127.0.0.8"), ("user", P + "a")),
                              [op("connection_creation_rate", 3)])]),
            ("empty_entity", [([], [op("producer_byte_rate", 3)])]),
            ("unknown_type", [(ent(("group", P + "g")), [op("producer_byte_rate", 3)])]),
            ("empty_name", [(ent(("user", "")), [op("producer_byte_rate", 3)])]),
            ("duplicate_key", [(ent(("user", P + "d")), [op("producer_byte_rate", 3),
                                                         op("producer_byte_rate", 4)])]),
            ("duplicate_entity", [(ent(("user", P + "e")), [op("producer_byte_rate", 3)]),
                                  (ent(("user", P + "e")), [op("consumer_byte_rate", 4)])]),
            ("one_bad_one_good", [(ent(("user", P + "ok")), [op("producer_byte_rate", 5)]),
                                  (ent(("user", P + "bad")), [op("bogus", 5)])]),
            ("remove_absent", [(ent(("user", P + "none")), [op("producer_byte_rate", 0, True)])]),
        ]
        for name, entries in cases:
            out.step(f"alter_{name}", lambda: alter(entries))
        out.step("alter_defaults", lambda: alter([
            (ent(("user", None)), [op("producer_byte_rate", 5)]),
            (ent(("user", None), ("client-id", None)), [op("producer_byte_rate", 6)]),
        ]))
        out.step("alter_v0", lambda: alter(
            [(ent(("client-id", P + "v0")), [op("producer_byte_rate", 9)])], v=0))
        out.step("validate_only", lambda: alter(
            [(ent(("user", P + "vo")), [op("producer_byte_rate", 3)])], validate_only=True))
        out.step("validate_only_bad", lambda: alter(
            [(ent(("user", P + "vo")), [op("producer_byte_rate", -3)])], validate_only=True))
        out.step("describe_validate_only", lambda: describe([("user", 0, P + "vo")]))
        out.step("remove", lambda: alter(
            [(ent(("user", P + "u")), [op("request_percentage", 0, True)])]))
        for name, comps, strict in (
            ("all", [], False),
            ("all_strict", [], True),
            ("exact_user", [("user", 0, P + "u")], False),
            ("exact_user_strict", [("user", 0, P + "u")], True),
            ("default_user", [("user", 1, None)], False),
            ("default_user_strict", [("user", 1, None)], True),
            ("specified_user", [("user", 2, None)], False),
            ("specified_both_strict", [("user", 2, None), ("client-id", 2, None)], True),
            ("specified_ip", [("ip", 2, None)], False),
            ("ip_with_user", [("ip", 2, None), ("user", 2, None)], False),
            ("exact_null", [("user", 0, None)], False),
            ("default_with_match", [("user", 1, "x")], False),
            ("specified_with_match", [("user", 2, "x")], False),
            ("bad_match_type", [("user", 7, None)], False),
            ("unknown_type", [("group", 2, None)], False),
            ("empty_type", [("", 2, None)], False),
            ("type_twice", [("user", 2, None), ("user", 2, None)], False),
        ):
            out.step(f"describe_{name}", lambda: describe(comps, strict))
        out.step("describe_v0", lambda: describe([("client-id", 0, P + "c")], v=0))
        # The default user's producer_byte_rate (5 B/s) applies to User:ANONYMOUS: one batch
        # of ~900 bytes on a fresh connection is throttled for minutes, far past the 11 s of
        # the rate's windows (Kafka 4.3.1 does not bound bandwidth throttles). The connection
        # stays muted that long, so it is closed after the one answer; then the defaults go,
        # or every later scenario on this broker would be throttled.
        create_topic(c, P + "t", 1)
        settled(lambda: describe([("user", 1, None)], True))
        with connect(bootstrap) as p:
            r = produce(p, P + "t", build_batch(simple_records(60)))
            out.step("default_user_throttles_anonymous", lambda: {
                "error_code": err(r.responses[0].partition_responses[0].error_code),
                "throttle_over_60s": r.throttle_time_ms > 60_000})
        out.step("remove_defaults", lambda: alter([
            (ent(("user", None)), [op("producer_byte_rate", 0, True)]),
            (ent(("user", None), ("client-id", None)), [op("producer_byte_rate", 0, True)]),
        ]))
    return out


def _scram_alter(r: Any) -> list[Any]:
    return sorted([x.user, err(x.error_code), x.error_message] for x in r.results)


def _scram_describe(r: Any, prefix: str) -> dict[str, Any]:
    return {
        "error_code": err(r.error_code),
        "error_message": r.error_message,
        "results": sorted(
            [x.user, err(x.error_code), x.error_message,
             [[i.mechanism, i.iterations] for i in sorted(x.credential_infos,
                                                          key=lambda i: i.mechanism)]]
            for x in r.results if x.user.startswith(prefix)
        ),
    }


@scenario
def scram_credentials(bootstrap: str) -> Outcome:
    """AlterUserScramCredentials / DescribeUserScramCredentials: upserts of both mechanisms,
    iteration bounds, unknown mechanisms, empty names, duplicates, deletions of absent
    credentials, describe of named / unknown / repeated users and of every user."""
    out = Steps()
    p = "sc_"

    def up(name: str, mech: int = 1, iterations: int = 8192,
           salted: bytes = b"k" * 32) -> AUSC.ScramCredentialUpsertion:
        return AUSC.ScramCredentialUpsertion(name=p + name if name else "", mechanism=mech,
                                             iterations=iterations, salt=b"salt",
                                             salted_password=salted)

    def de(name: str, mech: int = 1) -> AUSC.ScramCredentialDeletion:
        return AUSC.ScramCredentialDeletion(name=p + name if name else "", mechanism=mech)

    with connect(bootstrap) as c:
        def alter(ups: list[Any], dels: list[Any] | None = None) -> list[Any]:
            return _scram_alter(c.request(AUSC(deletions=dels or [], upsertions=ups), 0))

        def describe(names: list[str] | None) -> dict[str, Any]:
            users = None if names is None else [DUSC.UserName(name=p + n) for n in names]
            return settled(lambda: _scram_describe(c.request(DUSC(users=users), 0), p))

        out.step("describe_none_yet", lambda: describe(["alice"]))
        out.step("upsert_sha256", lambda: alter([up("alice")]))
        out.step("upsert_sha512", lambda: alter([up("alice", 2, 4096), up("bob", 2, 16384)]))
        out.step("same_user_twice", lambda: alter([up("carol"), up("carol", 2)]))
        out.step("too_few_iterations", lambda: alter([up("dave", 1, 4095)]))
        out.step("too_many_iterations", lambda: alter([up("dave", 1, 16385)]))
        out.step("unknown_mechanism", lambda: alter([up("dave", 0), up("erin", 3)]))
        out.step("empty_name", lambda: alter([up("")]))
        out.step("empty_salted_password", lambda: alter([up("frank", salted=b"")]))
        out.step("delete_absent", lambda: alter([], [de("nobody")]))
        out.step("delete_absent_twice", lambda: alter([], [de("nobody"), de("nobody")]))
        out.step("delete_twice", lambda: alter([], [de("alice"), de("alice")]))
        out.step("mixed", lambda: alter([up("gina"), up("hank", 5)], [de("bob", 1)]))
        out.step("describe_named", lambda: describe(["alice", "bob", "ghost"]))
        out.step("describe_twice", lambda: describe(["alice", "alice"]))
        out.step("describe_all", lambda: describe(None))
        out.step("describe_empty_list", lambda: describe([]))
        out.step("delete_one", lambda: alter([], [de("alice", 2)]))
        out.step("describe_after_delete", lambda: describe(["alice"]))
        out.step("delete_last", lambda: alter([], [de("alice", 1)]))
        out.step("describe_gone", lambda: describe(["alice"]))
    return out


def _features(c: Any, names: tuple[str, ...]) -> dict[str, Any]:
    r = c.request(ApiVersionsRequest(client_software_name="compat", client_software_version="1"),
                  4)
    return {f.name: f.max_version_level for f in r.finalized_features if f.name in names}


@scenario
def update_features(bootstrap: str) -> Outcome:
    """UpdateFeatures v0-2 (mostly validate_only): upgrades, safe/unsafe downgrades,
    metadata.version refusals, unknown features and upgrade types; then a real group.version
    downgrade (ConsumerGroupHeartbeat answers UNSUPPORTED_VERSION) and upgrade back."""
    from protocol._generated.consumer_group_heartbeat_request import (
        ConsumerGroupHeartbeatRequest as CGH,
    )

    out = Steps()
    shared = ("metadata.version", "group.version", "transaction.version",
              "eligible.leader.replicas.version")
    with connect(bootstrap) as c:
        def update(items: list[tuple[str, int, int]], v: int = 2,
                   validate_only: bool = True) -> dict[str, Any]:
            keys = []
            for name, level, kind in items:
                k = UF.FeatureUpdateKey(feature=name, max_version_level=level)
                if v == 0:
                    k.allow_downgrade = kind != 1
                else:
                    k.upgrade_type = kind
                keys.append(k)
            r = c.request(UF(timeout_ms=30000, feature_updates=keys,
                             validate_only=validate_only), v)
            return {
                "error_code": err(r.error_code), "error_message": r.error_message,
                "results": sorted([x.feature, err(x.error_code), x.error_message]
                                  for x in r.results),
            }

        cases: list[tuple[str, list[tuple[str, int, int]]]] = [
            ("mv_same", [("metadata.version", 30, 1)]),
            ("mv_above", [("metadata.version", 31, 1)]),
            ("mv_down_as_upgrade", [("metadata.version", 29, 1)]),
            ("mv_safe_down", [("metadata.version", 29, 2)]),
            ("mv_unsafe_down", [("metadata.version", 26, 3)]),
            ("mv_zero", [("metadata.version", 0, 2)]),
            ("gv_same", [("group.version", 1, 1)]),
            ("gv_down_as_upgrade", [("group.version", 0, 1)]),
            ("gv_safe_down", [("group.version", 0, 2)]),
            ("gv_unsafe_down", [("group.version", 0, 3)]),
            ("gv_above", [("group.version", 2, 1)]),
            ("tv_safe_down", [("transaction.version", 1, 2)]),
            ("tv_above", [("transaction.version", 3, 1)]),
            ("elr_down", [("eligible.leader.replicas.version", 0, 2)]),
            ("unknown_feature", [("bogus.version", 1, 1)]),
            ("unknown_feature_zero", [("bogus.version", 0, 2)]),
            ("negative", [("group.version", -1, 2)]),
            ("bad_upgrade_type", [("group.version", 1, 0)]),
            ("first_error_wins", [("group.version", 0, 2), ("bogus", 1, 1)]),
            ("named_twice", [("group.version", 0, 2), ("group.version", 1, 1)]),
            ("nothing", []),
        ]
        for name, items in cases:
            out.step(name, lambda: update(items))
        out.step("v1_ok", lambda: update([("group.version", 1, 1),
                                          ("transaction.version", 2, 1)], v=1))
        out.step("v1_error", lambda: update([("group.version", 0, 2), ("bogus", 1, 1)], v=1))
        out.step("v0_allow_downgrade", lambda: update([("group.version", 0, 2)], v=0))
        out.step("v0_above", lambda: update([("metadata.version", 31, 1)], v=0))
        out.step("finalized_before", lambda: settled(lambda: _features(c, shared)))
        try:
            out.step("gv_down", lambda: update([("group.version", 0, 2)], validate_only=False))
            out.step("finalized_down", lambda: settled(lambda: _features(c, shared)))
            out.step("heartbeat_down", lambda: err(c.request(CGH(
                group_id="compat-uf", member_id="compat-uf-member-0000001", member_epoch=0,
                rebalance_timeout_ms=30000, subscribed_topic_names=["t"], topic_partitions=[]),
                1).error_code))
        finally:
            out.step("gv_up", lambda: update([("group.version", 1, 1)], validate_only=False))
        out.step("finalized_after", lambda: settled(lambda: _features(c, shared)))
    return out


@scenario
def alter_replica_log_dirs(bootstrap: str) -> Outcome:
    """AlterReplicaLogDirs v1-2 on a single log dir: to the dir the replica is in, to unknown
    and relative paths, unknown topics and partitions, a partition named under two dirs."""
    topic = "alter_replica_log_dirs"
    out = Steps()
    with connect(bootstrap) as c:
        create_topic(c, topic, 2)
        ldr = c.request(DescribeLogDirsRequest(topics=None), 4)
        here = ldr.results[0].log_dir

        def move(dirs: list[tuple[str, list[tuple[str, list[int]]]]], v: int = 2) -> list[Any]:
            req = ARLD(dirs=[ARLD.AlterReplicaLogDir(path=d, topics=[
                ARLD.AlterReplicaLogDirTopic(name=t, partitions=ps) for t, ps in ts])
                for d, ts in dirs])
            r = c.request(req, v)
            return sorted([t.topic_name, p.partition_index, err(p.error_code)]
                          for t in r.results for p in t.partitions)

        out.step("same_dir", lambda: move([(here, [(topic, [0, 1])])]))
        out.step("same_dir_v1", lambda: move([(here, [(topic, [0])])], v=1))
        out.step("unknown_dir", lambda: move([("/nonexistent/compat", [(topic, [0])])]))
        out.step("relative_dir", lambda: move([("relative", [(topic, [0])])]))
        out.step("unknown_partition", lambda: move([(here, [(topic, [7])])]))
        out.step("unknown_topic", lambda: move([(here, [(f"{topic}-none", [0])])]))
        out.step("last_dir_wins", lambda: move([(here, [(topic, [0, 1])]),
                                                ("/nonexistent/compat", [(topic, [0])])]))
    return out
