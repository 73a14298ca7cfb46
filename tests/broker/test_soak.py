"""A bounded soak: about 50 concurrent clients against a ``samsa broker`` subprocess for a fixed
amount of work (not a duration), while the broker's RSS (/proc/<pid>/status VmRSS) and
descriptors (/proc/<pid>/fd) are sampled as the work progresses.

The clients: samsa producers (each sends its records in rounds, flushing each round), two
consumer groups of samsa consumers (subscribed, committing; they stop once their group has read
every record of its topic), raw fetchers (Metadata, ListOffsets and Fetch requests, reconnecting
every few requests) and connection churners (connect, ApiVersions, disconnect).

What must hold: every client finishes its work without an error; the broker's RSS and
descriptor count reach a plateau -- the highest sample of the last third of the work is no
higher than the highest of the middle third plus a margin -- and once the clients are gone its
sockets go back to what it had before they came.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial

from samsa.consumer import KafkaConsumer
from samsa.producer.producer import KafkaProducer
from samsa.protocol import (
    ApiVersionsRequest,
    FetchRequest,
    MetadataRequest,
)
from tests.broker.conftest import BrokerProcess, RawClient
from tests.broker.fuzz.target import Resources, resources

PARTITIONS = 4
PRODUCERS = 20
ROUNDS = 500  # flushes per producer: at least one Produce request each
RECORDS_PER_ROUND = 20
GROUPS = 2
CONSUMERS_PER_GROUP = 5
FETCHERS = 15
FETCHER_REQUESTS = 6000
CHURNERS = 5
CHURNS = 2000
SAMPLES = 30  # spread evenly over the work done
# Plateau margins: RSS may still creep by allocator noise, descriptors by the clients that
# happen to be connected at the moment of a sample.
RSS_MARGIN_KB = 16 * 1024
FD_MARGIN = 12
BROKER_CONFIG = {"num.partitions": PARTITIONS, "group.initial.rebalance.delay.ms": 0,
                 "group.min.session.timeout.ms": 500}


class Work:
    """Counts units of work done by all clients; the sampler samples at even fractions."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.errors: list[str] = []
        self._lock = threading.Lock()

    def add(self, n: int = 1) -> None:
        with self._lock:
            self.done += n

    def fail(self, who: str, exc: BaseException) -> None:
        with self._lock:
            self.errors.append(f"{who}: {exc!r}")


def _client(work: Work, who: str, body: Callable[[], None]) -> threading.Thread:
    def run() -> None:
        try:
            body()
        except BaseException as exc:  # noqa: BLE001 -- reported by the test
            work.fail(who, exc)

    return threading.Thread(target=run, name=who, daemon=True)


def _producer(bootstrap: str, topic: str, index: int, work: Work) -> None:
    with KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 2, "acks": "all"}) as p:
        for r in range(ROUNDS):
            for i in range(RECORDS_PER_ROUND):
                p.send(topic, value=b"p%d-r%d-%d" % (index, r, i) + b"x" * 100,
                       key=b"%d" % i)
            p.flush(60)
            work.add(RECORDS_PER_ROUND)


def _consumer(bootstrap: str, topic: str, group: str, expected: int, seen: set[tuple[int, int]],
              lock: threading.Lock, work: Work) -> None:
    config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "session.timeout.ms": 6000,
              "heartbeat.interval.ms": 200}
    with KafkaConsumer(config) as consumer:
        consumer.subscribe([topic])
        while True:
            with lock:
                if len(seen) >= expected:
                    return
            records = consumer.poll(0.1)
            if records:
                with lock:
                    before = len(seen)
                    seen.update((r.partition, r.offset) for r in records)
                    work.add(len(seen) - before)
                consumer.commit()


def _fetcher(port: int, topic: str, work: Work) -> None:
    client = RawClient(port)
    offsets = [0] * PARTITIONS
    try:
        for n in range(FETCHER_REQUESTS):
            if n % 25 == 24:  # new connections now and then
                client.close()
                client = RawClient(port)
            kind = n % 3
            if kind == 0:
                body = client.call(MetadataRequest(topics=[
                    MetadataRequest.MetadataRequestTopic(name=topic)]), 12)
                assert body.topics[0].error_code == 0, body.topics[0]
            elif kind == 1:
                client.list_offset(topic, n % PARTITIONS)
            else:
                p = n % PARTITIONS
                body = client.call(FetchRequest(max_wait_ms=10, min_bytes=1, max_bytes=1 << 16,
                                                topics=[FetchRequest.FetchTopic(
                                                    topic=topic, partitions=[
                                                        FetchRequest.FetchPartition(
                                                            partition=p, fetch_offset=offsets[p],
                                                            partition_max_bytes=1 << 16)])]), 12)
                part = body.responses[0].partitions[0]
                assert part.error_code == 0, part
                offsets[p] = max(offsets[p], int(part.high_watermark) - 5)
            work.add()
    finally:
        client.close()


