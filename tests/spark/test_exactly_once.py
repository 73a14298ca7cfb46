"""The sink's exactly-once mode (docs/spark-exactly-once.md): the batch-id skip decision, a
task's transactional write against the samsa broker (a re-run of a committed batch writes
nothing; a newer attempt fences an older one), and streaming queries SIGKILLed at chosen points
and restarted from their checkpoint (tests/spark/eos_job.py), read back with confluent-kafka's
read_committed consumer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
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
from tests.support.confluent_reads import read_values


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {"num.partitions": 2, "transaction.state.log.num.partitions": 2,
            "offsets.topic.num.partitions": 2}


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


# --- streaming queries killed and restarted ----------------------------------------------------

JOB = Path(__file__).with_name("eos_job.py")
TOTAL, PER_BATCH = 100, 20  # five micro-batches of two 10-row partitions


def run_job(bootstrap: str, topic: str, tmp: Path, *, kill: str | None = None,
            transactional: bool) -> None:
    """One run of the query from tmp's checkpoint; with ``kill`` it must die at that point."""
    state = tmp / "state"
    state.mkdir(exist_ok=True)
    (state / "killed").unlink(missing_ok=True)
    env = {**os.environ, "EOS_KILL": kill or ""}
    args = [sys.executable, str(JOB), bootstrap, topic, str(tmp / "checkpoint"), str(state),
            str(TOTAL), str(PER_BATCH)] + (["transactional"] if transactional else [])
    # A session of its own: the kill hook SIGKILLs this process group (driver and JVM).
    proc = subprocess.run(args, check=False, env=env, cwd=tmp, capture_output=True, text=True,
                          start_new_session=True, timeout=600)
    if kill is None:
        assert proc.returncode == 0, f"the query failed:\n{proc.stderr[-6000:]}"
    else:
        assert proc.returncode == -signal.SIGKILL, \
            f"the query was to be killed at {kill}, exit code {proc.returncode}:\n{proc.stderr[-6000:]}"
        assert (state / "killed").read_text() == kill.replace(":", " ")


def commits(tmp: Path) -> list[dict[str, Any]]:
    lines = (tmp / "state" / "commits.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_a_query_killed_mid_write_and_after_commit_writes_each_row_once(
        broker: Broker, new_topic: Callable[..., str], tmp_path: Path) -> None:
    topic = new_topic(2)
    bootstrap = broker.bootstrap_servers
    # Batch 1: partition 0 committed, partition 1's rows sent in its open transaction.
    run_job(bootstrap, topic, tmp_path, kill="mid-write:1", transactional=True)
    # Batch 1 re-run (partition 0 skips, partition 1's open transaction is aborted and its rows
    # written again), batch 2 committed by both tasks, the driver killed before the checkpoint.
    run_job(bootstrap, topic, tmp_path, kill="driver-commit:2", transactional=True)
    # Batch 2 re-run: both partitions skip; batches 3 and 4.
    run_job(bootstrap, topic, tmp_path, transactional=True)
    got = read_values(bootstrap, topic, TOTAL)
    assert Counter(got) == {str(i): 1 for i in range(TOTAL)}
    # The re-runs did skip what was committed, and partition 1's first try of batch 1 is in
    # the log, aborted (only read_uncommitted sees it).
    by_batch: dict[int, list[list[Any]]] = {}
    for c in commits(tmp_path):
        by_batch.setdefault(c["batch"], []).append(c["tasks"])
    assert by_batch[1] == [[[0, 0, True], [1, 10, False]]]
    assert by_batch[2] == [[[0, 10, False], [1, 10, False]], [[0, 0, True], [1, 0, True]]]
    assert len(read_values(bootstrap, topic, TOTAL + 10, committed=False)) == TOTAL + 10


def test_without_transactions_the_same_kill_duplicates_the_batch(
        broker: Broker, new_topic: Callable[..., str], tmp_path: Path) -> None:
    # Shows that the test above can fail: the at-least-once sink re-writes the re-run batch.
    topic = new_topic(2)
    bootstrap = broker.bootstrap_servers
    run_job(bootstrap, topic, tmp_path, kill="driver-commit:1", transactional=False)
    run_job(bootstrap, topic, tmp_path, transactional=False)
    got = Counter(read_values(bootstrap, topic, TOTAL + PER_BATCH))
    assert {v for v, n in got.items() if n > 1} == {str(i) for i in range(PER_BATCH, 2 * PER_BATCH)}
    assert sum(got.values()) == TOTAL + PER_BATCH


def test_a_batch_write_commits_one_transaction_per_task(
        spark: Any, broker: Broker, new_topic: Callable[..., str]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    topic = new_topic(2)
    rows = [(f"v{i}", i % 2) for i in range(20)]
    df = spark.createDataFrame(rows, "value string, partition int").repartition(3)
    (df.write.format("samsa").option("kafka.bootstrap.servers", broker.bootstrap_servers)
     .option("topic", topic).option("transactional", "true").mode("append").save())
    assert sorted(read_values(broker.bootstrap_servers, topic, 20)) == sorted(v for v, _ in rows)
    # Each task's transaction ended with a commit marker, which takes an offset of its own.
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": f"wm-{topic}"})
    try:
        for p in (0, 1):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            assert 10 < high - low <= 10 + 3
    finally:
        consumer.close()
