"""Consumer throughput: samsa (poll() and poll_arrow()) vs confluent-kafka, kafka-python and
aiokafka, same broker and topic, each peer with its best documented settings.

    .venv/bin/python bench/consumer.py [--num-records N] [--partitions P] [--bootstrap-server H:P
        [--mock]] [--clients samsa,samsa-arrow,confluent,kafka-python,aiokafka] [--mock-records M]
        [--repeat R]

Without --bootstrap-server two brokers are started, each in its own process: a ``samsa broker``
on a temporary data directory, and librdkafka's mock cluster (``python -m
tests.support.mock_cluster``; it keeps only ~5 MiB per partition, so its M records, default
500,000, are spread over 16 partitions).  Each topic is filled once with records of 100-byte
values by confluent-kafka, in batches of 500 records; then each client reads all of it in its
own subprocess: metadata first, then every partition is assigned from the beginning (no group); the clock runs from
the first records a poll returns to the last record, so connecting, the offsets lookup, the
first fetch and lazy set-up are kept out of every client's rate alike (printed apart as
"first s": assign() to the first records).  Every client touches each record's value (poll_arrow: the
value column's lengths, summed by Arrow).  CPU seconds are time.process_time of the worker
(all its threads; librdkafka's too), per million records ("cpu s").  Each client reads the
topic --repeat times (default 3), the clients taking turns, so that a burst of other load on
the machine falls on all of them alike; the row is the run of median rate.

Settings (printed with the results):

* confluent-kafka: ``fetch.queue.backoff.ms=10`` and ``consume(10000)``.  librdkafka stops
  fetching a partition once queued.min.messages (100,000) or queued.max.messages.kbytes are
  queued and waits fetch.queue.backoff.ms before the next fetch -- 1000 ms by default
  (CONFIGURATION.md; the setting came in librdkafka 2.1), which leaves the consumer idle most
  of the time in a bench that drains the queue faster than that;
* samsa: ``receive.buffer.bytes=-1`` (the OS's buffer, which Linux sizes to the traffic, as
  librdkafka's socket.receive.buffer.bytes=0 default leaves it), else its defaults; poll()
  with max_records=10000 and (samsa-500) 500, poll_arrow() with max_records=10000.  Java's
  default of 64 KiB caps what the broker can send before the consumer reads: a 1 MiB
  partition's answer then arrives in a dozen pieces, each a wake-up and a pass of the poll
  loop, and the broker waits on the consumer meanwhile;
* kafka-python and aiokafka: their defaults (max_poll_records 500), polled in a loop.  Against
  the mock, kafka-python also gets ``api_version=(2, 3)`` (its documented setting for the
  broker version): left to probe, it sends ApiVersions v3/v4, which the mock does not support;
  the mock answers UNSUPPORTED_VERSION in the v0 layout, as KIP-511 has brokers do, and
  kafka-python 3.0 fails to decode that answer ("Unable to decode response") and never
  bootstraps.  (2, 3) is the newest broker version whose ApiVersions request is v2, the mock's
  highest.

Prints per client and broker: records/s, MB/s, CPU seconds, and records/s relative to
kafka-python and confluent-kafka.  Targets: samsa poll() >= 1.0x confluent-kafka, poll_arrow()
>= 2x.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

VALUE_SIZE = 100
FILL_BATCH = 500  # records a batch when filling (the mock's fetch answers hold one a partition)
CLIENTS = ("samsa", "samsa-500", "samsa-arrow", "confluent", "kafka-python", "aiokafka")
MAX_RECORDS = 10_000  # samsa's max_records per poll, confluent-kafka's consume() batch
CONFLUENT_SETTINGS = {"fetch.queue.backoff.ms": 10}
SAMSA_SETTINGS: dict[str, Any] = {"receive.buffer.bytes": -1}  # else Java's defaults
SETTINGS = {
    "samsa": f"receive.buffer.bytes=-1, poll(1.0, max_records={MAX_RECORDS})",
    "samsa-500": "receive.buffer.bytes=-1, poll(1.0) (max.poll.records 500)",
    "samsa-arrow": f"receive.buffer.bytes=-1, poll_arrow(1.0, max_records={MAX_RECORDS})",
    "confluent": f"fetch.queue.backoff.ms=10, consume({MAX_RECORDS}, 1.0)",
    "kafka-python": "defaults, poll(timeout_ms=1000)",
    "kafka-python mock": "api_version=(2, 3), else defaults, poll(timeout_ms=1000)",
    "aiokafka": "defaults, getmany(timeout_ms=1000)",
}
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOPIC = "bench-consume"
# kafka-python against librdkafka's mock: see the module docstring.
KAFKA_PYTHON_MOCK_SETTINGS: dict[str, Any] = {"api_version": (2, 3)}


# --- workers (run in a subprocess) ------------------------------------------------------


class Clock:
    """Throughput from the first records a poll returns to the last record: connecting, the
    offsets lookup, the first fetch and lazy set-up (imports, codecs) are one-time costs,
    kept out of every client's figure alike and reported apart ("first s")."""

    def __init__(self) -> None:
        self.t_assign = time.perf_counter()
        self.t0 = self.cpu0 = 0.0
        self.count0 = self.bytes0 = -1

    def polled(self, count: int, nbytes: int) -> None:
        if self.count0 < 0 and count:
            self.t0, self.cpu0 = time.perf_counter(), time.process_time()
            self.count0, self.bytes0 = count, nbytes

    def result(self, count: int, nbytes: int) -> dict[str, Any]:
        t1, cpu1 = time.perf_counter(), time.process_time()
        return {"seconds": t1 - self.t0, "cpu": cpu1 - self.cpu0, "records": count - self.count0,
                "bytes": nbytes - self.bytes0, "first": self.t0 - self.t_assign}



