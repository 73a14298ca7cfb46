"""OffsetCommit (key 8), versions 0-9: store a group's positions, then answer.

v0 asks for offsets in ZooKeeper, which a KRaft broker does not have: Kafka 3.9 answers every
partition of a topic that exists with UNSUPPORTED_VERSION (``KafkaApis.commitOffsetsToZookeeper``
-> ``requireZkOrThrow``, the request's error response), unknown ones with
UNKNOWN_TOPIC_OR_PARTITION when no partition is left to commit.  v1 carries a commit timestamp
per partition (-1: now), v2-4 a retention time (-1: offsets.retention.minutes), after which
the committed offsets expire (the group coordinator's expiration.py).
Standalone consumers commit with generation -1 and no member id.
"""

from __future__ import annotations

from typing import Any

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.services import BrokerServices
from samsa.broker.group import PartitionCommit
from samsa.errors import (
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from samsa.protocol import OffsetCommitResponse
from samsa.security.acl import AclOperation

TopicResponse = OffsetCommitResponse.OffsetCommitResponseTopic
PartitionResponse = OffsetCommitResponse.OffsetCommitResponsePartition


def _zookeeper_commit(services: BrokerServices, req: Any) -> OffsetCommitResponse:
    known = [services.get_log(t.name, p.partition_index) is not None
             for t in req.topics for p in t.partitions]
    # The request fails as a whole once any partition exists (KafkaApis.handle's error path).
    code = UnsupportedVersionError.code if any(known) else UnknownTopicOrPartitionError.code
    return OffsetCommitResponse(throttle_time_ms=0, topics=[
        TopicResponse(name=t.name, partitions=[
            PartitionResponse(partition_index=p.partition_index, error_code=code)
            for p in t.partitions])
        for t in req.topics])


def handle_offset_commit(services: BrokerServices,
                         ctx: RequestContext) -> OffsetCommitResponse:
    version = ctx.header.request_api_version
    req = ctx.body
    if version == 0:
        return _zookeeper_commit(services, req)
    # READ on each topic (the group's READ was checked before, kafka_apis.REQUEST_CHECKS).
    readable = services.authorized_topics(ctx, AclOperation.READ, {t.name for t in req.topics})
    commits = [
        PartitionCommit(t.name, p.partition_index, p.committed_offset,
                        p.committed_leader_epoch if version >= 6 else -1, p.committed_metadata,
                        p.commit_timestamp if version == 1 else -1,
                        req.retention_time_ms if 2 <= version <= 4 else -1)
        for t in req.topics if t.name in readable for p in t.partitions
    ]
    errors = iter(services.groups.commit_offsets(
        req.group_id, req.generation_id_or_member_epoch, req.member_id,
        req.group_instance_id if version >= 7 else None, commits, api_version=version)
        if commits else [])
    denied = TopicAuthorizationFailedError.code
    return OffsetCommitResponse(throttle_time_ms=0, topics=[
        TopicResponse(name=t.name, partitions=[
            PartitionResponse(partition_index=p.partition_index,
                              error_code=next(errors) if t.name in readable else denied)
            for p in t.partitions])
        for t in req.topics])
