"""Raft messages: the generated Kafka request/response objects plus who sends them to whom.

The replica speaks only in the objects of protocol/_generated (Vote with pre_vote,
BeginQuorumEpoch, EndQuorumEpoch, Fetch with replica_state, FetchSnapshot, DescribeQuorum), so a
driver encodes exactly these on the wire. The envelope adds what a connection would know: the
sender, the receiver and the correlation id that pairs a response with its request.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from protocol._generated.add_raft_voter_request import AddRaftVoterRequest
from protocol._generated.add_raft_voter_response import AddRaftVoterResponse
from protocol._generated.begin_quorum_epoch_request import BeginQuorumEpochRequest
from protocol._generated.begin_quorum_epoch_response import BeginQuorumEpochResponse
from protocol._generated.describe_quorum_request import DescribeQuorumRequest
from protocol._generated.describe_quorum_response import DescribeQuorumResponse
from protocol._generated.end_quorum_epoch_request import EndQuorumEpochRequest
from protocol._generated.end_quorum_epoch_response import EndQuorumEpochResponse
from protocol._generated.fetch_request import FetchRequest
from protocol._generated.fetch_response import FetchResponse
from protocol._generated.fetch_snapshot_request import FetchSnapshotRequest
from protocol._generated.fetch_snapshot_response import FetchSnapshotResponse
from protocol._generated.remove_raft_voter_request import RemoveRaftVoterRequest
from protocol._generated.remove_raft_voter_response import RemoveRaftVoterResponse
from protocol._generated.update_raft_voter_request import UpdateRaftVoterRequest
from protocol._generated.update_raft_voter_response import UpdateRaftVoterResponse
from protocol._generated.vote_request import VoteRequest
from protocol._generated.vote_response import VoteResponse

__all__ = [
    "AddRaftVoterRequest", "AddRaftVoterResponse", "RemoveRaftVoterRequest",
    "RemoveRaftVoterResponse", "UpdateRaftVoterRequest", "UpdateRaftVoterResponse",
    "BeginQuorumEpochRequest", "BeginQuorumEpochResponse", "DescribeQuorumRequest",
    "DescribeQuorumResponse", "EndQuorumEpochRequest", "EndQuorumEpochResponse", "FetchRequest",
    "FetchResponse", "FetchSnapshotRequest", "FetchSnapshotResponse", "VoteRequest",
    "VoteResponse", "METADATA_TOPIC", "METADATA_PARTITION", "METADATA_TOPIC_ID", "RaftMessage",
    "RaftRequest", "RaftResponse", "REQUEST_TYPES", "WIRE_VERSION", "wire_round_trip",
    "vote_request", "vote_response", "begin_epoch_request", "begin_epoch_response",
    "end_epoch_request", "end_epoch_response", "fetch_request", "fetch_response", "fetch_part",
    "fetch_partition", "fetch_replica_id", "only_partition",
]

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
# Kafka's fixed topic id of __cluster_metadata (Uuid.METADATA_TOPIC_ID, "AAAAAAAAAAAAAAAAAAAAAQ").
METADATA_TOPIC_ID = uuid.UUID(int=1)

RaftRequest = (VoteRequest | BeginQuorumEpochRequest | EndQuorumEpochRequest | FetchRequest
               | FetchSnapshotRequest | DescribeQuorumRequest | AddRaftVoterRequest
               | RemoveRaftVoterRequest | UpdateRaftVoterRequest)
RaftResponse = (VoteResponse | BeginQuorumEpochResponse | EndQuorumEpochResponse | FetchResponse
                | FetchSnapshotResponse | DescribeQuorumResponse | AddRaftVoterResponse
                | RemoveRaftVoterResponse | UpdateRaftVoterResponse)
REQUEST_TYPES = (VoteRequest, BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest,
                 FetchSnapshotRequest, DescribeQuorumRequest, AddRaftVoterRequest,
                 RemoveRaftVoterRequest, UpdateRaftVoterRequest)
# The version each message travels at (the newest this codebase generates).
WIRE_VERSION: dict[type, int] = {
    VoteRequest: 2, VoteResponse: 2,
    BeginQuorumEpochRequest: 1, BeginQuorumEpochResponse: 1,
    EndQuorumEpochRequest: 1, EndQuorumEpochResponse: 1,
    FetchRequest: 18, FetchResponse: 18,
    FetchSnapshotRequest: 1, FetchSnapshotResponse: 1,
    DescribeQuorumRequest: 2, DescribeQuorumResponse: 2,
    AddRaftVoterRequest: 1, AddRaftVoterResponse: 1,
    RemoveRaftVoterRequest: 0, RemoveRaftVoterResponse: 0,
    UpdateRaftVoterRequest: 0, UpdateRaftVoterResponse: 0,
}


@dataclass(frozen=True, slots=True)
class RaftMessage:
    src: int
    dst: int
    correlation_id: int
    body: RaftRequest | RaftResponse

    @property
    def is_request(self) -> bool:
        return isinstance(self.body, REQUEST_TYPES)


def wire_round_trip(body: RaftRequest | RaftResponse) -> RaftRequest | RaftResponse:
    """Encode and decode ``body`` at its wire version (the simulation sends real bytes)."""
    version = WIRE_VERSION[type(body)]
    data = body.encode(version)
    out: RaftRequest | RaftResponse = type(body).decode(data, version)
    return out


def vote_request(cluster_id: str, voter_id: int, candidate_id: int, epoch: int,
                 last_epoch: int, end_offset: int, pre_vote: bool) -> VoteRequest:
    part = VoteRequest.PartitionData(
        partition_index=METADATA_PARTITION, replica_epoch=epoch, replica_id=candidate_id,
        last_offset_epoch=last_epoch, last_offset=end_offset, pre_vote=pre_vote)
    return VoteRequest(cluster_id=cluster_id, voter_id=voter_id, topics=[
        VoteRequest.TopicData(topic_name=METADATA_TOPIC, partitions=[part])])


def vote_response(error: int, part_error: int = 0, leader_id: int = -1, epoch: int = -1,
                  granted: bool = False) -> VoteResponse:
    part = VoteResponse.PartitionData(partition_index=METADATA_PARTITION, error_code=part_error,
                                      leader_id=leader_id, leader_epoch=epoch,
                                      vote_granted=granted)
    return VoteResponse(error_code=error, topics=[] if error else [
        VoteResponse.TopicData(topic_name=METADATA_TOPIC, partitions=[part])])


def begin_epoch_request(cluster_id: str, voter_id: int, leader_id: int,
                        epoch: int) -> BeginQuorumEpochRequest:
    part = BeginQuorumEpochRequest.PartitionData(partition_index=METADATA_PARTITION,
                                                 leader_id=leader_id, leader_epoch=epoch)
    return BeginQuorumEpochRequest(cluster_id=cluster_id, voter_id=voter_id, topics=[
        BeginQuorumEpochRequest.TopicData(topic_name=METADATA_TOPIC, partitions=[part])])


def begin_epoch_response(error: int, part_error: int = 0, leader_id: int = -1,
                         epoch: int = -1) -> BeginQuorumEpochResponse:
    part = BeginQuorumEpochResponse.PartitionData(partition_index=METADATA_PARTITION,
                                                  error_code=part_error, leader_id=leader_id,
                                                  leader_epoch=epoch)
    return BeginQuorumEpochResponse(error_code=error, topics=[] if error else [
        BeginQuorumEpochResponse.TopicData(topic_name=METADATA_TOPIC, partitions=[part])])


def end_epoch_request(cluster_id: str, leader_id: int, epoch: int,
                      successors: list[int]) -> EndQuorumEpochRequest:
    part = EndQuorumEpochRequest.PartitionData(
        partition_index=METADATA_PARTITION, leader_id=leader_id, leader_epoch=epoch,
        preferred_successors=list(successors),
        preferred_candidates=[EndQuorumEpochRequest.ReplicaInfo(candidate_id=s)
                              for s in successors])
    return EndQuorumEpochRequest(cluster_id=cluster_id, topics=[
        EndQuorumEpochRequest.TopicData(topic_name=METADATA_TOPIC, partitions=[part])])


def end_epoch_response(error: int, part_error: int = 0, leader_id: int = -1,
                       epoch: int = -1) -> EndQuorumEpochResponse:
    part = EndQuorumEpochResponse.PartitionData(partition_index=METADATA_PARTITION,
                                                error_code=part_error, leader_id=leader_id,
                                                leader_epoch=epoch)
    return EndQuorumEpochResponse(error_code=error, topics=[] if error else [
        EndQuorumEpochResponse.TopicData(topic_name=METADATA_TOPIC, partitions=[part])])


#: FetchPartition.HighWatermark of a fetcher that does not send it (before v18, KIP-1166)
HIGH_WATERMARK_NOT_SENT = 9223372036854775807


def fetch_request(cluster_id: str, replica_id: int, epoch: int, fetch_offset: int,
                  last_fetched_epoch: int, log_start_offset: int, max_wait_ms: int,
                  max_bytes: int, high_watermark: int = HIGH_WATERMARK_NOT_SENT
                  ) -> FetchRequest:
    """A replica's Fetch of the metadata partition; ``high_watermark`` is the one it knows
    (-1: none), so a leader whose high watermark is ahead answers at once (KIP-1166, v18)."""
    part = FetchRequest.FetchPartition(
        partition=METADATA_PARTITION, current_leader_epoch=epoch, fetch_offset=fetch_offset,
        last_fetched_epoch=last_fetched_epoch, log_start_offset=log_start_offset,
        partition_max_bytes=max_bytes, high_watermark=high_watermark)
    return FetchRequest(
        cluster_id=cluster_id, replica_id=-1,
        replica_state=FetchRequest.ReplicaState(replica_id=replica_id, replica_epoch=-1),
        max_wait_ms=max_wait_ms, min_bytes=0, max_bytes=max_bytes,
        topics=[FetchRequest.FetchTopic(topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID,
                                        partitions=[part])])


def fetch_partition(req: FetchRequest) -> FetchRequest.FetchPartition | None:
    """The one metadata partition a Raft Fetch names (by topic id or by name), else None."""
    if len(req.topics) != 1 or len(req.topics[0].partitions) != 1:
        return None
    topic = req.topics[0]
    if topic.topic_id != METADATA_TOPIC_ID and topic.topic != METADATA_TOPIC:
        return None
    part = topic.partitions[0]
    return part if part.partition == METADATA_PARTITION else None


def fetch_replica_id(req: FetchRequest) -> int:
    return req.replica_state.replica_id if req.replica_state is not None else req.replica_id


def fetch_response(error: int, part: FetchResponse.PartitionData | None = None) -> FetchResponse:
    return FetchResponse(error_code=error, responses=[] if part is None else [
        FetchResponse.FetchableTopicResponse(topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID,
                                             partitions=[part])])


def fetch_part(error: int, leader_id: int, epoch: int, high_watermark: int = -1,
               log_start_offset: int = -1, records: bytes | None = None
               ) -> FetchResponse.PartitionData:
    return FetchResponse.PartitionData(
        partition_index=METADATA_PARTITION, error_code=error, high_watermark=high_watermark,
        log_start_offset=log_start_offset, records=records,
        current_leader=FetchResponse.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=epoch))


def only_partition(topics: list[object]) -> object | None:
    """The single partition of a single-topic request/response, else None."""
    if len(topics) != 1:
        return None
    parts: list[object] = getattr(topics[0], "partitions", [])
    return parts[0] if len(parts) == 1 else None
