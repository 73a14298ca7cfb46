"""OffsetForLeaderEpoch's current_leader_epoch check (KIP-320): one node leads every partition
in epoch 0, so a client that names a later epoch learns UNKNOWN_LEADER_EPOCH."""

from __future__ import annotations

from typing import Any

import pytest

from samsa.protocol import OffsetForLeaderEpochRequest

UNKNOWN_LEADER_EPOCH = 75
Topic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
Partition = OffsetForLeaderEpochRequest.OffsetForLeaderPartition


@pytest.mark.parametrize("version", [2, 3, 4])
def test_a_newer_current_leader_epoch_is_unknown(client: Any, log_manager: Any,
                                                 version: int) -> None:
    log_manager.create_topic("t", 1)
    request = OffsetForLeaderEpochRequest(replica_id=-1, topics=[Topic(topic="t", partitions=[
        Partition(partition=0, current_leader_epoch=1, leader_epoch=0)])])
    p = client.call(request, version).topics[0].partitions[0]
    assert (p.error_code, p.leader_epoch, p.end_offset) == (UNKNOWN_LEADER_EPOCH, -1, -1)