def run_samsa_500(bootstrap: str, topic: str, n: int, partitions: int) -> dict[str, Any]:
    """poll() at the default max.poll.records (500): per record it should cost about what a
    poll of 10,000 costs."""
    return run_samsa(bootstrap, topic, n, partitions, max_records=500)


def run_samsa(bootstrap: str, topic: str, n: int, partitions: int,
              max_records: int = MAX_RECORDS) -> dict[str, Any]:
    from samsa.consumer import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest", **SAMSA_SETTINGS})
    consumer.partitions_for(topic)
    clock = Clock()
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    count = nbytes = 0
    poll = consumer.poll
    while count < n:
        for record in poll(1.0, max_records=max_records):
            nbytes += len(record.value)
            count += 1
        clock.polled(count, nbytes)
    result = clock.result(count, nbytes)
    consumer.close()
    return result


def run_samsa_arrow(bootstrap: str, topic: str, n: int, partitions: int) -> dict[str, Any]:
    import pyarrow.compute as pc

    from samsa.consumer import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest", **SAMSA_SETTINGS})
    consumer.partitions_for(topic)
    clock = Clock()
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    count = nbytes = 0
    poll = consumer.poll_arrow
    while count < n:
        for batch in poll(1.0, max_records=MAX_RECORDS).values():
            nbytes += pc.sum(pc.binary_length(batch.column("value"))).as_py() or 0
            count += batch.num_rows
        clock.polled(count, nbytes)
    result = clock.result(count, nbytes)
    consumer.close()
    return result


def run_confluent(bootstrap: str, topic: str, n: int, partitions: int) -> dict[str, Any]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-confluent",
                         "enable.auto.commit": False, **CONFLUENT_SETTINGS})
    consumer.list_topics(topic, timeout=30)
    clock = Clock()
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    count = nbytes = 0
    consume = consumer.consume
    while count < n:
        for msg in consume(MAX_RECORDS, 1.0):
            if msg.error() is None:
                nbytes += len(msg.value() or b"")
                count += 1
        clock.polled(count, nbytes)
    result = clock.result(count, nbytes)
    consumer.close()
    return result


def run_kafka_python(bootstrap: str, topic: str, n: int, partitions: int,
                     mock: bool = False) -> dict[str, Any]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest",
                             **(KAFKA_PYTHON_MOCK_SETTINGS if mock else {}))
    consumer.partitions_for_topic(topic)
    clock = Clock()
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    count = nbytes = 0
    while count < n:
        for records in consumer.poll(timeout_ms=1000).values():
            for record in records:
                nbytes += len(record.value)
                count += 1
        clock.polled(count, nbytes)
    result = clock.result(count, nbytes)
    consumer.close()
    return result


