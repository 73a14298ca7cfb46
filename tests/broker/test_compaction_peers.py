"""Log compaction against real peers (issue 16's "Done when"), on a ``samsa broker`` subprocess.

* confluent-kafka writes 200,000 updates over 2,000 keys (200 of them deleted by a tombstone)
  to a compacted topic with small segments; once the cleaner's checkpoint reaches the active
  segment, confluent-kafka, kafka-python and samsa's consumer each read exactly what Kafka's
  cleaner leaves: the latest record of every key below the checkpoint (tombstones included,
  their delete horizon not yet passed) and everything above it, offsets increasing with gaps;
  the log on disk is a small fraction of what was written.  Once the tombstones' delete horizon
  (delete.retention.ms after that cleaning) has passed and more writes make the log dirty again,
  the next cleaning removes them: no deleted key is read at all.
* The cleaner's memory: a broker with a 2 MiB log.cleaner.dedupe.buffer.size cleans a log of
  400,000 keys (4.6 times what its map holds: several rounds) with its peak resident memory
  within the buffer plus a fixed margin.
* Idempotent producers (samsa's and confluent-kafka's) keep producing to a compacted topic
  while the cleaner cleans it, across a SIGKILL and restart of the broker (producer state
  rebuilt from the cleaned log): no OutOfOrderSequence or UnknownProducerId error, and every
  acknowledged record is read at its offset unless a later record of its key superseded it.

The cleaner is awaited through its ``cleaner-offset-checkpoint`` file (no timed assertions);
topics are created with min.cleanable.dirty.ratio=1.0 (never cleanable) and lowered once the
data is written, so what a cleaning sees is known.  With log.cleaner.enable=false these tests
fail waiting for the checkpoint.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from samsa.broker.log.checkpoint import read_offset_checkpoint
from samsa.broker.log.cleaner_manager import CLEANER_OFFSET_CHECKPOINT
from samsa.records import iter_batches

Row = tuple[int, bytes, bytes | None]  # offset, key, value

KEYS = 2_000
ROUNDS = 100  # KEYS * ROUNDS = 200,000 updates
DELETE_ROUND = 90  # deleted keys get their tombstone in this round, then no more updates
SEGMENT_BYTES = 64 * 1024
DELETE_RETENTION_MS = 2_000
CLEANER = {"log.cleaner.backoff.ms": 50}


def is_deleted(k: int) -> bool:
    return k % 10 == 3


def key_of(k: int) -> bytes:
    return b"key-%05d" % k


# --- waiting on the broker ----------------------------------------------------------------------


def cleaner_checkpoint(data_dir: Path, topic: str, partition: int = 0) -> int:
    return read_offset_checkpoint(data_dir / CLEANER_OFFSET_CHECKPOINT).get((topic, partition), -1)


def segment_bases(data_dir: Path, topic: str, partition: int = 0) -> list[int]:
    return sorted(int(p.stem) for p in (data_dir / f"{topic}-{partition}").glob("*.log"))


def log_bytes(data_dir: Path, topic: str, partition: int = 0) -> int:
    return sum(p.stat().st_size for p in (data_dir / f"{topic}-{partition}").glob("*.log"))


def wait_cleaned_to(broker: Any, topic: str, offset: int, timeout_s: float = 120.0) -> int:
    """Wait until the cleaner's checkpoint of ``topic``-0 reaches ``offset``; returns it."""
    deadline = time.monotonic() + timeout_s
    while (reached := cleaner_checkpoint(broker.data_dir, topic)) < offset:
        if not broker.is_running():
            raise AssertionError(f"the broker died: {broker.stderr_text()[-3000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(
                f"the cleaner's checkpoint of {topic}-0 is at {reached}, not yet at {offset}, "
                f"after {timeout_s:.0f} s (is the cleaner running? log.cleaner.enable); broker "
                f"stderr: {broker.stderr_text()[-3000:]}")
        time.sleep(0.05)
    return reached


def create_topic(bootstrap: str, topic: str, configs: dict[str, str]) -> Any:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(30)
    return admin


def alter_topic(admin: Any, topic: str, configs: dict[str, str]) -> None:
    """AlterConfigs replaces the topic's whole set of overrides: pass them all."""
    from confluent_kafka.admin import ConfigResource

    resource = ConfigResource("topic", topic, set_config=configs)
    admin.alter_configs([resource])[resource].result(30)


# --- the three readers ----------------------------------------------------------------------------


def read_confluent(bootstrap: str, topic: str, end: int) -> list[Row]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "compaction-reader",
                         "enable.auto.commit": False, "check.crcs": True})
    rows: list[Row] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 60
        while (not rows or rows[-1][0] < end - 1) and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                assert msg.error() is None, msg.error()
                rows.append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    return rows


