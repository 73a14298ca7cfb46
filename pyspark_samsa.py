"""Auto-registration hook for PySpark: makes ``format("samsa")`` work without register().

PySpark imports every top-level ``pyspark_*`` module on the Python path and registers its
``DefaultSource`` under ``DefaultSource.name()``.
"""

from samsa.spark.source import SamsaDataSource


class DefaultSource(SamsaDataSource):
    """The "samsa" data source (see samsa.spark)."""


__all__ = ["DefaultSource"]