def run_aiokafka(bootstrap: str, topic: str, n: int, partitions: int) -> dict[str, Any]:
    import asyncio

    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def main() -> dict[str, Any]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            await consumer._client.force_metadata_update()
            clock = Clock()
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            count = nbytes = 0
            while count < n:
                batches = await consumer.getmany(timeout_ms=1000)
                for records in batches.values():
                    for record in records:
                        nbytes += len(record.value)
                        count += 1
                clock.polled(count, nbytes)
            result = clock.result(count, nbytes)
        finally:
            await consumer.stop()
        return result

    return asyncio.run(main())


WORKERS = {"samsa": run_samsa, "samsa-500": run_samsa_500, "samsa-arrow": run_samsa_arrow, "confluent": run_confluent, "kafka-python": run_kafka_python,
           "aiokafka": run_aiokafka}


# --- driver ------------------------------------------------------------------------------


@contextmanager
def samsa_broker() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="samsa-bench-consumer-") as data_dir:
        yield from _samsa_broker(data_dir)  # the ~100 MiB log goes with it


def _samsa_broker(data_dir: str) -> Iterator[str]:
    cmd = [sys.executable, "-m", "samsa.cli", "broker", "--host", "127.0.0.1", "--port", "0",
           "--data-dir", data_dir, "--log-level", "WARNING"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    while line and not line.startswith("listening on "):
        line = proc.stdout.readline()
    if not line:
        proc.wait(10)
        raise RuntimeError("samsa broker did not start")
    try:
        yield line.split()[-1]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)


