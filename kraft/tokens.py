"""Delegation tokens (KIP-48): the tokens in the metadata image and the controller logic of
CreateDelegationToken / RenewDelegationToken / ExpireDelegationToken.

A token is a DelegationTokenRecord (id, owner, requester, renewers, issue, max and expiry
times); RemoveDelegationTokenRecord drops it. Its HMAC is HMAC-SHA512 of the token id with
``delegation.token.secret.key``; clients authenticate with SCRAM using the token id as user
name, the base64 HMAC as password and the ``tokenauth=true`` extension, and act as the owner.
Sans-I/O: the caller passes ``now_ms`` and the secret.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass
from typing import Any

from protocol._generated.delegation_token_record import DelegationTokenRecord
from protocol._generated.remove_delegation_token_record import RemoveDelegationTokenRecord
from protocol.errors import ErrorCode, KafkaError


@dataclass(frozen=True)
class TokenInfo:
    token_id: str
    owner: str
    requester: str
    renewers: tuple[str, ...]
    issue_ms: int
    max_ms: int
    expiry_ms: int


def info_of_record(rec: Any) -> TokenInfo:
    return TokenInfo(rec.token_id, rec.owner, rec.requester, tuple(rec.renewers),
                     rec.issue_timestamp, rec.max_timestamp, rec.expiration_timestamp)


def record_of(info: TokenInfo) -> DelegationTokenRecord:
    return DelegationTokenRecord(
        token_id=info.token_id, owner=info.owner, requester=info.requester,
        renewers=list(info.renewers), issue_timestamp=info.issue_ms,
        max_timestamp=info.max_ms, expiration_timestamp=info.expiry_ms)


def token_hmac(secret: str, token_id: str) -> bytes:
    return hmac.new(secret.encode(), token_id.encode(), hashlib.sha512).digest()


def token_password(secret: str, token_id: str) -> str:
    """The SCRAM password of a token: its HMAC in base64."""
    return base64.b64encode(token_hmac(secret, token_id)).decode()


def by_hmac(tokens: dict[str, TokenInfo], secret: str, mac: bytes) -> TokenInfo:
    for info in tokens.values():
        if hmac.compare_digest(token_hmac(secret, info.token_id), mac):
            return info
    raise KafkaError(ErrorCode.DELEGATION_TOKEN_NOT_FOUND)


def create(token_id: str, owner: str, requester: str, renewers: list[str], now_ms: int,
           requested_max_ms: int, max_lifetime_ms: int, renew_period_ms: int) -> TokenInfo:
    """A new token (Kafka's DelegationTokenControlManager.createDelegationToken)."""
    for r in renewers:
        kind, sep, name = r.partition(":")
        if not sep or kind != "User" or not name:
            raise KafkaError(ErrorCode.INVALID_PRINCIPAL_TYPE, f"Invalid renewer {r}")
    lifetime = max_lifetime_ms if requested_max_ms <= 0 else min(requested_max_ms,
                                                                 max_lifetime_ms)
    max_ms = now_ms + lifetime
    return TokenInfo(token_id, owner, requester, tuple(renewers), now_ms, max_ms,
                     min(max_ms, now_ms + renew_period_ms))


def renew(info: TokenInfo, principal: str, period_ms: int, now_ms: int,
          renew_period_ms: int) -> tuple[list[Any], int]:
    """(records, new expiry); owner or renewer only, not after expiry."""
    if principal != info.owner and principal not in info.renewers:
        raise KafkaError(ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH)
    if info.expiry_ms < now_ms:
        raise KafkaError(ErrorCode.DELEGATION_TOKEN_EXPIRED)
    period = renew_period_ms if period_ms < 0 else period_ms
    expiry = min(info.max_ms, now_ms + period)
    new = TokenInfo(info.token_id, info.owner, info.requester, info.renewers, info.issue_ms,
                    info.max_ms, expiry)
    return [record_of(new)], expiry


def expire(info: TokenInfo, principal: str, period_ms: int,
           now_ms: int) -> tuple[list[Any], int]:
    """(records, new expiry); a negative period expires the token now (it is removed)."""
    if principal != info.owner and principal not in info.renewers:
        raise KafkaError(ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH)
    if info.expiry_ms < now_ms:
        raise KafkaError(ErrorCode.DELEGATION_TOKEN_EXPIRED)
    if period_ms < 0:
        return [RemoveDelegationTokenRecord(token_id=info.token_id)], now_ms
    expiry = min(info.max_ms, now_ms + period_ms)
    new = TokenInfo(info.token_id, info.owner, info.requester, info.renewers, info.issue_ms,
                    info.max_ms, expiry)
    return [record_of(new)], expiry


def expired_records(tokens: dict[str, TokenInfo], now_ms: int) -> list[Any]:
    """RemoveDelegationTokenRecords for the tokens past their expiry (Kafka's periodic
    removal, ``delegation.token.expiry.check.interval.ms``)."""
    return [RemoveDelegationTokenRecord(token_id=t.token_id)
            for t in tokens.values() if t.expiry_ms < now_ms]
