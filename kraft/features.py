"""UpdateFeatures (KIP-584, KIP-778): checks and FeatureLevelRecords, sans-I/O.

``update_features(image, supported, node_id, updates)`` validates every update against the
finalized levels of the image and the ranges this node supports (a single node is the whole
quorum and the only broker) and returns the FeatureLevelRecords, or the first error as Kafka
4.3.1 reports it: INVALID_UPDATE_VERSION with "The update failed for all features since the
following feature had an error: ..." and nothing applied. Upgrade types: 1 upgrade, 2 safe
downgrade, 3 unsafe downgrade (v0's ``allow_downgrade`` is ignored, as Kafka 4.3.1 does). A
feature named twice: the last update counts. Level 0 removes a feature.

``metadata.version`` cannot move: this node supports up to the finalized level only, and every
downgrade is refused as Kafka refuses those that would lose metadata.
"""

from __future__ import annotations

from typing import Any

from kraft.image import MetadataImage
from protocol._generated.feature_level_record import FeatureLevelRecord
from protocol.errors import ErrorCode, KafkaError

METADATA_VERSION = "metadata.version"
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
FAILED_PREFIX = "The update failed for all features since the following feature had an error: "


def _check(
    image: MetadataImage, supported: dict[str, tuple[int, int]], node_id: int,
    name: str, level: int, upgrade_type: int,
) -> FeatureLevelRecord:
    def invalid(reason: str) -> KafkaError:
        return KafkaError(ErrorCode.INVALID_UPDATE_VERSION,
                          f"Invalid update version {level} for feature {name}. {reason}")

    if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        raise invalid("The controller does not support the given upgrade type.")
    if level < 0:
        raise invalid("A feature version cannot be less than 0.")
    if name not in supported:
        if level == 0:
            raise invalid(f"Feature {name} not found.")
        raise invalid(f"Local controller {node_id} does not support this feature.")
    lo, hi = supported[name]
    if not lo <= level <= hi:
        raise invalid(f"Local controller {node_id} only supports versions {lo}-{hi}")
    current = image.features.get(name, 0)
    if level < current and upgrade_type == UPGRADE:
        raise invalid("Can't downgrade the version of this feature without setting the upgrade "
                      "type to either safe or unsafe downgrade.")
    if level > current and upgrade_type != UPGRADE:
        raise invalid("Can't downgrade to a newer version.")
    if name == METADATA_VERSION and level < current:
        why = (
            "Unsafe metadata downgrade is not supported in this version."
            if upgrade_type == UNSAFE_DOWNGRADE
            else "Refusing to perform the requested downgrade because it might delete metadata "
            "information."
        )
        raise KafkaError(
            ErrorCode.INVALID_UPDATE_VERSION,
            f"Unsupported metadata.version downgrade from {current} to {level}. {why}",
        )
    return FeatureLevelRecord(name=name, feature_level=level)


def update_features(
    image: MetadataImage, supported: dict[str, tuple[int, int]], node_id: int,
    updates: list[tuple[str, int, int]],
) -> list[Any]:
    """Records for ``updates`` ((feature, level, upgrade type)); KafkaError on the first bad one."""
    wanted: dict[str, tuple[int, int]] = {}
    for name, level, upgrade_type in updates:
        wanted[name] = (level, upgrade_type)
    records: list[Any] = []
    for name, (level, upgrade_type) in wanted.items():
        try:
            rec = _check(image, supported, node_id, name, level, upgrade_type)
        except KafkaError as e:
            raise KafkaError(e.code, FAILED_PREFIX + (e.message or "")) from None
        if image.features.get(name, 0) != level:
            records.append(rec)
    return records