def _churner(port: int, work: Work) -> None:
    for _ in range(CHURNS):
        client = RawClient(port)
        try:
            assert client.call(ApiVersionsRequest(), 0).error_code == 0
        finally:
            client.close()
        work.add()


def _sample_while(work: Work, pid: int, threads: list[threading.Thread]
                  ) -> list[tuple[int, Resources]]:
    """Samples (work done, resources) each time another 1/SAMPLES of the work is done."""
    samples: list[tuple[int, Resources]] = []
    next_mark = 1
    while any(t.is_alive() for t in threads):
        if work.done * SAMPLES >= next_mark * work.total:
            samples.append((work.done, resources(pid)))
            next_mark = work.done * SAMPLES // work.total + 1
        time.sleep(0.01)
    return samples


def test_fifty_clients_reach_a_plateau(broker_process: Callable[..., BrokerProcess]) -> None:
    broker = broker_process(BROKER_CONFIG).start()
    pid = broker.proc.pid  # type: ignore[union-attr]
    bootstrap = broker.bootstrap_servers
    topics = [f"soak-{g}" for g in range(GROUPS)]
    admin = RawClient(broker.port)
    for topic in topics:
        assert admin.create_topic(topic, PARTITIONS) == 0
    admin.close()
    before = resources(pid)

    per_topic = PRODUCERS // GROUPS * ROUNDS * RECORDS_PER_ROUND
    total = (PRODUCERS * ROUNDS * RECORDS_PER_ROUND + GROUPS * per_topic
             + FETCHERS * FETCHER_REQUESTS + CHURNERS * CHURNS)
    work = Work(total)
    threads: list[threading.Thread] = []
    for i in range(PRODUCERS):
        threads.append(_client(work, f"producer-{i}", partial(
            _producer, bootstrap, topics[i % GROUPS], i, work)))
    for g, topic in enumerate(topics):
        seen: set[tuple[int, int]] = set()
        lock = threading.Lock()
        for c in range(CONSUMERS_PER_GROUP):
            threads.append(_client(work, f"consumer-{g}-{c}", partial(
                _consumer, bootstrap, topic, f"soak-group-{g}", per_topic, seen, lock, work)))
    for i in range(FETCHERS):
        threads.append(_client(work, f"fetcher-{i}", partial(
            _fetcher, broker.port, topics[i % GROUPS], work)))
    for i in range(CHURNERS):
        threads.append(_client(work, f"churner-{i}", partial(_churner, broker.port, work)))
    assert len(threads) == 50
    for t in threads:
        t.start()
    samples = _sample_while(work, pid, threads)
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a client never finished its work"
    assert not work.errors, work.errors[:5]
    assert work.done == total, f"{work.done} of {total} units of work done"
    assert broker.is_running()
    assert "Traceback" not in broker.stderr_text(), broker.stderr_text()[-4000:]

    # The plateau: thirds by work done, not by time.
    assert len(samples) >= SAMPLES // 2, f"only {len(samples)} samples"
    middle = [r for done, r in samples if total / 3 <= done < 2 * total / 3]
    last = [r for done, r in samples if done >= 2 * total / 3]
    assert middle and last
    rss_mid, rss_last = max(r.rss_kb for r in middle), max(r.rss_kb for r in last)
    fds_mid, fds_last = max(r.fds for r in middle), max(r.fds for r in last)
    report = (f"RSS {before.rss_kb} kB before, max {rss_mid} kB in the middle third, {rss_last} "
              f"kB in the last; fds {before.fds}, {fds_mid}, {fds_last}; samples (work done, "
              f"RSS kB, fds): {[(d, r.rss_kb, r.fds) for d, r in samples]}")
    print(report)
    assert rss_last <= rss_mid + RSS_MARGIN_KB, f"RSS still growing: {report}"
    assert fds_last <= fds_mid + FD_MARGIN, f"descriptors still growing: {report}"
    assert not samples[-1][1].deleted, f"deleted files held open: {samples[-1][1].deleted}"

    # Every client is gone: the broker's sockets go back to where they were.
    after = resources(pid)
    for _ in range(300):
        after = resources(pid)
        if after.sockets <= before.sockets:
            break
        time.sleep(0.1)
    assert after.sockets <= before.sockets, (
        f"the broker still holds {after.sockets} sockets (it had {before.sockets} before the "
        f"clients came): {report}")
