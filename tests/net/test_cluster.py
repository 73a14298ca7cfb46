"""ClusterView: the producer's per-snapshot answers about leaders and partitions."""

from __future__ import annotations

from samsa.net.cluster import Cluster, ClusterView, Node, PartitionInfo

BROKER = Node(1, "broker-1", 9092)


def test_partition_leaders_answer_as_leader_for_and_leader_epoch_for() -> None:
    cluster = Cluster([BROKER], [
        PartitionInfo("t", 0, BROKER, leader_epoch=7),
        PartitionInfo("t", 1, None, leader_epoch=3),  # no leader
        PartitionInfo("t", 2, BROKER),  # epoch unknown (Metadata < v7)
        PartitionInfo("u", 0, BROKER, leader_epoch=0),
    ])
    view = ClusterView(cluster)
    assert view.partition_leaders("t") == {0: (1, 7), 1: (None, 3), 2: (1, None)}
    assert view.partition_leaders("u") == {0: (1, 0)}
    assert view.partition_leaders("unknown") == {}
    for topic, partition in [("t", 0), ("t", 1), ("t", 2), ("t", 3), ("u", 0), ("v", 0)]:
        leader, epoch = view.partition_leaders(topic).get(partition, (None, None))
        assert view.leader_for(topic, partition) == leader
        assert view.leader_epoch_for(topic, partition) == epoch
