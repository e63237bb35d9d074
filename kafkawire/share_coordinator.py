"""Share groups at runtime (KIP-932): membership, share partitions, share sessions, timers.

``ShareService`` drives the sans-I/O cores:

* ``groups.share_group.ShareGroups``: ShareGroupHeartbeat/Describe, epochs, assignment, session
  expiry (``share.session.timeout.ms``);
* one ``groups.share_partition.SharePartition`` per (group, topic id, partition), created when a
  member is first assigned the partition (Kafka initializes share-partition state at that
  point too) at the offset ``share.auto.offset.reset`` gives (latest: the high watermark;
  earliest: the log start offset; ``by_duration:``: the first offset at or after now minus the
  duration), or from the state persisted in ``__share_group_state``
  (``kafkawire.share_state``);
* share sessions (``ShareSession``), keyed by (group, member): the partitions a member fetches
  and the epoch its next ShareFetch/ShareAcknowledge must carry.

One timer task expires acquisition locks and member sessions; released records wake the
ShareFetch long-polls of their partition (through the append notifier, which Fetch shares).

Share groups are served when ``share.version`` >= 1 is finalized (Kafka 4.3.1 finalizes 1 on a
new cluster) or the internal ``group.share.enable`` is set; otherwise the share APIs answer
UNSUPPORTED_VERSION.
"""

from __future__ import annotations

import logging
import math
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio

from groups.share_group import ShareGroups, ShareGroupSettings
from groups.share_partition import TERMINAL, ShareLimits, SharePartition, StateBatch
from groups.share_state import ShareStateShard
from kafkawire.config_resources import group_config_entries
from protocol.coordinator import CoordinatorRecord
from protocol.errors import ErrorCode, KafkaError
from protocol.records import SimpleRecord, build_batch, decode_batch_records, iter_headers
from protocol.share_state import ShareStateKey

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kraft.image import MetadataImage

log = logging.getLogger("kafkawire.share")

SHARE_VERSION = 1
SHARE_STATE_TOPIC = "__share_group_state"
#: how long an admin write of share state waits for ``__share_group_state`` to be ready (s)
STATE_WAIT_S = 10.0
_RETRIABLE = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                        ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})
#: bytes read per archived range when copying it to a dead-letter topic
DLQ_READ_BYTES = 8 * 1024 * 1024
SPKey = tuple[str, uuid.UUID, int]  # group, topic id, partition
_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", re.I)


def share_version_records(image: MetadataImage) -> list[Any]:
    """Finalize ``share.version=1`` on a fresh cluster, as Kafka 4.2+ formats new storage
    (share groups are production-ready from 4.2). Never changed at start once recorded."""
    from protocol._generated.feature_level_record import FeatureLevelRecord

    if "share.version" in image.features_recorded:
        return []
    return [FeatureLevelRecord(name="share.version", feature_level=SHARE_VERSION)]


def duration_ms(spec: str) -> int:
    """An ISO-8601 duration (``PnDTnHnMn.nS``) in milliseconds."""
    m = _DURATION.fullmatch(spec.strip())
    if m is None:
        raise ValueError(spec)
    d, h, mi, s = m.groups()
    secs = int(d or 0) * 86400 + int(h or 0) * 3600 + int(mi or 0) * 60 + float(s or 0)
    return int(secs * 1000)


def dead_letter_records(
    plog: Any, group_id: str, topic: str, partition: int, ranges: list[tuple[int, int, int]],
) -> list[SimpleRecord]:
    """The records of ``ranges`` (first, last, delivery count) read back from the log, with
    ``kafkawire.dlq.*`` headers: group, topic, partition, offset, delivery count."""
    out: list[SimpleRecord] = []
    for first, last, count in ranges:
        at = first
        while at <= last:
            try:
                data = plog.read(at, DLQ_READ_BYTES, max_offset=plog.high_watermark).read_bytes()
            except KafkaError:
                break
            headers_ = iter_headers(data)
            if not headers_:
                break
            for pos, h in headers_:
                at = h.next_offset
                if not h.is_control:
                    out += _dlq_batch(data, pos, first, last, count, group_id, topic, partition)
    return out


