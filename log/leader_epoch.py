"""Leader epoch cache of one partition (Kafka's LeaderEpochFileCache, KIP-101).

An ordered list of (leader epoch, start offset): the first offset written in each epoch. It
answers "which epoch wrote offset o" (ListOffsets / Fetch leader epochs) and
OffsetsForLeaderEpoch (the end offset of an epoch, used by followers and by consumers to detect
log truncation, KIP-320). Persisted as ``leader-epoch-checkpoint`` in the partition directory
(Kafka's checkpoint text format), rewritten whenever an epoch is added or entries are dropped,
which is rare. Recovery rebuilds missing entries from the batches' partitionLeaderEpoch.
``sync=False`` writes leave the fsync to the owning log's next flush (``log.log_flush``): becoming
leader of thousands of partitions at once must not cost two fsyncs each.
"""

from __future__ import annotations

import bisect
from pathlib import Path

from log.checkpoint import CorruptCheckpointError, read_epoch_checkpoint, write_epoch_checkpoint

__all__ = ["LeaderEpochCache", "LEADER_EPOCH_CHECKPOINT", "UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET"]

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, path: Path | None, entries: list[tuple[int, int]] | None = None) -> None:
        self.path = path
        self._epochs: list[int] = []
        self._starts: list[int] = []
        for e, o in entries or []:
            self._epochs.append(e)
            self._starts.append(o)
        #: what the file holds (None: unknown or missing), so that flush() skips a rewrite
        #: (and its fsyncs) when nothing changed: every start flushes every partition's cache
        self._saved: list[tuple[int, int]] | None = None
        #: the file could not be parsed (a torn write): the owner rebuilds it from the log
        self.corrupt = False

    @classmethod
    def load(cls, dir: Path) -> LeaderEpochCache:
        path = dir / LEADER_EPOCH_CHECKPOINT
        corrupt = False
        try:
            raw = read_epoch_checkpoint(path)
        except CorruptCheckpointError:
            raw, corrupt = None, True
        entries = raw or []
        # keep only a strictly increasing chain (defensive against a hand-edited file)
        clean: list[tuple[int, int]] = []
        for e, o in entries:
            if e >= 0 and o >= 0 and (not clean or (e > clean[-1][0] and o >= clean[-1][1])):
                clean.append((e, o))
        cache = cls(path, clean)
        cache._saved = raw
        cache.corrupt = corrupt
        return cache

    def _save(self, sync: bool = True) -> None:
        if self.path is not None:
            entries = self.entries()
            write_epoch_checkpoint(self.path, entries, sync=sync)
            self._saved = entries

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts, strict=True))

    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    def assign(self, epoch: int, start_offset: int, *, persist: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``. Returns True if the cache changed."""
        if epoch < 0:
            return False
        if self._epochs:
            last_e, last_o = self._epochs[-1], self._starts[-1]
            if epoch == last_e and start_offset >= last_o:
                return False
        # drop entries that conflict: same or newer epoch, or starting at or after this offset
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        if persist:
            self._save()
        return True

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range contains ``offset`` (None before the first entry)."""
        i = bisect.bisect_right(self._starts, offset) - 1
        return self._epochs[i] if i >= 0 else None

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: (largest epoch <= requested, its end offset) per Kafka."""
        if epoch == UNDEFINED_EPOCH or not self._epochs:
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        if epoch == self._epochs[-1]:
            return (epoch, log_end_offset)
        hi = bisect.bisect_right(self._epochs, epoch)  # first entry with a larger epoch
        if hi == len(self._epochs):
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        if hi == 0:
            return (epoch, self._starts[0])
        return (self._epochs[hi - 1], self._starts[hi])

    def truncate_from_end(self, end_offset: int, *, persist: bool = True) -> None:
        """Drop entries starting at or after ``end_offset`` (log truncated to it)."""
        n = bisect.bisect_left(self._starts, end_offset)
        if n < len(self._starts):
            del self._epochs[n:], self._starts[n:]
            if persist:
                self._save()

    def truncate_from_start(self, start_offset: int, *, persist: bool = True) -> None:
        """Log start moved to ``start_offset``: earlier entries collapse into one at it."""
        i = bisect.bisect_right(self._starts, start_offset) - 1
        if i < 0 or (i == 0 and self._starts[0] == start_offset):
            return
        epoch = self._epochs[i]
        del self._epochs[:i], self._starts[:i]
        self._epochs[0] = epoch
        self._starts[0] = start_offset
        if persist:
            self._save()

    def clear(self, *, persist: bool = True) -> None:
        self._epochs.clear()
        self._starts.clear()
        if persist:
            self._save()

    def flush(self, *, sync: bool = True) -> bool:
        """Write the checkpoint unless it already holds these entries (True: written; with
        ``sync=False`` not fsynced, the caller's job)."""
        entries = self.entries()
        if self._saved == entries:
            return False
        if self._saved is None and not entries and (self.path is None or not self.path.exists()):
            return False  # a new partition: nothing to persist yet
        self._save(sync)
        return True
