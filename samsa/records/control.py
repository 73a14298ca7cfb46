"""Control batches: the transaction markers a coordinator writes (Kafka's ControlRecordType, EndTxnMarker).

A control batch has attributes transactional|control and one record whose key is
``int16 version (0) + int16 type`` and, for COMMIT/ABORT, whose value is the EndTxnMarker
``int16 version (0) + int32 coordinator epoch``.
"""

from __future__ import annotations

import enum
import struct
from typing import NamedTuple

from samsa.errors import CorruptRecordError
from samsa.records.batch_header import NO_PARTITION_LEADER_EPOCH
from samsa.records.builder import RecordBatchBuilder

__all__ = [
    "ControlMarker",
    "ControlRecordType",
    "build_control_batch",
    "encode_control_key",
    "encode_end_txn_marker",
    "parse_control_record",
]

_KEY = struct.Struct(">hh")
_END_TXN_MARKER = struct.Struct(">hi")
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0


class ControlRecordType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1
    # KRaft-internal types; they never appear in a data partition.
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


class ControlMarker(NamedTuple):
    """A decoded control record. ``coordinator_epoch`` is -1 for non-transaction types."""

    type: ControlRecordType | int
    version: int
    coordinator_epoch: int

    @property
    def is_commit(self) -> bool:
        return self.type == ControlRecordType.COMMIT

    @property
    def is_abort(self) -> bool:
        return self.type == ControlRecordType.ABORT


def encode_control_key(control_type: ControlRecordType | int) -> bytes:
    return _KEY.pack(CONTROL_KEY_VERSION, int(control_type))


def encode_end_txn_marker(coordinator_epoch: int) -> bytes:
    return _END_TXN_MARKER.pack(END_TXN_MARKER_VERSION, coordinator_epoch)


def parse_control_record(key: bytes | None, value: bytes | None) -> ControlMarker:
    """Decode a control record's key (and EndTxnMarker value for COMMIT/ABORT)."""
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError(f"control record key is {'null' if key is None else f'{len(key)} bytes'}, needs 4")
    version, type_id = _KEY.unpack_from(key)
    try:
        control_type: ControlRecordType | int = ControlRecordType(type_id)
    except ValueError:
        control_type = type_id  # unknown types are skipped by consumers, not fatal
    coordinator_epoch = -1
    if control_type in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        if value is None or len(value) < _END_TXN_MARKER.size:
            raise CorruptRecordError("transaction marker value is missing or shorter than 6 bytes")
        _, coordinator_epoch = _END_TXN_MARKER.unpack_from(value)
    return ControlMarker(control_type, version, coordinator_epoch)


def build_control_batch(
    control_type: ControlRecordType | int,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp_ms: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """One transaction-marker batch (attributes 0x30, one record, base sequence -1)."""
    builder = RecordBatchBuilder(  # uncompressed, the builder's default
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
        base_offset=base_offset,
    )
    builder.append(timestamp_ms, encode_control_key(control_type), encode_end_txn_marker(coordinator_epoch))
    return builder.build()
