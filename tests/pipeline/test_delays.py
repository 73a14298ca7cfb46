"""The pipeline's transformations on small static DataFrames (no broker)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from samsa.pipeline import delays

UTC = dt.UTC


def _flight_rows(spark: Any, rows: list[tuple[str, str, float | None, str]]) -> Any:
    """(carrier, origin, dep_delay, sched_dep ISO) -> source-shaped rows (value JSON, timestamp)."""
    from pyspark.sql import functions as F

    records = [(json.dumps({"carrier": c, "origin": o, "dep_delay": d, "sched_dep": t}),
                dt.datetime.fromisoformat(t)) for c, o, d, t in rows]
    return spark.createDataFrame(records, "value string, timestamp timestamp") \
        .withColumn("value", F.col("value").cast("binary"))


def test_delay_stats_per_carrier_and_origin_per_hour(spark: Any) -> None:
    source = _flight_rows(spark, [
        ("AA", "JFK", 10.0, "2013-01-01T10:15:00Z"),
        ("AA", "JFK", 30.0, "2013-01-01T10:59:00Z"),
        ("AA", "LGA", None, "2013-01-01T10:30:00Z"),  # cancelled: counted, no delay
        ("AA", "JFK", 0.0, "2013-01-01T11:00:00Z"),
    ])
    for event_time in ("timestamp", "sched_dep"):
        stats = delays.delay_stats(delays.parse_flights(source, event_time)).collect()
        got = {(r.dimension, r.name, r.window_start.hour): r for r in stats}
        assert set(got) == {("carrier", "AA", 10), ("carrier", "AA", 11), ("origin", "JFK", 10),
                            ("origin", "LGA", 10), ("origin", "JFK", 11)}
        aa = got[("carrier", "AA", 10)]
        assert (aa.flights, aa.departed, aa.dep_delay_sum, aa.mean_dep_delay, aa.max_dep_delay,
                aa.delayed, aa.delayed_share) == (3, 2, 40.0, 20.0, 30.0, 1, 0.5)
        lga = got[("origin", "LGA", 10)]
        assert (lga.flights, lga.departed, lga.delayed_share) == (1, 0, None)


def test_stats_round_trip_through_json(spark: Any) -> None:
    source = _flight_rows(spark, [("UA", "EWR", 20.0, "2013-06-01T12:00:00Z")])
    stats = delays.delay_stats(delays.parse_flights(source))
    back = delays.parse_stats(delays.to_stat_records(stats)).collect()
    assert sorted((r.dimension, r.name, r.flights, r.mean_dep_delay) for r in back) == [
        ("carrier", "UA", 1, 20.0), ("origin", "EWR", 1, 20.0)]


def test_end_of_stream_markers_pass_the_last_window(spark: Any) -> None:
    last = int(dt.datetime(2013, 12, 31, 23, 59, tzinfo=UTC).timestamp())
    markers = delays.end_of_stream_records(spark, 3, last, watermark_s=3600).collect()
    assert [m.partition for m in markers] == [0, 1, 2]
    value = json.loads(markers[0].value)
    at = dt.datetime.fromisoformat(value["sched_dep"])
    # the watermark (marker time - 1 h) reaches past the end of the last window (2014-01-01 00:00)
    assert at - dt.timedelta(hours=1) > dt.datetime(2014, 1, 1, tzinfo=UTC)
    assert value["end_of_stream"] is True and markers[0].key == delays.END_OF_STREAM_KEY
