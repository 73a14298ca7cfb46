"""OffsetFetch (key 9), versions 0-9: a group's committed positions.

v0 reads offsets from ZooKeeper, which a KRaft broker does not have: Kafka 3.9 answers each
requested partition with offset -1, no metadata and UNSUPPORTED_VERSION
(``KafkaApis.handleOffsetFetchRequestFromZookeeper`` -> ``requireZkOrThrow``, and
``OffsetFetchRequest.getErrorResponse`` for v0-1).

v2+ ``topics=null`` asks for every partition the group committed; v8+ asks for several groups
at once.  A partition with no commit answers offset -1 with no error (the client then applies
auto.offset.reset).

Offsets a transaction committed are pending until its marker and not seen; v7+
``require_stable`` answers their partitions UNSTABLE_OFFSET_COMMIT (offset -1) instead of the
last committed offset, so a read_committed consumer waits for the transaction's outcome
(KIP-447, Kafka's OffsetMetadataManager.fetchOffsets).
"""

from __future__ import annotations

from typing import Any

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.services import BrokerServices
from samsa.broker.group import OffsetAndMetadata
from samsa.errors import (
    TopicAuthorizationFailedError,
    UnstableOffsetCommitError,
    UnsupportedVersionError,
)
from samsa.protocol import OffsetFetchResponse
from samsa.security.acl import AclOperation

PartitionOffsets = list[tuple[int, OffsetAndMetadata | None, int]]


def _lookup(services: BrokerServices, ctx: RequestContext, group_id: str,
            topics: Any, require_stable: bool = False
            ) -> tuple[int, list[tuple[str, PartitionOffsets, int]]]:
    """(group error, [(topic, [(partition, committed or None, partition error)], topic
    error)]) in request order.  Topics the principal may not DESCRIBE: named ones get
    TOPIC_AUTHORIZATION_FAILED, and an all-partitions request leaves them out (Kafka's
    handleOffsetFetchRequest).  ``require_stable``: partitions with an offset pending in a
    transaction get UNSTABLE_OFFSET_COMMIT."""
    wanted = None if topics is None else [
        (t.name, p) for t in topics for p in t.partition_indexes]
    error, found, pending = services.groups.fetch_offsets_and_pending(group_id, wanted)
    unstable = pending if require_stable else frozenset()
    by_topic: dict[str, PartitionOffsets] = {}
    for (topic, partition), committed in found.items():
        if (topic, partition) in unstable:
            by_topic.setdefault(topic, []).append(
                (partition, None, UnstableOffsetCommitError.code))
        else:
            by_topic.setdefault(topic, []).append((partition, committed, 0))
    visible = services.authorized_topics(ctx, AclOperation.DESCRIBE, by_topic)
    denied = TopicAuthorizationFailedError.code
    return error, [(name, parts, 0 if name in visible else denied)
                   for name, parts in by_topic.items() if name in visible or topics is not None]


def handle_offset_fetch(services: BrokerServices, ctx: RequestContext) -> OffsetFetchResponse:
    version = ctx.header.request_api_version
    req = ctx.body
    if version >= 8:
        groups = []
        for g in req.groups:
            error, topics = _lookup(services, ctx, g.group_id, g.topics, req.require_stable)
            groups.append(OffsetFetchResponse.OffsetFetchResponseGroup(
                group_id=g.group_id, error_code=error, topics=[
                    OffsetFetchResponse.OffsetFetchResponseTopics(name=name, partitions=[
                        OffsetFetchResponse.OffsetFetchResponsePartitions(
                            partition_index=p,
                            committed_offset=c.offset if c and not code else -1,
                            committed_leader_epoch=c.leader_epoch if c and not code else -1,
                            metadata=c.metadata if c and not code else "",
                            error_code=code or unstable)
                        for p, c, unstable in parts])
                    for name, parts, code in topics]))
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    if version == 0:
        return OffsetFetchResponse(topics=[
            OffsetFetchResponse.OffsetFetchResponseTopic(name=t.name, partitions=[
                OffsetFetchResponse.OffsetFetchResponsePartition(
                    partition_index=p, committed_offset=-1, metadata="",
                    error_code=UnsupportedVersionError.code)
                for p in t.partition_indexes])
            for t in req.topics or []])
    topics_requested = req.topics if version >= 2 else (req.topics or [])
    error, topics = _lookup(services, ctx, req.group_id, topics_requested,
                            version >= 7 and req.require_stable)
    return OffsetFetchResponse(
        throttle_time_ms=0, error_code=error if version >= 2 else 0, topics=[
            OffsetFetchResponse.OffsetFetchResponseTopic(name=name, partitions=[
                OffsetFetchResponse.OffsetFetchResponsePartition(
                    partition_index=p, committed_offset=c.offset if c and not code else -1,
                    committed_leader_epoch=(c.leader_epoch if c and not code else -1)
                    if version >= 5 else -1,
                    metadata=c.metadata if c and not code else "",
                    error_code=code or unstable)
                for p, c, unstable in parts])
            for name, parts, code in topics])