def _dlq_batch(data: bytes, pos: int, first: int, last: int, count: int, group_id: str,
               topic: str, partition: int) -> list[SimpleRecord]:
    _h, recs = decode_batch_records(data, pos, check_crc=False)
    out = []
    for r in recs:
        if not first <= r.offset <= last:
            continue
        headers = [*r.headers, ("kafkawire.dlq.group", group_id.encode()),
                   ("kafkawire.dlq.topic", topic.encode()),
                   ("kafkawire.dlq.partition", str(partition).encode()),
                   ("kafkawire.dlq.offset", str(r.offset).encode()),
                   ("kafkawire.dlq.delivery.count", str(count).encode())]
        out.append(SimpleRecord(r.key, r.value, headers, r.timestamp))
    return out


def now_ms() -> int:
    return int(time.time() * 1000)


Op = Callable[[Any, int], tuple[list[CoordinatorRecord], None]]


def _write_op(key: ShareStateKey, start: int, batches: list[Any], epoch: int) -> Op:
    def op(shard: Any, now: int) -> tuple[list[CoordinatorRecord], None]:
        return shard.write(key, start, batches, epoch, now), None
    return op


def _reset_op(key: ShareStateKey, start: int, leader_epoch: int) -> Op:
    """A new state epoch with nothing in flight (AlterShareGroupOffsets)."""
    def op(shard: Any, now: int) -> tuple[list[CoordinatorRecord], None]:
        cur = shard.states.get(key)
        epoch = cur.state_epoch + 1 if cur is not None else 0
        return shard.write(key, start, [], leader_epoch, now, state_epoch=epoch), None
    return op


def _delete_op(key: ShareStateKey) -> Op:
    def op(shard: Any, _now: int) -> tuple[list[CoordinatorRecord], None]:
        return shard.delete(key), None
    return op


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    epoch: int  # the epoch the next request must carry
    partitions: list[tuple[uuid.UUID, int]] = field(default_factory=list)
    conn_id: int = -1