def fill(bootstrap: str, topic: str, n: int, partitions: int, create: bool) -> None:
    """Create the topic (unless the mock has it) and write n records round-robin over its
    partitions (confluent-kafka)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    if create:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
            future.result(30)
    value = os.urandom(VALUE_SIZE // 4).hex().encode()[: VALUE_SIZE // 2] + b"a" * (VALUE_SIZE - VALUE_SIZE // 2)
    errors: list[Any] = []
    # Batches of FILL_BATCH records, not what linger.ms=5 happened to gather: librdkafka's mock
    # answers a fetch with one batch a partition, so its rows read as fast as the fill's
    # batches are large, and with linger they varied from run to run.
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1000, "acks": 1,
                         "batch.num.messages": FILL_BATCH, "batch.size": 16 << 20,
                         "queue.buffering.max.messages": 1_000_000, "delivery.report.only.error": True,
                         "on_delivery": lambda err, _msg: errors.append(err)})
    for i in range(n):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.005)
        if not i & 0x3FFF:
            producer.poll(0)
    if producer.flush(300) or errors:
        raise RuntimeError(f"filling {topic} failed: {errors[:3]}")


def report(title: str, rows: dict[str, dict[str, Any]], n: int, mock: bool = False) -> None:
    print(f"\n{title}: {n:,} records")
    header = (f"{'client':<13}{'rec/s':>11}{'MB/s':>8}{'cpu s':>8}{'first s':>9}{'vs kp':>7}"
              f"{'vs ck':>7}  settings")
    print(header)
    print("-" * len(header))
    rates = {c: r["records"] / r["seconds"] for c, r in rows.items() if "error" not in r}
    base_kp = rates.get("kafka-python")
    base_ck = rates.get("confluent")
    for client, r in rows.items():
        if "error" in r:
            print(f"{client:<13}  FAILED: {r['error']}")
            continue
        rate = rates[client]
        vs_kp = f"{rate / base_kp:.2f}" if base_kp else "-"
        vs_ck = f"{rate / base_ck:.2f}" if base_ck else "-"
        cpu_per_m = r["cpu"] * 1_000_000 / max(r["records"], 1)
        settings = SETTINGS.get(f"{client} mock", SETTINGS[client]) if mock else SETTINGS[client]
        print(f"{client:<13}{rate:>11.0f}{r['bytes'] / r['seconds'] / 1024 / 1024:>8.2f}"
              f"{cpu_per_m:>8.2f}{r['first']:>9.2f}{vs_kp:>7}{vs_ck:>7}  {settings}",
              flush=True)


@contextmanager
def mock_cluster(topic: str, partitions: int) -> Iterator[str]:
    """librdkafka's mock cluster (tests/support/mock_cluster.py) in its own process."""
    cmd = [sys.executable, "-m", "tests.support.mock_cluster", "--brokers", "1",
           "--topic", f"{topic}:{partitions}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            cwd=REPO_ROOT)
    assert proc.stdout is not None
    bootstrap = proc.stdout.readline().strip()
    try:
        if not bootstrap:
            raise RuntimeError("mock cluster did not start")
        yield bootstrap
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def bench(title: str, bootstrap: str, topic: str, n: int, partitions: int, clients: list[str],
          mock: bool, repeat: int) -> None:
    start = time.perf_counter()
    fill(bootstrap, topic, n, partitions, create=not mock)  # the mock has it
    print(f"filled {topic} ({partitions} partitions) with {n:,} x {VALUE_SIZE} B records in "
          f"{time.perf_counter() - start:.1f} s (confluent-kafka), {title} at {bootstrap}", flush=True)
    report(title, run_all(clients, bootstrap, n, partitions, topic, mock, repeat), n, mock)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-records", "-n", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--mock-records", type=int, default=500_000,
                        help="records for the mock cluster rows (0: skip them)")
    parser.add_argument("--mock-partitions", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs per client, taking turns; the median-rate run is shown")
    parser.add_argument("--bootstrap-server", default=None)
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--topic", default=None, help="An existing topic holding the records (skips the fill).")
    parser.add_argument("--mock", action="store_true",
                        help="the broker at --bootstrap-server is librdkafka's mock cluster")
    parser.add_argument("--worker", choices=CLIENTS, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        worker = WORKERS[args.worker]
        if args.mock and args.worker == "kafka-python":
            worker = partial(run_kafka_python, mock=True)
        result = worker(args.bootstrap_server, args.topic or TOPIC, args.num_records,
                        args.partitions)
        print(json.dumps(result))
        return 0

    clients = [c for c in args.clients.split(",") if c]
    n = args.num_records
    if args.bootstrap_server is not None:
        topic = args.topic or f"{TOPIC}-{os.getpid()}"
        if args.topic is None:
            fill(args.bootstrap_server, topic, n, args.partitions, True)
        report(f"broker {args.bootstrap_server}",
               run_all(clients, args.bootstrap_server, n, args.partitions, topic, args.mock,
                       args.repeat), n, args.mock)
        return 0
    with samsa_broker() as bootstrap:
        bench("samsa broker", bootstrap, f"{TOPIC}-{os.getpid()}", n, args.partitions, clients,
              mock=False, repeat=args.repeat)
    if args.mock_records:
        topic = f"{TOPIC}-mock"
        with mock_cluster(topic, args.mock_partitions) as bootstrap:
            bench("librdkafka mock cluster", bootstrap, topic, args.mock_records,
                  args.mock_partitions, clients, mock=True, repeat=args.repeat)
    print("\nvs kp / vs ck: this row's records/s divided by kafka-python's / confluent-kafka's "
          "(same broker, same run).  Targets: samsa >= 1.0x ck, samsa-arrow >= 2.0x ck.")
    return 0


@contextmanager
def _given(bootstrap: str) -> Iterator[str]:
    yield bootstrap


def run_all(clients: list[str], bootstrap: str, n: int, partitions: int, topic: str, mock: bool,
            repeat: int) -> dict[str, dict[str, Any]]:
    """Each client's run of median rate among ``repeat``, the clients taking turns."""
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in clients}
    for _ in range(max(repeat, 1)):
        for client in clients:
            runs[client].append(run_one(client, bootstrap, n, partitions, topic, mock))
    rows = {}
    for client, results in runs.items():
        done = sorted((r for r in results if "error" not in r),
                      key=lambda r: r["records"] / r["seconds"])
        rows[client] = done[len(done) // 2] if done else results[-1]
    return rows


def run_one(client: str, bootstrap: str, n: int, partitions: int, topic: str,
            mock: bool = False) -> dict[str, Any]:
    """One client's run in its own process (its CPU time is its own)."""
    cmd = [sys.executable, __file__, "--worker", client, "--bootstrap-server", bootstrap,
           "--num-records", str(n), "--partitions", str(partitions), "--topic", topic,
           *(["--mock"] if mock else [])]
    try:
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=1200)
    except subprocess.TimeoutExpired:
        return {"error": "timed out after 1200 s"}
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    sys.exit(main())
