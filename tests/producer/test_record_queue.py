"""send()'s queue (samsa.producer.record_queue): records accepted by send() and appended to
batches in bulk later.

The unit tests run against the installed module (compiled by setup.py where it can be) and its
pure-Python source; the producer tests run send() through the queue against librdkafka's mock
cluster and read the records back with confluent-kafka."""

from __future__ import annotations

import gc
import sys
import threading
import weakref
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from samsa import KafkaProducer
from samsa.errors import KafkaTimeoutError, ProducerClosedError
from samsa.producer import future as future_module
from samsa.producer import record_queue
from samsa.producer.batch import ProducerBatch, TopicPartition
from samsa.producer.buffer_pool import BufferExhaustedError
from samsa.producer.future import RecordMetadata
from samsa.producer.partitioner import UNKNOWN_PARTITION, partition_for_key
from samsa.records.builder import RecordBatchBuilder
from tests.support.compiled_modules import (
    both_builds,
    check_compiled_in_use,
    is_compiled,
    load_source,
)
from tests.support.mock_cluster import MockCluster

from .test_producer_mock import DEADLINE_S, FAST, read_back

PARTITIONS = 4


@pytest.fixture(scope="module", params=["installed", "source"])
def rq(request: pytest.FixtureRequest) -> Iterator[ModuleType]:
    with pytest.MonkeyPatch.context() as patch:
        if request.param == "source" and is_compiled(future_module):
            # An interpreted class cannot subclass a compiled one: the pure-Python queue runs
            # with the pure-Python futures, as in a build without a compiler.
            patch.setitem(sys.modules, "samsa.producer.future", load_source(future_module))
        with both_builds(request, record_queue) as module:
            yield module


def test_the_compiled_queue_is_in_use_where_it_can_be_built() -> None:
    check_compiled_in_use(record_queue)


class Drains:
    """The producer's side of a RecordQueue, recorded."""

    def __init__(self) -> None:
        self.calls: list[bool] = []
        self.settles: list[float | None] = []
        self.wakes = 0
        self.queue: Any = None
        self.bind_on_settle = True

    def drain(self, block: bool) -> None:
        self.calls.append(block)
        self.queue.take()

    def settle(self, timeout: float | None) -> bool:
        self.settles.append(timeout)
        if self.bind_on_settle:
            for future in self.queue.take():
                future.fail(ProducerClosedError("settled"))
        return True

    def wake(self) -> None:
        self.wakes += 1


def make_queue(rq: ModuleType, **overrides: Any) -> tuple[Any, Drains]:
    drains = Drains()
    settings: dict[str, Any] = {"raw_keys": True, "raw_values": True, "ignore_keys": False,
                                "max_record_size": 1 << 20, "max_records": 1000, "max_bytes": 1 << 20,
                                "max_wait_ms": 5, "open": True}
    settings.update(overrides)
    queue = rq.RecordQueue(drains.drain, drains.settle, drains.wake, lambda: 1_700_000_000_000_000_000, lambda: 5,
                           lambda topic, key: key.encode(), lambda topic, value: value.encode(), **settings)
    drains.queue = queue
    queue.topics["t"] = PARTITIONS
    return queue, drains


def test_try_send_queues_known_topics_and_leaves_the_rest_to_the_direct_path(rq: ModuleType) -> None:
    queue, _ = make_queue(rq)
    future = queue.try_send("t", b"v", None, None, None, None, None)
    assert future is not None and future.is_queued() and not future.done()
    assert len(queue) == 1
    assert queue.try_send("unknown", b"v", None, None, None, None, None) is None
    assert queue.try_send("t", b"v", None, PARTITIONS, None, None, None) is None  # not in metadata yet
    assert queue.try_send("t", b"v", None, -1, None, None, None) is None
    assert queue.try_send("t", b"x" * (1 << 20), None, None, None, None, None) is None  # too large: raises there
    queue.open = False
    assert queue.try_send("t", b"v", None, None, None, None, None) is None
    assert len(queue) == 1


