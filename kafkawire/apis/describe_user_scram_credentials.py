"""DescribeUserScramCredentials (key 50), version 0 (flexible).

Lists the SCRAM mechanisms and iteration counts stored for users (``kraft/scram.py``), never
the keys: ``users`` null or empty lists every user (sorted by name); a named user without
credentials is RESOURCE_NOT_FOUND, a user named twice DUPLICATE_RESOURCE (one result), with
Kafka's messages. Error messages are "" on success, as Kafka sends them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraft.scram import describe_scram
from protocol._generated.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
)
from protocol._generated.describe_user_scram_credentials_response import (
    DescribeUserScramCredentialsResponse,
)
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 50
VERSIONS = (0, 0)

R = DescribeUserScramCredentialsResponse


async def handle(
    broker: Broker, ctx: RequestContext, req: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    names = None if req.users is None else [u.name for u in req.users]
    return R(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message="",
        results=[
            R.DescribeUserScramCredentialsResult(
                user=user, error_code=code, error_message=message,
                credential_infos=[
                    R.CredentialInfo(mechanism=m, iterations=i) for m, i in infos
                ],
            )
            for user, code, message, infos in describe_scram(broker.image, names)
        ],
    )
