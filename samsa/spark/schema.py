"""The fixed row schema of the source, as Spark's Kafka source defines it, and its Arrow twin.

Built in code, not from DDL strings: ``StructType.fromDDL`` needs a live JVM, and these are
also built in executor workers.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["HEADERS_TYPE", "arrow_schema", "read_schema"]

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()),
                                     StructField("value", BinaryType())]))


def read_schema(include_headers: bool = False) -> StructType:
    """key, value, topic, partition, offset, timestamp, timestampType [, headers]."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


@cache
def arrow_schema(include_headers: bool = False) -> pa.Schema:
    """The Arrow schema read() batches must match exactly (timestamps in UTC microseconds)."""
    # pyarrow is imported here, not at module level: Spark's planner processes
    # (create_data_source) import this module for read_schema() alone.
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(read_schema(include_headers), timezone="UTC")
