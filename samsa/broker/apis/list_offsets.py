"""ListOffsets (key 2), versions 0-9: offsets by time, and the special earliest/latest ones.

v0 answers a list of segment-based offsets instead (list_offsets_v0.py).  A special timestamp
below the version that introduced it, or an unknown negative one, is UNSUPPORTED_VERSION for
that partition (Kafka's ``KafkaApis.timestampMinSupportedVersion``).
"""

from __future__ import annotations

from typing import Any

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.error_codes import code_for
from samsa.broker.apis.fetch import leader_epoch_error
from samsa.broker.apis.list_offsets_v0 import CONSUMER_REPLICA_ID, legacy_offsets_before
from samsa.broker.apis.services import BrokerServices
from samsa.broker.log import Log, TimestampAndOffset
from samsa.errors import (
    InvalidRequestError,
    KafkaError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from samsa.protocol import ListOffsetsResponse
from samsa.security.acl import AclOperation

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3  # v7+: the record with the largest timestamp
EARLIEST_LOCAL = -4  # v8+: tiered storage; without it the same as EARLIEST
LATEST_TIERED = -5  # v9+: nothing is tiered here, so no offset
# The first ListOffsets version each special timestamp may be asked in.
_MIN_VERSION = {LATEST: 1, EARLIEST: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9}

TopicResponse = ListOffsetsResponse.ListOffsetsTopicResponse
PartitionResponse = ListOffsetsResponse.ListOffsetsPartitionResponse

_NOT_FOUND = TimestampAndOffset(-1, -1, -1)


def _lookup(log: Log, timestamp: int, read_committed: bool) -> TimestampAndOffset:
    last_fetchable = log.last_stable_offset if read_committed else log.high_watermark
    if timestamp == LATEST:
        return TimestampAndOffset(-1, last_fetchable, log.latest_epoch)
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return TimestampAndOffset(-1, log.log_start_offset, log.latest_epoch)
    if timestamp == LATEST_TIERED:
        return _NOT_FOUND
    if timestamp == MAX_TIMESTAMP:
        found = log.offset_of_max_timestamp()
    else:
        found = log.offset_for_timestamp(timestamp)
    if found is None or found.offset >= last_fetchable:
        return _NOT_FOUND
    return found


def _partition(services: BrokerServices, topic: str, p: Any, read_committed: bool,
               version: int, replica_id: int) -> PartitionResponse:
    index = p.partition_index
    if p.timestamp < 0 and version < _MIN_VERSION.get(p.timestamp, 1 << 15) \
            and not (version == 0 and p.timestamp >= EARLIEST):  # v0 knows -1 and -2
        return PartitionResponse(partition_index=index, error_code=UnsupportedVersionError.code)
    log = services.get_log(topic, index)
    if log is None:
        return PartitionResponse(partition_index=index,
                                 error_code=UnknownTopicOrPartitionError.code)
    if version == 0:
        return PartitionResponse(partition_index=index, error_code=0, old_style_offsets=(
            legacy_offsets_before(log, p.timestamp, p.max_num_offsets,
                                  replica_id == CONSUMER_REPLICA_ID)))
    epoch_error = leader_epoch_error(services.leader_epoch(log),
                                     p.current_leader_epoch)
    if epoch_error:
        return PartitionResponse(partition_index=index, error_code=epoch_error)
    try:
        found = _lookup(log, p.timestamp, read_committed)
    except KafkaError as exc:
        return PartitionResponse(partition_index=index,
                                 error_code=code_for(exc, f"list offsets of {topic}-{index}"))
    # LeaderEpoch exists from v4; the codec refuses a non-default value in older versions.
    return PartitionResponse(partition_index=index, error_code=0, timestamp=found.timestamp,
                             offset=found.offset,
                             leader_epoch=found.leader_epoch if version >= 4 else -1)


def handle_list_offsets(services: BrokerServices, ctx: RequestContext) -> ListOffsetsResponse:
    version = ctx.header.request_api_version
    req = ctx.body
    read_committed = version >= 2 and req.isolation_level == 1
    counts: dict[tuple[str, int], int] = {}
    for t in req.topics:
        for p in t.partitions:
            key = (t.name, p.partition_index)
            counts[key] = counts.get(key, 0) + 1
    topics = []
    describable = services.authorized_topics(ctx, AclOperation.DESCRIBE,
                                             {t.name for t in req.topics})
    for t in req.topics:
        partitions = []
        for p in t.partitions:
            if t.name not in describable:
                partitions.append(PartitionResponse(partition_index=p.partition_index,
                                                    error_code=TopicAuthorizationFailedError.code))
            elif counts[(t.name, p.partition_index)] > 1 and version > 0:
                # Kafka refuses partitions listed more than once.
                partitions.append(PartitionResponse(partition_index=p.partition_index,
                                                    error_code=InvalidRequestError.code))
            else:
                partitions.append(_partition(services, t.name, p, read_committed, version,
                                             req.replica_id))
        topics.append(TopicResponse(name=t.name, partitions=partitions))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
