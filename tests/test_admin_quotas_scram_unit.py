"""Unit checks of the sans-I/O quota / SCRAM / feature logic (kraft/), below the wire tests."""

from __future__ import annotations

import base64
import hashlib
import hmac

from hypothesis import given
from hypothesis import strategies as st

from kraft.features import update_features
from kraft.image import MetadataImage, apply
from kraft.quotas import alter_client_quotas, describe_client_quotas, entity_order
from kraft.scram import alter_scram, scram_keys
from protocol.errors import ErrorCode

SUPPORTED = {"group.version": (0, 1), "metadata.version": (7, 30)}


def test_scram_keys_rfc7677_vector() -> None:
    """RFC 7677's SCRAM-SHA-256 exchange: the ServerKey we store signs its AuthMessage."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", salt, 4096)
    stored_key, server_key = scram_keys("sha256", salted)
    nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    auth = (f"n=user,r=rOprNGfwEbeRWgbNEkqO,r={nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,"
            f"c=biws,r={nonce}").encode()
    signature = hmac.new(server_key, auth, "sha256").digest()
    assert base64.b64encode(signature) == b"6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    proof = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    client_key = bytes(a ^ b for a, b in zip(proof, hmac.new(stored_key, auth, "sha256").digest(),
                                             strict=True))
    assert hashlib.sha256(client_key).digest() == stored_key


def test_entity_order_is_kafkas() -> None:
    assert entity_order([("user", "u"), ("client-id", "c")]) == [("client-id", "c"), ("user", "u")]
    assert entity_order([("ip", None), ("user", "a")]) == [("user", "a"), ("ip", None)]


_names = st.sampled_from(["a", "b", None])
_ops = st.lists(st.tuples(st.sampled_from(["producer_byte_rate", "request_percentage"]),
                          st.one_of(st.none(), st.sampled_from([1.0, 2.0, 64.0]))),
                max_size=3)


@given(st.lists(st.tuples(st.sampled_from(["user", "client-id"]), _names, _ops), max_size=12))
def test_quota_records_replay_to_what_was_asked(
    steps: list[tuple[str, str | None, list[tuple[str, float | None]]]],
) -> None:
    """Alter one entity at a time; the replayed image always equals a plain dict model."""
    img = MetadataImage()
    model: dict[tuple[tuple[str, str | None], ...], dict[str, float]] = {}
    for etype, name, ops in steps:
        records, results = alter_client_quotas(img, [([(etype, name)], ops)], set())
        keys = [k for k, _v in ops]
        if len(set(keys)) != len(keys):
            assert results[0][1] == ErrorCode.INVALID_REQUEST
            assert not records
            continue
        assert results[0][1] == ErrorCode.NONE
        img = apply(img, records, img.offset + len(records), 1)
        cur = model.setdefault(((etype, name),), {})
        for k, v in ops:
            if v is None:
                cur.pop(k, None)
            else:
                cur[k] = v
        if not cur:
            model.pop(((etype, name),))
    assert img.client_quotas == model
    everything = describe_client_quotas(img, [], strict=False)
    assert dict(everything) == model


def test_scram_user_with_a_problem_changes_nothing() -> None:
    img = MetadataImage()
    records, results = alter_scram(img, [("zz", 1)], [("zz", 2, 8192, b"s", b"k" * 32)])
    assert records == [] and results == [("zz", ErrorCode.RESOURCE_NOT_FOUND,
                                          "Attempt to delete a user credential that does not exist")]
    records, _ = alter_scram(img, [], [("zz", 2, 8192, b"s", b"k" * 32)])
    img = apply(img, records, 0, 1)
    assert img.scram["zz"][2].iterations == 8192
    records, _ = alter_scram(img, [("zz", 2)], [])
    assert apply(img, records, 1, 1).scram == {}


def test_feature_level_zero_is_recorded() -> None:
    img = apply(MetadataImage(), update_features(MetadataImage(), SUPPORTED, 1,
                                                 [("group.version", 1, 1)]), 0, 1)
    img = apply(img, update_features(img, SUPPORTED, 1, [("group.version", 0, 2)]), 1, 1)
    assert "group.version" not in img.features and "group.version" in img.features_recorded
