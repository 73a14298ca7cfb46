"""Crash tests: a ``samsa broker`` subprocess is SIGKILLed mid-stream and restarted on the same
data dir and port.

* Every record a confluent-kafka idempotent producer (acks=all) saw acknowledged is still there
  at its offset with its value, offsets stay contiguous, nothing is written twice.
* An idempotent producer's retry of a batch written before the crash is answered as a duplicate
  (NONE with the original offsets), from producer state rebuilt after the restart.
* A torn batch at the tail of a segment and a batch with a flipped byte are found by recovery,
  the log is cut there, whole batches before the cut are served and new writes continue.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from samsa.broker.log.checkpoint import read_offset_checkpoint
from samsa.protocol import InitProducerIdRequest
from samsa.records import RecordBatchBuilder, iter_batch_headers

FLUSH_EVERY_MESSAGE = {"log.flush.interval.messages": 1}


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int
                ) -> dict[Any, list[tuple[Any, bytes | None, bytes | None]]]:
    """Every record of ``topic`` per partition as (offset, key, value), read with confluent-kafka
    (check.crcs=true) until ``expected`` records have arrived."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "crash-check",
                         "enable.auto.commit": False, "check.crcs": True,
                         "enable.partition.eof": False})
    out: dict[Any, list[tuple[Any, bytes | None, bytes | None]]] = {
        p: [] for p in range(partitions)}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        count = 0
        deadline = time.monotonic() + 60
        while count < expected and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 0.5):
                assert msg.error() is None, msg.error()
                out[msg.partition()].append((msg.offset(), msg.key(), msg.value()))
                count += 1
        # Nothing beyond the expected count arrives either.
        for msg in consumer.consume(10_000, 0.5):
            assert msg.error() is None, msg.error()
            out[msg.partition()].append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    return out


def test_acknowledged_records_survive_sigkill(broker_process: Callable[..., Any],
                                              raw_client: Callable[[int], Any]) -> None:
    from confluent_kafka import Producer

    broker = broker_process(FLUSH_EVERY_MESSAGE).start()
    topic, partitions = "crash", 4
    assert raw_client(broker.port).create_topic(topic, partitions) == 0

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 2,
                         "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 200,
                         "retry.backoff.ms": 50, "message.timeout.ms": 120_000})
    acked: dict[bytes, tuple[int, int]] = {}
    failed: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acked[msg.value()] = (msg.partition(), msg.offset())
        else:
            failed.append(f"{msg.value()!r}: {err}")

    sent = 0

    def send(n: int) -> None:
        nonlocal sent
        for _ in range(n):
            value = b"rec-%08d" % sent
            while True:
                try:
                    producer.produce(topic, value, key=b"k%d" % (sent % 97),
                                     on_delivery=on_delivery)
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    producer.poll(0.01)
            sent += 1
        producer.poll(0)

    # Stream until 20,000 records are acknowledged, then kill the broker without a pause, so
    # produce requests are in flight (some written but unanswered, some not written at all).
    while len(acked) < 20_000:
        send(500)
        producer.poll(0.001)
    broker.kill()
    acked_before_kill = dict(acked)
    send(5_000)          # buffered while the broker is down
    producer.poll(0.5)
    broker.start()
    send(20_000)
    assert producer.flush(120) == 0, "records still unacknowledged 120 s after the restart"
    assert not failed, failed[:5]
    assert len(acked) == sent

    log = consume_all(broker.bootstrap_servers, topic, partitions, sent)
    seen: dict[bytes, tuple[int, int]] = {}
    for p, records in log.items():
        offsets = [o for o, _, _ in records]
        assert offsets == list(range(len(offsets))), f"partition {p}: offsets have gaps"
        for offset, _, value in records:
            assert value is not None
            assert value not in seen, f"{value!r} stored twice: {seen[value]} and {(p, offset)}"
            seen[value] = (p, offset)
    # Every acknowledgement, before and after the crash, names where the record really is.
    for value, position in acked_before_kill.items():
        assert seen.get(value) == position, f"{value!r} acked at {position}, found at " \
                                            f"{seen.get(value)}"
    assert seen == acked


def _batch(producer_id: int, epoch: int, sequence: int, count: int) -> bytes:
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=epoch,
                                 base_sequence=sequence)
    for i in range(count):
        builder.append(1_700_000_000_000 + sequence + i, b"k", b"seq-%d" % (sequence + i))
    return builder.build()


