"""The broker's durable log storage: Kafka's segment/index layout on disk (LogSegment, OffsetIndex, TimeIndex).

Layers, bottom up:

* ``OffsetIndex`` / ``TimeIndex`` (index.py): sparse ``.index`` / ``.timeindex`` files;
  ``TransactionIndex`` (txn_index.py): a segment's aborted transactions (``.txnindex``).
* ``LogSegment`` (segment.py): ``<20-digit base offset>.log`` plus its indexes; append, read
  as a ``FileSlice``, recover (validate every batch, cut a torn/corrupt tail), roll checks.
* ``Log`` (log.py): one topic-partition.  Thread-safe.
* ``LogManager`` (manager.py): the data directory: topics, logs, checkpoints, recovery,
  housekeeping, the ``.lock`` file.

Typical use by the broker::

    manager = LogManager("/var/samsa", {"log.segment.bytes": 64 << 20})   # opens + recovers
    manager.start_background()            # or call manager.tick(now_ms) from your scheduler
    info = manager.create_topic("events", 3, {"retention.ms": "3600000"})
    log = manager.get_log("events", 0)    # UnknownTopicOrPartitionError if absent

    # Produce (one partition's records bytes, exactly as in the request):
    result = log.append_as_leader(records, leader_epoch=0, now_ms=now)
    #   -> AppendResult(base_offset, last_offset, log_append_time_ms (-1 for CreateTime),
    #                   log_start_offset, duplicate)  duplicate=True: an idempotent retry,
    #      nothing written, original offsets and (as log_append_time_ms) the original
    #      batch's max timestamp returned (answer NONE, as Kafka's UnifiedLog.append does).
    #   raises InvalidRecordError (magic != 2, count/delta mismatch, control batch, missing
    #   sequence), CorruptRecordError (CRC/size), MessageTooLargeError (max.message.bytes),
    #   UnsupportedCompressionTypeError, InvalidProducerEpochError,
    #   OutOfOrderSequenceNumberError, KafkaStorageError (disk).

    # Fetch:
    data = log.read(fetch_offset, max_bytes, min_one_message=True,
                    isolation=IsolationLevel.READ_UNCOMMITTED)
    #   -> FetchData(records, high_watermark, log_start_offset, last_stable_offset,
    #                aborted_transactions (read_committed only))
    #   ``records`` is b"" or a FileSlice: ``os.sendfile(sock_fd, s.fileno(), s.position, len(s))``
    #   or ``s.read()``.  It may start before fetch_offset (the batch containing it) and end in a
    #   partial batch, as in Kafka.  Raises OffsetOutOfRangeError outside [log start, log end].

    # ListOffsets:   log.log_start_offset (EARLIEST), log.high_watermark / log.last_stable_offset
    #                (LATEST), log.offset_for_timestamp(ts) -> TimestampAndOffset | None,
    #                log.offset_of_max_timestamp() (MAX_TIMESTAMP).
    # OffsetForLeaderEpoch: log.end_offset_for_epoch(epoch) -> (epoch, end_offset)
    # DeleteRecords: log.delete_records_before(offset) -> new log start offset (-1 = HW)
    # Transactions:  log.append_control_marker(producer_id=, producer_epoch=, commit=,
    #                coordinator_epoch=, leader_epoch=) (WriteTxnMarkers)
    # Topics:        create_topic / delete_topic / add_partitions / set_topic_configs /
    #                topics() -> {name: TopicInfo(name, topic_id (uuid.UUID), partitions, configs)}
    #                topic_by_id(uuid)
    # Durability:    log.flush(); manager.checkpoint(); manager.close() (clean shutdown)

Configuration uses Kafka's broker names and defaults (config.py ``BROKER_DEFAULTS``), and
topic-level overrides (``segment.bytes``, ``retention.ms``, ``max.message.bytes``,
``message.timestamp.type``, ``flush.messages`` ...).  ``flush.messages=1`` fsyncs before each
append returns.  Single node: the high watermark is the log end offset after each append.
"""

from samsa.broker.log.config import BROKER_DEFAULTS, LogConfig
from samsa.broker.log.file_slice import FileSlice
from samsa.broker.log.index import CorruptIndexError, OffsetIndex, TimeIndex
from samsa.broker.log.log import (
    AppendResult,
    FetchData,
    IsolationLevel,
    Log,
    TimestampAndOffset,
)
from samsa.broker.log.manager import (
    LogManager,
    TopicInfo,
    topic_id_from_str,
    topic_id_to_str,
)
from samsa.broker.log.producer_state import ProducerStateManager
from samsa.broker.log.segment import LogSegment
from samsa.broker.log.txn_index import AbortedTxn, TransactionIndex

__all__ = [
    "BROKER_DEFAULTS",
    "AbortedTxn",
    "AppendResult",
    "CorruptIndexError",
    "FetchData",
    "FileSlice",
    "IsolationLevel",
    "Log",
    "LogConfig",
    "LogManager",
    "LogSegment",
    "OffsetIndex",
    "ProducerStateManager",
    "TimeIndex",
    "TimestampAndOffset",
    "TopicInfo",
    "TransactionIndex",
    "topic_id_from_str",
    "topic_id_to_str",
]
