"""UpdateFeatures (key 57), versions 0-2 (flexible).

Changes finalized feature levels (``kafka-features upgrade/downgrade``) within the ranges this
node advertises in ApiVersions (``Broker.supported_features``); checks and messages are Kafka
4.3.1's (``kraft/features.py``). The FeatureLevelRecords go through the metadata quorum, so the
new levels survive restarts (start-up defaults never override a level set here), and
ApiVersions' finalized features and epoch (the metadata offset) follow at once.

What a level changes here, as in Kafka:
- ``group.version`` 0: ConsumerGroupHeartbeat / ConsumerGroupDescribe answer UNSUPPORTED_VERSION
  (and are no longer advertised, see FINDINGS.md); 1 turns them back on.
- ``transaction.version``: the transaction coordinator's shards switch at once (TV2's epoch
  bump on every EndTxn, or TV0/1), and Kafka 4.x Java clients pick the version from
  ApiVersions' finalized features.
- ``eligible.leader.replicas.version``: recorded and advertised (a single replica has no ELR).
- ``metadata.version`` only "changes" to its current level; ``kraft.version``,
  ``share.version`` and ``streams.version`` stay 0 (supported range 0-0): anything else is
  INVALID_UPDATE_VERSION "... only supports versions 0-0".

v0: ``allow_downgrade`` is ignored (every update is an upgrade) and there is no validate_only;
v0-1 list one result per feature on success (message "NONE", as Kafka) and none on error;
v2 has no per-feature results.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraft.features import UPGRADE, update_features
from protocol._generated.update_features_request import UpdateFeaturesRequest
from protocol._generated.update_features_response import UpdateFeaturesResponse
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 57
VERSIONS = (0, 2)

R = UpdateFeaturesResponse


async def handle(
    broker: Broker, ctx: RequestContext, req: UpdateFeaturesRequest
) -> UpdateFeaturesResponse:
    v = ctx.api_version
    updates = [
        (u.feature, u.max_version_level, UPGRADE if v == 0 else u.upgrade_type)
        for u in req.feature_updates
    ]
    validate_only = v >= 1 and req.validate_only
    try:
        async with broker.metadata_lock:
            records = update_features(
                broker.image, broker.supported_features(), broker.node_id, updates
            )
            if not validate_only and records:
                await broker.commit_metadata(records)
                broker.txn_coordinator.on_features_changed()
    except KafkaError as e:
        return R(throttle_time_ms=0, error_code=e.code, error_message=e.message, results=[])
    results = [] if v >= 2 else [
        R.UpdatableFeatureResult(feature=name, error_code=ErrorCode.NONE, error_message="NONE")
        for name in dict.fromkeys(u[0] for u in updates)
    ]
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, results=results)
