"""ACLs with Kafka's StandardAuthorizer semantics: storage, CreateAcls/DeleteAcls/DescribeAcls
logic and the authorization decision. Sans-I/O over ``MetadataImage.acls`` (replayed from
AccessControlEntryRecord / RemoveAccessControlEntryRecord).

An ACL binds a resource pattern (type, name, LITERAL or PREFIXED; the literal name ``*`` is the
wildcard) to an entry (principal ``Type:name`` or ``User:*``, host or ``*``, operation, ALLOW or
DENY). ``authorize`` decides as Kafka's StandardAuthorizer:

1. a super user (``super.users``) is allowed everything;
2. the ACLs whose pattern matches the resource (same literal name, the wildcard, or a prefix of
   the name) and whose principal and host match the request are examined: a DENY for the
   operation (or for ALL) denies; an ALLOW for the operation or for one that implies it allows
   (READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS; ALL
   implies everything); DENY never applies through implication;
3. when no ACL at all matches the resource, ``allow.everyone.if.no.acl.found`` decides.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from protocol._generated.access_control_entry_record import AccessControlEntryRecord
from protocol._generated.remove_access_control_entry_record import (
    RemoveAccessControlEntryRecord,
)
from protocol.errors import ErrorCode

# Kafka's enum codes
ANY = 1
# resource types
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = 2, 3, 4, 5, 6, 7
RESOURCE_TYPES = {TOPIC: "Topic", GROUP: "Group", CLUSTER: "Cluster",
                  TRANSACTIONAL_ID: "TransactionalId", DELEGATION_TOKEN: "DelegationToken",
                  USER: "User"}
# pattern types
MATCH, LITERAL, PREFIXED = 2, 3, 4
# operations
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 2, 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
CREATE_TOKENS, DESCRIBE_TOKENS, TWO_PHASE_COMMIT = 13, 14, 15
OPERATIONS = {ALL: "All", READ: "Read", WRITE: "Write", CREATE: "Create", DELETE: "Delete",
              ALTER: "Alter", DESCRIBE: "Describe", CLUSTER_ACTION: "ClusterAction",
              DESCRIBE_CONFIGS: "DescribeConfigs", ALTER_CONFIGS: "AlterConfigs",
              IDEMPOTENT_WRITE: "IdempotentWrite", CREATE_TOKENS: "CreateTokens",
              DESCRIBE_TOKENS: "DescribeTokens", TWO_PHASE_COMMIT: "TwoPhaseCommit"}
# permission types
DENY, ALLOW = 2, 3

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"

#: operations an ALLOW of the key also grants
IMPLIED: dict[int, frozenset[int]] = {
    READ: frozenset({READ, DESCRIBE}), WRITE: frozenset({WRITE, DESCRIBE}),
    DELETE: frozenset({DELETE, DESCRIBE}), ALTER: frozenset({ALTER, DESCRIBE}),
    ALTER_CONFIGS: frozenset({ALTER_CONFIGS, DESCRIBE_CONFIGS}),
    ALL: frozenset(OPERATIONS),
}

#: the operations each resource type supports (Kafka's AclEntry.supportedOperations), for
#: the authorized-operations bit fields
SUPPORTED_OPERATIONS: dict[int, tuple[int, ...]] = {
    TOPIC: (READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    GROUP: (READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS),  # configs: KIP-848
    CLUSTER: (CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER,
              DESCRIBE),
    TRANSACTIONAL_ID: (DESCRIBE, WRITE, TWO_PHASE_COMMIT),
    DELEGATION_TOKEN: (DESCRIBE,),
    USER: (CREATE_TOKENS, DESCRIBE_TOKENS),
}


@dataclass(frozen=True)
class Acl:
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int

    def pattern_matches(self, resource_type: int, name: str) -> bool:
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == LITERAL:
            return self.resource_name in (name, WILDCARD)
        return self.pattern_type == PREFIXED and name.startswith(self.resource_name)


@dataclass(frozen=True)
class AclFilter:
    """A DescribeAcls/DeleteAcls filter; None fields and ANY codes match everything."""
    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission_type: int

    def matches(self, acl: Acl) -> bool:
        if self.resource_type != ANY and self.resource_type != acl.resource_type:
            return False
        if not self._pattern_matches(acl):
            return False
        return ((self.principal is None or self.principal == acl.principal)
                and (self.host is None or self.host == acl.host)
                and self.operation in (ANY, acl.operation)
                and self.permission_type in (ANY, acl.permission_type))

    def _pattern_matches(self, acl: Acl) -> bool:
        if self.pattern_type == MATCH:
            if self.resource_name is None:
                return True
            return acl.pattern_matches(acl.resource_type, self.resource_name)
        if self.pattern_type not in (ANY, acl.pattern_type):
            return False
        return self.resource_name is None or self.resource_name == acl.resource_name


# ---- validation and records -----------------------------------------------------------------

def validate(acl: Acl) -> str | None:
    """Kafka's reason to refuse an ACL creation (INVALID_REQUEST), or None."""
    if acl.resource_type not in RESOURCE_TYPES:
        return f"Invalid resourceType {acl.resource_type}"
    if acl.pattern_type not in (LITERAL, PREFIXED):
        return f"Invalid patternType {acl.pattern_type}"
    if acl.operation not in OPERATIONS:
        return f"Invalid operation {acl.operation}"
    if acl.permission_type not in (ALLOW, DENY):
        return f"Invalid permissionType {acl.permission_type}"
    if not acl.resource_name:
        return "Resource name should not be empty"
    if acl.resource_type == CLUSTER and acl.resource_name != CLUSTER_NAME:
        return "The only valid name for the CLUSTER resource is kafka-cluster"
    if ":" not in acl.principal:
        return (f"Could not parse principal from `{acl.principal}` (no colon is present "
                "separating the principal type from the principal name)")
    if not acl.host:
        return "Host should not be empty"
    return None


