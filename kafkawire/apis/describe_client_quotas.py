"""DescribeClientQuotas (key 48), versions 0-1 (v1 flexible).

Filters over the client quotas of the metadata image (``kraft/quotas.py``): per entity type a
component matching one name (EXACT 0), the default entity (DEFAULT 1) or any entity of that
type, the default included (SPECIFIED 2); ``strict`` keeps only entities with no other types; no
component and not strict lists everything. A bad filter is a top-level error (INVALID_REQUEST,
or UNSUPPORTED_VERSION for an unknown entity type) with null entries, as Kafka. Entries are
listed sorted by entity, values by key. Quotas are not enforced (docs/DESIGN.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraft.quotas import describe_client_quotas, entity_order
from protocol._generated.describe_client_quotas_request import DescribeClientQuotasRequest
from protocol._generated.describe_client_quotas_response import DescribeClientQuotasResponse
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 48
VERSIONS = (0, 1)

R = DescribeClientQuotasResponse


async def handle(
    broker: Broker, ctx: RequestContext, req: DescribeClientQuotasRequest
) -> DescribeClientQuotasResponse:
    comps = [(c.entity_type, c.match_type, c.match) for c in req.components]
    try:
        found = describe_client_quotas(broker.image, comps, req.strict)
    except KafkaError as e:
        resp = R(throttle_time_ms=0, error_code=e.code, error_message=e.message)
        resp.entries = None  # null, as Kafka (the constructor turns None into [])
        return resp
    entries = [
        R.EntryData(
            entity=[R.EntityData(entity_type=t, entity_name=n) for t, n in entity_order(entity)],
            values=[R.ValueData(key=k, value=v) for k, v in sorted(values.items())],
        )
        for entity, values in sorted(found, key=lambda ev: [(t, n or "") for t, n in ev[0]])
    ]
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message="", entries=entries)
