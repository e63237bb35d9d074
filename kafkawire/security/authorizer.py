"""The broker's authorizer: Kafka's StandardAuthorizer decisions (``kraft.acls``) over the ACLs
in the metadata image.

Enabled by ``authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer``
(the only authorizer Kafka 4 ships); any other class is refused at start. ``super.users`` is a
``;``-separated list of principals (``User:admin;User:CN=broker``) allowed everything;
``allow.everyone.if.no.acl.found`` (default false) allows a resource no ACL names. Without an
authorizer every request is allowed and the ACL APIs answer SECURITY_DISABLED, as Kafka.

Handlers ask ``ctx.allowed(operation, resource_type, name)``; denials are logged at INFO on the
``kafkawire.security.authorizer`` logger (Kafka's ``kafka.authorizer.logger``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kafkawire.config.broker_config import BrokerConfig, ConfigError
from kraft.acls import (
    ALLOW,
    CLUSTER,
    CLUSTER_NAME,
    GROUP,
    IMPLIED,
    OPERATIONS,
    RESOURCE_TYPES,
    SUPPORTED_OPERATIONS,
    TOPIC,
    Acl,
    AuthorizerConfig,
    authorize,
    authorized_operations,
)
from kraft.image import MetadataImage
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.net.server import RequestContext

log = logging.getLogger("kafkawire.security.authorizer")
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


class Authorizer:
    def __init__(self, cfg: BrokerConfig, image: Callable[[], MetadataImage]) -> None:
        name = cfg.explicit.get("authorizer.class.name", "").strip()
        if name and name != STANDARD_AUTHORIZER:
            raise ConfigError(f"authorizer.class.name {name} is not available; kafkawire "
                              f"implements {STANDARD_AUTHORIZER}")
        self.enabled = bool(name)
        supers = cfg.explicit.get("super.users", "")
        self.config = AuthorizerConfig(
            frozenset(p.strip() for p in supers.split(";") if p.strip()),
            cfg.explicit.get("allow.everyone.if.no.acl.found", "false").strip().lower()
            == "true")
        self.image = image
        self._acl_image: MetadataImage | None = None
        self._by_type: dict[int, list[Acl]] = {}

    def _acls(self, resource_type: int) -> list[Acl]:
        img = self.image()
        if img is not self._acl_image:  # re-index when the image changes
            by_type: dict[int, list[Acl]] = {}
            for acl in img.acls.values():
                by_type.setdefault(acl.resource_type, []).append(acl)
            self._by_type, self._acl_image = by_type, img
        return self._by_type.get(resource_type, [])

    def allowed(self, principal: str, host: str, operation: int, resource_type: int,
                name: str, log_denied: bool = True) -> bool:
        if not self.enabled:
            return True
        ok = authorize(self._acls(resource_type), self.config, principal, host, operation,
                       resource_type, name)
        if not ok and log_denied:
            log.info("Principal = %s is Denied operation = %s from host = %s on resource = "
                     "%s:LITERAL:%s", principal, OPERATIONS.get(operation, operation), host,
                     RESOURCE_TYPES.get(resource_type, resource_type), name)
        return ok

    def allowed_somewhere(self, ctx: RequestContext, operation: int, resource_type: int) -> bool:
        """Kafka's ``authorizeByResourceType``, simplified: a super user, no authorizer, or an
        ALLOW ACL for the operation on some resource of the type that names the principal
        (or ``User:*``) and its host; DENY ACLs on other patterns are not weighed."""
        if not self.enabled:
            return True
        principal, host = ctx.connection.principal, ctx.connection.host
        if principal in self.config.super_users:
            return True
        return any(acl.permission_type == ALLOW and acl.principal in (principal, "User:*")
                   and acl.host in (host, "*")
                   and operation in IMPLIED.get(acl.operation, frozenset({acl.operation}))
                   for acl in self._acls(resource_type))

    def operations(self, principal: str, host: str, resource_type: int, name: str) -> int:
        if not self.enabled:
            return sum(1 << op for op in SUPPORTED_OPERATIONS.get(resource_type, ()))
        return authorized_operations(self._acls(resource_type), self.config, principal, host,
                                     resource_type, name)


# config resource type (DescribeConfigs/AlterConfigs) -> (ACL resource type, error when denied)
_CONFIG_RESOURCES: dict[int, tuple[int, ErrorCode, str]] = {
    2: (TOPIC, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."),
    4: (CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."),
    8: (CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."),
    16: (CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."),
    32: (GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed."),
}


def check_config_resource(ctx: RequestContext, operation: int, config_type: int,
                          name: str) -> KafkaError | None:
    """Kafka's check for a config resource: DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic, the
    group, or the cluster (brokers, broker loggers, client metrics)."""
    entry = _CONFIG_RESOURCES.get(config_type)
    if entry is None:
        return None
    rtype, code, message = entry
    if ctx.allowed(operation, rtype, CLUSTER_NAME if rtype == CLUSTER else name):
        return None
    return KafkaError(code, message)
