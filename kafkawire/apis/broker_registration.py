"""BrokerRegistration (key 62), versions 0-4; controller listener only.

A broker registers with the active controller at start (kafkawire/metadata/broker_lifecycle.py): its
listeners, rack, supported features and incarnation id. The controller writes a
RegisterBrokerRecord with the broker *fenced* and answers the broker epoch, the offset of that
record (kraft/cluster_control.py). Errors: INCONSISTENT_CLUSTER_ID, UNSUPPORTED_VERSION (the
broker cannot serve the finalized metadata.version), DUPLICATE_BROKER_REGISTRATION (another
incarnation of the id still heartbeats).
- v1 ``is_migrating_zk_broker`` (ZooKeeper migration, gone in Kafka 4): ignored.
- v2+ ``log_dirs``: kept in the RegisterBrokerRecord (an Apache Kafka broker whose record lacks
  its directories registers again and again, BrokerRegistrationTracker).
- v3+ ``previous_broker_epoch`` (KIP-966): the epoch of a clean shutdown; otherwise the broker
  leaves every ISR and leadership on registration.
- v4: no field change (Kafka bumped it for KIP-1066's cordoned log dirs in heartbeats).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraft.cluster_control import Registration
from protocol._generated.broker_registration_request import BrokerRegistrationRequest
from protocol._generated.broker_registration_response import BrokerRegistrationResponse
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 62
VERSIONS = (0, 4)


async def handle(
    broker: Broker, ctx: RequestContext, req: BrokerRegistrationRequest
) -> BrokerRegistrationResponse:
    reg = Registration(
        broker_id=req.broker_id,
        cluster_id=req.cluster_id,
        incarnation_id=req.incarnation_id,
        endpoints=[(lst.name, lst.host, lst.port, lst.security_protocol) for lst in req.listeners],
        features={f.name: (f.min_supported_version, f.max_supported_version)
                  for f in req.features},
        rack=req.rack,
        previous_broker_epoch=req.previous_broker_epoch if ctx.api_version >= 3 else -1,
        log_dirs=tuple(req.log_dirs) if ctx.api_version >= 2 else (),
    )
    try:
        epoch = await broker.controller.register(reg)
    except KafkaError as e:
        return BrokerRegistrationResponse(throttle_time_ms=0, error_code=e.code, broker_epoch=-1)
    return BrokerRegistrationResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                      broker_epoch=epoch)
