"""A streaming query for the exactly-once crash tests (test_exactly_once.py), run as a script
so the test can SIGKILL it: a deterministic Python source of the numbers 0..total-1 (perBatch
per micro-batch, in two Spark partitions) written by the samsa sink, with kill points.

    eos_job.py BOOTSTRAP TOPIC CHECKPOINT STATE_DIR TOTAL PER_BATCH [transactional]

Environment: EOS_KILL=<point>:<batch id> with point ``mid-write`` (partition 1's task, its
rows acknowledged in its open transaction, once partition 0 of that batch has committed) or
``driver-commit`` (the stream writer's commit() on the driver: every task done, the checkpoint
not yet told).  The hook writes STATE_DIR/killed, then SIGKILLs the driver's process group
(the test starts this script in a new session) and its own (PySpark's daemon puts its workers
in a group of their own).  Every commit() appends the batch's commit messages to
STATE_DIR/commits.jsonl.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from samsa.spark.exactly_once import TaskScope
from samsa.spark.source import SamsaDataSource
from samsa.spark.writer import SamsaCommitMessage, SamsaStreamWriter

HOST = "127.0.0.1"


class Range(InputPartition):  # type: ignore[misc]
    def __init__(self, start: int, end: int) -> None:
        self.start, self.end = start, end


class NumbersReader(DataSourceStreamReader):  # type: ignore[misc]
    """Batch [a, b) is split into [a, m) and [m, b): the same partitions on every re-run."""

    def __init__(self, total: int, per_batch: int) -> None:
        self.total, self.per_batch = total, per_batch

    def initialOffset(self) -> dict[str, int]:
        return {"n": 0}

    def latestOffset(self, start: dict[str, int], limit: Any) -> dict[str, int]:
        return {"n": min(start["n"] + self.per_batch, self.total)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[Range]:
        middle = (start["n"] + end["n"]) // 2
        return [Range(start["n"], middle), Range(middle, end["n"])]

    def read(self, partition: Range) -> Iterator[tuple[str]]:
        for i in range(partition.start, partition.end):
            yield (str(i),)

    def commit(self, end: dict[str, int]) -> None:
        pass


class Numbers(DataSource):  # type: ignore[misc]
    @classmethod
    def name(cls) -> str:
        return "eos_numbers"

    def schema(self) -> str:
        return "value string"

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return NumbersReader(int(self.options["total"]), int(self.options["perBatch"]))


def _kill_point() -> tuple[str, int] | None:
    raw = os.environ.get("EOS_KILL")
    if not raw:
        return None
    point, batch = raw.split(":")
    return point, int(batch)


def _die(state: Path, what: str) -> None:
    (state / "killed").write_text(what)
    os.killpg(int(os.environ["EOS_DRIVER_PGID"]), signal.SIGKILL)
    os.killpg(os.getpgid(0), signal.SIGKILL)


class KillingStreamWriter(SamsaStreamWriter):
    def __init__(self, options: Any, state: str) -> None:
        super().__init__(options)
        self.state = state

    def transaction_step(self, step: str, scope: TaskScope) -> None:
        state = Path(self.state)
        if step == "committed":
            (state / f"committed-{scope.batch_id}-{scope.partition_id}").touch()
        if step == "sent" and _kill_point() == ("mid-write", scope.batch_id) and scope.partition_id == 1:
            other = state / f"committed-{scope.batch_id}-0"
            deadline = time.monotonic() + 120  # a bound, not an expectation: then die anyway
            while not other.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            _die(state, f"mid-write {scope.batch_id}")

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        state = Path(self.state)
        done = [(m.partition_id, m.records, m.skipped) for m in messages if isinstance(m, SamsaCommitMessage)]
        with open(state / "commits.jsonl", "a") as f:
            f.write(json.dumps({"batch": batchId, "tasks": sorted(done)}) + "\n")
        super().commit(messages, batchId)
        if _kill_point() == ("driver-commit", batchId):
            _die(state, f"driver-commit {batchId}")


class KillingSamsa(SamsaDataSource):
    @classmethod
    def name(cls) -> str:
        return "eos_samsa"

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        writer = super().streamWriter(schema, overwrite)
        return KillingStreamWriter(writer.options, self.options["eosState"])


def main(bootstrap: str, topic: str, checkpoint: str, state: str, total: str, per_batch: str,
         *mode: str) -> None:
    os.environ["EOS_DRIVER_PGID"] = str(os.getpgid(0))  # inherited by the JVM and its workers
    os.environ["SPARK_LOCAL_IP"] = HOST
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (SparkSession.builder.master("local[2]").appName("samsa-eos-job")
             .config("spark.driver.host", HOST).config("spark.driver.bindAddress", HOST)
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(Numbers)
    spark.dataSource.register(KillingSamsa)
    writer = (spark.readStream.format("eos_numbers").option("total", total).option("perBatch", per_batch)
              .load().writeStream.format("eos_samsa")
              .option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
              .option("eosState", state).option("checkpointLocation", checkpoint))
    if "transactional" in mode:
        writer = writer.option("transactional", "true").option("transactionalIdPrefix", f"eos-{topic}")
    query = writer.start()
    query.processAllAvailable()
    query.stop()
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
