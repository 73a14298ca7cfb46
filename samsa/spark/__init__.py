"""PySpark data source "samsa": Spark's Kafka source and sink options, over Samsa's clients.

``spark.read.format("samsa")`` / ``readStream`` / ``write`` / ``writeStream`` with the
options of Spark's Kafka connector (``kafka.bootstrap.servers``, ``subscribe``,
``startingOffsets``, ...).  The ``pyspark_samsa`` module registers it automatically where it
is on the Python path; :func:`register` does it explicitly.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SamsaDataSource", "register"]


def register(spark: Any) -> None:
    """Register the "samsa" data source with this SparkSession."""
    from samsa.spark.source import SamsaDataSource

    spark.dataSource.register(SamsaDataSource)


def __getattr__(name: str) -> object:
    # Lazy: importing samsa.spark must not import pyspark until it is used.
    if name == "SamsaDataSource":
        from samsa.spark.source import SamsaDataSource

        return SamsaDataSource
    raise AttributeError(f"module 'samsa.spark' has no attribute {name!r}")
