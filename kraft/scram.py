"""SCRAM credentials (KIP-554): AlterUserScramCredentials checks and records, describe.

Sans-I/O controller logic over ``MetadataImage.scram`` (replayed from
UserScramCredentialRecord / RemoveUserScramCredentialRecord). The client sends the salt and
the salted password; as Kafka, the controller keeps only ``StoredKey = H(HMAC(salted,
"Client Key"))`` and ``ServerKey = HMAC(salted, "Server Key")`` (RFC 5802) with the salt and
iteration count. Checks and messages are Apache Kafka 4.3.1's, per user, first problem wins,
and a user with a problem has none of its operations applied:

- empty name: UNACCEPTABLE_CREDENTIAL "Username must not be empty"; a mechanism other than
  1 (SCRAM-SHA-256) / 2 (SCRAM-SHA-512): UNSUPPORTED_SASL_MECHANISM;
- a user named twice among the upsertions: DUPLICATE_RESOURCE;
- deleting a credential that does not exist: RESOURCE_NOT_FOUND (before a user named twice
  among the deletions: DUPLICATE_RESOURCE);
- iterations outside 4096..16384: UNACCEPTABLE_CREDENTIAL "Too few/many iterations";
- an empty salted password: UNKNOWN_SERVER_ERROR with no message (Kafka's HMAC refuses an
  empty key).

The credentials authenticate SASL/SCRAM clients (``kafkawire.security.sasl.ScramServer``).
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from kraft.image import MetadataImage
from protocol._generated.remove_user_scram_credential_record import (
    RemoveUserScramCredentialRecord,
)
from protocol._generated.user_scram_credential_record import UserScramCredentialRecord
from protocol.errors import ErrorCode, KafkaError

#: mechanism id -> (name, hashlib digest)
MECHANISMS = {1: ("SCRAM-SHA-256", "sha256"), 2: ("SCRAM-SHA-512", "sha512")}
#: Kafka's ScramMechanism bounds (both mechanisms)
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384

Deletion = tuple[str, int]
Upsertion = tuple[str, int, int, bytes, bytes]  # name, mechanism, iterations, salt, salted
Result = tuple[str, ErrorCode, str | None]


def scram_keys(digest: str, salted_password: bytes) -> tuple[bytes, bytes]:
    """(StoredKey, ServerKey) of RFC 5802 for a salted password."""
    if not salted_password:
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR)
    client_key = hmac.new(salted_password, b"Client Key", digest).digest()
    stored_key = hashlib.new(digest, client_key).digest()
    server_key = hmac.new(salted_password, b"Server Key", digest).digest()
    return stored_key, server_key


def alter_scram(
    image: MetadataImage, deletions: list[Deletion], upsertions: list[Upsertion]
) -> tuple[list[Any], list[Result]]:
    """(records, one (user, error, message) per user in request order)."""
    errors: dict[str, KafkaError] = {}
    users: list[str] = []
    for name in [d[0] for d in deletions] + [u[0] for u in upsertions]:
        if name not in users:
            users.append(name)

    def fail(name: str, e: KafkaError) -> None:
        errors.setdefault(name, e)

    for name, mech in [(d[0], d[1]) for d in deletions] + [(u[0], u[1]) for u in upsertions]:
        if not name:
            fail(name, KafkaError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"))
        elif mech not in MECHANISMS:
            fail(name, KafkaError(ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"))
    twice = KafkaError(ErrorCode.DUPLICATE_RESOURCE,
                       "A user credential cannot be altered twice in the same request")
    seen: set[str] = set()
    for name in [u[0] for u in upsertions]:
        if name in seen:
            fail(name, twice)
        seen.add(name)
    records: list[Any] = []
    planned: dict[str, list[Any]] = {}
    seen.clear()
    for name, mech in deletions:  # a missing credential is reported before a repeated one
        if name in errors:
            continue
        if mech not in image.scram.get(name, {}):
            fail(name, KafkaError(ErrorCode.RESOURCE_NOT_FOUND,
                                  "Attempt to delete a user credential that does not exist"))
            continue
        if name in seen:
            fail(name, twice)
            continue
        seen.add(name)
        planned.setdefault(name, []).append(
            RemoveUserScramCredentialRecord(name=name, mechanism=mech)
        )
    for name, mech, iterations, salt, salted in upsertions:
        if name in errors:
            continue
        try:
            if iterations < MIN_ITERATIONS:
                raise KafkaError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
            if iterations > MAX_ITERATIONS:
                raise KafkaError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
            stored_key, server_key = scram_keys(MECHANISMS[mech][1], salted)
        except KafkaError as e:
            fail(name, e)
            continue
        planned.setdefault(name, []).append(UserScramCredentialRecord(
            name=name, mechanism=mech, salt=salt, stored_key=stored_key, server_key=server_key,
            iterations=iterations,
        ))
    results: list[Result] = []
    for name in users:
        if name in errors:
            results.append((name, errors[name].code, errors[name].message))
        else:
            records += planned.get(name, [])
            results.append((name, ErrorCode.NONE, None))
    return records, results


def describe_scram(
    image: MetadataImage, names: list[str] | None
) -> list[tuple[str, ErrorCode, str, list[tuple[int, int]]]]:
    """(user, error, message, [(mechanism, iterations)]); ``names`` None/empty: every user."""
    def infos(user: str) -> list[tuple[int, int]]:
        return [(m, c.iterations) for m, c in sorted(image.scram[user].items())]

    if not names:
        return [(u, ErrorCode.NONE, "", infos(u)) for u in sorted(image.scram)]
    out: list[tuple[str, ErrorCode, str, list[tuple[int, int]]]] = []
    listed: list[str] = []
    for name in names:
        if name not in listed:
            listed.append(name)
    for name in listed:
        if names.count(name) > 1:
            out.append((name, ErrorCode.DUPLICATE_RESOURCE, "Cannot describe SCRAM credentials "
                        f"for the same user twice in a single request: {name}", []))
        elif name not in image.scram:
            out.append((name, ErrorCode.RESOURCE_NOT_FOUND,
                        f"Attempt to describe a user credential that does not exist: {name}", []))
        else:
            out.append((name, ErrorCode.NONE, "", infos(name)))
    return out
