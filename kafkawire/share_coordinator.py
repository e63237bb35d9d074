"""Share groups at runtime (KIP-932): membership, share partitions, share sessions, timers.

The work is split across brokers as in Kafka:

* the **group coordinator** (the leader of the group's ``__consumer_offsets`` partition) keeps
  the membership and the assignment (``groups.share_group.ShareGroups``:
  ShareGroupHeartbeat/Describe, epochs, session expiry). It initializes the share partitions
  of the subscribed topics in the share coordinator (InitializeShareGroupState at start offset
  -1, after a ReadShareGroupStateSummary shows that the key has no state yet) and assigns only
  initialized ones (``initialized``); it serves the admin side (DescribeShareGroupOffsets with
  the lag, Alter/DeleteShareGroupOffsets, DeleteGroups) through the persister;
* the **share-partition leader** (the leader of the data partition) hosts one
  ``groups.share_partition.SharePartition`` per (group, topic id, partition) it serves:
  acquisition, locks, delivery counts. It loads the state from the share coordinator the first
  time a ShareFetch needs it (ReadShareGroupState with its leader epoch; a start offset of -1
  is resolved with ``share.auto.offset.reset``: latest = the high watermark, earliest = the
  log start offset, ``by_duration:`` = the first offset at or after now minus the duration)
  and writes every change before answering (WriteShareGroupState with the state epoch it
  loaded and its leader epoch). A share partition whose leadership moved is dropped (its
  acquisitions are lost, the new leader loads the persisted state); one that no share session
  uses and that holds no acquired records is dropped once written, so the next use reads the
  state again (an AlterShareGroupOffsets meanwhile is seen); a write fenced by a newer state
  or leader epoch drops it too;
* the **share coordinator** (the leader of the key's ``__share_group_state`` partition,
  ``groups/share_state.py``) stores the state; ``kafkawire.share_persister`` reaches it, locally
  or over the inter-broker APIs, and retries while it moves.

Share sessions (``ShareSession``), keyed by (group, member), live on each share-partition
leader: the partitions a member fetches there and the epoch its next ShareFetch/
ShareAcknowledge must carry.

One timer task expires acquisition locks and member sessions and writes what changed;
released records wake the ShareFetch long-polls of their partition (through the append
notifier, which Fetch shares).

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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio

from groups.share_group import ShareGroups, ShareGroupSettings
from groups.share_partition import ShareLimits, SharePartition, StateBatch
from groups.share_state import ShareStateShard
from kafkawire.config_resources import group_config_entries
from kafkawire.node_client import NodeDisconnected, NodeUnsupportedVersion
from kafkawire.share_persister import SharePersister
from protocol.errors import ErrorCode, KafkaError
from protocol.records import SimpleRecord, build_batch, decode_batch_records, iter_headers
from protocol.share_state import NO_START_OFFSET, ShareStateKey

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kraft.image import MetadataImage

log = logging.getLogger("kafkawire.share")

SHARE_VERSION = 1
SHARE_STATE_TOPIC = "__share_group_state"
#: how long an admin operation on share state waits for its share coordinator (s)
STATE_WAIT_S = 10.0
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


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    epoch: int  # the epoch the next request must carry
    partitions: list[tuple[uuid.UUID, int]] = field(default_factory=list)
    conn_id: int = -1


@dataclass
class Live:
    """What the share-partition leader keeps beside a loaded SharePartition."""

    state_epoch: int  # the state epoch it was loaded at (its writes carry it)
    leader_epoch: int  # this broker's leader epoch of the data partition when loaded
    version: int = 0  # changes made
    written: int = 0  # changes known durable in the share coordinator


class ShareService:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.groups = ShareGroups(int(broker.config["group.share.max.size"]))
        self.persister = SharePersister(broker)
        #: share partitions loaded on this broker (it leads their data partition)
        self.partitions: dict[SPKey, SharePartition] = {}
        self.live: dict[SPKey, Live] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        #: group coordinator side: per group, the (topic id, partition) whose share-partition
        #: state is initialized (the assignable ones)
        self.initialized: dict[str, set[tuple[uuid.UUID, int]]] = {}
        self._initializing: set[SPKey] = set()
        self._loading: dict[SPKey, trio.Event] = {}
        self._load_errors: dict[SPKey, ErrorCode] = {}
        self._write_locks: dict[SPKey, trio.Lock] = {}
        self._rearm = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._flushing = False

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

    def read_committed(self, group_id: str) -> bool:
        return self.group_configs(group_id)["share.isolation.level"] == "read_committed"

    def topic_meta(self, name: str) -> tuple[uuid.UUID, int] | None:
        t = self.broker.image.topics.get(name)
        if t is None or t.is_internal:
            return None
        return t.topic_id, len(t.partitions)

    # ---- group coordinator: initialization -------------------------------------------------
    def assignable(self, group_id: str, name: str) -> tuple[uuid.UUID, list[int]] | None:
        """The topic's partitions whose share-partition state the group has initialized (the
        only ones the assignor hands out, as Kafka 4.1+)."""
        meta = self.topic_meta(name)
        if meta is None:
            return None
        tid, n = meta
        done = self.initialized.get(group_id, set())
        return tid, sorted(p for t, p in done if t == tid and p < n)

    def initialize_subscribed(self, group_id: str, topics: list[str]) -> None:
        """Initialize the share partitions of the subscribed topics that are not yet, in the
        background (Kafka's InitializeShareGroupState after the heartbeat that brings them);
        the group's next heartbeat sees them assignable. A key that already has state (a
        group coordinator that moved or restarted) is only marked initialized."""
        done = self.initialized.get(group_id, set())
        missing: list[SPKey] = []
        for name in topics:
            meta = self.topic_meta(name)
            if meta is None:
                continue
            for p in range(meta[1]):
                key = (group_id, meta[0], p)
                if (meta[0], p) not in done and key not in self._initializing:
                    missing.append(key)
        if missing and self._nursery is not None:
            self._initializing.update(missing)
            self._nursery.start_soon(self._initialize, group_id, missing)

    async def _initialize(self, group_id: str, keys: list[SPKey]) -> None:
        g = self.groups.group(group_id)
        state_epoch = max(1, g.epoch if g is not None else 1)

        async def one(key: SPKey) -> None:
            skey = ShareStateKey(*key)
            try:
                summary = await self.persister.summary(skey)
                if not summary.exists:
                    await self.persister.initialize(skey, state_epoch, NO_START_OFFSET)
                self.initialized.setdefault(group_id, set()).add((key[1], key[2]))
            except KafkaError as e:
                log.info("cannot initialize the share state of %s: %s", key, e)
            finally:
                self._initializing.discard(key)

        async with trio.open_nursery() as nursery:
            for key in keys:
                nursery.start_soon(one, key)

    def group_keys(self, group_id: str) -> set[SPKey]:
        """The share partitions the group has state for, as this broker knows them: those it
        initialized as the group's coordinator, and those in the state partitions led here
        (all of them on a single node)."""
        keys = {(group_id, t, p) for t, p in self.initialized.get(group_id, ())}
        for _p, shard in self.broker.share_runtime.loaded_shards():
            if isinstance(shard, ShareStateShard):
                keys |= {(k.group_id, k.topic_id, k.partition) for k in shard.keys_of(group_id)}
        return keys

    def group_known(self, group_id: str) -> bool:
        return (self.groups.group(group_id) is not None or bool(self.initialized.get(group_id))
                or bool(self.group_keys(group_id)))

    def coordinates(self, group_id: str) -> bool:
        """Whether this broker is the group's coordinator (leads its __consumer_offsets
        partition)."""
        rt = self.broker.group_runtime
        if rt.topic.name not in self.broker.image.topics:
            return True  # nothing created yet: a single node answers for every group
        return rt.partition_for(group_id) in rt.slots

    # ---- share-partition leader: loading ---------------------------------------------------
    def leads(self, topic_id: uuid.UUID, p: int) -> tuple[str, int] | None:
        """(topic name, leader epoch) when this broker leads the partition, else None."""
        t = self.broker.image.topics_by_id.get(topic_id)
        pimg = t.partitions.get(p) if t is not None else None
        if t is None or pimg is None or pimg.leader != self.broker.node_id:
            return None
        rp = self.broker.replicas.partition(t.name, p) if self.broker.replicas else None
        if rp is None or not rp.is_leader:
            return None
        return t.name, pimg.leader_epoch

    def start_load(self, key: SPKey) -> trio.Event | None:
        """Begin loading the share partition (None: it is loaded already)."""
        if key in self.partitions:
            return None
        ev = self._loading.get(key)
        if ev is None:
            ev = self._loading[key] = trio.Event()
            assert self._nursery is not None
            self._nursery.start_soon(self._load_task, key, ev)
        return ev

    async def load(self, keys: list[SPKey], timeout_s: float) -> None:
        """Load the share partitions (led here) not loaded yet, waiting up to ``timeout_s``;
        loads that take longer go on in the background."""
        events = [ev for ev in (self.start_load(k) for k in keys) if ev is not None]
        with trio.move_on_after(max(timeout_s, 0.0)):
            for ev in events:
                await ev.wait()

    async def _load_task(self, key: SPKey, ev: trio.Event) -> None:
        try:
            await self._load(key)
            self._load_errors.pop(key, None)
        except KafkaError as e:
            self._load_errors[key] = e.code
            log.info("cannot load share partition %s: %s", key, e)
        except Exception:
            log.exception("loading share partition %s", key)
        finally:
            self._loading.pop(key, None)
            ev.set()
            self.wake(key[1], key[2])

    async def _load(self, key: SPKey) -> None:
        group_id, tid, p = key
        led = self.leads(tid, p)
        if led is None:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        name, epoch = led
        saved = await self.persister.read(ShareStateKey(*key), epoch)
        if self.leads(tid, p) != led:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "leadership moved while loading")
        plog = self.broker.partition_log(name, p)
        if plog is None:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        limits = self.limits(group_id)
        if saved is not None and saved.start_offset >= 0:
            batches = [StateBatch(*b) for b in saved.state_batches]
            sp = SharePartition.load(saved.start_offset, batches, limits)
            live = Live(saved.state_epoch, epoch)
        else:  # initialized at -1 (or never): share.auto.offset.reset decides, written next
            sp = SharePartition(self._reset_offset(group_id, plog), limits)
            live = Live(saved.state_epoch if saved is not None else 0, epoch, version=1)
        self.partitions[key] = sp
        self.live[key] = live
        self._rearm.set()

    def forget(self, key: SPKey) -> None:
        """Drop a loaded share partition without writing it (leadership moved, its state was
        replaced in the share coordinator, or a write was fenced)."""
        self.partitions.pop(key, None)
        self.live.pop(key, None)
        lock = self._write_locks.get(key)
        if lock is not None and not lock.locked():
            del self._write_locks[key]

    def on_image(self) -> None:
        """Leadership changes: share partitions whose data partition this broker no longer
        leads, or leads in a new epoch, are dropped (the leader loads the persisted state)."""
        for key, live in list(self.live.items()):
            led = self.leads(key[1], key[2])
            if led is None or led[1] != live.leader_epoch:
                self.forget(key)
                self.wake(key[1], key[2])

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

    # ---- share-partition leader: writing ---------------------------------------------------
    def changed(self, key: SPKey, sp: SharePartition | None = None) -> None:
        live = self.live.get(key)
        if live is not None:
            live.version += 1
        self._rearm.set()

    def dirty(self) -> list[SPKey]:
        return [k for k, v in self.live.items() if v.version > v.written]

    async def flush(self, keys: list[SPKey] | None = None) -> dict[SPKey, ErrorCode]:
        """Write the state of the changed share partitions (all, or ``keys``) to the share
        coordinator, each as one WriteShareGroupState; records archived at the delivery limit
        go to the group's dead-letter topic first. Returns the keys whose write failed."""
        targets = [k for k in (self.dirty() if keys is None else keys)
                   if k in self.live and self.live[k].version > self.live[k].written]
        errors: dict[SPKey, ErrorCode] = {}
        if len(targets) == 1:
            await self._flush_one(targets[0], errors)
        elif targets:
            async with trio.open_nursery() as nursery:
                for key in targets:
                    nursery.start_soon(self._flush_one, key, errors)
        return errors

    async def _flush_one(self, key: SPKey, errors: dict[SPKey, ErrorCode]) -> None:
        lock = self._write_locks.setdefault(key, trio.Lock())
        async with lock:  # one write per key at a time, each with the state of its start
            live, sp = self.live.get(key), self.partitions.get(key)
            if live is None or sp is None or live.version <= live.written:
                return
            version = live.version
            if sp.exhausted:
                self.dead_letter(key, sp.exhausted)
                sp.exhausted = []
            sp.dead = []
            batches = [(b[0], b[1], b[2], b[3]) for b in sp.state_batches()]
            try:
                await self.persister.write(ShareStateKey(*key), live.state_epoch,
                                           live.leader_epoch, sp.start_offset, batches)
            except KafkaError as e:
                errors[key] = e.code
                if e.code in (ErrorCode.FENCED_STATE_EPOCH, ErrorCode.FENCED_LEADER_EPOCH):
                    log.info("share partition %s fenced (%s): reloading", key, e.code.name)
                    if self.live.get(key) is live:
                        self.forget(key)
                        self.wake(key[1], key[2])
                else:
                    log.warning("cannot write share state of %s: %s", key, e)
                return
            if self.live.get(key) is live:
                live.written = max(live.written, version)
        self._maybe_evict(key)

    def _maybe_evict(self, key: SPKey) -> None:
        """Drop a written share partition that no share session uses and that holds no
        acquired records: its next use reads the state again."""
        live, sp = self.live.get(key), self.partitions.get(key)
        if live is None or sp is None or live.version > live.written:
            return
        if sp.next_deadline_ms() is not None:
            return  # acquired records
        tp = (key[1], key[2])
        if any(s.group_id == key[0] and tp in s.partitions for s in self.sessions.values()):
            return
        self.forget(key)

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

    def wake(self, topic_id: uuid.UUID, p: int) -> None:
        t = self.broker.image.topics_by_id.get(topic_id)
        if t is not None:
            self.broker.notifier.notify(t.name, p)

    # ---- group coordinator: admin ----------------------------------------------------------
    async def offsets_of(self, group_id: str, topic_id: uuid.UUID, p: int) -> tuple[int, int, int]:
        """(start offset, leader epoch, lag) of a share partition from its persisted state;
        (-1, -1, -1) without a start offset. Lag (KIP-1226): records in [start offset, high
        watermark) not acknowledged or archived."""
        s = await self.persister.summary(ShareStateKey(group_id, topic_id, p))
        if s.start_offset < 0:
            return -1, -1, -1
        t = self.broker.image.topics_by_id.get(topic_id)
        hw = await self.high_watermark(t.name, p) if t is not None else None
        if hw is None:
            return s.start_offset, s.leader_epoch, -1
        complete = max(0, s.delivery_complete_count)
        return s.start_offset, s.leader_epoch, max(0, hw - s.start_offset - complete)

    async def high_watermark(self, name: str, p: int, wait_s: float = 5.0) -> int | None:
        """The partition's high watermark: from this broker when it leads the partition,
        else from its leader (ListOffsets, latest; a connection lost since the last request,
        e.g. to a restarted broker, or a leader moving is retried for ``wait_s``); None when
        it cannot be had."""
        from protocol._generated.list_offsets_request import ListOffsetsRequest as Req

        b = self.broker
        deadline = trio.current_time() + wait_s
        while True:
            rp = b.replicas.partition(name, p) if b.replicas is not None else None
            if rp is not None and rp.is_leader:
                return int(rp.high_watermark)
            t = b.image.topics.get(name)
            pimg = t.partitions.get(p) if t is not None else None
            client = self.persister.peers().get(pimg.leader) if (
                pimg is not None and pimg.leader >= 0) else None
            if client is not None:
                try:
                    resp = await client.request(Req(replica_id=-1, isolation_level=0, topics=[
                        Req.ListOffsetsTopic(name=name, partitions=[Req.ListOffsetsPartition(
                            partition_index=p, current_leader_epoch=-1, timestamp=-1)])]))
                    pr = resp.topics[0].partitions[0]
                    if pr.error_code == ErrorCode.NONE:
                        return int(pr.offset)
                except (NodeDisconnected, NodeUnsupportedVersion):
                    pass
            if trio.current_time() >= deadline:
                return None
            await trio.sleep(0.2)

    async def alter_offset(self, group_id: str, topic_id: uuid.UUID, p: int, start: int) -> None:
        """AlterShareGroupOffsets: the share partition restarts at ``start`` (nothing in
        flight), initialized in the share coordinator with a new state epoch; a share-partition
        leader that still holds the old state is fenced at its next write."""
        self.groups.ensure(group_id)  # as Kafka, altering offsets creates the share group
        key = ShareStateKey(group_id, topic_id, p)
        s = await self.persister.summary(key, wait_s=STATE_WAIT_S)
        await self.persister.initialize(key, s.state_epoch + 1 if s.exists else 0, start,
                                        wait_s=STATE_WAIT_S)
        self.initialized.setdefault(group_id, set()).add((topic_id, p))
        self.forget((group_id, topic_id, p))
        self.wake(topic_id, p)

    async def delete_offsets(self, group_id: str, topic_id: uuid.UUID) -> None:
        """DeleteShareGroupOffsets of one topic: its share partitions' state is removed."""
        await self._delete_keys({k for k in self.group_keys(group_id) if k[1] == topic_id})

    def list_groups(self, states: list[str], types: list[str]) -> list[Any]:
        """The share groups this broker coordinates."""
        from protocol._generated.list_groups_response import ListGroupsResponse

        want_states = {x.lower() for x in states}
        want_types = {x.lower() for x in types}
        if want_types and "share" not in want_types:
            return []
        ids = set(self.groups.groups) | {g for g, ks in self.initialized.items() if ks}
        for _p, shard in self.broker.share_runtime.loaded_shards():
            if isinstance(shard, ShareStateShard):
                ids |= {k.group_id for k in shard.states}
        out = []
        for gid in sorted(ids):
            if not self.coordinates(gid):
                continue
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
        self.initialized.pop(group_id, None)
        return ErrorCode.NONE

    async def delete_state(self, group_id: str) -> None:
        """Forget the group's share partitions and tombstone their persisted state."""
        await self._delete_keys(self.group_keys(group_id))

    async def _delete_keys(self, keys: set[SPKey]) -> None:
        async def one(key: SPKey) -> None:
            self.forget(key)
            done = self.initialized.get(key[0])
            if done is not None:
                done.discard((key[1], key[2]))
            try:
                await self.persister.delete(ShareStateKey(*key), wait_s=STATE_WAIT_S)
            except KafkaError as e:
                log.warning("cannot delete share state of %s: %s", key, e)

        async with trio.open_nursery() as nursery:
            for key in sorted(keys, key=str):
                nursery.start_soon(one, key)

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
            self.forget(key)  # topic deleted
        for key, sp in self.partitions.items():
            if sp.on_timer(now):
                self.changed(key, sp)
                self.wake(key[1], key[2])

    def rearm(self) -> None:
        self._rearm.set()

    async def serve(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            while True:
                self._rearm = trio.Event()
                deadline = self.next_deadline_ms()
                wait_s = math.inf if deadline is None else max(0.0, (deadline - now_ms()) / 1000)
                with trio.move_on_after(wait_s):
                    await self._rearm.wait()
                try:
                    self.on_timer(now_ms())
                    if self.dirty() and not self._flushing:
                        self._flushing = True
                        nursery.start_soon(self._background_flush)
                except Exception:
                    log.exception("share group timers")

    async def _background_flush(self) -> None:
        """Write what timers and closed sessions changed; one such task at a time (a share
        coordinator that is moving makes each write retry for a while)."""
        failed = False
        try:
            failed = bool(await self.flush())
        except Exception:
            log.exception("writing share state")
        finally:
            self._flushing = False
        if failed:  # try again in a while, whatever else happens meanwhile
            await trio.sleep(1.0)
            self._rearm.set()

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
            elif sp is not None:
                self._maybe_evict(key)

    def acknowledge(
        self, group_id: str, member_id: str, tid: uuid.UUID, p: int, batches: list[Any],
        renew_ok: bool,
    ) -> int:
        """Apply AcknowledgementBatches; the partition's acknowledge error code."""
        if self.leads(tid, p) is None:
            return int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
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
