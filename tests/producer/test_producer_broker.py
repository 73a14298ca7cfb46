"""SAMSA BROKER END-TO-END (large): 1,000,000 records, keyed and keyless, 8 partitions, produced
by KafkaProducer to the embedded samsa Broker and read back with confluent-kafka (check.crcs):
every record exactly once, in send order per partition, keyed records on murmur2's partition.
Takes roughly 30-60 s.
"""

from __future__ import annotations

from pathlib import Path

from samsa import KafkaProducer
from samsa.broker import Broker

from .test_producer_mock import (
    check_exactly_once_in_order,
    make_records,
    read_back,
    send_all,
)

NUM_RECORDS = 1_000_000
PARTITIONS = 8


def test_one_million_records_exactly_once_in_order_on_the_samsa_broker(tmp_path: Path) -> None:
    records = make_records(NUM_RECORDS)
    with Broker(data_dir=tmp_path, port=0, config={"num.partitions": PARTITIONS}) as broker:
        with KafkaProducer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
            assert len(producer.partitions_for("million")) == PARTITIONS
            errors = send_all(producer, "million", records)
            producer.flush(300)
            metrics = producer.metrics()
        assert not errors, errors[:3]
        assert metrics["record-send-total"] == NUM_RECORDS
        got = read_back(broker.bootstrap_servers, "million", PARTITIONS, NUM_RECORDS, deadline_s=300)
    check_exactly_once_in_order(got, records, PARTITIONS)


def test_acks_zero_completes_on_send_with_unknown_offsets(tmp_path: Path) -> None:
    # librdkafka's mock answers acks=0 requests (mock notes section 2); a real broker does not.
    records = make_records(5000)
    with Broker(data_dir=tmp_path, port=0, config={"num.partitions": 2}) as broker:
        with KafkaProducer({"bootstrap.servers": broker.bootstrap_servers, "acks": "0"}) as producer:
            futures = [producer.send("fire", v, key=k) for k, v in records]
            producer.flush(60)
            offsets = {f.get(timeout=60).offset for f in futures}
        assert offsets == {-1}
        got = read_back(broker.bootstrap_servers, "fire", 2, len(records), deadline_s=60)
    check_exactly_once_in_order(got, records, 2)
