"""Batch reader: offsets resolved once on the driver, one input partition per offset range."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from samsa.errors import ConfigError
from samsa.spark.fetch import read_range
from samsa.spark.offsets import OffsetRange, OffsetResolver, split_ranges
from samsa.spark.options import SourceOptions, source_group_ids

__all__ = ["SamsaBatchReader"]


class SamsaBatchReader(DataSourceReader):  # type: ignore[misc]
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        # Made once here, so executors get the same ids in their pickled copy.
        self.driver_group_id, self.executor_group_id = source_group_ids(options)

    def partitions(self) -> list[InputPartition]:
        opts = self.options
        assert opts.ending is not None
        resolver = OffsetResolver(opts.client, self.driver_group_id)
        try:
            parts = resolver.partitions(opts.subscription)
            starts = resolver.resolve(opts.starting, parts, opts, is_start=True)
            ends = resolver.resolve(opts.ending, parts, opts, is_start=False)
        finally:
            resolver.close()
        ranges = []
        for tp in parts:
            start, end = starts[tp], ends[tp]
            if end < start:
                raise ConfigError(opts.ending.option, (
                    f"the end offset {end} of {tp} is before its start offset {start} "
                    f"({opts.starting.option}); check the offset range options"))
            ranges.append(OffsetRange(tp.topic, tp.partition, start, end))
        split = split_ranges(ranges, opts.min_partitions, opts.max_records_per_partition)
        # Spark needs at least one partition to plan a scan; an empty range reads nothing.
        return list(split) or [OffsetRange("", 0, 0, 0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, OffsetRange)
        opts = self.options
        yield from read_range(partition, opts.client, opts.include_headers, opts.fail_on_data_loss,
                              opts.poll_timeout_ms, self.executor_group_id)
