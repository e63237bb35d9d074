"""The broker's authorizer: Kafka's StandardAuthorizer decisions (``kraft.acls``) over the ACLs
in the metadata image.

Enabled by ``authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer``
(the only authorizer Kafka 4 ships); any other class is refused at start. ``super.users`` is a
``;``-separated list of principals (``User:admin;User:CN=broker``) allowed everything;
``allow.everyone.if.no.acl.found`` (default false) allows a resource no ACL names. Without an
authorizer every request is allowed and the ACL APIs answer SECURITY_DISABLED, as Kafka.

Handlers ask ``ctx.allowed(operation, resource_type, name)``; denials are logged at INFO on the
``kafkawire.authorizer`` logger (Kafka's ``kafka.authorizer.logger``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kafkawire.config import BrokerConfig, ConfigError
from kraft.acls import (
    OPERATIONS,
    RESOURCE_TYPES,
    SUPPORTED_OPERATIONS,
    Acl,
    AuthorizerConfig,
    authorize,
    authorized_operations,
)
from kraft.image import MetadataImage

log = logging.getLogger("kafkawire.authorizer")
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
                name: str) -> bool:
        if not self.enabled:
            return True
        ok = authorize(self._acls(resource_type), self.config, principal, host, operation,
                       resource_type, name)
        if not ok:
            log.info("Principal = %s is Denied operation = %s from host = %s on resource = "
                     "%s:LITERAL:%s", principal, OPERATIONS.get(operation, operation), host,
                     RESOURCE_TYPES.get(resource_type, resource_type), name)
        return ok

    def operations(self, principal: str, host: str, resource_type: int, name: str) -> int:
        if not self.enabled:
            return sum(1 << op for op in SUPPORTED_OPERATIONS.get(resource_type, ()))
        return authorized_operations(self._acls(resource_type), self.config, principal, host,
                                     resource_type, name)
