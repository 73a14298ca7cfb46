"""Consumer throughput: samsa vs confluent-kafka, kafka-python and aiokafka, same broker and topic.

    .venv/bin/python bench/consumer.py [--num-records N] [--partitions P] [--bootstrap-server H:P]
        [--clients samsa,confluent,kafka-python,aiokafka]

Without --bootstrap-server a ``samsa broker`` subprocess is started on a temporary data
directory (so the broker never shares a GIL with a client).  One topic of P partitions
(default 4) is filled once with N (default 1,000,000) records of 100-byte values by
confluent-kafka; then each client reads all of it in its own subprocess: metadata first, then
the clock starts, every partition is assigned from the beginning (no group), and the clock
stops at the N-th record.  Every client touches each record's value, with its default fetch
settings.  CPU seconds are time.process_time of the worker (all its threads; librdkafka's
too).

Prints per client: records/s, MB/s, CPU seconds, and records/s relative to kafka-python and
confluent-kafka.  Target: samsa >= 2x kafka-python.
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
from typing import Any

VALUE_SIZE = 100
CLIENTS = ("samsa", "confluent", "kafka-python", "aiokafka")
TOPIC = "bench-consume"


# --- workers (run in a subprocess) ------------------------------------------------------


def run_samsa(bootstrap: str, topic: str, n: int, partitions: int) -> dict[str, Any]:
    from samsa.consumer import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
    consumer.partitions_for(topic)
    cpu0, t0 = time.process_time(), time.perf_counter()
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    count = nbytes = 0
    poll = consumer.poll
    while count < n:
        for record in poll(1.0):
            nbytes += len(record.value)
            count += 1
    t1, cpu1 = time.perf_counter(), time.process_time()
    consumer.close()
    return {"seconds": t1 - t0, "cpu": cpu1 - cpu0, "records": count, "bytes": nbytes}


def run_confluent(bootstrap: str, topic: str, n: int, partitions: int) -> dict[str, Any]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-confluent",
                         "enable.auto.commit": False})
    consumer.list_topics(topic, timeout=30)
    cpu0, t0 = time.process_time(), time.perf_counter()
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    count = nbytes = 0
    consume = consumer.consume
    while count < n:
        for msg in consume(10_000, 1.0):
            if msg.error() is None:
                nbytes += len(msg.value() or b"")
                count += 1
    t1, cpu1 = time.perf_counter(), time.process_time()
    consumer.close()
    return {"seconds": t1 - t0, "cpu": cpu1 - cpu0, "records": count, "bytes": nbytes}


def run_kafka_python(bootstrap: str, topic: str, n: int, partitions: int) -> dict[str, Any]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest")
    consumer.partitions_for_topic(topic)
    cpu0, t0 = time.process_time(), time.perf_counter()
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    count = nbytes = 0
    while count < n:
        for records in consumer.poll(timeout_ms=1000).values():
            for record in records:
                nbytes += len(record.value)
                count += 1
    t1, cpu1 = time.perf_counter(), time.process_time()
    consumer.close()
    return {"seconds": t1 - t0, "cpu": cpu1 - cpu0, "records": count, "bytes": nbytes}


def run_aiokafka(bootstrap: str, topic: str, n: int, partitions: int) -> dict[str, Any]:
    import asyncio

    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def main() -> dict[str, Any]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            await consumer._client.force_metadata_update()
            cpu0, t0 = time.process_time(), time.perf_counter()
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
            t1, cpu1 = time.perf_counter(), time.process_time()
        finally:
            await consumer.stop()
        return {"seconds": t1 - t0, "cpu": cpu1 - cpu0, "records": count, "bytes": nbytes}

    return asyncio.run(main())


WORKERS = {"samsa": run_samsa, "confluent": run_confluent, "kafka-python": run_kafka_python,
           "aiokafka": run_aiokafka}


# --- driver ------------------------------------------------------------------------------


@contextmanager
def samsa_broker() -> Iterator[str]:
    data_dir = tempfile.mkdtemp(prefix="samsa-bench-consumer-")
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


def fill(bootstrap: str, topic: str, n: int, partitions: int) -> None:
    """Create the topic and write n records round-robin over its partitions (confluent-kafka)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)
    value = os.urandom(VALUE_SIZE // 4).hex().encode()[: VALUE_SIZE // 2] + b"a" * (VALUE_SIZE - VALUE_SIZE // 2)
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1,
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


def report(rows: dict[str, dict[str, Any]], n: int) -> None:
    header = f"{'client':<13}{'rec/s':>11}{'MB/s':>8}{'cpu s':>8}{'vs kp':>7}{'vs ck':>7}"
    print(header)
    print("-" * len(header))
    base_kp = rows.get("kafka-python", {}).get("seconds")
    base_ck = rows.get("confluent", {}).get("seconds")
    for client, r in rows.items():
        if "error" in r:
            print(f"{client:<13}  FAILED: {r['error']}")
            continue
        secs = r["seconds"]
        vs_kp = f"{base_kp / secs:.2f}" if base_kp else "-"
        vs_ck = f"{base_ck / secs:.2f}" if base_ck else "-"
        print(f"{client:<13}{n / secs:>11.0f}{r['bytes'] / secs / 1024 / 1024:>8.2f}{r['cpu']:>8.2f}"
              f"{vs_kp:>7}{vs_ck:>7}", flush=True)
    print("vs kp / vs ck: this row's records/s divided by kafka-python's / confluent-kafka's.")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-records", "-n", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--bootstrap-server", default=None)
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--topic", default=None, help="An existing topic holding the records (skips the fill).")
    parser.add_argument("--worker", choices=CLIENTS, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        result = WORKERS[args.worker](args.bootstrap_server, args.topic or TOPIC, args.num_records,
                                      args.partitions)
        print(json.dumps(result))
        return 0

    n = args.num_records
    with (samsa_broker() if args.bootstrap_server is None else _given(args.bootstrap_server)) as bootstrap:
        topic = args.topic or f"{TOPIC}-{os.getpid()}"
        if args.topic is None:
            start = time.perf_counter()
            fill(bootstrap, topic, n, args.partitions)
            print(f"filled {topic} ({args.partitions} partitions) with {n} x {VALUE_SIZE} B records "
                  f"in {time.perf_counter() - start:.1f} s (confluent-kafka), broker {bootstrap}\n",
                  flush=True)
        rows: dict[str, dict[str, Any]] = {}
        for client in (c for c in args.clients.split(",") if c):
            rows[client] = run_one(client, bootstrap, n, args.partitions, topic)
        report(rows, n)
    return 0


@contextmanager
def _given(bootstrap: str) -> Iterator[str]:
    yield bootstrap


def run_one(client: str, bootstrap: str, n: int, partitions: int, topic: str) -> dict[str, Any]:
    """One client's run in its own process (its CPU time is its own)."""
    cmd = [sys.executable, __file__, "--worker", client, "--bootstrap-server", bootstrap,
           "--num-records", str(n), "--partitions", str(partitions), "--topic", topic]
    try:
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=1200)
    except subprocess.TimeoutExpired:
        return {"error": "timed out after 1200 s"}
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    sys.exit(main())
