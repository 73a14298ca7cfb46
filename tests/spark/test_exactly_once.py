"""The sink's exactly-once mode (docs/spark-exactly-once.md): the batch-id skip decision, a
task's transactional write against the samsa broker (a re-run of a committed batch writes
nothing; a newer attempt fences an older one), and streaming queries SIGKILLed at chosen points
and restarted from their checkpoint (tests/spark/eos_job.py), read back with confluent-kafka's
read_committed consumer."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from samsa.broker import Broker
from samsa.consumer.records import OffsetAndMetadata
from samsa.errors import ConfigError
from samsa.spark.exactly_once import (
    TaskScope,
    already_written,
    check_transactional_config,
    write_transactionally,
)
from samsa.spark.options import parse_sink_options

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {"num.partitions": 2, "transaction.state.log.num.partitions": 2,
            "offsets.topic.num.partitions": 2}


def read_values(bootstrap: str, topic: str, wanted: int, *, committed: bool = True,
                partitions: int = 2) -> list[str]:
    """Every value in ``topic`` as confluent-kafka's consumer reads it from the beginning
    (read_committed unless ``committed`` is false): polls until ``wanted`` arrived, then one
    more second to show that nothing else comes."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}",
                         "isolation.level": "read_committed" if committed else "read_uncommitted",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    values: list[str] = []
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + 60
        settle: float | None = None
        while time.monotonic() < deadline and (settle is None or time.monotonic() < settle):
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                values.append(msg.value().decode())
            if len(values) >= wanted and settle is None:
                settle = time.monotonic() + 1.0
    finally:
        consumer.close()
    return values


# --- the skip decision and the options --------------------------------------------------------

def test_a_batch_is_written_unless_the_record_is_past_it() -> None:
    # The record is the next batch id to write (last committed batch + 1).
    assert not already_written(None, 0)
    assert not already_written(OffsetAndMetadata(3), 3)  # batch 2 committed; 3 is new
    assert already_written(OffsetAndMetadata(4), 3)  # batch 3 committed: its re-run skips
    assert already_written(OffsetAndMetadata(9), 3)
    assert not already_written(OffsetAndMetadata(3), 7)


def test_transactional_options() -> None:
    base = {"kafka.bootstrap.servers": "h:1"}
    opts = parse_sink_options({**base, "topic": "out", "Transactional": "true"})
    assert (opts.transactional, opts.transactional_id_prefix, opts.progress_topic) == \
        (True, "spark-samsa-sink", "out")
    opts = parse_sink_options({**base, "transactional": "true", "transactionalIdPrefix": "app1",
                               "transactionalProgressTopic": "progress"})
    assert (opts.transactional_id_prefix, opts.progress_topic) == ("app1", "progress")
    assert not parse_sink_options({**base, "topic": "out"}).transactional
    with pytest.raises(ConfigError, match="transactionalProgressTopic.*is required"):
        parse_sink_options({**base, "transactional": "true"})  # rows name their topic
    with pytest.raises(ConfigError, match="derives one per task"):
        parse_sink_options({**base, "topic": "out", "kafka.transactional.id": "mine"})
    with pytest.raises(ConfigError, match="must be true or false"):
        parse_sink_options({**base, "topic": "out", "transactional": "yes"})
    with pytest.raises(ConfigError, match="kafka.enable.idempotence.*transactional=true"):
        check_transactional_config(parse_sink_options(
            {**base, "topic": "out", "transactional": "true", "kafka.enable.idempotence": "false"}))


# --- one task's transactional write against the broker ----------------------------------------

def _rows(values: list[str]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"value": pa.array(values, pa.string())})


def test_a_rerun_of_a_committed_batch_writes_nothing(broker: Broker, new_topic: Callable[..., str]) -> None:
    topic = new_topic(2)
    opts = parse_sink_options({"kafka.bootstrap.servers": broker.bootstrap_servers, "topic": topic,
                               "transactional": "true", "transactionalIdPrefix": f"t-{topic}"})
    batch3 = [f"b3-{i}" for i in range(10)]
    scope = TaskScope("query", partition_id=0, batch_id=3)
    assert write_transactionally(opts, iter([_rows(batch3[:4]), _rows([]), _rows(batch3[4:])]),
                                 scope) == (10, False)
    # A second attempt of batch 3 (a retry, or the re-run after the driver died before the
    # checkpoint) finds batch 3 recorded and writes nothing; batch 4 is written.
    assert write_transactionally(opts, iter([_rows(batch3)]), scope) == (0, True)
    assert write_transactionally(opts, iter([_rows(["b4"])]), TaskScope("query", 0, batch_id=4)) == (1, False)
    # Another partition of batch 3 has a record of its own.
    assert write_transactionally(opts, iter([_rows(["p1"])]), TaskScope("query", 1, batch_id=3)) == (1, False)
    # An empty partition opens no transaction and records nothing.
    assert write_transactionally(opts, iter([_rows([])]), TaskScope("query", 2, batch_id=3)) == (0, False)
    got = read_values(broker.bootstrap_servers, topic, 12)
    assert sorted(got) == sorted(batch3 + ["b4", "p1"])


def test_a_newer_attempt_fences_an_older_one(broker: Broker, new_topic: Callable[..., str]) -> None:
    topic = new_topic(2)
    opts = parse_sink_options({"kafka.bootstrap.servers": broker.bootstrap_servers, "topic": topic,
                               "transactional": "true", "transactionalIdPrefix": f"t-{topic}"})
    scope = TaskScope("query", partition_id=0, batch_id=0)
    newer: list[tuple[int, bool]] = []

    def zombie_step(step: str) -> None:
        # The older attempt has its rows in the log, its transaction open: the newer attempt
        # of the same partition and batch starts now, fences it and aborts its transaction.
        if step == "sent":
            newer.append(write_transactionally(opts, iter([_rows(["new"] * 3)]), scope))

    with pytest.raises(Exception, match="(?i)fenc|epoch"):
        write_transactionally(opts, iter([_rows(["old"] * 5)]), scope, zombie_step)
    assert newer == [(3, False)]
    assert sorted(read_values(broker.bootstrap_servers, topic, 3)) == ["new"] * 3
    # The old attempt's rows are in the log, aborted: only read_uncommitted sees them.
    assert Counter(read_values(broker.bootstrap_servers, topic, 8, committed=False)) == \
        {"old": 5, "new": 3}