def read_kafka_python(bootstrap: str, topic: str, end: int) -> list[Row]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             check_crcs=True, max_poll_records=10_000)
    rows: list[Row] = []
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        deadline = time.monotonic() + 60
        while (not rows or rows[-1][0] < end - 1) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                rows.extend((r.offset, r.key, r.value) for r in records)
    finally:
        consumer.close()
    return rows


def read_samsa(bootstrap: str, topic: str, end: int) -> list[Row]:
    from samsa.consumer import KafkaConsumer, TopicPartition

    rows: list[Row] = []
    with KafkaConsumer({"bootstrap.servers": bootstrap, "enable.auto.commit": False,
                        "check.crcs": True}) as consumer:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        deadline = time.monotonic() + 60
        while (not rows or rows[-1][0] < end - 1) and time.monotonic() < deadline:
            rows.extend((r.offset, r.key, r.value) for r in consumer.poll(0.5))
    return rows


READERS: dict[str, Callable[[str, str, int], list[Row]]] = {
    "confluent-kafka": read_confluent, "kafka-python": read_kafka_python, "samsa": read_samsa}


def compacted_view(written: list[Row], cleaned_to: int, *, tombstones: bool) -> list[Row]:
    """What a cleaning up to ``cleaned_to`` leaves of ``written``: below it the latest record of
    each key (a tombstone too while ``tombstones``), from it on everything."""
    last: dict[bytes, int] = {}
    for offset, key, _ in written:
        if offset < cleaned_to:
            last[key] = offset
    return [(offset, key, value) for offset, key, value in written
            if offset >= cleaned_to
            or (last[key] == offset and (value is not None or tombstones))]


def check_readers(bootstrap: str, topic: str, written: list[Row], expected: list[Row]) -> None:
    end = written[-1][0] + 1
    live = {key: value for _, key, value in written}
    for name, read in READERS.items():
        rows = read(bootstrap, topic, end)
        offsets = [offset for offset, _, _ in rows]
        assert all(a < b for a, b in itertools.pairwise(offsets)), \
            f"{name}: offsets not strictly increasing"
        assert len(rows) < end, f"{name}: {len(rows)} records for {end} offsets: no gaps"
        missing = sorted(set(expected) - set(rows))[:5]
        extra = sorted(set(rows) - set(expected))[:5]
        assert rows == expected, f"{name}: missing {missing}, unexpected {extra}"
        # The reader's final view: the latest value of every live key.
        seen = {key: value for _, key, value in rows}
        assert {k: v for k, v in seen.items() if v is not None} == \
            {k: v for k, v in live.items() if v is not None}, f"{name}: wrong latest values"


# --- 1. 200,000 updates, three readers, tombstones gone after delete.retention.ms -----------------


