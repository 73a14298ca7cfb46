"""A quiet local SparkSession bound to loopback, as the pipeline and its tests use it."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def local_session(app_name: str = "samsa-pipeline", master: str | None = None,
                  shuffle_partitions: int = 4) -> SparkSession:
    """Get (or reuse) a local SparkSession: loopback only, no UI, ERROR logging.

    Without SPARK_LOCAL_IP Spark binds to the first non-loopback address and warns; the
    pipeline talks only to 127.0.0.1.  Few shuffle partitions: the data is small (MBs), and
    each partition costs a Python/JVM task per micro-batch.
    """
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Spark's Python workers must run this interpreter (with samsa and pyarrow), not whatever
    # python3 comes first on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    cores = os.cpu_count() or 2
    builder = (SparkSession.builder.appName(app_name)
               .master(master or f"local[{min(cores, 8)}]")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               # Adaptive query execution runs each shuffle stage of a batch query as a Spark
               # job of its own and re-plans between them; with a few MB in 4 partitions and no
               # joins it has nothing to coalesce or switch (streaming queries never use it).
               .config("spark.sql.adaptive.enabled", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true"))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