def test_try_send_places_records_as_send_does(rq: ModuleType) -> None:
    queue, _ = make_queue(rq)
    queue.try_send("t", b"v", None, 2, 5, None, None)
    queue.try_send("t", b"v", b"key", None, None, None, None)
    queue.try_send("t", "text", "k", None, None, {"h": "x"}, None)  # serializers; headers
    queue.try_send("t", b"v", None, None, None, None, None)
    explicit, keyed, serialized, sticky = queue.take()
    assert (explicit._partition, explicit._timestamp) == (2, 5)
    assert keyed._partition == partition_for_key(b"key", PARTITIONS)
    assert keyed._timestamp == 1_700_000_000_000  # the clock's time, in ms
    assert (serialized._key, serialized._value, serialized._headers) == (b"k", b"text", [("h", b"x")])
    assert sticky._partition == UNKNOWN_PARTITION
    assert len(queue) == 0


def test_a_full_queue_is_appended_by_the_sending_thread_before_it_takes_more(rq: ModuleType) -> None:
    queue, drains = make_queue(rq, max_records=3)
    for _ in range(3):
        queue.try_send("t", b"v", None, None, None, None, None)
    assert drains.calls == []
    queue.try_send("t", b"v", None, None, None, None, None)
    assert drains.calls == [True] and len(queue) == 1
    queue, drains = make_queue(rq, max_bytes=250)
    queue.try_send("t", b"v" * 200, None, None, None, None, None)
    queue.try_send("t", b"v", None, None, None, None, None)
    assert drains.calls == [True]


def test_a_drain_that_raises_leaves_the_new_record_out_of_the_queue(rq: ModuleType) -> None:
    queue, _ = make_queue(rq, max_records=1)
    queue.try_send("t", b"first", None, None, None, None, None)

    def exhausted(block: bool) -> None:
        raise BufferExhaustedError(16384, 10, 32768, 0)

    queue._drain = exhausted
    with pytest.raises(BufferExhaustedError):
        queue.try_send("t", b"second", None, None, None, None, None)
    assert [f._value for f in queue.take()] == [b"first"]


def test_the_first_record_wakes_the_sender_only_when_it_sleeps_long(rq: ModuleType) -> None:
    queue, drains = make_queue(rq)
    queue.try_send("t", b"v", None, None, None, None, None)
    assert drains.wakes == 0
    queue.take()
    queue.sender_sleeps_long = True
    queue.try_send("t", b"v", None, None, None, None, None)
    queue.try_send("t", b"v", None, None, None, None, None)
    assert drains.wakes == 1  # once: the queue was empty before the first only


def test_give_back_puts_records_at_the_head_in_order(rq: ModuleType) -> None:
    queue, _ = make_queue(rq)
    for value in (b"a", b"b", b"c"):
        queue.try_send("t", value, None, None, None, None, None)
    taken = queue.take()
    queue.try_send("t", b"d", None, None, None, None, None)
    queue.give_back(taken[1:])
    assert [f._value for f in queue.take()] == [b"b", b"c", b"d"]


def test_waiting_on_a_queued_future_appends_the_queue_first(rq: ModuleType) -> None:
    queue, drains = make_queue(rq)
    future = queue.try_send("t", b"v", None, None, None, None, None)
    with pytest.raises(ProducerClosedError, match="settled"):
        future.get(timeout=3)
    assert drains.settles and drains.settles[0] is not None and drains.settles[0] <= 3
    assert future.done() and not future.is_queued()


def test_a_future_that_stays_queued_times_out_saying_what_it_waited_for(rq: ModuleType) -> None:
    queue, drains = make_queue(rq)
    drains.bind_on_settle = False
    future = queue.try_send("t", b"v", None, None, None, None, None)
    with pytest.raises(KafkaTimeoutError, match="send\\(\\)'s queue.*buffer.memory"):
        future.get(timeout=0.05)
    assert future.is_queued()


def test_fail_completes_the_future_and_runs_its_callback_once(rq: ModuleType) -> None:
    queue, _ = make_queue(rq)
    seen: list[Any] = []
    future = queue.try_send("t", b"v", None, 1, None, None, lambda md, err: seen.append((md, err)))
    error = ProducerClosedError("closed")
    future.fail(error)
    future.fail(ProducerClosedError("again"))  # already complete: ignored
    assert seen == [(None, error)]
    assert future.exception(0) is error and future.partition == 1 and future.topic == "t"


