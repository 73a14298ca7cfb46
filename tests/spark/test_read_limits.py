"""minOffsetsPerTrigger, maxTriggerDelay and maxOffsetsPerTrigger in the stream reader's
latestOffset(), judged against Spark's KafkaMicroBatchStream (delayBatch, rateLimit); the
reader's offset lookups are answered by a stand-in and its clock is set by the test."""

from __future__ import annotations

from typing import Any

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from samsa.net.cluster import TopicPartition as TP
from samsa.spark.options import parse_source_options
from samsa.spark.stream import SamsaStreamReader

PARTS = [TP("t", 0), TP("t", 1)]


class Offsets:
    """Stands in for the driver's OffsetResolver: ``ends`` are the partitions' latest offsets."""

    def __init__(self) -> None:
        self.ends = dict.fromkeys(PARTS, 0)

    def partitions(self, subscription: Any) -> list[TP]:
        return list(PARTS)

    def earliest(self, parts: Any) -> dict[TP, int]:
        return dict.fromkeys(parts, 0)

    def latest(self, parts: Any) -> dict[TP, int]:
        return {tp: self.ends[tp] for tp in parts}

    def close(self) -> None:
        pass


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def reader(**options: str) -> tuple[SamsaStreamReader, Offsets, Clock]:
    opts = parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t", **options},
                                streaming=True)
    r = SamsaStreamReader(opts)
    offsets, clock = Offsets(), Clock()
    r._resolver = offsets  # type: ignore[assignment]
    r.clock = clock
    return r, offsets, clock


def at(a: int, b: int) -> dict[str, dict[str, int]]:
    return {"t": {"0": a, "1": b}}


def test_min_offsets_waits_for_enough_offsets_or_the_delay() -> None:
    r, offsets, clock = reader(minOffsetsPerTrigger="100", maxTriggerDelay="30s")
    limit = r.getDefaultReadLimit()
    assert limit == ReadMinRows(100)
    offsets.ends = {PARTS[0]: 10, PARTS[1]: 5}
    assert r.latestOffset(at(0, 0), limit) == at(10, 5)  # the first micro-batch runs at once
    offsets.ends = {PARTS[0]: 60, PARTS[1]: 30}
    clock.now += 29
    assert r.latestOffset(at(10, 5), limit) == at(10, 5)  # 75 new offsets: wait
    offsets.ends = {PARTS[0]: 80, PARTS[1]: 35}
    assert r.latestOffset(at(10, 5), limit) == at(80, 35)  # 100 new offsets: go
    offsets.ends = {PARTS[0]: 81, PARTS[1]: 35}
    clock.now += 29.9
    assert r.latestOffset(at(80, 35), limit) == at(80, 35)  # 1 new offset, 29.9 s: wait
    clock.now += 0.1
    assert r.latestOffset(at(80, 35), limit) == at(81, 35)  # maxTriggerDelay passed: go
    # The delay counts from that micro-batch on.
    offsets.ends = {PARTS[0]: 82, PARTS[1]: 35}
    clock.now += 1
    assert r.latestOffset(at(81, 35), limit) == at(81, 35)


def test_min_and_max_offsets_together() -> None:
    # Spark's composite limit (ReadMinRows + ReadMaxRows): wait for the minimum, cap at the
    # maximum, shared across partitions in proportion to their lag.
    r, offsets, clock = reader(minOffsetsPerTrigger="50", maxOffsetsPerTrigger="100",
                               maxTriggerDelay="1m")
    limit = r.getDefaultReadLimit()
    assert limit == ReadMaxRows(100)
    offsets.ends = {PARTS[0]: 300, PARTS[1]: 100}
    assert r.latestOffset(at(0, 0), limit) == at(75, 25)
    clock.now += 1
    offsets.ends = {PARTS[0]: 90, PARTS[1]: 30}
    assert r.latestOffset(at(75, 25), limit) == at(75, 25)  # 20 new offsets: wait
    clock.now += 60
    assert r.latestOffset(at(75, 25), limit) == at(90, 30)


def test_default_max_trigger_delay_is_fifteen_minutes() -> None:
    r, offsets, clock = reader(minOffsetsPerTrigger="10")
    limit = r.getDefaultReadLimit()
    r.latestOffset(at(0, 0), limit)
    offsets.ends = {PARTS[0]: 1, PARTS[1]: 0}
    clock.now += 15 * 60 - 1
    assert r.latestOffset(at(0, 0), limit) == at(0, 0)
    clock.now += 1
    assert r.latestOffset(at(0, 0), limit) == at(1, 0)


def test_available_now_never_waits() -> None:
    # Spark passes ReadAllAvailable under Trigger.AvailableNow for a ReadMinRows default; the
    # reader must read what there is, or the query would end without it.
    r, offsets, _ = reader(minOffsetsPerTrigger="1000")
    r.latestOffset(at(0, 0), r.getDefaultReadLimit())
    offsets.ends = {PARTS[0]: 3, PARTS[1]: 4}
    r.prepareForTriggerAvailableNow()
    assert r.latestOffset(at(0, 0), ReadAllAvailable()) == at(3, 4)
    assert r.latestOffset(at(0, 0), r.getDefaultReadLimit()) == at(3, 4)


def test_a_held_back_last_stable_offset_is_not_data_loss() -> None:
    # read_committed: the last stable offset may lie below a start taken from a
    # read_uncommitted run while a transaction is open; the range waits, nothing is lost.
    r, offsets, _ = reader(**{"kafka.isolation.level": "read_committed"})
    offsets.ends = {PARTS[0]: 5, PARTS[1]: 9}
    assert r.latestOffset(at(7, 9), ReadAllAvailable()) == at(7, 9)
