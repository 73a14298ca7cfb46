"""The records of ``__transaction_state`` (Kafka's TransactionLogKey/TransactionLogValue).

* key   = int16 coordinator record type 0 + struct ``{transactional_id}`` (version 0);
* value = int16 version + struct, or null (a tombstone: the id expired).  Version 1 (flexible,
  with tagged fields) is written; version 0 is read too.  Partitions are null when EMPTY.

Layouts as in Kafka's transaction-coordinator message definitions, so Kafka's own tools could
read the topic; encoded by the protocol codec.
"""

from __future__ import annotations

import struct
from typing import Any

from samsa.broker.txn.state import NO_PRODUCER_EPOCH, TransactionState, TxnTransit
from samsa.protocol.codec import decode_struct, encode_struct
from samsa.protocol.message import declare_struct
from samsa.protocol.schema import F, StructSchema, VersionRange

KEY_TYPE = 0  # the coordinator record type of transaction log records
VALUE_VERSION = 1
TV2_LEVEL = 2  # ClientTransactionVersion of a KIP-890 part 2 client
_FLEXIBLE = VersionRange.parse("1+")
_INT16 = struct.Struct(">h")

_KEY_DECLS = [F("transactional_id", "string", "0")]
_VALUE_DECLS = [
    F("producer_id", "int64", "0+"),
    F("previous_producer_id", "int64", "1+", default=-1, ignorable=True, tag=0, tagged="1+"),
    F("next_producer_id", "int64", "1+", default=-1, ignorable=True, tag=1, tagged="1+"),
    F("producer_epoch", "int16", "0+"),
    F("next_producer_epoch", "int16", "1+", default=-1, ignorable=True, tag=3, tagged="1+"),
    F("transaction_timeout_ms", "int32", "0+"),
    F("transaction_status", "int8", "0+"),
    F("transaction_partitions", "[]PartitionsSchema", "0+", nullable="0+", fields=[
        F("topic", "string", "0+"),
        F("partition_ids", "[]int32", "0+"),
    ]),
    F("transaction_last_update_timestamp_ms", "int64", "0+"),
    F("transaction_start_timestamp_ms", "int64", "0+"),
    F("client_transaction_version", "int16", "1+", default=0, ignorable=True, tag=2,
      tagged="1+"),
]


KEY = declare_struct("TransactionLogKey", _KEY_DECLS)
VALUE = declare_struct("TransactionLogValue", _VALUE_DECLS)
_PARTITIONS = next(f for f in VALUE.fields if f.name == "transaction_partitions").item
assert isinstance(_PARTITIONS, StructSchema)
PartitionsSchema: Any = _PARTITIONS.cls


def encode_key(transactional_id: str) -> bytes:
    buf = bytearray(_INT16.pack(KEY_TYPE))
    encode_struct(KEY.cls(transactional_id=transactional_id), 0, False, buf)
    return bytes(buf)


def decode_key(data: bytes) -> str | None:
    """The transactional id, or None for a record type this broker does not know (skipped,
    as Kafka's TransactionLog.readTxnRecordKey)."""
    (record_type,) = _INT16.unpack_from(data)
    if record_type != KEY_TYPE:
        return None
    key, _ = decode_struct(KEY, 0, False, data, 2)
    return str(key.transactional_id)


def encode_value(t: TxnTransit) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(t.partitions):
        by_topic.setdefault(topic, []).append(partition)
    partitions = None if t.state == TransactionState.EMPTY else [
        PartitionsSchema(topic=topic, partition_ids=ids) for topic, ids in by_topic.items()]
    value = VALUE.cls(
        producer_id=t.producer_id, previous_producer_id=t.prev_producer_id,
        next_producer_id=t.next_producer_id, producer_epoch=t.producer_epoch,
        next_producer_epoch=-1, transaction_timeout_ms=t.timeout_ms,
        transaction_status=int(t.state), transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=t.last_update_timestamp,
        transaction_start_timestamp_ms=t.start_timestamp,
        client_transaction_version=TV2_LEVEL if t.client_tv2 else 0)
    buf = bytearray(_INT16.pack(VALUE_VERSION))
    encode_struct(value, VALUE_VERSION, True, buf)
    return bytes(buf)


def decode_value(data: bytes) -> TxnTransit:
    """The metadata a value holds.  The last epoch is not in the record (Kafka does not keep
    it either): it is NO_PRODUCER_EPOCH after a reload."""
    (version,) = _INT16.unpack_from(data)
    if version not in (0, 1):
        raise ValueError(f"__transaction_state value version {version} is not known "
                         f"(0 and 1 are)")
    v, _ = decode_struct(VALUE, version, version in _FLEXIBLE, data, 2)
    partitions = frozenset(
        (p.topic, int(i)) for p in (v.transaction_partitions or ()) for i in p.partition_ids)
    return TxnTransit(
        producer_id=v.producer_id, prev_producer_id=v.previous_producer_id,
        next_producer_id=v.next_producer_id, producer_epoch=v.producer_epoch,
        last_producer_epoch=NO_PRODUCER_EPOCH, timeout_ms=v.transaction_timeout_ms,
        state=TransactionState(v.transaction_status), partitions=partitions,
        start_timestamp=v.transaction_start_timestamp_ms,
        last_update_timestamp=v.transaction_last_update_timestamp_ms,
        client_tv2=v.client_transaction_version >= TV2_LEVEL)
