"""Partitioners: murmur2 as Java, keyed placement as Java/kafka-python, KIP-794 sticky + adaptive."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import DefaultPartitioner as KafkaPythonPartitioner
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from samsa.producer.partitioner import (
    UNKNOWN_PARTITION,
    BuiltInPartitioner,
    ClusterView,
    Partitioner,
    RoundRobinPartitioner,
    murmur2,
    partition_for_key,
    partition_for_record,
    to_positive,
)
from tests.producer.fakes import FakeCluster

# Kafka's UtilsTest.testMurmur2.
JAVA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
    b"": 275646681,
    b"a": -1563381124,
    b"key1": 28543940,
}


@pytest.mark.parametrize(("data", "expected"), JAVA_VECTORS.items())
def test_murmur2_java_vectors(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected
    assert murmur2(bytearray(data)) == expected
    assert murmur2(memoryview(data)) == expected


@pytest.mark.parametrize(("key", "partition"), [(b"", 3), (b"a", 4), (b"key1", 2)])
def test_partition_for_key_vectors_six_partitions(key: bytes, partition: int) -> None:
    assert partition_for_key(key, 6) == partition


def test_to_positive_is_not_abs() -> None:
    assert to_positive(-(2**31)) == 0
    assert to_positive(-1) == 2**31 - 1
    assert to_positive(-1563381124) == 584102524
    assert to_positive(5) == 5


@given(st.binary(max_size=64))
def test_murmur2_matches_kafka_python(key: bytes) -> None:
    assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key) & 0xFFFFFFFF


class KafkaPythonCluster:
    """The three ClusterMetadata methods kafka-python's DefaultPartitioner calls."""

    def __init__(self, topic: str, num_partitions: int) -> None:
        self.topic = topic
        self.partitions = set(range(num_partitions))

    def topics(self) -> set[str]:
        return {self.topic}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return self.partitions

    def available_partitions_for_topic(self, topic: str) -> set[int]:
        return self.partitions


@given(st.binary(max_size=40), st.integers(min_value=1, max_value=200))
def test_keyed_placement_matches_kafka_python(key: bytes, num_partitions: int) -> None:
    theirs = KafkaPythonPartitioner().partition(
        "t", None, key, None, None, KafkaPythonCluster("t", num_partitions)
    )
    ours = partition_for_record(
        "t", None, key, None, FakeCluster({"t": [1] * num_partitions})
    )
    assert ours == theirs == partition_for_key(key, num_partitions)


# -- placement rules ------------------------------------------------------------------------


class Fixed:
    def __init__(self, value: int) -> None:
        self.value = value
        self.calls: list[tuple[str, bytes | None, bytes | None]] = []

    def partition(
        self,
        topic: str,
        key_bytes: bytes | None,
        value_bytes: bytes | None,
        cluster: ClusterView,
    ) -> int:
        self.calls.append((topic, key_bytes, value_bytes))
        return self.value

    def close(self) -> None:
        pass


def test_protocols_are_satisfied() -> None:
    assert isinstance(FakeCluster(), ClusterView)
    assert isinstance(Fixed(0), Partitioner)
    assert isinstance(RoundRobinPartitioner(), Partitioner)


def test_partition_for_record_rules() -> None:
    cluster = FakeCluster({"t": [1, 1, 1, 1, 1, 1]})
    assert partition_for_record("t", 5, b"key1", None, cluster) == 5  # explicit wins
    custom = Fixed(1)
    assert partition_for_record("t", None, b"key1", b"v", cluster, custom) == 1
    assert custom.calls == [("t", b"key1", b"v")]
    assert partition_for_record("t", None, b"key1", None, cluster) == 2  # murmur2
    assert (
        partition_for_record("t", None, b"", None, cluster) == 3
    )  # empty key is hashed
    assert partition_for_record("t", None, None, None, cluster) == UNKNOWN_PARTITION
    assert (
        partition_for_record("t", None, b"key1", None, cluster, ignore_keys=True)
        == UNKNOWN_PARTITION
    )


def test_keyed_placement_uses_all_partitions_even_unavailable() -> None:
    cluster = FakeCluster({"t": [None, None, None, None, None, 1]})
    assert partition_for_record("t", None, b"key1", None, cluster) == 2


def test_negative_custom_partition_is_rejected() -> None:
    with pytest.raises(ValueError, match="partition id >= 0"):
        partition_for_record("t", None, None, None, FakeCluster({"t": [1]}), Fixed(-3))


def test_round_robin_cycles_available_then_all() -> None:
    rr = RoundRobinPartitioner()
    cluster = FakeCluster({"t": [1, None, 1, 1], "u": [None, None]})
    assert [rr.partition("t", b"k", None, cluster) for _ in range(6)] == [
        0,
        2,
        3,
        0,
        2,
        3,
    ]
    assert [rr.partition("u", None, None, cluster) for _ in range(3)] == [0, 1, 0]


# -- BuiltInPartitioner ---------------------------------------------------------------------


class ScriptedPartitioner(BuiltInPartitioner):
    """Random numbers come from a script so choices are deterministic."""

    def __init__(self, topic: str, batch_size: int, randoms: list[int]) -> None:
        super().__init__(topic, batch_size)
        self._randoms: Iterator[int] = iter(randoms)

    def random_partition(self) -> int:
        return next(self._randoms)


