"""DescribeLogDirs (key 35), versions 0-4: the one log directory, its partitions' sizes and the
volume's space (Kafka's ReplicaManager.describeLogDirs)."""

from __future__ import annotations

import os
import shutil
from typing import Any

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.services import BrokerServices
from samsa.protocol import DescribeLogDirsResponse

DirResult = DescribeLogDirsResponse.DescribeLogDirsResult
TopicResult = DescribeLogDirsResponse.DescribeLogDirsTopic
PartitionResult = DescribeLogDirsResponse.DescribeLogDirsPartition


def handle_describe_log_dirs(services: BrokerServices,
                             ctx: RequestContext) -> DescribeLogDirsResponse:
    req = ctx.body
    wanted: set[tuple[str, int]] | None = None  # null topics: every partition
    if req.topics is not None:
        wanted = {(t.topic, p) for t in req.topics for p in t.partitions}
    by_topic: dict[str, list[Any]] = {}
    for (topic, index), log in sorted(services.logs.logs().items()):
        if wanted is not None and (topic, index) not in wanted:
            continue
        by_topic.setdefault(topic, []).append(PartitionResult(
            partition_index=index, partition_size=log.size_bytes,
            # max(high watermark - log end offset, 0): always 0 for a leader.
            offset_lag=max(log.high_watermark - log.log_end_offset, 0),
            is_future_key=False))
    directory = os.path.abspath(services.logs.data_dir)
    usage = shutil.disk_usage(directory)
    result = DirResult(error_code=0, log_dir=directory,
                       topics=[TopicResult(name=name, partitions=parts)
                               for name, parts in by_topic.items()],
                       total_bytes=usage.total, usable_bytes=usage.free)
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=[result])
