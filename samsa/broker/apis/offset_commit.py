"""OffsetCommit (key 8), versions 2-9: store a group's positions, then answer.

v2-4 carry a retention time, which is ignored as in Kafka >= 2.1 (offsets.retention.minutes
applies).  Standalone consumers commit with generation -1 and no member id.
"""

from __future__ import annotations

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.services import BrokerServices
from samsa.broker.group import PartitionCommit
from samsa.protocol import OffsetCommitResponse

TopicResponse = OffsetCommitResponse.OffsetCommitResponseTopic
PartitionResponse = OffsetCommitResponse.OffsetCommitResponsePartition


def handle_offset_commit(services: BrokerServices,
                         ctx: RequestContext) -> OffsetCommitResponse:
    version = ctx.header.request_api_version
    req = ctx.body
    commits = [
        PartitionCommit(t.name, p.partition_index, p.committed_offset,
                        p.committed_leader_epoch if version >= 6 else -1, p.committed_metadata)
        for t in req.topics for p in t.partitions
    ]
    errors = iter(services.groups.commit_offsets(
        req.group_id, req.generation_id_or_member_epoch, req.member_id,
        req.group_instance_id if version >= 7 else None, commits, api_version=version))
    return OffsetCommitResponse(throttle_time_ms=0, topics=[
        TopicResponse(name=t.name, partitions=[
            PartitionResponse(partition_index=p.partition_index, error_code=next(errors))
            for p in t.partitions])
        for t in req.topics])