def test_queued_run_binds_each_future_to_its_batch_with_consecutive_offsets(rq: ModuleType) -> None:
    queue, _ = make_queue(rq)
    seen: list[Any] = []
    futures = [queue.try_send("t", b"v%d" % i, b"k" if i == 1 else None, 0, 1000 + i, None,
                              (lambda md, err: seen.append(md.offset)) if i % 2 else None) for i in range(5)]
    run = rq.QueuedRun(queue.take())
    batch = ProducerBatch(TopicPartition("t", 0), RecordBatchBuilder(batch_size_limit=16384), 0)
    assert run.into(batch, 0, 2, 7) == 2
    assert run.into(batch, 2, 5, 7) == 5
    assert batch.builder.record_count == 5 and batch.last_append_ms == 7
    assert [f.relative_offset for f in futures] == [0, 1, 2, 3, 4]
    batch.complete(100, -1)
    assert futures[1].get(0) == RecordMetadata("t", 0, 101, 1001, 1, 2)
    assert seen == [101, 103]  # the callbacks, in record order
    assert run.upper_bound(1) > run.upper_bound(0)  # the key counts


def test_group_queued_keeps_each_partitions_order(rq: ModuleType) -> None:
    queue, _ = make_queue(rq)
    for i, p in enumerate([0, 1, 0, 2, 1, 0]):
        queue.try_send("t", b"%d" % i, None, p, None, None, None)
    groups = rq.group_queued(queue.take())
    assert [(t, p, [f._value for f in fs]) for t, p, fs in groups] == [
        ("t", 0, [b"0", b"2", b"5"]), ("t", 1, [b"1", b"4"]), ("t", 2, [b"3"])]
    single = [queue.try_send("t", b"x", None, None, None, None, None) for _ in range(3)]
    assert rq.group_queued(queue.take()) == [("t", UNKNOWN_PARTITION, single)]


def test_group_queued_keeps_sticky_and_placed_records_of_a_topic_in_runs(rq: ModuleType) -> None:
    """A keyless record may land in a partition that a placed record also goes to: runs in
    queue order keep the two in the order they were sent."""
    queue, _ = make_queue(rq)
    queue.topics["u"] = 1
    for topic, p in [("t", 0), ("t", None), ("t", 0), ("u", 0), ("t", None)]:
        queue.try_send(topic, b"v", None, p, None, None, None)
    groups = rq.group_queued(queue.take())
    assert [(t, p, len(fs)) for t, p, fs in groups] == [
        ("t", 0, 1), ("t", UNKNOWN_PARTITION, 1), ("t", 0, 1), ("u", 0, 1), ("t", UNKNOWN_PARTITION, 1)]


# --- send() through the queue, against librdkafka's mock cluster ---------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[MockCluster]:
    with MockCluster(1, topics={"order": PARTITIONS, "few": 1, "mixed": PARTITIONS, "slow": 1}) as mock:
        yield mock


def producer_for(cluster: MockCluster, **extra: Any) -> KafkaProducer:
    return KafkaProducer({"bootstrap.servers": cluster.bootstrap_servers, **FAST, **extra})


def test_send_keeps_each_partitions_order_across_queued_and_direct_appends(cluster: MockCluster) -> None:
    """send() mixing sticky, keyed and placed records, with send_many() and flush() between:
    every partition holds its records in the order they were sent."""
    sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    with producer_for(cluster, **{"linger.ms": 50}) as producer:
        futures = []
        for i in range(5000):
            value = b"%05d" % i
            if i % 3 == 0:
                futures.append(producer.send("order", value, partition=i % PARTITIONS))
            elif i % 3 == 1:
                futures.append(producer.send("order", value, key=b"k%d" % (i % 7)))
            else:
                futures.append(producer.send("order", value))
            if i % 1777 == 0:
                producer.send_many("order", [value + b"-many"], partitions=[0])
        partitions = [f.get(timeout=DEADLINE_S).partition for f in futures]
    for i, p in enumerate(partitions):
        sent[p].append(b"%05d" % i)
        if i % 1777 == 0:
            sent[0].append(b"%05d-many" % i)
    got = read_back(cluster.bootstrap_servers, "order", PARTITIONS, 5000 + len(range(0, 5000, 1777)))
    assert {p: [v for _, v in records] for p, records in got.items()} == sent


