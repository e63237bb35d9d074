"""Metadata snapshot cost: write (image -> records -> file) and load (file -> image).

    .venv/bin/python bench/metadata_snapshot.py [--topics 2000] [--partitions 10]

Builds an image of that many topics (each with a config) and partitions, then times what a
snapshot costs kafkawire: ``image_records`` + ``encode_snapshot`` + the atomic file write, and
``decode_snapshot`` + ``apply`` on start. Prints one Markdown row.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafkawire.metadata.snapshots import SnapshotStore, write_snapshot  # noqa: E402
from kraft import controller  # noqa: E402
from kraft.image import MetadataImage, apply  # noqa: E402
from protocol._generated.config_record import ConfigRecord  # noqa: E402
from protocol._generated.topic_record import TopicRecord  # noqa: E402


def build(topics: int, partitions: int) -> MetadataImage:
    recs: list[object] = list(controller.bootstrap_records())
    for t in range(topics):
        tid = uuid.uuid4()
        recs.append(TopicRecord(name=f"topic-{t}", topic_id=tid))
        recs.append(ConfigRecord(resource_type=2, resource_name=f"topic-{t}",
                                 name="retention.ms", value="86400000"))
        recs += [controller.partition_record(tid, p, [1], [1]) for p in range(partitions)]
    return apply(MetadataImage(), recs, len(recs) - 1, 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--topics", type=int, default=2000)
    ap.add_argument("--partitions", type=int, default=10)
    args = ap.parse_args()
    img = build(args.topics, args.partitions)
    with tempfile.TemporaryDirectory() as tmp:
        store = SnapshotStore(Path(tmp))
        t0 = time.perf_counter()
        sid = write_snapshot(store, img, 1, 0, 0)
        t1 = time.perf_counter()
        got = store.read(sid)
        loaded = apply(MetadataImage(), got.records, sid.offset - 1, sid.epoch)
        t2 = time.perf_counter()
        assert loaded == img
        size = store.size(sid)
    print("| topics x partitions | records | file | write | load |")
    print("|---|---|---|---|---|")
    print(f"| {args.topics} x {args.partitions} | {len(got.records)} | {size / 1e6:.2f} MB "
          f"| {t1 - t0:.2f} s | {t2 - t1:.2f} s |")


if __name__ == "__main__":
    main()
