"""The DataSource named "samsa": Spark's Kafka source and sink, over Samsa's clients.

Switching a job from Spark's built-in Kafka connector is a change of the format name:
the options, the row schema and the offset JSON are Spark's.  Two differences come from
PySpark, not from us: a Python data source is only offered the save modes append and overwrite
(PySpark itself refuses the default errorifexists and ignore with
UNSUPPORTED_DATA_SOURCE_SAVE_MODE), so batch writes need ``.mode("append")``; and overwrite is
refused here because a topic can only be appended to.  In an editable install, PySpark's
auto-registration cannot see the ``pyspark_samsa`` module (the editable finder hides it from
``pkgutil.iter_modules``): call :func:`samsa.spark.register` or put the repository root on
``PYTHONPATH``.
"""

from __future__ import annotations

from collections.abc import MutableMapping

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from samsa.errors import ConfigError
from samsa.spark.options import parse_sink_options, parse_source_options
from samsa.spark.schema import read_schema

__all__ = ["SamsaDataSource"]


class SamsaDataSource(DataSource):  # type: ignore[misc]
    @classmethod
    def name(cls) -> str:
        return "samsa"

    def __init__(self, options: MutableMapping[str, str]) -> None:
        # Keep Spark's case-insensitive mapping (dict() would lose that); parse per use,
        # because only reader()/streamReader() know whether this is batch or streaming.
        self.options = options

    def _include_headers(self) -> bool:
        return str(self.options.get("includeHeaders", "false")).strip().lower() == "true"

    def schema(self) -> StructType:
        return read_schema(self._include_headers())

    def _check_schema(self, schema: StructType) -> None:
        # Spark only passes a schema other than ours when the user gave one with .schema().
        if schema != read_schema(self._include_headers()):
            raise ConfigError("schema", "the samsa source does not support a user-specified schema; "
                                        "drop .schema(...): the columns are fixed (key, value, topic, "
                                        "partition, offset, timestamp, timestampType[, headers])")

    def reader(self, schema: StructType) -> DataSourceReader:
        from samsa.spark.batch import SamsaBatchReader

        self._check_schema(schema)
        opts = parse_source_options(self.options, streaming=False)
        _check_consumer_config(opts.client)
        return SamsaBatchReader(opts)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from samsa.spark.stream import SamsaStreamReader

        self._check_schema(schema)
        opts = parse_source_options(self.options, streaming=True)
        _check_consumer_config(opts.client)
        return SamsaStreamReader(opts)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from samsa.spark.writer import SamsaWriter, check_sink_schema

        if overwrite:
            raise ConfigError("mode", "save mode 'overwrite' is not supported: Kafka topics can only be "
                                      "appended to; use .mode('append')")
        opts = parse_sink_options(self.options)
        check_sink_schema(schema, opts)
        _check_producer_config(opts.client)
        return SamsaWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from samsa.spark.writer import SamsaStreamWriter, check_sink_schema

        # Every output mode appends to the topic, as with Spark's Kafka sink.
        opts = parse_sink_options(self.options)
        check_sink_schema(schema, opts)
        _check_producer_config(opts.client)
        return SamsaStreamWriter(opts)


def _check_consumer_config(client: dict[str, str] | object) -> None:
    """Unknown or invalid kafka.* settings fail at planning time, naming the setting."""
    from samsa.consumer.config import ConsumerConfig
    from samsa.spark.offsets import consumer_config

    assert isinstance(client, dict) or hasattr(client, "items")
    ConsumerConfig(consumer_config(client, "spark-samsa-check"))  # type: ignore[arg-type]


def _check_producer_config(client: object) -> None:
    from samsa.producer.config import ProducerConfig

    ProducerConfig(dict(client))  # type: ignore[call-overload]
