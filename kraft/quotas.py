"""Client quotas (KIP-546 describe/alter, KIP-554): validation, records, describe filters.

Sans-I/O controller logic for AlterClientQuotas and the broker's DescribeClientQuotas, over
``MetadataImage.client_quotas`` (replayed from ClientQuotaRecord). Behaviour and messages are
Apache Kafka 4.3.1's, checked against a real broker:

- Entity types ``user``, ``client-id``, ``ip``; a null name is the default entity. Allowed
  combinations: user, client-id, user+client-id (keys ``producer_byte_rate``,
  ``consumer_byte_rate`` (LONG), ``request_percentage``, ``controller_mutation_rate`` (DOUBLE)),
  ip alone (``connection_creation_rate``, INT). An ip name must parse or resolve (the caller
  passes the names that do not).
- Values: every quota must be > 0 (NaN passes, as in Kafka); LONG/INT values must be whole
  (within 1e-6) and fit the type.
- The first problem of an entity fails the whole entity; other entities still apply. An entity
  named twice (or a key named twice in one entity) answers "Ignoring duplicate entity ..." and
  the response has one entry per distinct entity.
- Removing an absent key is a no-op; setting the current value writes nothing.

Enforcement (throttling) is ``kafkawire.net.quotas`` (docs/SECURITY.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from kraft.image import MetadataImage, QuotaEntity
from protocol._generated.client_quota_record import ClientQuotaRecord
from protocol.errors import ErrorCode, KafkaError

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2

LONG, INT, DOUBLE = "LONG", "INT", "DOUBLE"
CLIENT_KEYS = {
    "producer_byte_rate": LONG,
    "consumer_byte_rate": LONG,
    "request_percentage": DOUBLE,
    "controller_mutation_rate": DOUBLE,
}
IP_KEYS = {"connection_creation_rate": INT}
_LIMITS = {LONG: (2**63 - 1, "a LONG"), INT: (2**31 - 1, "an INT")}
WHOLE_EPSILON = 1e-6

#: one alteration: its entity as sent (type, name) pairs and its (key, value or None) ops
Alteration = tuple[list[tuple[str, str | None]], list[tuple[str, float | None]]]


def _java_hash(s: str) -> int:
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h ^ (h >> 16)


def entity_order(pairs: Iterable[tuple[str, str | None]]) -> list[tuple[str, str | None]]:
    """The order Kafka lists an entity's components in (its small HashMap's iteration order)."""
    items = list(pairs)
    return sorted(items, key=lambda p: (_java_hash(p[0]) & 3, items.index(p)))


def describe_entity(pairs: Iterable[tuple[str, str | None]]) -> str:
    """Kafka's ``ClientQuotaEntity.toString``."""
    inner = ", ".join(f"{t}={n}" for t, n in entity_order(pairs))
    return f"ClientQuotaEntity(entries={{{inner}}})"


def _entity_map(pairs: list[tuple[str, str | None]]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for t, n in pairs:
        out[t] = n  # a type named twice: the last name wins, as in Kafka's map
    return out


def _check_entity(entity: dict[str, str | None], bad_ips: set[str]) -> dict[str, str]:
    if not entity:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")
    for t, n in entity.items():
        if t not in ENTITY_TYPES:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unhandled client quota entity type: {t}")
        if n == "":
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Empty {t} not supported")
    if IP in entity:
        if USER in entity or CLIENT_ID in entity:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                "Invalid quota entity combination, IP entity shouldnot be combined with User "
                "or ClientId",
            )
        ip = entity[IP]
        if ip is not None and ip in bad_ips:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"{ip} is not a valid IP or resolvable host.")
        return dict(IP_KEYS)
    return dict(CLIENT_KEYS)


def _check_value(kind: str, key: str, value: float) -> None:
    if value <= 0:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Quota {key} must be greater than 0")
    if kind in _LIMITS:
        limit, name = _LIMITS[kind]
        if value > limit:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"Proposed value for {key} is too large for {name}."
            )
        if not math.isnan(value) and abs(math.floor(value + WHOLE_EPSILON) - value) > WHOLE_EPSILON:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"{key} cannot be a fractional value.")


