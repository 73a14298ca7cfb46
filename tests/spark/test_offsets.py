"""Offset JSON, minPartitions splitting and maxOffsetsPerTrigger shares (no Spark session)."""

from __future__ import annotations

from samsa.net.cluster import TopicPartition as TP
from samsa.spark.offsets import OffsetRange, from_json, split_ranges, to_json
from samsa.spark.stream import rate_limit


def test_spark_offset_json_round_trip() -> None:
    offsets = {TP("b", 1): 7, TP("a", 10): 3, TP("a", 2): 0}
    as_json = to_json(offsets)
    assert as_json == {"a": {"2": 0, "10": 3}, "b": {"1": 7}}
    assert from_json(as_json) == offsets
    assert from_json('{"a":{"0":5}}') == {TP("a", 0): 5}


def test_split_ranges_covers_each_offset_once() -> None:
    ranges = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 10, 13), OffsetRange("t", 2, 5, 5)]
    split = split_ranges(ranges, 8)
    assert len(split) >= 7
    for p, (lo, hi) in {0: (0, 100), 1: (10, 13)}.items():
        covered = sorted(o for r in split if r.partition == p for o in range(r.start, r.end))
        assert covered == list(range(lo, hi))
    assert split_ranges(ranges, None) == ranges[:2]  # empty ranges dropped


def test_rate_limit_shares_in_proportion_to_lag() -> None:
    start = {TP("t", p): 0 for p in range(4)}
    latest = {TP("t", p): 1000 for p in range(4)}
    assert rate_limit(start, latest, 1500) == {TP("t", p): 375 for p in range(4)}
    skewed = rate_limit({TP("t", 0): 0, TP("t", 1): 0}, {TP("t", 0): 900, TP("t", 1): 100}, 100)
    assert skewed == {TP("t", 0): 90, TP("t", 1): 10}
    tiny = rate_limit({TP("t", 0): 0, TP("t", 1): 0}, {TP("t", 0): 10_000, TP("t", 1): 1}, 10)
    assert tiny[TP("t", 1)] == 1  # a share below one record rounds up, so nothing starves
    assert rate_limit(start, latest, 10_000) == latest


def test_max_records_per_partition_cuts_ranges_then_min_partitions_applies() -> None:
    ranges = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 10, 13)]
    split = split_ranges(ranges, None, 30)
    assert [(r.partition, r.start, r.end) for r in split] == [
        (0, 0, 25), (0, 25, 50), (0, 50, 75), (0, 75, 100), (1, 10, 13)]
    assert split_ranges(ranges, None, 1000) == ranges
    # minPartitions beyond what maxRecordsPerPartition made: the pieces are split further,
    # never above the maximum.
    more = split_ranges(ranges, 12, 30)
    assert len(more) >= 10 and max(r.size for r in more) <= 30
    covered = sorted((r.partition, o) for r in more for o in range(r.start, r.end))
    assert covered == [(0, o) for o in range(100)] + [(1, o) for o in range(10, 13)]