def test_records_below_the_queue_limit_go_out_without_flush(cluster: MockCluster) -> None:
    """A few records, then nothing: the Sender appends them (it wakes for the first)."""
    done = threading.Event()
    outcomes: list[Any] = []

    def on_delivery(md: Any, err: Any) -> None:
        outcomes.append((md, err))
        if len(outcomes) == 3:
            done.set()

    with producer_for(cluster, **{"linger.ms": 0}) as producer:
        producer.partitions_for("few")
        futures = [producer.send("few", b"r%d" % i, on_delivery=on_delivery) for i in range(3)]
        assert done.wait(DEADLINE_S), "the Sender never appended the queued records"
        assert [err for _, err in outcomes] == [None] * 3
        assert [f.done() for f in futures] == [True] * 3


def test_close_zero_resolves_every_queued_future(cluster: MockCluster) -> None:
    producer = producer_for(cluster)
    producer.partitions_for("few")
    futures = [producer.send("few", b"x") for _ in range(50)]
    producer.close(0)
    for future in futures:
        assert future.done()
        error = future.exception(0)
        assert error is None or isinstance(error, ProducerClosedError)


def test_memory_exhausted_send_raises_and_queued_records_still_go_out_once(cluster: MockCluster) -> None:
    """buffer.memory too small for what is queued while the broker is slow: send() raises
    BufferExhaustedError for the record it was given (which is not sent), the records queued
    before it wait for memory and are delivered, each exactly once."""
    producer = producer_for(cluster, **{"buffer.memory": 32768, "batch.size": 16384, "max.block.ms": 300,
                                        "linger.ms": 0})
    futures = []
    try:
        producer.partitions_for("slow")
        cluster.set_rtt(-1, 1500)
        with pytest.raises(BufferExhaustedError):
            for i in range(20_000):
                futures.append(producer.send("slow", b"%06d" % i + b"x" * 94))
        cluster.set_rtt(-1, 0)
        offsets = [f.get(timeout=DEADLINE_S).offset for f in futures]
    finally:
        cluster.set_rtt(-1, 0)
        producer.close(DEADLINE_S)
    assert offsets == list(range(len(futures)))
    got = read_back(cluster.bootstrap_servers, "slow", 1, len(futures))
    assert [v[:6] for _, v in got[0]] == [b"%06d" % i for i in range(len(futures))]


def test_records_queued_past_delivery_timeout_fail_with_a_timeout(cluster: MockCluster) -> None:
    """delivery.timeout.ms bounds the time from send() to an outcome, the queue included."""
    with producer_for(cluster) as producer:
        producer.send("few", b"warm").get(timeout=DEADLINE_S)
        producer._queue._monotonic_ns = lambda: 0  # every record queued now looks ancient
        futures = [producer.send("few", b"x") for _ in range(3)]
        for future in futures:
            with pytest.raises(KafkaTimeoutError, match="delivery.timeout.ms"):
                future.get(timeout=DEADLINE_S)


def test_close_delivers_the_records_still_queued(cluster: MockCluster) -> None:
    """A lingering batch keeps the Sender's poll short of waking for queued records (linger.ms
    is long), so close() finds them queued and appends them before the Sender stops."""
    producer = producer_for(cluster, **{"linger.ms": 10_000})
    producer.partitions_for("few")
    producer.send("few", b"direct")  # the topic's first record takes the direct path
    futures = [producer.send("few", b"queued-%d" % i) for i in range(5)]
    producer.close(DEADLINE_S)
    assert [f.exception(0) for f in futures] == [None] * 5


def test_a_producer_dropped_without_close_is_collected_and_sends_its_queued_records(
        cluster: MockCluster) -> None:
    """The Sender keeps send()'s queue alive, not the producer: a producer dropped without
    close() is collected, its finalizer stops the Sender, and what it had queued goes out."""
    topic = "dropped"
    cluster.create_topic(topic, 1)
    producer = producer_for(cluster, **{"linger.ms": 10_000})
    producer.send(topic, b"direct")  # the topic's first record takes the direct path
    for i in range(5):
        producer.send(topic, b"queued-%d" % i)
    sender = producer._sender
    collected = weakref.ref(producer)
    del producer
    gc.collect()
    assert collected() is None, "something still holds the dropped producer"
    sender.join(DEADLINE_S)
    assert not sender.is_alive()
    got = read_back(cluster.bootstrap_servers, topic, 1, 6)
    assert [v for _, v in got[0]] == [b"direct"] + [b"queued-%d" % i for i in range(5)]
