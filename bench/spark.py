"""Spark through the samsa data source vs a plain confluent-kafka writer, on one broker.

    .venv/bin/python bench/spark.py [--rows N] [--repeat R] [--master local[2]]

Starts a ``samsa broker`` subprocess (its own process and GIL, 4 partitions per topic) and a
local SparkSession, caches N rows (default 1,000,000) of 100-byte values, then times:

* samsa sink: ``df.write.format("samsa")`` (Arrow batches, one idempotent samsa producer per
  Python worker, flushed per task);
* confluent-kafka writer: ``df.mapInArrow`` with a confluent-kafka Producer per task doing the
  same (acks=all, idempotence, linger.ms=5: the samsa producer's defaults), flushed per task;
* samsa source: ``spark.read.format("samsa")`` of the records the samsa sink wrote, summing the
  value lengths so every value is read.

Each row runs ``--repeat`` times (default 3) into fresh topics and the best run is kept.  The
target is samsa sink >= 1.0x the confluent-kafka writer.
"""

from __future__ import annotations

import argparse
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
PARTITIONS = 4


@contextmanager
def samsa_broker(data_dir: str) -> Iterator[str]:
    cmd = [sys.executable, "-m", "samsa.cli", "broker", "--host", "127.0.0.1", "--port", "0",
           "--data-dir", data_dir, "--log-level", "WARNING",
           "--config", f"num.partitions={PARTITIONS}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    while line and not line.startswith("listening on "):
        line = proc.stdout.readline()
    try:
        if not line:
            raise RuntimeError("samsa broker did not start")
        yield line.split()[-1]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)


def confluent_writer(servers: str, topic: str) -> Any:
    """A mapInArrow function producing every value with confluent-kafka; yields the count."""

    def write(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from confluent_kafka import Producer

        errors: list[Any] = []
        producer = Producer({"bootstrap.servers": servers, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 5,
                             "delivery.report.only.error": True,
                             "on_delivery": lambda err, msg: errors.append(err)})
        produce, count = producer.produce, 0
        for batch in batches:
            for value in batch.column(0).to_pylist():
                while True:
                    try:
                        produce(topic, value)
                        break
                    except BufferError:
                        producer.poll(0.005)
            count += batch.num_rows
            producer.poll(0)
        if producer.flush(120) or errors:
            raise RuntimeError(f"confluent-kafka: undelivered records, errors {errors[:3]}")
        yield pa.RecordBatch.from_pydict({"n": [count]})

    return write


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    from pyspark.sql import functions as F

    from samsa.admin import AdminClient, NewTopic
    from samsa.pipeline.session import local_session

    spark = local_session("samsa-bench", master=args.master)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "10000")
    cores = spark.sparkContext.defaultParallelism
    # Half-random 100-byte values (hex), generated and cached before any timing.
    df = (spark.range(args.rows, numPartitions=cores)
          .select(F.substring(F.concat(F.sha2(F.col("id").cast("string"), 256),
                                       F.sha2(F.col("id").cast("string"), 512)), 1, VALUE_SIZE)
                  .cast("binary").alias("value"))
          .cache())
    assert df.count() == args.rows
    best: dict[str, float] = {}

    def keep(name: str, seconds: float) -> None:
        best[name] = min(best.get(name, float("inf")), seconds)
        print(f"  {name:<26} {seconds:7.2f} s  {args.rows / seconds:>12,.0f} rows/s", flush=True)

    with tempfile.TemporaryDirectory(prefix="samsa-bench-spark-") as data_dir, \
            samsa_broker(data_dir) as servers:
        print(f"samsa broker at {servers}; Spark {spark.version} {args.master}, "
              f"{cores} input partitions, {args.rows:,} rows of {VALUE_SIZE} B")
        admin = AdminClient({"bootstrap.servers": servers})
        for run in range(args.repeat):
            print(f"run {run + 1}/{args.repeat}")
            t_samsa, t_ck = f"bench-samsa-{run}", f"bench-confluent-{run}"
            admin.create_topics([NewTopic(t, PARTITIONS) for t in (t_samsa, t_ck)])

            start = time.perf_counter()
            (df.write.format("samsa").option("kafka.bootstrap.servers", servers)
             .option("topic", t_samsa).mode("append").save())
            keep("samsa sink", time.perf_counter() - start)

            start = time.perf_counter()
            written = df.mapInArrow(confluent_writer(servers, t_ck), "n long") \
                .agg(F.sum("n")).first()
            keep("confluent-kafka mapInArrow", time.perf_counter() - start)
            assert written is not None and written[0] == args.rows

            start = time.perf_counter()
            read = (spark.read.format("samsa").option("kafka.bootstrap.servers", servers)
                    .option("subscribe", t_samsa).load()
                    .agg(F.count(F.lit(1)), F.sum(F.length("value"))).first())
            keep("samsa source (read back)", time.perf_counter() - start)
            assert read is not None and read[0] == args.rows and read[1] == args.rows * VALUE_SIZE
        admin.close()
    spark.stop()

    print(f"\nbest of {args.repeat}, {args.rows:,} rows of {VALUE_SIZE} B, {args.master}:")
    print(f"{'path':<28} {'seconds':>8} {'rows/s':>12} {'vs confluent':>13}")
    base = best["confluent-kafka mapInArrow"]
    for name, seconds in best.items():
        print(f"{name:<28} {seconds:8.2f} {args.rows / seconds:12,.0f} {base / seconds:12.2f}x")
    ratio = base / best["samsa sink"]
    print(f"\nsamsa sink / confluent-kafka writer = {ratio:.2f}x (target >= 1.0x)")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    raise SystemExit(main())
