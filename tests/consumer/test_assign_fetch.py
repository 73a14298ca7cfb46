"""Assign + fetch against the samsa broker, data produced by confluent-kafka."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

from samsa.broker import Broker
from samsa.consumer import KafkaConsumer, OffsetAndTimestamp, TopicPartition
from samsa.consumer import fetcher as fetcher_module
from samsa.records import TimestampType

_topic_ids = itertools.count()


def new_topic(prefix: str) -> str:
    return f"{prefix}-{next(_topic_ids)}"


def consume_all(consumer: KafkaConsumer, n: int, max_polls: int = 200) -> list[Any]:
    out: list[Any] = []
    for _ in range(max_polls):
        out.extend(consumer.poll(0.5))
        if len(out) >= n:
            break
    return out


@pytest.fixture(params=["compiled loops", "plain Python"])
def record_reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both ways v2 records are read: record_loops (compiled by setup.py where it can be) and
    iter_records, which the consumer uses where record_loops is not compiled."""
    if request.param == "plain Python":
        monkeypatch.setattr(fetcher_module, "compiled_loops", False)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_round_trip_every_codec(broker: Broker, produce: Callable[..., None], codec: str,
                                record_reader: None) -> None:
    topic = new_topic(f"codec-{codec}")
    records = [{"key": f"k{i}".encode(), "value": f"value-{i}".encode() * 3, "partition": i % 3,
                    "headers": [("h", f"{i}".encode()), ("n", None)], "timestamp": 1_700_000_000_000 + i}
               for i in range(300)]
    produce(topic, records, **{"compression.type": codec})
    with KafkaConsumer({"bootstrap.servers": broker.bootstrap_servers,
                        "auto.offset.reset": "earliest"}) as c:
        c.assign([TopicPartition(topic, p) for p in range(3)])
        got = consume_all(c, 300)
    assert len(got) == 300
    by_key = {r.key: r for r in got}
    for i in range(300):
        r = by_key[f"k{i}".encode()]
        assert r.value == f"value-{i}".encode() * 3
        assert r.partition == i % 3 and r.topic == topic
        assert r.offset == i // 3
        assert r.headers == (("h", f"{i}".encode()), ("n", None))
        assert r.timestamp == 1_700_000_000_000 + i
        assert r.timestamp_type == TimestampType.CREATE_TIME
        assert r.serialized_key_size == len(r.key)
        assert r.serialized_value_size == len(r.value)
    # Offsets are consecutive per partition and in order.
    for p in range(3):
        offs = [r.offset for r in got if r.partition == p]
        assert offs == list(range(100))


def test_deserializers_and_null_key(broker: Broker, produce: Callable[..., None]) -> None:
    topic = new_topic("deser")
    produce(topic, [{"value": b'{"a": 1}', "partition": 0}, {"key": b"x", "value": None, "partition": 0}])
    with KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                       key_deserializer="str", value_deserializer="json") as c:
        c.assign([TopicPartition(topic, 0)])
        got = consume_all(c, 2)
    assert [(r.key, r.value) for r in got] == [(None, {"a": 1}), ("x", None)]
    assert got[0].serialized_key_size == -1 and got[1].serialized_value_size == -1


def test_seek_positions_pause_and_offsets(broker: Broker, produce: Callable[..., None]) -> None:
    topic = new_topic("seek")
    base_ts = 1_600_000_000_000
    produce(topic, [{"value": str(i).encode(), "partition": 0, "timestamp": base_ts + 10 * i}
                    for i in range(50)])
    tp = TopicPartition(topic, 0)
    with KafkaConsumer({"bootstrap.servers": broker.bootstrap_servers, "max.poll.records": 7}) as c:
        c.assign([tp])
        assert c.assignment() == {tp}
        assert c.position(tp) == 50  # auto.offset.reset=latest
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([tp]) == {tp: 50}
        found = c.offsets_for_times({tp: base_ts + 105})
        assert found[tp] == OffsetAndTimestamp(11, base_ts + 110, 0)  # the first leader epoch
        assert c.offsets_for_times({tp: base_ts + 10_000})[tp] is None

        c.seek(tp, 45)
        got = consume_all(c, 5)
        assert [r.offset for r in got] == [45, 46, 47, 48, 49]
        assert c.position(tp) == 50

        c.seek_to_beginning()
        batch = c.poll(5.0)
        assert [r.offset for r in batch] == list(range(7))  # max.poll.records
        assert c.position(tp) == 7

        c.pause([tp])
        assert c.paused() == {tp}
        assert len(c.poll(0.3)) == 0
        c.resume([tp])
        rest = consume_all(c, 43)
        assert [r.offset for r in rest] == list(range(7, 50))

        c.seek_to_end([tp])
        assert c.position(tp) == 50
        assert topic in c.list_topics()