def _plan_entity(
    image: MetadataImage, entity: dict[str, str | None], ops: dict[str, float | None],
    bad_ips: set[str],
) -> list[Any]:
    keys = _check_entity(entity, bad_ips)
    for key in ops:
        if key not in keys:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid configuration key {key}")
    for key in sorted(ops):
        value = ops[key]
        if value is not None:
            _check_value(keys[key], key, value)
    ekey: QuotaEntity = tuple(sorted(entity.items()))
    current = image.client_quotas.get(ekey, {})
    comps = [
        ClientQuotaRecord.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()
    ]
    records: list[Any] = []
    for key, value in ops.items():
        if value is None:
            if key in current:
                records.append(ClientQuotaRecord(entity=comps, key=key, value=0.0, remove=True))
        elif current.get(key) != value or key not in current:
            records.append(ClientQuotaRecord(entity=comps, key=key, value=value, remove=False))
    return records


def alter_client_quotas(
    image: MetadataImage, alterations: list[Alteration], bad_ips: set[str]
) -> tuple[list[Any], list[tuple[list[tuple[str, str | None]], ErrorCode, str | None]]]:
    """(records, one (entity pairs, error, message) per distinct entity, in request order)."""
    records: list[Any] = []
    results: dict[QuotaEntity, tuple[list[tuple[str, str | None]], ErrorCode, str | None]] = {}
    for pairs, raw_ops in alterations:
        entity = _entity_map(pairs)
        ekey: QuotaEntity = tuple(sorted(entity.items()))
        shown = list(entity.items())
        ops: dict[str, float | None] = {}
        duplicate_key = False
        for key, value in raw_ops:
            duplicate_key = duplicate_key or key in ops
            ops[key] = value
        if ekey in results or duplicate_key:
            results[ekey] = (shown, ErrorCode.INVALID_REQUEST,
                             f"Ignoring duplicate entity {describe_entity(shown)}")
            continue
        try:
            records += _plan_entity(image, entity, ops, bad_ips)
        except KafkaError as e:
            results[ekey] = (shown, e.code, e.message)
        else:
            results[ekey] = (shown, ErrorCode.NONE, None)
    return records, list(results.values())


def describe_client_quotas(
    image: MetadataImage, components: list[tuple[str, int, str | None]], strict: bool
) -> list[tuple[QuotaEntity, dict[str, float]]]:
    """The (entity, values) pairs matching the filter; KafkaError for a bad filter."""
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for etype, match_type, match in components:
        if etype == "":
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if etype in exact or etype in specified:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"Entity type {etype} cannot appear more than once in the filter.",
            )
        if etype not in ENTITY_TYPES:
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {etype}")
        if match_type == MATCH_EXACT:
            if match is None:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, "
                                 "but set match string to null.")
            exact[etype] = match
        elif match_type == MATCH_DEFAULT:
            if match is not None:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Request specified "
                                 "MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[etype] = None
        elif match_type == MATCH_SPECIFIED:
            if match is not None:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Request specified "
                                 "MATCH_TYPE_SPECIFIED, but also specified a match string.")
            specified.add(etype)
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown match type {match_type}")
    named = set(exact) | specified
    if IP in named and (USER in named or CLIENT_ID in named):
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            "Invalid entity filter component combination. IP filter component should not be "
            "used with user or clientId filter component.",
        )
    if not named and strict:
        return []
    matched: Callable[[dict[str, str | None]], bool] = lambda ent: (  # noqa: E731
        all(t in ent and ent[t] == n for t, n in exact.items())
        and all(t in ent for t in specified)  # default entities too, as Kafka
        and (not strict or len(ent) == len(named))
    )
    return [(e, v) for e, v in image.client_quotas.items() if matched(dict(e))]
