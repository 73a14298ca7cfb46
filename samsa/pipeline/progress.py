"""Progress bars for long pipeline stages, fed by a polling thread.

Spark runs the work in the JVM and in worker processes, so the driver cannot count records as
they pass; instead a thread samples an external measure (a topic's end offsets, a streaming
query's committed source offsets) a few times a second and moves a tqdm bar.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

Sample = Callable[[], tuple[int, str]]  # -> (records done, a short status for the bar)


@contextmanager
def polled_bar(desc: str, total: int, sample: Sample, enabled: bool = True,
               interval: float = 0.5) -> Iterator[tqdm]:
    """A tqdm bar moved by ``sample()`` every ``interval`` seconds until the block ends."""
    bar = tqdm(total=total, desc=desc, unit="rec", unit_scale=True, disable=not enabled,
               mininterval=interval, dynamic_ncols=True, leave=True)
    stop = threading.Event()

    def update() -> None:
        try:
            done, status = sample()
        except Exception as exc:  # noqa: BLE001 - a failed sample must not kill the stage it watches
            done, status = bar.n, f"(progress unavailable: {type(exc).__name__})"
        bar.update(max(0, min(done, total) - bar.n))
        if status:
            bar.set_postfix_str(status, refresh=False)

    def loop() -> None:
        while not stop.wait(interval):
            update()

    thread = threading.Thread(target=loop, name=f"progress-{desc}", daemon=True)
    if enabled:
        thread.start()
    try:
        yield bar
        if enabled:
            stop.set()
            thread.join()
            update()
    finally:
        stop.set()
        bar.close()


def spark_tasks(spark: SparkSession) -> str:
    """``tasks done/total`` of the stages running now, from Spark's status tracker."""
    tracker = spark.sparkContext.statusTracker()
    done = total = 0
    for stage_id in tracker.getActiveStageIds():
        info = tracker.getStageInfo(stage_id)
        if info is not None:
            done += info.numCompletedTasks
            total += info.numTasks
    return f"tasks {done}/{total}" if total else ""


def query_offsets(query: StreamingQuery) -> dict[str, dict[str, int]] | None:
    """The end offsets of the query's last finished micro-batch (Spark's Kafka JSON shape)."""
    import json

    progress: Any = query.lastProgress
    if not progress:
        return None
    sources = progress["sources"]
    if not sources:
        return None
    end = sources[0]["endOffset"]
    return json.loads(end) if isinstance(end, str) else end


def records_between(start: dict[int, int], end: dict[str, dict[str, int]] | None,
                    topic: str) -> int:
    """Records from ``start`` ({partition: offset}) up to the offsets ``end`` of ``topic``."""
    if not end or topic not in end:
        return 0
    return sum(max(0, int(off) - start.get(int(p), 0)) for p, off in end[topic].items())