def test_out_of_range_resets_to_earliest(broker: Broker, produce: Callable[..., None]) -> None:
    topic = new_topic("oor")
    produce(topic, [{"value": b"v", "partition": 1} for _ in range(5)])
    tp = TopicPartition(topic, 1)
    with KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest") as c:
        c.assign([tp])
        c.seek(tp, 1000)
        got = consume_all(c, 5)
    assert [r.offset for r in got] == [0, 1, 2, 3, 4]


def test_out_of_range_with_reset_none_raises(broker: Broker, produce: Callable[..., None]) -> None:
    from samsa.errors import OffsetOutOfRangeError

    topic = new_topic("oor-none")
    produce(topic, [{"value": b"v", "partition": 0}])
    tp = TopicPartition(topic, 0)
    with KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="none") as c:
        c.assign([tp])
        c.seek(tp, 99)
        with pytest.raises(OffsetOutOfRangeError):
            for _ in range(50):
                c.poll(0.2)


def test_iteration_and_many_records(broker: Broker, produce: Callable[..., None]) -> None:
    topic = new_topic("iter")
    produce(topic, [{"value": b"x" * 100, "partition": i % 3} for i in range(20000)],
            **{"compression.type": "lz4"})
    with KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, p) for p in range(3)])
        n = 0
        for _record in c:
            n += 1
            if n == 20000:
                break
    assert n == 20000


def test_a_partition_at_its_end_does_not_hold_up_the_buffered_ones(
        broker: Broker, produce: Callable[..., None]) -> None:
    """A fetch naming only partitions at their end is held by the broker up to
    fetch.max.wait.ms, and while it is in flight no other fetch goes to that broker: sent while
    other partitions of that broker still had records buffered, it stalled them once drained.
    It now waits for them and goes out with them."""
    topic = new_topic("caught-up")
    # Partition 0: 40 batches of one 1,000-byte record (several fetches at 4 KiB a partition);
    # partition 1: one record, at its end after the first fetch.
    produce(topic, [{"value": b"x" * 1000, "partition": 0} for _ in range(40)]
            + [{"value": b"y", "partition": 1}], **{"batch.size": 1100, "linger.ms": 0})
    with KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                       fetch_max_wait_ms=60_000, max_partition_fetch_bytes=4096,
                       max_poll_records=1) as c:
        c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        got = []
        for _ in range(400):  # about 41 polls are needed; a held fetch stalls 60 s each
            got += c.poll(0.05)
            if len(got) == 41:
                break
    assert sorted((r.partition, r.offset) for r in got) == [(0, i) for i in range(40)] + [(1, 0)]


def test_a_large_poll_builds_its_records_as_they_are_iterated(
        broker: Broker, produce: Callable[..., None]) -> None:
    """A poll of more than a chunk (500) hands out RecordSpans, built when iterated: iterating,
    records(tp), [tp], items() and len() all see the same records, positions move at poll()."""
    topic = new_topic("large-poll")
    produce(topic, [{"value": b"%d" % i, "key": b"k" if i % 7 else None, "partition": i % 3,
                     "headers": [("h", b"%d" % i)] if i % 5 == 0 else None}
                    for i in range(6000)])
    with KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest") as c:
        tps = [TopicPartition(topic, p) for p in range(3)]
        c.assign(tps)
        seen: list[Any] = []
        for _ in range(50):
            records = c.poll(1.0, max_records=6000)
            if not records:
                continue
            n = len(records)
            iterated = list(records)
            assert len(iterated) == n
            by_tp = dict(records.items())  # in iteration order (partitions() is a set)
            assert set(by_tp) == records.partitions()
            assert [r for tp in by_tp for r in by_tp[tp]] == iterated
            assert all(records.records(tp) == records[tp] == by_tp[tp] for tp in by_tp)
            for tp, rs in by_tp.items():
                assert c.position(tp) == rs[-1].offset + 1
            seen += iterated
            if len(seen) == 6000:
                break
    assert sorted(int(r.value) for r in seen) == list(range(6000))
    for r in seen:
        i = int(r.value)
        assert (r.key, r.headers) == (b"k" if i % 7 else None, (("h", r.value),) if i % 5 == 0 else ())
        assert r.serialized_key_size == (1 if i % 7 else -1)