def produce_updates(bootstrap: str, topic: str, updates: list[tuple[bytes, bytes | None]]
                    ) -> list[Row]:
    """confluent-kafka (idempotent, acks=all) writes ``updates``; returns them with offsets."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})
    written: list[Row] = []
    errors: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            written.append((msg.offset(), msg.key(), msg.value()))

    for key, value in updates:
        while True:
            try:
                producer.produce(topic, value, key=key, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    assert producer.flush(120) == 0, "records unacknowledged after 120 s"
    assert not errors, errors[:5]
    assert len(written) == len(updates)
    written.sort()
    return written


def phase_one_updates() -> list[tuple[bytes, bytes | None]]:
    updates: list[tuple[bytes, bytes | None]] = []
    for r in range(ROUNDS):
        for k in range(KEYS):
            if is_deleted(k) and r == DELETE_ROUND:
                updates.append((key_of(k), None))
            elif is_deleted(k) and r > DELETE_ROUND:
                # Deleted keys stay deleted: this slot updates their (live) neighbour.
                updates.append((key_of(k + 1), b"v-%d-%d-n" % (k + 1, r)))
            else:
                updates.append((key_of(k), b"v-%d-%d" % (k, r)))
    return updates


def max_delete_horizon(data_dir: Path, topic: str) -> int:
    """The latest KIP-534 delete horizon stamped on a stored batch (-1 if none)."""
    horizon = -1
    for path in sorted((data_dir / f"{topic}-0").glob("*.log")):
        for batch in iter_batches(path.read_bytes(), check_crcs=True):
            if batch.header.has_delete_horizon:
                horizon = max(horizon, batch.header.base_timestamp)
    return horizon


def test_three_readers_see_the_compacted_log_and_no_deleted_key_after_retention(
        broker_process: Callable[..., Any]) -> None:
    broker = broker_process(CLEANER).start()
    topic = "changelog"
    configs = {"cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES),
               "delete.retention.ms": str(DELETE_RETENTION_MS),
               "min.cleanable.dirty.ratio": "1.0"}
    admin = create_topic(broker.bootstrap_servers, topic, configs)

    updates = phase_one_updates()
    assert len(updates) == 200_000
    written = produce_updates(broker.bootstrap_servers, topic, updates)
    assert [offset for offset, _, _ in written] == list(range(len(updates)))
    written_bytes = log_bytes(broker.data_dir, topic)
    active_base = segment_bases(broker.data_dir, topic)[-1]
    # Every tombstone is in an inactive (cleanable) segment.
    assert max(o for o, _, v in written if v is None) < active_base

    alter_topic(admin, topic, {**configs, "min.cleanable.dirty.ratio": "0.01"})
    cleaned_to = wait_cleaned_to(broker, topic, active_base)
    assert cleaned_to == active_base  # the active segment is never cleaned
    assert log_bytes(broker.data_dir, topic) < written_bytes // 10, \
        f"log {log_bytes(broker.data_dir, topic)} bytes after cleaning, {written_bytes} before"
    # Tombstones are kept until their delete horizon: readers see them (value None).
    check_readers(broker.bootstrap_servers, topic, written,
                  compacted_view(written, cleaned_to, tombstones=True))

    # Past the tombstones' delete horizon, more updates (of live keys) make the log dirty
    # again and the next cleaning drops the tombstones.
    horizon = max_delete_horizon(broker.data_dir, topic)
    assert horizon > 0, "no batch carries a delete horizon after the first cleaning"
    while time.time() * 1000 <= horizon:
        time.sleep(0.05)
    more = [(key_of(k), b"w-%d-%d" % (k, r)) for r in range(10) for k in range(KEYS)
            if not is_deleted(k)]
    written += produce_updates(broker.bootstrap_servers, topic, more)
    assert [offset for offset, _, _ in written] == list(range(len(written)))
    active_base = segment_bases(broker.data_dir, topic)[-1]
    cleaned_to = wait_cleaned_to(broker, topic, active_base)
    expected = compacted_view(written, cleaned_to, tombstones=False)
    deleted = {key_of(k) for k in range(KEYS) if is_deleted(k)}
    assert not [row for row in expected if row[1] in deleted]
    check_readers(broker.bootstrap_servers, topic, written, expected)


# --- 3. idempotent producers during cleaning, across a SIGKILL ----------------------------------


def test_idempotent_producers_keep_producing_while_the_cleaner_cleans(
        broker_process: Callable[..., Any]) -> None:
    from confluent_kafka import Producer

    from samsa.producer.producer import KafkaProducer

    # Every acknowledged batch on disk before its answer, so the SIGKILL loses none.
    broker = broker_process({**CLEANER, "log.flush.interval.messages": 1}).start()
    topic = "idem-changelog"
    create_topic(broker.bootstrap_servers, topic,
                 {"cleanup.policy": "compact", "segment.bytes": "16384",
                  "min.cleanable.dirty.ratio": "0.01"})
    acked: dict[bytes, tuple[int, bytes]] = {}  # value -> (offset, key)
    errors: list[str] = []

    def on_confluent(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(f"confluent-kafka: {err}")
        else:
            acked[msg.value()] = (msg.offset(), msg.key())

    def fatal(err: Any) -> None:  # connection errors while the broker is down are not
        if err.fatal():
            errors.append(f"confluent-kafka fatal error: {err}")

    confluent = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all",
                          "enable.idempotence": True, "linger.ms": 2, "batch.num.messages": 50,
                          "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 200,
                          "retry.backoff.ms": 50, "message.timeout.ms": 120_000,
                          "error_cb": fatal})
    samsa = KafkaProducer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all",
                           "enable.idempotence": True, "linger.ms": 2, "batch.size": 2048,
                           "reconnect.backoff.ms": 50, "retry.backoff.ms": 50,
                           "delivery.timeout.ms": 120_000})
    samsa_pending: list[tuple[bytes, bytes, Any]] = []
    sent = 0

    def send(n: int) -> None:
        nonlocal sent
        for _ in range(n):
            i = sent
            key, value = b"c-%d" % (i % 50), b"c-%08d" % i
            while True:
                try:
                    confluent.produce(topic, value, key=key, on_delivery=on_confluent)
                    break
                except BufferError:
                    confluent.poll(0.01)
            key, value = b"s-%d" % (i % 50), b"s-%08d" % i
            samsa_pending.append((key, value, samsa.send(topic, value, key)))
            sent += 1
        confluent.poll(0)

    def produce_through_rounds(rounds: int) -> None:
        """Produce until the cleaner has finished ``rounds`` more cleanings of the topic."""
        seen = {cleaner_checkpoint(broker.data_dir, topic)}
        deadline = time.monotonic() + 120
        while len(seen) <= rounds:
            assert time.monotonic() < deadline, \
                f"only {len(seen) - 1} cleanings of {topic} while producing {sent} records " \
                f"(is the cleaner running?); broker stderr: {broker.stderr_text()[-3000:]}"
            send(200)
            confluent.poll(0.01)
            seen.add(cleaner_checkpoint(broker.data_dir, topic))
            assert not errors, errors[:5]

    try:
        produce_through_rounds(3)
        # SIGKILL while records are in flight: the restarted broker rebuilds producer state
        # from the cleaned log, where each producer's last batch was kept.
        broker.kill()
        send(500)
        broker.start()
        produce_through_rounds(3)
        assert confluent.flush(120) == 0, "confluent-kafka records unacknowledged after 120 s"
        samsa.flush(120)
    finally:
        samsa.close(10)
    for key, value, future in samsa_pending:
        metadata = future.get(0)  # raises OutOfOrderSequence, UnknownProducerId ...
        acked[value] = (metadata.offset, key)
    assert not errors, errors[:5]
    assert len(acked) == 2 * sent

    end = max(offset for offset, _ in acked.values()) + 1
    rows = read_confluent(broker.bootstrap_servers, topic, end)
    offsets = [offset for offset, _, _ in rows]
    assert offsets == sorted(set(offsets)), "offsets repeat or go back"
    assert len(rows) < len(acked), "nothing was cleaned"
    # Each record read is one acknowledged at that offset ...
    for offset, key, value in rows:
        assert value is not None and acked.get(value) == (offset, key), \
            f"{value!r} read at {offset}, acknowledged at {acked.get(value)}"
    # ... and the latest acknowledged record of every key is there: nothing lost that no later
    # record of its key superseded.
    latest: dict[bytes, tuple[int, bytes]] = {}
    for value, (offset, key) in acked.items():
        if key not in latest or latest[key][0] < offset:
            latest[key] = (offset, value)
    read_at = {offset: value for offset, _, value in rows}
    for key, (offset, value) in latest.items():
        assert read_at.get(offset) == value, f"latest record of {key!r} ({value!r} at {offset}) lost"


# --- 5. the cleaner's memory stays within log.cleaner.dedupe.buffer.size ------------------------

DEDUPE_BUFFER = 2 * 1024 * 1024  # 87,381 map entries of 24 bytes: 78,643 keys per round
MEMORY_KEYS = 400_000  # Kafka's 24-byte entries for all of them: 9.6 MB, 4.6 times the buffer
# Room for what else the broker allocates while cleaning (its read buffer, a batch's records,
# the allocator's slack): about 6 MiB measured here; a map holding every key (9.6 MB as
# Kafka's entries, far more as a Python dict) would not fit under buffer + margin.
MEMORY_MARGIN = 10 * 1024 * 1024


def test_cleaner_memory_stays_within_its_dedupe_buffer(
        broker_process: Callable[..., Any]) -> None:
    from tests.support.process_stats import peak_rss_bytes, reset_peak_rss, rss_bytes

    broker = broker_process({**CLEANER, "log.cleaner.dedupe.buffer.size": DEDUPE_BUFFER}).start()
    topic = "many-keys"
    configs = {"cleanup.policy": "compact", "segment.bytes": str(1024 * 1024),
               "min.cleanable.dirty.ratio": "1.0"}
    admin = create_topic(broker.bootstrap_servers, topic, configs)
    # Every key once, then the first quarter again: several rounds, each cleaning what fits.
    updates = [(b"key-%07d" % k, b"v%d" % k) for k in range(MEMORY_KEYS)]
    updates += [(b"key-%07d" % k, b"w%d" % k) for k in range(MEMORY_KEYS // 4)]
    written = produce_updates(broker.bootstrap_servers, topic, updates)
    before_bytes = log_bytes(broker.data_dir, topic)
    active_base = segment_bases(broker.data_dir, topic)[-1]
    assert active_base > MEMORY_KEYS, "the superseded keys must be in cleanable segments"

    pid = broker.proc.pid
    rss_before = rss_bytes(pid)
    reset_peak_rss(pid)
    alter_topic(admin, topic, {**configs, "min.cleanable.dirty.ratio": "0.01"})
    cleaned_to = wait_cleaned_to(broker, topic, active_base)
    growth = peak_rss_bytes(pid) - rss_before
    assert growth <= DEDUPE_BUFFER + MEMORY_MARGIN, (
        f"the broker's resident memory grew by {growth / 2**20:.1f} MiB while cleaning, more "
        f"than log.cleaner.dedupe.buffer.size ({DEDUPE_BUFFER / 2**20:.0f} MiB) + "
        f"{MEMORY_MARGIN / 2**20:.0f} MiB")
    # It did clean: the superseded first values are gone.
    assert log_bytes(broker.data_dir, topic) < before_bytes
    rows = read_confluent(broker.bootstrap_servers, topic, written[-1][0] + 1)
    assert rows == compacted_view(written, cleaned_to, tombstones=True)