def create_acls(
    acls_now: dict[uuid.UUID, Acl], creations: Iterable[Acl], new_id: Any,
) -> tuple[list[Any], list[tuple[ErrorCode, str | None]]]:
    """(records, one (error, message) per creation); an ACL that exists is not added twice."""
    existing = set(acls_now.values())
    records: list[Any] = []
    results: list[tuple[ErrorCode, str | None]] = []
    for acl in creations:
        problem = validate(acl)
        if problem is not None:
            results.append((ErrorCode.INVALID_REQUEST, problem))
            continue
        if acl not in existing:
            existing.add(acl)
            records.append(AccessControlEntryRecord(
                id=new_id(), resource_type=acl.resource_type, resource_name=acl.resource_name,
                pattern_type=acl.pattern_type, principal=acl.principal, host=acl.host,
                operation=acl.operation, permission_type=acl.permission_type))
        results.append((ErrorCode.NONE, None))
    return records, results


def delete_acls(
    acls_now: dict[uuid.UUID, Acl], filters: list[AclFilter],
) -> tuple[list[Any], list[list[Acl]]]:
    """(records, the ACLs each filter removed)."""
    removed: set[uuid.UUID] = set()
    records: list[Any] = []
    out: list[list[Acl]] = []
    for flt in filters:
        matched = []
        for acl_id, acl in acls_now.items():
            if flt.matches(acl):
                matched.append(acl)
                if acl_id not in removed:
                    removed.add(acl_id)
                    records.append(RemoveAccessControlEntryRecord(id=acl_id))
        out.append(matched)
    return records, out


def describe_acls(acls_now: dict[uuid.UUID, Acl], flt: AclFilter) -> list[Acl]:
    return [acl for acl in acls_now.values() if flt.matches(acl)]


def acl_of_record(rec: Any) -> Acl:
    return Acl(rec.resource_type, rec.resource_name, rec.pattern_type, rec.principal, rec.host,
               rec.operation, rec.permission_type)


# ---- the decision ------------------------------------------------------------------------

@dataclass(frozen=True)
class AuthorizerConfig:
    super_users: frozenset[str]
    allow_if_no_acl: bool


def authorize(acls: Iterable[Acl], cfg: AuthorizerConfig, principal: str, host: str,
              operation: int, resource_type: int, name: str) -> bool:
    if principal in cfg.super_users:
        return True
    found = False
    allowed = False
    for acl in acls:
        if not acl.pattern_matches(resource_type, name):
            continue
        found = True
        if acl.principal not in (principal, WILDCARD_PRINCIPAL):
            continue
        if acl.host not in (host, WILDCARD):
            continue
        if acl.permission_type == DENY:
            if acl.operation in (operation, ALL):
                return False
        elif operation in IMPLIED.get(acl.operation, frozenset({acl.operation})):
            allowed = True
    if not found:
        return cfg.allow_if_no_acl
    return allowed


def authorized_operations(acls: list[Acl], cfg: AuthorizerConfig, principal: str, host: str,
                          resource_type: int, name: str) -> int:
    """Kafka's authorized-operations bit field (bit n: operation code n)."""
    bits = 0
    for op in SUPPORTED_OPERATIONS.get(resource_type, ()):
        if authorize(acls, cfg, principal, host, op, resource_type, name):
            bits |= 1 << op
    return bits
