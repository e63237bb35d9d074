"""kraft.image.apply: a batch changes its own copy of a topic's partitions in place (linear in
the batch), and earlier images never change."""

from __future__ import annotations

import uuid

from kraft.image import MetadataImage, apply
from protocol._generated.partition_change_record import PartitionChangeRecord
from protocol._generated.partition_record import PartitionRecord
from protocol._generated.remove_topic_record import RemoveTopicRecord
from protocol._generated.topic_record import TopicRecord

TID = uuid.UUID(int=7)


def _part(p: int) -> PartitionRecord:
    return PartitionRecord(partition_id=p, topic_id=TID, replicas=[1], isr=[1], leader=1,
                           leader_epoch=0, partition_epoch=0, directories=[uuid.UUID(int=0)])


def test_batches_leave_earlier_images_alone() -> None:
    img1 = apply(MetadataImage(), [TopicRecord(name="t", topic_id=TID),
                                   *[_part(p) for p in range(3)]], 3, 1)
    img2 = apply(img1, [_part(3), *[PartitionChangeRecord(partition_id=p, topic_id=TID,
                                                          leader=-1) for p in range(4)],
                        PartitionChangeRecord(partition_id=0, topic_id=TID, isr=[1, 2])], 9, 1)
    assert sorted(img1.topics["t"].partitions) == [0, 1, 2]
    assert all(p.leader == 1 and p.leader_epoch == 0 for p in img1.topics["t"].partitions.values())
    parts2 = img2.topics["t"].partitions
    assert sorted(parts2) == [0, 1, 2, 3]
    assert [parts2[p].leader for p in range(4)] == [-1] * 4
    assert [parts2[p].leader_epoch for p in range(4)] == [1, 1, 1, 1]
    assert parts2[0].isr == (1, 2) and parts2[0].partition_epoch == 2
    assert img2.topics_by_id[TID] is img2.topics["t"]
    img3 = apply(img2, [RemoveTopicRecord(topic_id=TID), TopicRecord(name="t", topic_id=TID),
                        _part(0)], 12, 1)
    assert sorted(img3.topics["t"].partitions) == [0]
    assert sorted(img2.topics["t"].partitions) == [0, 1, 2, 3]


def test_one_batch_of_many_partitions() -> None:
    n = 20000
    img = apply(MetadataImage(), [TopicRecord(name="t", topic_id=TID),
                                  *[_part(p) for p in range(n)]], n, 1)
    assert len(img.topics["t"].partitions) == n
    img2 = apply(img, [PartitionChangeRecord(partition_id=p, topic_id=TID, leader=-1)
                       for p in range(n)], 2 * n, 1)
    assert all(p.leader == -1 for p in img2.topics["t"].partitions.values())
    assert all(p.leader == 1 for p in img.topics["t"].partitions.values())
