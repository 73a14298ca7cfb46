"""Produce v0-v2 with magic 0/1 message sets: validate and rebuild as one v2 batch.

A Kafka 3.x broker always writes the v2 format (KIP-724: with inter.broker.protocol.version
3.0+ the topic's message.format.version is ignored), so every legacy append is converted, as
``LogValidator`` does (``convertAndAssignOffsetsNonCompressed`` for uncompressed input and
target, ``validateMessagesAndAssignOffsetsCompressed`` + ``buildRecordsAndAssignOffsets``
otherwise):

* the result is one v2 batch (base offset 0 here; the log assigns offsets), no producer id,
  epoch or sequence, not transactional, records with their timestamps (v0: -1) and keys and
  values, no headers;
* codec: the topic's ``compression.type``, or the source's when that is ``producer`` (Kafka's
  ``BrokerCompressionType.targetCompression``), at the topic's ``compression.<codec>.level``;
  compressed input must be a single wrapper;
* records are checked as Kafka's ``validateRecord`` does: inner messages of the wrapper's magic
  and uncompressed, keys on compacted topics, CreateTime timestamps within
  message.timestamp.before/after.max.ms, no producer-set LogAppendTime.  Any record error
  rejects the whole set: INVALID_TIMESTAMP if one is a timestamp error, else INVALID_RECORD.

The log then stamps offsets, the leader epoch and LogAppendTime as for any v2 batch.
"""

from __future__ import annotations

from samsa.broker.log.config import LogConfig
from samsa.errors import InvalidRecordError, InvalidTimestampError
from samsa.records import Compression, RecordBatchBuilder, TimestampType
from samsa.records.conversion import LegacyBatch, LegacyRecord, read_legacy_produce

__all__ = ["target_compression", "up_convert"]

_CODECS = {"uncompressed": Compression.NONE, "none": Compression.NONE,
           "gzip": Compression.GZIP, "snappy": Compression.SNAPPY, "lz4": Compression.LZ4,
           "zstd": Compression.ZSTD}
_NO_LIMIT = 2**31 - 1


def target_compression(compression_type: str | None, source: Compression) -> Compression:
    """BrokerCompressionType.targetCompression: the topic's codec unless it is ``producer``."""
    return _CODECS.get((compression_type or "producer").lower(), source)


def _record_error(batch: LegacyBatch, record: LegacyRecord, index: int, config: LogConfig,
                  source: Compression, now_ms: int) -> tuple[bool, str] | None:
    """(is a timestamp error, message) for a record Kafka's validateRecord rejects, else None.

    (validateRecord's inner-magic check is done while reading: ``read_legacy_produce`` rejects a
    wrapper whose inner messages have another magic, and an uncompressed entry is its own batch.)"""
    if source != Compression.NONE and record.compressed:
        return False, (f"record {index}: compressed outer record should not have an inner "
                       "record with a compression attribute set")
    if "compact" in config.cleanup_policy.split(",") and record.key is None:
        return False, f"record {index}: compacted topic cannot accept message without key"
    if not config.log_append_time and record.timestamp != -1:
        ts = record.timestamp
        if now_ms - ts > config.timestamp_before_max_ms or \
                ts - now_ms > config.timestamp_after_max_ms:
            return True, (f"record {index}: timestamp {ts} of message with offset "
                          f"{record.offset} is out of range; it must be within "
                          f"[{now_ms - config.timestamp_before_max_ms}, "
                          f"{now_ms + config.timestamp_after_max_ms}]")
    elif batch.timestamp_type == TimestampType.LOG_APPEND_TIME:
        return True, (f"record {index}: invalid timestamp type in message; producers must "
                      "not set the timestamp type to LogAppendTime")
    return None


def _raise_record_errors(errors: list[tuple[bool, str]]) -> None:
    shown = "; ".join(message for _, message in errors[:3])
    text = (f"One or more records have been rejected due to {len(errors)} record errors in "
            f"total, and only showing the first three errors at most: {shown}")
    if any(is_timestamp for is_timestamp, _ in errors):
        raise InvalidTimestampError(text)
    raise InvalidRecordError(text)


def up_convert(data: bytes | bytearray | memoryview, config: LogConfig, now_ms: int,
               compression_type: str | None = None) -> bytes:
    """The v2 batch a Kafka 3.9 broker would append for this produced v0/v1 message set.

    Raises CorruptRecordError, MessageTooLargeError, InvalidRecordError,
    InvalidTimestampError or UnsupportedCompressionTypeError (nothing is appended then)."""
    batches = read_legacy_produce(data, config.max_message_bytes)
    if not batches:
        raise InvalidRecordError("the produce request has no complete message for this "
                                 "partition")
    source = Compression.NONE
    for batch in batches:
        if batch.codec != Compression.NONE:
            source = Compression(batch.codec)
    target = target_compression(compression_type, source)
    first = batches[0]
    if source != Compression.NONE and len(batches) > 1:
        raise InvalidRecordError("Compressed outer record has more than one batch")
    # compression.<codec>.level (KIP-390): the broker compresses here.
    builder = RecordBatchBuilder(compression=target, timestamp_type=TimestampType.CREATE_TIME,
                                 batch_size_limit=_NO_LIMIT,
                                 compression_level=config.compression_level(target))
    for batch in batches:
        if batch.magic != first.magic:
            raise InvalidRecordError(f"{batch.where}: batch magic {batch.magic} is not the same "
                                     f"as the first batch's magic byte {first.magic}")
        errors: list[tuple[bool, str]] = []
        for index, record in enumerate(batch.records()):
            error = _record_error(batch, record, index, config, source, now_ms)
            if error is not None:
                errors.append(error)
            elif not errors:
                builder.append(record.timestamp, record.key, record.value)
        if errors:
            _raise_record_errors(errors)
    return builder.build()