def test_sticky_partition_switches_after_batch_size_bytes() -> None:
    cluster = FakeCluster({"t": [1, 1, 1]})
    p = ScriptedPartitioner("t", 100, [0, 1, 2])
    info = p.peek_current_partition_info(cluster)
    assert info.partition == 0
    p.update_partition_info(info, 60, cluster)
    assert p.peek_current_partition_info(cluster) is info
    p.update_partition_info(info, 40, cluster)  # 100 >= batch size: switch
    assert p.is_partition_changed(info)
    new = p.peek_current_partition_info(cluster)
    assert new.partition == 1 and new.produced_bytes == 0


def test_switch_waits_for_full_batch_up_to_twice_batch_size() -> None:
    cluster = FakeCluster({"t": [1, 1, 1]})
    p = ScriptedPartitioner("t", 100, [0, 2])
    info = p.peek_current_partition_info(cluster)
    p.update_partition_info(info, 150, cluster, enable_switch=False)
    assert not p.is_partition_changed(info)
    p.update_partition_info(info, 0, cluster, enable_switch=True)  # batch became full
    assert p.is_partition_changed(info)

    p2 = ScriptedPartitioner("t", 100, [0, 2])
    info2 = p2.peek_current_partition_info(cluster)
    p2.update_partition_info(info2, 199, cluster, enable_switch=False)
    assert not p2.is_partition_changed(info2)
    p2.update_partition_info(info2, 1, cluster, enable_switch=False)  # hard cap at 2x
    assert p2.is_partition_changed(info2)


def test_partition_changed_finishes_a_postponed_switch_once_the_batch_is_full() -> None:
    """Java's RecordAccumulator.partitionChanged, the accumulator's call under the deque lock."""
    cluster = FakeCluster({"t": [1, 1, 1]})
    p = ScriptedPartitioner("t", 100, [0, 2, 1])
    info = p.peek_current_partition_info(cluster)
    assert p.sticky_info is info
    assert not p.partition_changed(info, True, cluster)  # full, but too few bytes yet
    p.update_partition_info(info, 150, cluster, enable_switch=False)
    assert not p.partition_changed(info, False, cluster)  # postponed: last batch not full
    assert p.sticky_info is info
    assert p.partition_changed(info, True, cluster)  # the batch filled up: switch now
    assert p.sticky_info is not None and p.sticky_info.partition == 2
    assert p.partition_changed(info, False, cluster)  # another thread switched


def test_is_partition_changed_ignores_explicit_partitions() -> None:
    p = BuiltInPartitioner("t", 10)
    assert not p.is_partition_changed(None)
    p.update_partition_info(None, 100, FakeCluster({"t": [1]}))


def test_next_partition_uniform_over_available_or_all() -> None:
    p = ScriptedPartitioner("t", 10, [0, 1, 2, 5])
    cluster = FakeCluster({"t": [None, 1, None, 1]})
    assert [p.next_partition(cluster) for _ in range(3)] == [1, 3, 1]
    none_available = FakeCluster({"t": [None, None, None]})
    assert p.next_partition(none_available) == 2


def test_random_sticky_choice_is_spread_over_available_partitions() -> None:
    cluster = FakeCluster({"t": [1, None, 2, 3]})
    p = BuiltInPartitioner("t", 10)
    seen = Counter(p.next_partition(cluster) for _ in range(300))
    assert set(seen) == {0, 2, 3}


def test_load_stats_cumulative_frequency_table() -> None:
    # Java's example: queue sizes 0 3 1 -> inverted 4 1 3 -> running sum 4 5 8.
    p = ScriptedPartitioner("t", 10, list(range(8)))
    sizes, ids = [0, 3, 1], [10, 11, 12]
    p.update_partition_load_stats(sizes, ids, 3)
    assert sizes == [4, 5, 8]
    assert p.load_stats_range_end() == 8
    cluster = FakeCluster({"t": [1] * 13})
    picks = [p.next_partition(cluster) for _ in range(8)]
    assert picks == [10, 10, 10, 10, 11, 12, 12, 12]


def test_load_stats_prefer_short_queues() -> None:
    p = BuiltInPartitioner("t", 10)
    p.update_partition_load_stats([0, 9], [0, 1], 2)  # weights 10 and 1
    counts = Counter(p.next_partition(FakeCluster({"t": [1, 1]})) for _ in range(2000))
    assert counts[0] > counts[1] * 3


def test_load_stats_disabled_when_equal_single_or_none() -> None:
    p = BuiltInPartitioner("t", 10)
    p.update_partition_load_stats([2, 2, 2], [0, 1, 2], 3)
    assert p.load_stats_range_end() is None
    p.update_partition_load_stats([5], [0], 1)
    assert p.load_stats_range_end() is None
    p.update_partition_load_stats([1, 2], [0, 1], 2)
    assert p.load_stats_range_end() == 3
    p.update_partition_load_stats(None, None, 0)
    assert p.load_stats_range_end() is None


def test_load_stats_kept_when_partitions_excluded_even_if_equal() -> None:
    # partitioner.availability.timeout.ms excluded partition 2: length < number of partitions.
    p = ScriptedPartitioner("t", 10, [0, 1, 2, 3])
    p.update_partition_load_stats([1, 1, 7], [0, 1, 2], 2)
    assert p.load_stats_range_end() == 2
    cluster = FakeCluster({"t": [1, 1, 1]})
    assert {p.next_partition(cluster) for _ in range(4)} == {0, 1}


def test_sticky_batch_size_must_be_positive() -> None:
    with pytest.raises(ValueError):
        BuiltInPartitioner("t", 0)
