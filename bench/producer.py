"""Producer throughput: samsa vs confluent-kafka, kafka-python and aiokafka, same broker.

    .venv/bin/python bench/producer.py [--num-records N] [--bootstrap-server H:P]
        [--clients samsa,confluent,kafka-python,aiokafka] [--acks 1,all] [--codecs none,lz4,zstd]
        [--transactional N]
    .venv/bin/python bench/producer.py --mock [--num-records N] [--codecs none,lz4]
        [--clients "confluent produce(),samsa send_many()"] [--batch-sizes 16384,1048576] [--repeat 3]

``--mock``: issue 17's rows against librdkafka's mock cluster (1 broker, 4 partitions, acks=1,
linger.ms=5, batch.size 16 KiB and 1 MiB): confluent-kafka ``produce()`` per record with
librdkafka's documented throughput settings (a queue that holds the run, delivery reports for
failures only; the ratios are against it) and again with an on_delivery callback per message
(``confluent +callback``, the like of samsa's future per record), samsa ``send()`` per
record, ``send_many()`` and ``send_arrow()`` with 10,000 rows a call (the Arrow batch and the list
built before the clock starts, as a caller holding the data would).  Each row runs ``--repeat``
times (default 3), the clients taking turns, and each client's fastest run is kept.

Without --bootstrap-server an embedded samsa Broker is started in this process (auto-created
topics get --partitions partitions, default 8).  Each
(client, acks, codec) run happens in its own subprocess, so the CPU seconds reported
(time.process_time of that process, all its threads) belong to that client alone.  A run sends
one warm-up record (metadata, connections), then N records of 100-byte values (null keys) to a
fresh topic and flushes; the clock covers sending plus the final flush.

``--transactional N`` adds a ``samsa-txn`` row to every acks=all run: samsa's transactional
producer (init_transactions once, then a transaction committed every N records, the last one
with the rest), for transactional vs idempotent throughput in the same run.

Prints for each row: the client's linger, batch size and idempotence, records/s, MB/s, CPU
seconds, and the ratios of samsa's records/s to kafka-python's and to confluent-kafka's.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

VALUE_SIZE = 100
CLIENTS = ("samsa", "confluent", "kafka-python", "aiokafka")


def payload(size: int) -> bytes:
    # Half random, half repeated: compressible like real data, not trivially so.
    return os.urandom(size // 4).hex().encode()[: size // 2] + b"a" * (size - size // 2)


# --- workers (run in a subprocess) ------------------------------------------------------


def run_samsa(bootstrap: str, topic: str, n: int, acks: str, codec: str) -> dict[str, Any]:
    from samsa import KafkaProducer

    config = {"bootstrap.servers": bootstrap, "acks": acks, "compression.type": codec}
    producer = KafkaProducer(config)
    value = payload(VALUE_SIZE)
    producer.send(topic, value).get(timeout=60)
    cfg = producer.config
    info = {"linger_ms": cfg["linger.ms"], "batch_size": cfg["batch.size"],
            "idempotence": cfg["enable.idempotence"]}
    send = producer.send
    cpu0, t0 = time.process_time(), time.perf_counter()
    for _ in range(n):
        send(topic, value)
    producer.flush()
    t1, cpu1 = time.perf_counter(), time.process_time()
    errors = producer.metrics()["record-error-total"]
    producer.close()
    return {**info, "seconds": t1 - t0, "cpu": cpu1 - cpu0, "errors": errors}


def _confluent_produce(conf: dict[str, Any], topic: str, n: int,
                       per_message_callback: bool = True) -> dict[str, Any]:
    """One warm-up record, then ``n`` produce() calls (poll only when the queue is full) and a
    flush: seconds, CPU seconds and delivery errors.  Without ``per_message_callback`` errors
    are counted by a config-level on_delivery with delivery.report.only.error=true
    (CONFIGURATION.md): librdkafka then calls into Python only for failures."""
    from confluent_kafka import Producer

    errors = 0

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal errors
        if err is not None:
            errors += 1

    if not per_message_callback:
        conf = {**conf, "delivery.report.only.error": True, "on_delivery": on_delivery}
    producer = Producer(conf)
    value = payload(VALUE_SIZE)
    producer.produce(topic, value)
    producer.flush(60)
    errors = 0
    produce, poll = producer.produce, producer.poll
    callback = {"on_delivery": on_delivery} if per_message_callback else {}
    cpu0, t0 = time.process_time(), time.perf_counter()
    for _ in range(n):
        while True:
            try:
                produce(topic, value, **callback)
                break
            except BufferError:
                poll(0.001)
    producer.flush()
    t1, cpu1 = time.perf_counter(), time.process_time()
    return {"seconds": t1 - t0, "cpu": cpu1 - cpu0, "errors": errors}


def run_confluent(bootstrap: str, topic: str, n: int, acks: str, codec: str) -> dict[str, Any]:
    idempotent = acks == "all"
    conf = {"bootstrap.servers": bootstrap, "acks": acks, "compression.type": codec,
            "linger.ms": 5, "enable.idempotence": idempotent,
            "queue.buffering.max.messages": 1_000_000}
    return {"linger_ms": 5, "batch_size": "1000000 (librdkafka default)", "idempotence": idempotent,
            **_confluent_produce(conf, topic, n)}


def run_kafka_python(bootstrap: str, topic: str, n: int, acks: str, codec: str) -> dict[str, Any]:
    from kafka import KafkaProducer as KPProducer

    producer = KPProducer(bootstrap_servers=bootstrap, acks=-1 if acks == "all" else int(acks),
                          compression_type=None if codec == "none" else codec,
                          linger_ms=5, batch_size=16384)
    value = payload(VALUE_SIZE)
    producer.send(topic, value).get(timeout=60)
    idempotent = bool(getattr(producer.config, "get", lambda *_: False)("enable_idempotence", False))
    send = producer.send
    cpu0, t0 = time.process_time(), time.perf_counter()
    for _ in range(n):
        send(topic, value)
    producer.flush()
    t1, cpu1 = time.perf_counter(), time.process_time()
    producer.close()
    return {"linger_ms": 5, "batch_size": 16384, "idempotence": idempotent,
            "seconds": t1 - t0, "cpu": cpu1 - cpu0, "errors": 0}


def run_aiokafka(bootstrap: str, topic: str, n: int, acks: str, codec: str) -> dict[str, Any]:
    import asyncio

    from aiokafka import AIOKafkaProducer

    async def main() -> dict[str, Any]:
        idempotent = acks == "all"
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=-1 if acks == "all" else int(acks),
                                    compression_type=None if codec == "none" else codec,
                                    linger_ms=5, max_batch_size=16384, enable_idempotence=idempotent)
        await producer.start()
        value = payload(VALUE_SIZE)
        await producer.send_and_wait(topic, value)
        send = producer.send
        cpu0, t0 = time.process_time(), time.perf_counter()
        futures = []
        for _ in range(n):
            futures.append(await send(topic, value))
        await producer.flush()
        await asyncio.gather(*futures)
        t1, cpu1 = time.perf_counter(), time.process_time()
        await producer.stop()
        return {"linger_ms": 5, "batch_size": 16384, "idempotence": idempotent,
                "seconds": t1 - t0, "cpu": cpu1 - cpu0, "errors": 0}

    return asyncio.run(main())


def run_samsa_transactional(bootstrap: str, topic: str, n: int, acks: str, codec: str) -> dict[str, Any]:
    from samsa import KafkaProducer

    per_txn = int(os.environ.get("SAMSA_BENCH_TXN_SIZE", "10000"))
    config = {"bootstrap.servers": bootstrap, "compression.type": codec,
              "transactional.id": f"bench-{uuid.uuid4().hex[:8]}"}
    producer = KafkaProducer(config)
    value = payload(VALUE_SIZE)
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.send(topic, value).get(timeout=60)
    producer.commit_transaction(60)
    cfg = producer.config
    info = {"linger_ms": cfg["linger.ms"], "batch_size": cfg["batch.size"], "idempotence": True}
    send = producer.send
    cpu0, t0 = time.process_time(), time.perf_counter()
    done = 0
    while done < n:
        count = min(per_txn, n - done)
        producer.begin_transaction()
        for _ in range(count):
            send(topic, value)
        producer.commit_transaction(120)  # flushes the transaction's records first
        done += count
    t1, cpu1 = time.perf_counter(), time.process_time()
    errors = producer.metrics()["record-error-total"]
    producer.close()
    return {**info, "seconds": t1 - t0, "cpu": cpu1 - cpu0, "errors": errors}


CHUNK = 10_000  # rows per send_many() / send_arrow() call in the mock-cluster rows


def run_samsa_bulk(bootstrap: str, topic: str, n: int, acks: str, codec: str, batch_size: int,
                   mode: str) -> dict[str, Any]:
    """samsa per record (send), in lists (send_many) or from Arrow (send_arrow), CHUNK rows a call."""
    import pyarrow as pa

    from samsa import KafkaProducer

    config = {"bootstrap.servers": bootstrap, "acks": acks, "compression.type": codec,
              "batch.size": batch_size, "linger.ms": 5}
    producer = KafkaProducer(config)
    value = payload(VALUE_SIZE)
    producer.send(topic, value).get(timeout=60)
    values = [value] * CHUNK
    table = pa.record_batch({"value": pa.array(values, pa.binary())})
    send, send_many, send_arrow = producer.send, producer.send_many, producer.send_arrow
    cpu0, t0 = time.process_time(), time.perf_counter()
    if mode == "send":
        for _ in range(n):
            send(topic, value)
    else:
        for done in range(0, n, CHUNK):
            rows = min(CHUNK, n - done)
            if mode == "many":
                send_many(topic, values if rows == CHUNK else values[:rows])
            else:
                send_arrow(topic, table if rows == CHUNK else table.slice(0, rows))
    producer.flush()
    t1, cpu1 = time.perf_counter(), time.process_time()
    errors = producer.metrics()["record-error-total"]
    producer.close()
    return {"linger_ms": 5, "batch_size": batch_size, "idempotence": producer.config["enable.idempotence"],
            "seconds": t1 - t0, "cpu": cpu1 - cpu0, "errors": errors}


def run_confluent_tuned(bootstrap: str, topic: str, n: int, acks: str, codec: str, batch_size: int,
                        mode: str) -> dict[str, Any]:
    """confluent-kafka produce() per record with librdkafka's documented throughput settings
    (INTRODUCTION.md "Performance"): linger.ms=5, batch.size as samsa's row, a queue big enough
    for the whole run (queue.buffering.max.messages/kbytes), poll(0) only when the queue is full,
    and delivery reports for failures only (``mode`` "cb": an on_delivery callback per
    message instead, what samsa's per-record futures correspond to)."""
    conf = {"bootstrap.servers": bootstrap, "acks": acks, "compression.type": codec, "linger.ms": 5,
            "batch.size": batch_size, "enable.idempotence": False,
            "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 2_000_000}
    return {"linger_ms": 5, "batch_size": batch_size, "idempotence": False,
            **_confluent_produce(conf, topic, n, per_message_callback=mode == "cb")}


MOCK_CLIENTS = {
    "confluent produce()": (run_confluent_tuned, ""),
    "confluent +callback": (run_confluent_tuned, "cb"),
    "samsa send()": (run_samsa_bulk, "send"),
    "samsa send_many()": (run_samsa_bulk, "many"),
    "samsa send_arrow()": (run_samsa_bulk, "arrow"),
}


MOCK_BATCH_SIZES = (16384, 1 << 20)


def run_mock(n: int, codecs: list[str], clients: list[str], sizes: tuple[int, ...] = MOCK_BATCH_SIZES,
             repeat: int = 3) -> None:
    """The mock-cluster rows of issue 17: librdkafka's mock cluster (1 broker, 4 partitions),
    acks=1, linger.ms=5, batch.size 16 KiB and 1 MiB, each client in its own process.  Each row
    runs ``repeat`` times, the clients taking turns, and keeps each client's fastest run (as
    bench/broker.py does): other load on the machine then slows every client alike."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from broker import mock_cluster  # bench/broker.py: the mock in a subprocess of its own

    names = {(c, codec, size, r): f"mock-{i}-{codec}-{size}-{r}" for i, c in enumerate(clients)
             for codec in codecs for size in sizes for r in range(repeat)}
    with mock_cluster([(t, 4) for t in names.values()]) as mock:
        print(f"{n} records x {VALUE_SIZE} B, null keys, librdkafka mock cluster at {mock.bootstrap} "
              f"(1 broker, 4 partitions), acks=1, linger.ms=5; send_many/send_arrow: {CHUNK} rows a call; "
              f"best of {repeat} runs per client, the clients taking turns\n")
        header = f"{'client':<21}{'codec':<6}{'batch':>9}{'rec/s':>11}{'cpu s':>8}{'errors':>8}{'vs ck':>7}"
        print(header)
        print("-" * len(header))
        for codec in codecs:
            for size in sizes:
                rows: dict[str, dict[str, Any]] = {}
                for r in range(repeat):
                    for client in clients:
                        cmd = [sys.executable, __file__, "--worker-mock", client, "--bootstrap-server",
                               mock.bootstrap, "--topic", names[(client, codec, size, r)], "--num-records",
                               str(n), "--codecs", codec, "--batch-size", str(size)]
                        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=1800)
                        run = (json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0
                               else {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1]})
                        best = rows.get(client)
                        if best is None or "error" in run or ("error" not in best
                                                              and run["seconds"] < best["seconds"]):
                            rows[client] = run  # a failed run is shown, never hidden by a good one
                base = rows.get("confluent produce()", {}).get("seconds")
                for client, r in rows.items():
                    if "error" in r:
                        print(f"{client:<21}{codec:<6}{size:>9}  FAILED: {r['error']}")
                        continue
                    vs = f"{base / r['seconds']:.2f}" if base else "-"
                    print(f"{client:<21}{codec:<6}{size:>9}{n / r['seconds']:>11.0f}{r['cpu']:>8.2f}"
                          f"{r['errors']:>8}{vs:>7}", flush=True)
                print()
    print("vs ck: this row's records/s over confluent-kafka produce()'s (same codec and batch.size; "
          "delivery reports for failures only).  confluent +callback: an on_delivery callback per "
          "message, as samsa's send() makes a future per record.")


WORKERS = {"samsa": run_samsa, "samsa-txn": run_samsa_transactional, "confluent": run_confluent, "kafka-python": run_kafka_python,
           "aiokafka": run_aiokafka}


# --- driver ------------------------------------------------------------------------------


def run_one(client: str, bootstrap: str, n: int, acks: str, codec: str) -> dict[str, Any]:
    topic = f"bench-{client}-{acks}-{codec}-{uuid.uuid4().hex[:6]}"
    cmd = [sys.executable, __file__, "--worker", client, "--bootstrap-server", bootstrap,
           "--topic", topic, "--num-records", str(n), "--acks", acks, "--codecs", codec]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def start_broker(partitions: int) -> tuple[Any, str]:
    from samsa.broker import Broker

    data_dir = tempfile.mkdtemp(prefix="samsa-bench-")
    # A run writes GBs: remove them when the bench ends, however it ends.
    atexit.register(shutil.rmtree, data_dir, ignore_errors=True)
    # Topics are auto-created on first use, with this many partitions, for every client alike.
    broker = Broker(data_dir=data_dir, port=0, config={"num.partitions": partitions})
    broker.__enter__()
    return broker, broker.bootstrap_servers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-records", "-n", type=int, default=1_000_000)
    parser.add_argument("--bootstrap-server", default=None)
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--acks", default="1,all")
    parser.add_argument("--codecs", default="none,lz4,zstd")
    parser.add_argument("--partitions", type=int, default=8,
                        help="num.partitions of the embedded broker's auto-created topics (default 8)")
    parser.add_argument("--transactional", type=int, default=0, metavar="N",
                        help="also run samsa's transactional producer, committing every N records (acks=all rows)")
    parser.add_argument("--mock", action="store_true",
                        help="run issue 17's rows against librdkafka's mock cluster instead: confluent-kafka "
                             "produce(), samsa send(), send_many() and send_arrow(); 16 KiB and 1 MiB batches")
    parser.add_argument("--batch-sizes", default=",".join(map(str, MOCK_BATCH_SIZES)),
                        help="with --mock: the batch.size rows to run (default 16384,1048576)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="with --mock: runs per row and client, the fastest kept (default 3)")
    parser.add_argument("--batch-size", type=int, default=16384, help=argparse.SUPPRESS)
    parser.add_argument("--worker", choices=tuple(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--worker-mock", choices=tuple(MOCK_CLIENTS), help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        result = WORKERS[args.worker](args.bootstrap_server, args.topic, args.num_records, args.acks, args.codecs)
        print(json.dumps(result))
        return 0

    if args.worker_mock:
        fn, mode = MOCK_CLIENTS[args.worker_mock]
        result = fn(args.bootstrap_server, args.topic, args.num_records, "1", args.codecs, args.batch_size, mode)
        print(json.dumps(result))
        return 0
    if args.mock:
        codecs = "none,lz4" if args.codecs == parser.get_default("codecs") else args.codecs
        clients = list(MOCK_CLIENTS) if args.clients == parser.get_default("clients") else args.clients.split(",")
        run_mock(args.num_records, codecs.split(","), clients,
                 tuple(int(size) for size in args.batch_sizes.split(",")), args.repeat)
        return 0

    broker = None
    bootstrap = args.bootstrap_server
    if bootstrap is None:
        broker, bootstrap = start_broker(args.partitions)
    clients = [c for c in args.clients.split(",") if c]
    if args.transactional > 0:
        os.environ["SAMSA_BENCH_TXN_SIZE"] = str(args.transactional)
        clients.append("samsa-txn")
    n = args.num_records
    mb = n * VALUE_SIZE / (1024 * 1024)
    where = f"embedded samsa broker at {bootstrap}, {args.partitions} partitions per topic" if broker else bootstrap
    print(f"{n} records x {VALUE_SIZE} B, null keys, to {where}\n")
    header = (f"{'client':<13}{'acks':<5}{'codec':<6}{'linger':>7}{'batch':>10}{'idemp':>7}"
              f"{'rec/s':>11}{'MB/s':>8}{'cpu s':>8}{'vs kp':>7}{'vs ck':>7}")
    print(header)
    print("-" * len(header))
    try:
        for acks in args.acks.split(","):
            for codec in args.codecs.split(","):
                rows: dict[str, dict[str, Any]] = {}
                for client in clients:
                    if client == "samsa-txn" and acks not in ("all", "-1"):
                        continue  # transactions need acks=all
                    rows[client] = run_one(client, bootstrap, n, acks, codec)
                base_kp = rows.get("kafka-python", {}).get("seconds")
                base_ck = rows.get("confluent", {}).get("seconds")
                for client, r in rows.items():
                    if "error" in r:
                        print(f"{client:<13}{acks:<5}{codec:<6}  FAILED: {r['error']}")
                        continue
                    rate = n / r["seconds"]
                    vs_kp = f"{base_kp / r['seconds']:.2f}" if base_kp else "-"
                    vs_ck = f"{base_ck / r['seconds']:.2f}" if base_ck else "-"
                    batch = str(r["batch_size"]).split(" ")[0]
                    print(f"{client:<13}{acks:<5}{codec:<6}{r['linger_ms']:>7}{batch:>10}"
                          f"{bool(r['idempotence'])!s:>7}{rate:>11.0f}{mb / r['seconds']:>8.2f}"
                          f"{r['cpu']:>8.2f}{vs_kp:>7}{vs_ck:>7}", flush=True)
                print()
    finally:
        if broker is not None:
            broker.__exit__(None, None, None)
    print("vs kp / vs ck: this row's records/s divided by kafka-python's / confluent-kafka's (same acks, codec).")
    if args.transactional > 0:
        print(f"samsa-txn: samsa's transactional producer, one transaction committed every {args.transactional} "
              "records (compare with the samsa acks=all row: idempotent).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
