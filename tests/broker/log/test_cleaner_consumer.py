"""samsa's consumer reads a compacted topic: offset gaps, emptied batches, a seek into a gap."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from samsa.broker import Broker
from samsa.consumer import KafkaConsumer, TopicPartition
from tests.broker.log.test_cleaner import BASE, produce


def _poll_until(consumer: KafkaConsumer, last_offset: int) -> list[Any]:
    out: list[Any] = []
    for _ in range(100):
        out.extend(consumer.poll(0.2))
        if out and out[-1].offset >= last_offset:
            break
    return out


def test_consumer_reads_the_latest_values_across_gaps(make_broker: Callable[..., Broker]) -> None:
    broker = make_broker({"log.cleaner.threads": 0})
    logs = broker.log_manager
    logs.create_topic("compacted", 1, {"cleanup.policy": "compact", "segment.bytes": "2000"})
    plog = logs.get_log("compacted", 0)
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    for i in range(300):
        key = b"k%d" % (i % 17)
        value = None if i % 11 == 0 else b"v%d" % i
        # An idempotent producer's batches: its last one is kept (emptied) for its sequence.
        offset = produce(plog, [(key, value)], ts=BASE + i, pid=5, epoch=0, seq=i)
        latest[key] = (offset, value)
    plog.roll()
    cleaner = logs.cleaner
    assert cleaner.clean_filthiest(cleaner.new_cleaner(), BASE + 1000)
    end = plog.log_end_offset
    with KafkaConsumer({"bootstrap.servers": broker.bootstrap_servers,
                        "auto.offset.reset": "earliest"}) as consumer:
        tp = TopicPartition("compacted", 0)
        consumer.assign([tp])
        got = _poll_until(consumer, max(o for o, _ in latest.values()))
        assert sorted((r.offset, r.value) for r in got) == sorted(latest.values())
        assert [r.offset for r in got] == sorted(r.offset for r in got)
        assert len(got) < end  # gaps
        assert consumer.position(tp) == end
        # A seek into a gap resumes at the next record kept.
        gap = next(o for o in range(end) if o not in {r.offset for r in got})
        consumer.seek(tp, gap)
        after = _poll_until(consumer, max(o for o, _ in latest.values()))
        assert after[0].offset == min(r.offset for r in got if r.offset > gap)
