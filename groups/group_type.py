"""What every group type (classic, consumer; streams next, KIP-1071) offers the parts of the
shard that serve all groups alike: offsets (``groups/offset_manager.py``), admin
(``groups/admin.py``) and the runtime hooks (``groups/shard.py``). As Kafka's ``Group``
interface: a group id belongs to one type at a time, and the shard asks the type that holds it.

A new group type is a module with a class implementing ``GroupType`` plus its own request
handlers, its records in ``groups/records.py`` and their readers in ``groups/replay.py``'s
``handlers``; the shard lists it in ``types`` and routes its timer kinds and its heartbeat.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from protocol._generated.list_groups_response import ListGroupsResponse
from protocol.coordinator import CoordinatorRecord
from protocol.errors import ErrorCode


@dataclass(frozen=True)
class Expiry:
    """How offsets retention treats a group's offsets (Kafka's OffsetExpirationCondition):
    never (``expirable`` False); not those of ``subscribed`` topics; counted from ``base_ms``
    (the time the group became empty) instead of each commit's time."""

    expirable: bool = True
    subscribed: set[str] | None = None
    base_ms: int | None = None


class GroupType(Protocol):
    #: ListGroups' group type ("classic", "consumer")
    type_name: str
    #: the kinds (first element) of the timer keys it schedules
    timer_kinds: frozenset[str]

    def has(self, group_id: str) -> bool: ...

    def group_ids(self) -> Iterable[str]: ...

    def on_loaded(self, now_ms: int) -> None: ...

    def on_unloaded(self, now_ms: int) -> None: ...

    def on_timer(self, key: tuple[Any, ...], now_ms: int) -> list[CoordinatorRecord]: ...

    def validate_commit(
        self, group_id: str, generation: int, member_id: str, instance_id: str | None,
        transactional: bool, now_ms: int, api_version: int = -1,
        partitions: list[tuple[str, int]] | None = None,
    ) -> ErrorCode: ...

    def validate_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode: ...

    def offset_delete_check(self, group_id: str) -> tuple[ErrorCode, set[str]]:
        """(group error, topics the group subscribes to) for OffsetDelete."""
        ...

    def expiry(self, group_id: str) -> Expiry: ...

    def after_expiry(self, group_id: str, had_offsets: bool, now_ms: int) -> list[CoordinatorRecord]:
        """Every offset of the group expired (none pending; ``had_offsets``: it had some): the
        records deleting the group when it should go."""
        ...

    def listed(self, states: set[str], types: set[str]) -> list[ListGroupsResponse.ListedGroup]:
        """The groups for ListGroups (``states``/``types``: lower-case filters, empty: all)."""
        ...

    def delete(self, group_id: str, now_ms: int) -> tuple[list[CoordinatorRecord], ErrorCode]:
        """DeleteGroups of the group: the records deleting it (its offsets aside)."""
        ...
