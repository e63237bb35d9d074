"""AlterClientQuotas (key 49), versions 0-1 (v1 flexible).

Sets (``remove`` false) or removes quota keys of user / client-id / ip entities, the null name
being the default entity; validation and messages are Kafka's (``kraft/quotas.py``). The
changes are ClientQuotaRecords committed through the metadata quorum (``validate_only``:
checked, nothing written), so they survive restarts. One result per distinct entity, in
request order. An ip name that is neither an address nor resolvable is refused, as Kafka's
``InetAddress.getByName``. Quotas are not enforced (docs/DESIGN.md).
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

import trio

from kraft.acls import ALTER_CONFIGS, CLUSTER, CLUSTER_NAME
from kraft.quotas import IP, alter_client_quotas, entity_order
from protocol._generated.alter_client_quotas_request import AlterClientQuotasRequest
from protocol._generated.alter_client_quotas_response import AlterClientQuotasResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 49
VERSIONS = (0, 1)
#: how long one ip entity name may take to resolve
IP_RESOLVE_TIMEOUT_S = 5.0

R = AlterClientQuotasResponse


async def resolvable(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    with trio.move_on_after(IP_RESOLVE_TIMEOUT_S):
        try:
            return bool(await trio.socket.getaddrinfo(host, None))
        except OSError:
            return False
    return False


async def handle(
    broker: Broker, ctx: RequestContext, req: AlterClientQuotasRequest
) -> AlterClientQuotasResponse:
    alterations = [
        (
            [(e.entity_type, e.entity_name) for e in entry.entity],
            [(o.key, None if o.remove else o.value) for o in entry.ops],
        )
        for entry in req.entries
    ]
    ips = {n for pairs, _ops in alterations for t, n in pairs if t == IP and n}
    bad_ips = {ip for ip in sorted(ips) if not await resolvable(ip)}
    async with broker.metadata_lock:
        records, results = alter_client_quotas(broker.image, alterations, bad_ips)
        if not ctx.allowed(ALTER_CONFIGS, CLUSTER, CLUSTER_NAME):  # Kafka: ALTER_CONFIGS
            records = []
            results = [(pairs, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
                       for pairs, _code, _message in results]
        if not req.validate_only:
            await broker.commit_metadata(records)
    return R(
        throttle_time_ms=0,
        entries=[
            R.EntryData(
                error_code=code, error_message=message,
                entity=[R.EntityData(entity_type=t, entity_name=n) for t, n in entity_order(pairs)],
            )
            for pairs, code, message in results
        ],
    )
