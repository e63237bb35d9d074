"""Group admin (Kafka's GroupMetadataManager admin side): ListGroups over every group type,
DescribeGroups (classic groups; another type's id answers as Dead, as before), ConsumerGroupDescribe
(a classic group's id is GROUP_ID_NOT_FOUND, "not a consumer group"), DeleteGroups (a group
with members is NON_EMPTY_GROUP; else its offsets and its records are deleted).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from groups.classic_protocol import ClassicGroups
from groups.consumer import ConsumerGroups
from groups.group_type import GroupType
from groups.offset_manager import OffsetManager
from groups.records import Records
from protocol._generated.consumer_group_describe_response import ConsumerGroupDescribeResponse
from protocol._generated.describe_groups_response import DescribeGroupsResponse
from protocol._generated.list_groups_response import ListGroupsResponse
from protocol.errors import ErrorCode


class GroupAdmin:
    def __init__(self, types: Sequence[GroupType], offsets: OffsetManager, classic: ClassicGroups,
                 consumer: ConsumerGroups) -> None:
        self.types = types
        self.offsets = offsets
        self.classic = classic
        self.consumer = consumer

    def list_groups(self, states: list[str], types: list[str]) -> list[ListGroupsResponse.ListedGroup]:
        want_states = {s.lower() for s in states}
        want_types = {t.lower() for t in types}
        out: list[ListGroupsResponse.ListedGroup] = []
        for t in self.types:
            out += t.listed(want_states, want_types)
        return out

    def describe(self, group_id: str) -> DescribeGroupsResponse.DescribedGroup:
        return self.classic.describe(group_id)

    def consumer_describe(self, group_id: str, names: dict[uuid.UUID, str]) -> ConsumerGroupDescribeResponse.DescribedGroup:
        if self.classic.has(group_id):
            return ConsumerGroupDescribeResponse.DescribedGroup(
                error_code=ErrorCode.GROUP_ID_NOT_FOUND, group_id=group_id, members=[],
                error_message=f"Group {group_id} is not a consumer group.",
            )
        return self.consumer.describe(group_id, names)

    def delete_group(self, group_id: str, now_ms: int) -> tuple[Records, ErrorCode]:
        owner = self.offsets.owner(group_id)
        if owner is None:
            return [], ErrorCode.GROUP_ID_NOT_FOUND
        offsets = self.offsets.tombstones(group_id)
        records, code = owner.delete(group_id, now_ms)
        if code != ErrorCode.NONE:
            return [], code
        return offsets + records, ErrorCode.NONE