class ShareService:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.groups = ShareGroups(int(broker.config["group.share.max.size"]))
        self.partitions: dict[SPKey, SharePartition] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        # Kafka does not release a member's records when it leaves the group or expires: its
        # share session closing (epoch -1 or the connection) or the locks expiring do that.
        #: share partitions changed since their state was last written
        self.dirty: set[SPKey] = set()
        self._rearm = trio.Event()

    # ---- configuration --------------------------------------------------------------------
    def enabled(self) -> bool:
        b = self.broker
        if b.image.features.get("share.version", 0) >= SHARE_VERSION:
            return True
        return bool(b.config["group.share.enable"])

    def group_configs(self, group_id: str) -> dict[str, str]:
        b = self.broker
        names = ("share.record.lock.duration.ms", "share.delivery.count.limit",
                 "share.partition.max.record.locks", "share.session.timeout.ms",
                 "share.heartbeat.interval.ms", "share.auto.offset.reset",
                 "share.isolation.level", "share.assignment.interval.ms",
                 "kafkawire.share.dead.letter.topic")
        entries = group_config_entries(b.config, b.image, group_id, names=names)
        return {e.name: e.value or "" for e in entries}

    def limits(self, group_id: str) -> ShareLimits:
        c = self.group_configs(group_id)
        return ShareLimits(int(c["share.record.lock.duration.ms"]),
                           int(c["share.delivery.count.limit"]),
                           int(c["share.partition.max.record.locks"]))

    def settings(self, group_id: str) -> ShareGroupSettings:
        c = self.group_configs(group_id)
        return ShareGroupSettings(int(c["share.session.timeout.ms"]),
                                  int(c["share.heartbeat.interval.ms"]),
                                  int(c["share.assignment.interval.ms"]))

    def assignable(self, group_id: str, name: str) -> tuple[uuid.UUID, list[int]] | None:
        """The topic's partitions whose share-partition state the group has initialized (the
        only ones the assignor hands out, as Kafka 4.1+)."""
        meta = self.topic_meta(name)
        if meta is None:
            return None
        tid, n = meta
        done = {k[2] for k in self.partitions if k[0] == group_id and k[1] == tid}
        done |= {k[2] for k in self.persisted_keys(group_id) if k[1] == tid}
        return tid, sorted(p for p in done if p < n)

    async def initialize_subscribed(self, group_id: str, topics: list[str]) -> None:
        """Initialize the share partitions of the subscribed topics (Kafka's
        InitializeShareGroupState at the heartbeat that brings them); the group's next
        heartbeat sees them assignable. Creates ``__share_group_state`` when needed."""
        await self.ensure_state_topic()
        for name in topics:
            meta = self.topic_meta(name)
            if meta is None:
                continue
            for p in range(meta[1]):
                try:
                    self.partition(group_id, meta[0], p)
                except KafkaError:
                    pass  # the state topic is being created/loaded: a later heartbeat does it
        await self.flush()

    def read_committed(self, group_id: str) -> bool:
        return self.group_configs(group_id)["share.isolation.level"] == "read_committed"

    def topic_meta(self, name: str) -> tuple[uuid.UUID, int] | None:
        t = self.broker.image.topics.get(name)
        if t is None or t.is_internal:
            return None
        return t.topic_id, len(t.partitions)

    # ---- share partitions -----------------------------------------------------------------
    def partition(self, group_id: str, topic_id: uuid.UUID, p: int) -> SharePartition | None:
        """The share partition, initialized on first need from its persisted state or
        ``share.auto.offset.reset``; None for an unknown partition. KafkaError (coordinator
        errors) while its ``__share_group_state`` shard is not available."""
        key = (group_id, topic_id, p)
        sp = self.partitions.get(key)
        if sp is not None:
            return sp
        t = self.broker.image.topics_by_id.get(topic_id)
        plog = self.broker.partition_log(t.name, p) if t is not None else None
        if t is None or plog is None:
            return None
        shard = self.state_shard(key)
        limits = self.limits(group_id)
        saved = shard.states.get(ShareStateKey(*key))
        if saved is not None and saved.start_offset >= 0:
            batches = [StateBatch(*b) for b in saved.state_batches]
            sp = SharePartition.load(saved.start_offset, batches, limits)
        else:
            sp = SharePartition(self._reset_offset(group_id, plog), limits)
            self.dirty.add(key)
        self.partitions[key] = sp
        return sp

    def state_shard(self, key: SPKey) -> ShareStateShard:
        shard = self.broker.share_runtime.shard_for(ShareStateKey(*key).coordinator_key())
        assert isinstance(shard, ShareStateShard)
        return shard

    async def flush(self) -> None:
        """Write the state of every changed share partition (a ShareSnapshot each); records
        archived at the delivery limit go to the group's dead-letter topic first."""
        dirty, self.dirty = self.dirty, set()
        for key in sorted(dirty, key=str):
            sp = self.partitions.get(key)
            if sp is None:
                continue
            if sp.exhausted:
                self.dead_letter(key, sp.exhausted)
                sp.exhausted = []
            sp.dead = []
            t = self.broker.image.topics_by_id.get(key[1])
            if t is None:  # the topic was deleted: its state goes with it (on_metadata)
                self.partitions.pop(key, None)
                continue
            pimg = t.partitions.get(key[2])
            epoch = pimg.leader_epoch if pimg is not None else -1
            batches = [tuple(b) for b in sp.state_batches()]
            skey = ShareStateKey(*key)
            try:
                await self.broker.share_runtime.run(
                    skey.coordinator_key(), _write_op(skey, sp.start_offset, batches, epoch))
            except KafkaError as e:
                log.warning("cannot write share state of %s: %s", key, e)
                self.dirty.add(key)

    def dead_letter(self, key: SPKey, ranges: list[tuple[int, int, int]]) -> None:
        """The kafkawire extension: copy records archived at ``share.delivery.count.limit`` to
        the topic named by the group config ``kafkawire.share.dead.letter.topic`` (same
        partition index modulo its partition count), with headers naming their origin."""
        target = self.group_configs(key[0]).get("kafkawire.share.dead.letter.topic", "")
        if not target:
            return
        b = self.broker
        src = b.image.topics_by_id.get(key[1])
        dst = b.image.topics.get(target)
        if src is None or dst is None or not dst.partitions:
            log.warning("dead-letter topic %r of share group %s missing", target, key[0])
            return
        splog = b.partition_log(src.name, key[2])
        dp = key[2] % len(dst.partitions)
        assert b.replicas is not None
        try:
            dpart = b.replicas.leader_partition(target, dp)
        except KafkaError as e:
            log.warning("dead-letter topic %s-%d not writable here: %s", target, dp, e.code.name)
            return
        if splog is None:
            return
        records = dead_letter_records(splog, key[0], src.name, key[2], ranges)
        if not records:
            return
        buf = bytearray(build_batch(records))
        dpart.append_as_leader(buf, iter_headers(buf), now_ms=now_ms())  # wakes fetchers

    async def ensure_state_topic(self) -> None:
        if SHARE_STATE_TOPIC not in self.broker.image.topics:
            await self.broker.share_runtime.ensure_topic()

    def _reset_offset(self, group_id: str, plog: Any) -> int:
        policy = self.group_configs(group_id)["share.auto.offset.reset"]
        if policy == "earliest":
            return int(plog.log_start_offset)
        if policy.startswith("by_duration:"):
            try:
                ts = now_ms() - duration_ms(policy.split(":", 1)[1])
            except ValueError:
                return int(plog.high_watermark)
            found = plog.offset_for_timestamp(ts)
            return int(found.offset) if found is not None else int(plog.high_watermark)
        return int(plog.high_watermark)

    def changed(self, key: SPKey, sp: SharePartition) -> None:
        self.dirty.add(key)
        self._rearm.set()

    def wake(self, topic_id: uuid.UUID, p: int) -> None:
        t = self.broker.image.topics_by_id.get(topic_id)
        if t is not None:
            self.broker.notifier.notify(t.name, p)

    def persisted_keys(self, group_id: str) -> list[SPKey]:
        out: list[SPKey] = []
        for _p, shard in self.broker.share_runtime.loaded_shards():
            if isinstance(shard, ShareStateShard):
                out += [(k.group_id, k.topic_id, k.partition) for k in shard.keys_of(group_id)]
        return out

    def group_known(self, group_id: str) -> bool:
        return self.groups.group(group_id) is not None or any(
            k[0] == group_id for k in self.partitions) or bool(self.persisted_keys(group_id))

    def offsets_of(self, group_id: str, topic_id: uuid.UUID, p: int) -> tuple[int, int, int]:
        """(start offset, leader epoch, lag) of a share partition; (-1, -1, -1) without state.
        Lag: records in [start offset, high watermark) not acknowledged or archived."""
        key = (group_id, topic_id, p)
        t = self.broker.image.topics_by_id.get(topic_id)
        plog = self.broker.partition_log(t.name, p) if t is not None else None
        pimg = t.partitions.get(p) if t is not None else None
        epoch = pimg.leader_epoch if pimg is not None else -1
        sp = self.partitions.get(key)
        if sp is not None:
            start = sp.start_offset
            done = [(f, last) for f, last, st, _c, _o in sp.ranges() if st in TERMINAL]
        else:
            try:
                saved = self.state_shard(key).states.get(ShareStateKey(*key))
            except KafkaError:
                saved = None
            if saved is None or saved.start_offset < 0:
                return -1, -1, -1
            start, epoch = saved.start_offset, saved.leader_epoch
            done = [(b[0], b[1]) for b in saved.state_batches if b[2] in (2, 4)]
        if plog is None:
            return start, epoch, -1
        hw = plog.high_watermark
        complete = sum(max(0, min(last, hw - 1) - max(f, start) + 1) for f, last in done)
        return start, epoch, max(0, hw - start - complete)

    async def alter_offset(self, group_id: str, topic_id: uuid.UUID, p: int, start: int) -> None:
        """AlterShareGroupOffsets: the share partition restarts at ``start`` (nothing in
        flight), persisted with a new state epoch."""
        self.groups.ensure(group_id)  # as Kafka, altering offsets creates the share group
        key = (group_id, topic_id, p)
        sp = self.partitions.get(key)
        if sp is None:
            sp = SharePartition(start, self.limits(group_id))
            self.partitions[key] = sp
        sp.reset(start)
        self.dirty.discard(key)
        skey = ShareStateKey(*key)
        t = self.broker.image.topics_by_id.get(topic_id)
        pimg = t.partitions.get(p) if t is not None else None
        await self.run_state_op(skey, _reset_op(
            skey, start, pimg.leader_epoch if pimg is not None else -1))
        self.wake(topic_id, p)

    async def run_state_op(self, key: ShareStateKey, op: Op) -> None:
        """``op`` on the key's ``__share_group_state`` shard, waiting (up to
        ``STATE_WAIT_S``) while the topic is created or the shard loads, as Kafka's
        persister retries."""
        await self.ensure_state_topic()
        deadline = trio.current_time() + STATE_WAIT_S
        while True:
            try:
                await self.broker.share_runtime.run(key.coordinator_key(), op)
                return
            except KafkaError as e:
                if e.code not in _RETRIABLE or trio.current_time() >= deadline:
                    raise
            await trio.sleep(0.05)

    async def delete_offsets(self, group_id: str, topic_id: uuid.UUID) -> None:
        """DeleteShareGroupOffsets of one topic: its share partitions' state is removed."""
        keys = {k for k in self.persisted_keys(group_id) if k[1] == topic_id}
        keys |= {k for k in self.partitions if k[0] == group_id and k[1] == topic_id}
        await self._delete_keys(keys)

    def list_groups(self, states: list[str], types: list[str]) -> list[Any]:
        from protocol._generated.list_groups_response import ListGroupsResponse

        want_states = {x.lower() for x in states}
        want_types = {x.lower() for x in types}
        if want_types and "share" not in want_types:
            return []
        ids = set(self.groups.groups) | {k[0] for k in self.partitions}
        for _p, shard in self.broker.share_runtime.loaded_shards():
            if isinstance(shard, ShareStateShard):
                ids |= {k.group_id for k in shard.states}
        out = []
        for gid in sorted(ids):
            g = self.groups.group(gid)
            state = g.state if g is not None else "Empty"
            if want_states and state.lower() not in want_states:
                continue
            out.append(ListGroupsResponse.ListedGroup(
                group_id=gid, protocol_type="share", group_state=state, group_type="share"))
        return out

    async def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups of a share group: NON_EMPTY_GROUP while it has members."""
        g = self.groups.group(group_id)
        if g is not None and g.members:
            return ErrorCode.NON_EMPTY_GROUP
        await self.delete_state(group_id)
        self.groups.groups.pop(group_id, None)
        return ErrorCode.NONE

    async def delete_state(self, group_id: str) -> None:
        """Forget the group's share partitions and tombstone their persisted state."""
        keys = set(self.persisted_keys(group_id)) | {k for k in self.partitions if k[0] == group_id}
        await self._delete_keys(keys)

    async def _delete_keys(self, keys: set[SPKey]) -> None:
        for key in keys:
            self.partitions.pop(key, None)
            self.dirty.discard(key)
            skey = ShareStateKey(*key)
            try:
                await self.broker.share_runtime.run(skey.coordinator_key(), _delete_op(skey))
            except KafkaError as e:
                log.warning("cannot delete share state of %s: %s", key, e)

    # ---- timers -----------------------------------------------------------------------------
    def next_deadline_ms(self) -> int | None:
        ds = [d for d in (sp.next_deadline_ms() for sp in self.partitions.values()) if d is not None]
        g = self.groups.next_deadline_ms()
        if g is not None:
            ds.append(g)
        return min(ds) if ds else None

    def on_timer(self, now: int) -> None:
        self.groups.on_timer(now)
        topics = self.broker.image.topics_by_id
        for key in [k for k in self.partitions if k[1] not in topics]:
            del self.partitions[key]  # topic deleted
        for key, sp in self.partitions.items():
            if sp.on_timer(now):
                self.changed(key, sp)
                self.wake(key[1], key[2])

    def rearm(self) -> None:
        self._rearm.set()

    async def serve(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            self._rearm = trio.Event()
            deadline = self.next_deadline_ms()
            wait_s = math.inf if deadline is None else max(0.0, (deadline - now_ms()) / 1000)
            with trio.move_on_after(wait_s):
                await self._rearm.wait()
            try:
                self.on_timer(now_ms())
                await self.flush()
            except Exception:
                log.exception("share group timers")

    # ---- share sessions ---------------------------------------------------------------------
    def session(self, group_id: str, member_id: str, epoch: int, conn_id: int) -> ShareSession:
        """The share session a request with ``epoch`` uses: 0 opens one (replacing an old one of
        the member), -1 names the one to close, any other must be the session's next epoch
        (moved on by this call). KafkaError: SHARE_SESSION_NOT_FOUND,
        INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_LIMIT_REACHED
        (``group.share.max.share.sessions``)."""
        key = (group_id, member_id)
        if epoch == 0:
            if key not in self.sessions and len(self.sessions) >= self.max_sessions():
                raise KafkaError(ErrorCode.SHARE_SESSION_LIMIT_REACHED)
            s = self.sessions[key] = ShareSession(group_id, member_id, 1, [], conn_id)
            return s
        s_or_none = self.sessions.get(key)
        if s_or_none is None:
            raise KafkaError(ErrorCode.SHARE_SESSION_NOT_FOUND)
        if epoch == -1:
            return s_or_none
        if epoch != s_or_none.epoch:
            raise KafkaError(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        s_or_none.epoch = epoch + 1 if epoch < 2**31 - 1 else 1
        return s_or_none

    def on_disconnect(self, conn: Any) -> None:
        """A connection closed: the share sessions opened on it close and their members'
        acquired records go back at once (Kafka 4.1+, KAFKA-19015), not at lock expiry. A
        session re-opened (epoch 0) on another connection is not touched."""
        for s in [s for s in self.sessions.values() if s.conn_id == conn.conn_id]:
            self.close_session(s)
        self._rearm.set()  # the timer task writes the released state

    def max_sessions(self) -> int:
        v = self.broker.config.values.get("group.share.max.share.sessions", 2000)
        return int(v)

    def close_session(self, s: ShareSession) -> None:
        """The member's acquired records of the session's partitions go back (-1 epoch)."""
        self.sessions.pop((s.group_id, s.member_id), None)
        for tid, p in s.partitions:
            key = (s.group_id, tid, p)
            sp = self.partitions.get(key)
            if sp is not None and sp.release_member(s.member_id):
                self.changed(key, sp)
                self.wake(tid, p)

    def acknowledge(
        self, group_id: str, member_id: str, tid: uuid.UUID, p: int, batches: list[Any],
        renew_ok: bool,
    ) -> int:
        """Apply AcknowledgementBatches; the partition's acknowledge error code."""
        sp = self.partitions.get((group_id, tid, p))
        if sp is None:
            return int(ErrorCode.INVALID_RECORD_STATE)
        now = now_ms()
        code = ErrorCode.NONE
        for b in batches:
            types = list(b.acknowledge_types)
            if 4 in types and not renew_ok:
                code = ErrorCode.INVALID_REQUEST
                continue
            c = sp.acknowledge(member_id, b.first_offset, b.last_offset, types, now)
            if c != ErrorCode.NONE and code == ErrorCode.NONE:
                code = c
        self.changed((group_id, tid, p), sp)
        self.wake(tid, p)
        return int(code)
