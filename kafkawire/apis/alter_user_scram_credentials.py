"""AlterUserScramCredentials (key 51), version 0 (flexible).

Upserts and deletes SCRAM-SHA-256 / SCRAM-SHA-512 credentials (``kraft/scram.py`` has the checks
and Kafka's messages): the broker derives StoredKey/ServerKey from the client's salted password
and commits UserScramCredentialRecord / RemoveUserScramCredentialRecord through the metadata
quorum, so credentials survive restarts. One result per user, in request order. The
credentials authenticate SASL/SCRAM clients (docs/SECURITY.md). With an authorizer: ALTER on
the cluster, else CLUSTER_AUTHORIZATION_FAILED for every user.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraft.acls import ALTER, CLUSTER, CLUSTER_NAME
from kraft.scram import alter_scram
from protocol._generated.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
)
from protocol._generated.alter_user_scram_credentials_response import (
    AlterUserScramCredentialsResponse,
)
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 51
VERSIONS = (0, 0)

R = AlterUserScramCredentialsResponse


async def handle(
    broker: Broker, ctx: RequestContext, req: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    deletions = [(d.name, d.mechanism) for d in req.deletions]
    upsertions = [
        (u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
        for u in req.upsertions
    ]
    if not ctx.allowed(ALTER, CLUSTER, CLUSTER_NAME):  # Kafka: ALTER on the cluster
        users = list(dict.fromkeys([d[0] for d in deletions] + [u[0] for u in upsertions]))
        results: list[tuple[str, ErrorCode, str | None]] = [
            (u, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None) for u in users]
    else:
        async with broker.metadata_lock:
            records, results = alter_scram(broker.image, deletions, upsertions)
            await broker.commit_metadata(records)
    return R(
        throttle_time_ms=0,
        results=[
            R.AlterUserScramCredentialsResult(user=user, error_code=code, error_message=message)
            for user, code, message in results
        ],
    )
