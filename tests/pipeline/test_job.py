"""The whole pipeline on Spark against an embedded broker, checked against pandas.

The run covers the whole of 2013 (336,776 flights), exactly what ``make run`` does, so the suite
checks the main job's per-carrier figures against a plain pandas aggregation of the same CSV.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from samsa.pipeline import flights
from samsa.pipeline.job import (
    PipelineConfig,
    PipelineError,
    _prepare_output,
    compare,
    run_pipeline,
)

MONTHS = tuple(range(1, 13))  # the whole year


@pytest.fixture(scope="module")
def result(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    work = tmp_path_factory.mktemp("pipeline")
    config = PipelineConfig(output=work / "out", months=MONTHS, progress=False,
                            work_dir=work / "work", archive_max_offsets_per_trigger=5_000)
    return run_pipeline(spark, config, log=lambda line: None)


def test_per_carrier_figures_equal_pandas(result: Any) -> None:
    frame = flights.read_pandas()
    frame = frame[frame["month"].isin(MONTHS)]
    expected = frame.groupby("carrier").agg(flights=("carrier", "size"),
                                            mean_dep_delay=("dep_delay", "mean"))
    got = result.carriers.sort_index()
    assert list(got.index) == list(expected.index)
    assert got["flights"].astype(int).tolist() == expected["flights"].tolist()
    assert got["mean_dep_delay"].tolist() == pytest.approx(expected["mean_dep_delay"].tolist(),
                                                            rel=1e-12)
    assert result.mismatches == [] and result.dropped_late == 0 and result.ok
    assert result.event_time in ("timestamp", "sched_dep")


def test_per_origin_figures_equal_pandas(result: Any) -> None:
    frame = flights.read_pandas()
    frame = frame[frame["month"].isin(MONTHS)]
    expected = frame.groupby("origin")["dep_delay"].agg(["size", "mean", "max"])
    got = result.origins.sort_index()
    assert got["flights"].astype(int).tolist() == expected["size"].tolist()
    assert got["mean_dep_delay"].tolist() == pytest.approx(expected["mean"].tolist(), rel=1e-12)
    assert got["max_dep_delay"].tolist() == expected["max"].tolist()


def test_windows_in_parquet_are_hourly_and_complete(result: Any, spark: Any) -> None:
    windows = spark.read.parquet(str(result.output)).toPandas()
    assert ((windows["window_end"] - windows["window_start"]) == pd.Timedelta(hours=1)).all()
    assert set(windows["dimension"]) == {"carrier", "origin"}
    assert windows["name"].notna().all()  # the end-of-stream markers' window is never emitted
    # every flight is counted once per dimension, and no window appears twice
    for dimension in ("carrier", "origin"):
        part = windows[windows["dimension"] == dimension]
        assert not part.duplicated(["window_start", "name"]).any()
        assert int(part["flights"].sum()) == int(result.reference["flights"].sum())


def test_stages_report_records(result: Any) -> None:
    names = [s.name for s in result.stages]
    assert names == ["load", "produce", "aggregate", "archive", "summary"]
    n = int(result.reference["flights"].sum())
    by_name = {s.name: s for s in result.stages}
    assert by_name["load"].records == by_name["produce"].records == n
    assert by_name["aggregate"].records == n + 4  # plus one end-of-stream marker per partition
    assert all(s.seconds > 0 for s in result.stages)


def test_compare_reports_differences() -> None:
    ref = pd.DataFrame({"flights": [2], "departed": [2], "mean_dep_delay": [1.5],
                        "max_dep_delay": [2.0], "delayed_share": [0.0]}, index=["AA"])
    assert compare(ref.copy(), ref) == []
    off = ref.copy()
    off.loc["AA", "mean_dep_delay"] = 1.6
    assert compare(off, ref) == ["AA mean_dep_delay: pipeline 1.6, pandas 1.5"]


def test_output_directory_of_something_else_is_refused(tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(PipelineError, match="not empty"):
        _prepare_output(tmp_path)
    assert (tmp_path / "precious.txt").exists()
    previous = tmp_path / "previous"
    (previous / "_spark_metadata").mkdir(parents=True)
    _prepare_output(previous)
    assert not previous.exists()