def test_idempotent_retry_after_sigkill_is_a_duplicate(broker_process: Callable[..., Any],
                                                       raw_client: Callable[[int], Any]
                                                       ) -> None:
    broker = broker_process(FLUSH_EVERY_MESSAGE).start()
    client = raw_client(broker.port)
    assert client.create_topic("idem", 1) == 0
    init = client.call(InitProducerIdRequest(transactional_id=None,
                                             transaction_timeout_ms=60_000), 4)
    assert init.error_code == 0
    pid, epoch = init.producer_id, init.producer_epoch
    batches = [_batch(pid, epoch, seq, 5) for seq in (0, 5, 10)]
    for i, batch in enumerate(batches):
        part = client.produce("idem", 0, batch, version=8)
        assert (part.error_code, part.base_offset) == (0, 5 * i)
    assert client.list_offset("idem", 0) == 15

    broker.kill()
    broker.start()
    client = raw_client(broker.port)

    # The producer never saw the answer to its last batch and sends it again, byte for byte.
    retry = client.produce("idem", 0, batches[-1], version=8)
    assert (retry.error_code, retry.base_offset) == (0, 10)
    assert client.list_offset("idem", 0) == 15, "the retried batch was appended twice"
    older = client.produce("idem", 0, batches[1], version=8)
    assert (older.error_code, older.base_offset) == (0, 5)
    assert client.list_offset("idem", 0) == 15
    # The sequence continues where it was; a gap is refused.
    assert client.produce("idem", 0, _batch(pid, epoch, 15, 5), version=8).base_offset == 15
    gap = client.produce("idem", 0, _batch(pid, epoch, 30, 5), version=8)
    assert gap.error_code == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
    assert client.list_offset("idem", 0) == 20


def _segment(data_dir: Path, topic: str, partition: int) -> Path:
    segments = sorted((data_dir / f"{topic}-{partition}").glob("*.log"))
    assert len(segments) == 1, segments
    return segments[0]


def test_torn_and_corrupt_batches_are_cut_at_recovery(broker_process: Callable[..., Any],
                                                      raw_client: Callable[[int], Any]
                                                      ) -> None:
    from confluent_kafka import Producer

    broker = broker_process(FLUSH_EVERY_MESSAGE).start()
    client = raw_client(broker.port)
    topic = "torn"
    assert client.create_topic(topic, 2) == 0
    for p in (0, 1):
        for b in range(20):
            builder = RecordBatchBuilder()
            for i in range(10):
                builder.append(1_700_000_000_000, b"p%d" % p, b"v-%d-%03d" % (p, b * 10 + i))
            assert client.produce(topic, p, builder.build()).base_offset == b * 10
    broker.kill()

    # Partition 0: half of one more batch at the tail, as a crash mid-write leaves it.
    torn_segment = _segment(broker.data_dir, topic, 0)
    whole_size = torn_segment.stat().st_size
    extra = RecordBatchBuilder(base_offset=200)
    for i in range(10):
        extra.append(1_700_000_000_000, b"p0", b"torn-%d" % i)
    extra_bytes = extra.build()
    with torn_segment.open("ab") as f:
        f.write(extra_bytes[: len(extra_bytes) // 2])

    # Partition 1: one flipped byte inside batch 15 (a record's value, under the CRC).
    bad_segment = _segment(broker.data_dir, topic, 1)
    positions = [pos for pos, _ in iter_batch_headers(bad_segment.read_bytes())]
    assert len(positions) == 20
    cut_at = positions[15]
    data = bytearray(bad_segment.read_bytes())
    data[positions[16] - 3] ^= 0x55
    bad_segment.write_bytes(bytes(data))
    # Both damaged spots lie past the recovery point the broker last checkpointed, as after a
    # real crash (batches before it are trusted without a CRC check, as in Kafka).
    points = read_offset_checkpoint(broker.data_dir / "recovery-point-offset-checkpoint")
    assert points.get((topic, 0), 0) <= 200 and points.get((topic, 1), 0) <= 150

    broker.start()
    assert torn_segment.stat().st_size == whole_size, "the torn tail was not cut"
    assert bad_segment.stat().st_size == cut_at, "the log was not cut at the corrupt batch"
    client = raw_client(broker.port)
    assert (client.list_offset(topic, 0), client.list_offset(topic, 1)) == (200, 150)

    log = consume_all(broker.bootstrap_servers, topic, 2, 350)
    assert [v for _, _, v in log[0]] == [b"v-0-%03d" % i for i in range(200)]
    assert [v for _, _, v in log[1]] == [b"v-1-%03d" % i for i in range(150)]
    assert [o for o, _, _ in log[1]] == list(range(150))

    # New writes go after the cut.
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all",
                         "enable.idempotence": True})
    positions_after: list[tuple[Any, Any]] = []
    for p in (0, 1):
        for i in range(3):
            producer.produce(topic, b"new-%d-%d" % (p, i), partition=p,
                             on_delivery=lambda err, msg: positions_after.append(
                                 (msg.partition(), msg.offset()) if err is None else (-1, -1)))
    assert producer.flush(30) == 0
    assert sorted(positions_after) == [(0, 200), (0, 201), (0, 202), (1, 150), (1, 151),
                                       (1, 152)]
    log = consume_all(broker.bootstrap_servers, topic, 2, 356)
    assert [v for _, _, v in log[0][200:]] == [b"new-0-%d" % i for i in range(3)]
    assert [v for _, _, v in log[1][150:]] == [b"new-1-%d" % i for i in range(3)]
