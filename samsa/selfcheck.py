"""`make run` until the Spark pipeline lands: an end-to-end run on one machine.

Starts an embedded samsa broker in a temporary data directory, creates a 4-partition topic with
the admin client, sends records with samsa's KafkaProducer (idempotent, lz4), reads them back with
samsa's KafkaConsumer, checks that every record arrived exactly once and in order per partition,
and prints throughput for each stage.  Exits non-zero on any mismatch.
"""

from __future__ import annotations

import sys
import tempfile
import time

from tqdm import tqdm

NUM_RECORDS = 200_000
TOPIC = "selfcheck"
PARTITIONS = 4


def main() -> int:
    from samsa import KafkaConsumer, KafkaProducer
    from samsa.admin import AdminClient, NewTopic
    from samsa.broker import Broker
    from samsa.consumer import TopicPartition

    with tempfile.TemporaryDirectory(prefix="samsa-selfcheck-") as data_dir, \
            Broker(data_dir=data_dir, port=0) as broker:
        servers = broker.bootstrap_servers
        print(f"embedded broker listening on {servers} (data dir {data_dir})")
        admin = AdminClient({"bootstrap.servers": servers})
        admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])
        admin.close()

        sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        start = time.perf_counter()
        with KafkaProducer({"bootstrap.servers": servers, "compression.type": "lz4"}) as producer:
            futures = []
            for i in tqdm(range(NUM_RECORDS), desc="produce", unit="rec", mininterval=0.5):
                key = f"key-{i % 1000}".encode()
                futures.append((key, b"value-%d" % i, producer.send(TOPIC, value=b"value-%d" % i,
                                                                   key=key)))
            producer.flush(60)
            for key, value, future in futures:
                sent[future.get(10).partition].append(value)
        produce_s = time.perf_counter() - start
        print(f"produced {NUM_RECORDS:,} records in {produce_s:.2f} s "
              f"({NUM_RECORDS / produce_s:,.0f} records/s)")

        received: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        start = time.perf_counter()
        consumer = KafkaConsumer({"bootstrap.servers": servers, "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False})
        consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        with tqdm(total=NUM_RECORDS, desc="consume", unit="rec", mininterval=0.5) as bar:
            deadline = time.monotonic() + 60
            count = 0
            while count < NUM_RECORDS and time.monotonic() < deadline:
                batch = consumer.poll(1.0)
                for record in batch:
                    received[record.partition].append(record.value)
                    count += 1
                bar.update(len(batch))
        consumer.close()
        consume_s = time.perf_counter() - start
        print(f"consumed {count:,} records in {consume_s:.2f} s "
              f"({count / consume_s:,.0f} records/s)")

    if received != sent:
        print("MISMATCH: the records read back differ from those acknowledged", file=sys.stderr)
        return 1
    print(f"ok: all {NUM_RECORDS:,} records read back exactly once, in order per partition")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
