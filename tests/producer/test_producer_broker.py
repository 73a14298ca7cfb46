"""SAMSA BROKER END-TO-END (large): 1,000,000 records, keyed and keyless, 8 partitions, produced
by KafkaProducer to the embedded samsa Broker and read back with confluent-kafka (check.crcs):
every record exactly once, in send order per partition, keyed records on murmur2's partition.
Takes roughly 30-60 s.  Also: a ``samsa broker`` subprocess SIGKILLed and restarted while an
idempotent acks=all producer sends (nothing lost, nothing duplicated, order kept).
"""

from __future__ import annotations

import random
import signal
import threading
import time
from pathlib import Path

from samsa import KafkaProducer
from samsa.broker import Broker
from samsa.errors import KafkaError
from samsa.records import iter_batches
from tests.broker.conftest import BrokerProcess
from tests.support.mutation_budget import records as budget

from .test_producer_mock import (
    FAST,
    check_exactly_once_in_order,
    make_records,
    read_back,
    send_all,
)

NUM_RECORDS = budget(1_000_000)  # a tenth in a mutation run (tests/support/mutation_budget.py)
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
    # librdkafka's mock answers acks=0 requests (rdkafka_mock_handlers.c); a real broker does not.
    records = make_records(5000)
    with Broker(data_dir=tmp_path, port=0, config={"num.partitions": 2}) as broker:
        with KafkaProducer({"bootstrap.servers": broker.bootstrap_servers, "acks": "0"}) as producer:
            futures = [producer.send("fire", v, key=k) for k, v in records]
            producer.flush(60)
            offsets = {f.get(timeout=60).offset for f in futures}
        assert offsets == {-1}
        got = read_back(broker.bootstrap_servers, "fire", 2, len(records), deadline_s=60)
    check_exactly_once_in_order(got, records, 2)


def stored_records(data_dir: Path, topic: str, partitions: int) -> int:
    """Records in the topic's segment files (whole batches; a torn tail is not counted)."""
    total = 0
    for partition in range(partitions):
        for path in sorted((data_dir / f"{topic}-{partition}").glob("*.log")):
            try:
                for batch in iter_batches(path.read_bytes(), check_crcs=True):
                    total += batch.records_count
            except (ValueError, KafkaError):
                pass  # a batch still being written: stop at the last whole one
    return total


def test_broker_killed_and_restarted_mid_stream_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    """acks=all + idempotence while a ``samsa broker`` subprocess is SIGKILLed mid-stream and
    restarted on the same port and data dir: the producer retries what was in flight, the
    broker (which, unlike librdkafka's mock, checks idempotent sequences and rebuilds producer
    state from its log) drops the retries it had already appended.  Every record once, in
    send order per partition."""
    topic, partitions = "restart", 8
    records = make_records(40_000)
    broker = BrokerProcess(
        tmp_path / "data", {"num.partitions": partitions, "log.flush.interval.messages": 1}
    ).start()
    errors: list[BaseException] = []
    acked = [0]
    sent = [0]

    def on_delivery(_md: object, err: BaseException | None) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked[0] += 1

    config = {
        "bootstrap.servers": broker.bootstrap_servers, "acks": "all", "enable.idempotence": True,
        "linger.ms": 2, "batch.size": 4096, "delivery.timeout.ms": 120_000,
        "request.timeout.ms": 10_000, **FAST,
    }
    try:
        with KafkaProducer(config) as producer:
            assert len(producer.partitions_for(topic)) == partitions

            sending_errors: list[BaseException] = []

            def produce() -> None:
                # Paced so that sending spans the kill and the restart.
                try:
                    for start in range(0, len(records), 2000):
                        for key, value in records[start : start + 2000]:
                            producer.send(topic, value, key=key, on_delivery=on_delivery)
                            sent[0] += 1
                        time.sleep(0.02)
                except BaseException as exc:  # noqa: BLE001 -- the test thread fails on it
                    sending_errors.append(exc)

            thread = threading.Thread(target=produce)
            thread.start()
            # Catch the broker between appending a request's batches and the producer seeing
            # the response: freeze it (SIGSTOP), compare what it stored with what was
            # acknowledged, and SIGKILL it frozen if it holds unacknowledged records.
            deadline = time.monotonic() + 60
            while acked[0] < 5_000 and time.monotonic() < deadline:
                time.sleep(0.001)
            stored_at_kill = acked_at_kill = sent_at_kill = 0
            for _ in range(1000):
                broker.proc.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
                time.sleep(0.02)  # responses already in our socket buffer are read meanwhile
                acked_at_kill, sent_at_kill = acked[0], sent[0]
                stored_at_kill = stored_records(broker.data_dir, topic, partitions)
                if stored_at_kill > acked_at_kill:
                    break
                broker.proc.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
                time.sleep(random.uniform(0.001, 0.005))
            broker.kill()
            time.sleep(0.2)
            broker.start()
            thread.join(120)
            assert not thread.is_alive(), "the sending thread did not finish"
            assert not sending_errors, sending_errors
            producer.flush(120)
            metrics = producer.metrics()
        assert 5_000 <= acked_at_kill < sent_at_kill, (acked_at_kill, sent_at_kill)
        # Records the dead broker had stored but never acknowledged are sent again: the
        # restarted broker must recognise them as duplicates (the point of this test).
        assert stored_at_kill > acked_at_kill, (stored_at_kill, acked_at_kill)
        assert not errors, errors[:3]
        assert acked[0] == len(records)
        assert metrics["record-retry-total"] > 0  # something was in flight when the broker died
        got = read_back(broker.bootstrap_servers, topic, partitions, len(records), deadline_s=60)
    finally:
        if broker.is_running():
            broker.stop()
    check_exactly_once_in_order(got, records, partitions)
