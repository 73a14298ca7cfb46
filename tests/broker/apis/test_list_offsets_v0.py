"""ListOffsets v0 (OldStyleOffsets) while retention deletes a segment under the request."""

from __future__ import annotations

import os
from typing import Any

from samsa.protocol import ListOffsetsRequest


def test_a_segment_deleted_under_the_request_counts_as_oldest(client: Any, log_manager: Any,
                                                              make_batch: Any) -> None:
    log_manager.create_topic("t", 1)
    log = log_manager.get_log("t", 0)
    log.append_as_leader(make_batch(b"a", b"b"), leader_epoch=0)
    log.roll()
    log.append_as_leader(make_batch(b"c"), leader_epoch=0)
    # Retention unlinks a segment's file before it leaves the segment list (Log._delete_segments).
    os.unlink(log.segments[0].log_path)
    request = ListOffsetsRequest(replica_id=-1, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name="t", partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=1,
                                                    max_num_offsets=10)])])
    partition = client.call(request, 0).topics[0].partitions[0]
    # Kafka's OldStyleOffsets: offsets of segments last modified at or before the timestamp.
    assert (partition.error_code, partition.old_style_offsets) == (0, [0])
