"""The pipeline's DataFrame transformations, kept apart from I/O so tests can run them on any source.

flights (CSV rows) --to_flight_records--> topic ``flights`` (key carrier, value JSON,
timestamp = scheduled departure) --parse_flights/delay_stats--> per-hour windows per carrier
and per origin --to_stat_records--> topic ``flight-delays`` --parse_stats--> Parquet
--totals--> per-carrier / per-origin figures for the whole year.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.pipeline.flights import COLUMNS, spark_schema

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

FLIGHTS_TOPIC = "flights"
DELAYS_TOPIC = "flight-delays"
DIMENSIONS = ("carrier", "origin")
DELAYED_MINUTES = 15  # a departure more than this late counts as delayed (FAA's definition)
WINDOW = "1 hour"
END_OF_STREAM_KEY = "__end_of_stream__"
JSON_OPTIONS = {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ssXXX"}  # ISO 8601, UTC as "Z"


def to_flight_records(flights: DataFrame, partitions: int) -> DataFrame:
    """Rows for the samsa sink: key carrier, value the CSV row as JSON, timestamp the scheduled
    departure, and an explicit partition.

    Rows are hash-partitioned by carrier into ``partitions`` Spark partitions, sorted by time
    within each, and each Spark partition goes to the topic partition of the same number. So a
    carrier's flights all land in one topic partition (as keyed records do), and every topic
    partition is written by one task in event-time order, which the watermark relies on.
    """
    from pyspark.sql import functions as F

    value = F.to_json(F.struct(*[name for name, _ in COLUMNS], "sched_dep"),
                      JSON_OPTIONS)
    return (flights.repartition(partitions, "carrier")
            .sortWithinPartitions("sched_dep")
            .select(F.col("carrier").alias("key"), value.alias("value"),
                    F.col("sched_dep").alias("timestamp"),
                    F.spark_partition_id().alias("partition")))


def end_of_stream_records(spark: SparkSession, partitions: int, last_event_s: int,
                          watermark_s: int) -> DataFrame:
    """One marker record per topic partition, timed so the watermark passes every real window.

    A streaming aggregation in append mode emits a window only once the watermark (the latest
    event time seen minus the allowed lateness) has passed its end.  A bounded replay has no
    later events, so its last windows would stay in state; these markers carry a time just far
    enough ahead.  They parse to a null carrier and origin, and their own window ends after
    the watermark they cause, so it is never emitted.  Times are epoch seconds (UTC).
    """
    from pyspark.sql import functions as F

    last_window_end = (last_event_s // 3600 + 1) * 3600
    at = last_window_end + watermark_s + 60
    rows = [(END_OF_STREAM_KEY, at, p) for p in range(partitions)]
    markers = spark.createDataFrame(rows, "key string, at long, partition int") \
        .withColumn("timestamp", F.timestamp_seconds("at"))
    value = F.to_json(F.struct(F.lit(True).alias("end_of_stream"),
                               F.col("timestamp").alias("sched_dep")), JSON_OPTIONS)
    return markers.select("key", value.alias("value"), "timestamp", "partition")


def flight_value_schema() -> StructType:
    """The JSON value of a ``flights`` record: the CSV columns plus sched_dep."""
    from pyspark.sql.types import StructField, TimestampType

    return spark_schema().add(StructField("sched_dep", TimestampType()))


def parse_flights(records: DataFrame, event_time: str = "timestamp") -> DataFrame:
    """Source rows of topic ``flights`` -> event_time, carrier, origin, dep_delay.

    ``event_time`` names where the event time comes from: ``timestamp``, the record's own
    timestamp (written from sched_dep by the producing stage), or ``sched_dep`` in the value.
    """
    from pyspark.sql import functions as F

    flight = F.from_json(F.col("value").cast("string"), flight_value_schema(),
                         JSON_OPTIONS)
    when = F.col("timestamp") if event_time == "timestamp" else F.col("f.sched_dep")
    return (records.select(F.col("timestamp"), flight.alias("f"))
            .select(when.alias("event_time"), "f.carrier", "f.origin", "f.dep_delay"))


def _stat_columns() -> list[Column]:
    from pyspark.sql import functions as F

    delay = F.col("dep_delay")
    return [
        F.count(F.lit(1)).alias("flights"),
        F.count(delay).alias("departed"),
        F.sum(delay).alias("dep_delay_sum"),
        F.avg(delay).alias("mean_dep_delay"),
        F.max(delay).alias("max_dep_delay"),
        F.count_if(delay > DELAYED_MINUTES).alias("delayed"),
    ]


def delay_stats(flights: DataFrame, watermark: str = "1 hour", window: str = WINDOW) -> DataFrame:
    """Departure-delay statistics per one-hour event-time window, per carrier and per origin.

    One aggregation, not two: every flight is exploded into a (``carrier``, code) and an
    (``origin``, code) row, grouped by (window, dimension, name).  Columns: window_start,
    window_end, dimension, name, flights, departed (flights with a dep_delay, i.e. not
    cancelled), dep_delay_sum, mean_dep_delay, max_dep_delay, delayed (> 15 min) and
    delayed_share (delayed / departed).  dep_delay_sum and departed make exact totals possible.
    """
    from pyspark.sql import functions as F

    dims = F.array(*[F.struct(F.lit(d).alias("dimension"), F.col(d).alias("name"))
                     for d in DIMENSIONS])
    exploded = (flights.withWatermark("event_time", watermark)
                .select("event_time", "dep_delay", F.explode(dims).alias("d"))
                .select("event_time", "dep_delay", "d.dimension", "d.name"))
    stats = (exploded.groupBy(F.window("event_time", window), "dimension", "name")
             .agg(*_stat_columns()))
    return stats.select(
        F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
        "dimension", "name", "flights", "departed", "dep_delay_sum", "mean_dep_delay",
        "max_dep_delay", "delayed",
        F.try_divide("delayed", "departed").alias("delayed_share"))


def stats_schema() -> StructType:
    from pyspark.sql.types import (
        DoubleType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    return StructType([
        StructField("window_start", TimestampType()), StructField("window_end", TimestampType()),
        StructField("dimension", StringType()), StructField("name", StringType()),
        StructField("flights", LongType()), StructField("departed", LongType()),
        StructField("dep_delay_sum", DoubleType()), StructField("mean_dep_delay", DoubleType()),
        StructField("max_dep_delay", DoubleType()), StructField("delayed", LongType()),
        StructField("delayed_share", DoubleType()),
    ])


def to_stat_records(stats: DataFrame) -> DataFrame:
    """Rows for the samsa sink: key ``dimension:name``, value the statistics as JSON."""
    from pyspark.sql import functions as F

    return stats.select(F.concat_ws(":", "dimension", "name").alias("key"),
                        F.to_json(F.struct(*stats.columns)).alias("value"))


def parse_stats(records: DataFrame) -> DataFrame:
    """Source rows of topic ``flight-delays`` -> the statistics columns."""
    from pyspark.sql import functions as F

    stat = F.from_json(F.col("value").cast("string"), stats_schema(),
                       {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"})
    return records.select(stat.alias("s")).select("s.*")


def totals(stats: DataFrame, *dimensions: str) -> DataFrame:
    """Whole-period figures for dimensions from the hourly windows (sums, not means of means).

    Columns: name, flights, departed, mean_dep_delay, max_dep_delay, delayed_share; with more
    than one dimension, a leading ``dimension`` column too (rows ordered by it, then name).
    """
    from pyspark.sql import functions as F

    keys = ["dimension", "name"] if len(dimensions) > 1 else ["name"]
    return (stats.filter(F.col("dimension").isin(list(dimensions))).groupBy(*keys)
            .agg(F.sum("flights").alias("flights"), F.sum("departed").alias("departed"),
                 F.try_divide(F.sum("dep_delay_sum"), F.sum("departed")).alias("mean_dep_delay"),
                 F.max("max_dep_delay").alias("max_dep_delay"),
                 F.try_divide(F.sum("delayed"), F.sum("departed")).alias("delayed_share"))
            .orderBy(*keys))
