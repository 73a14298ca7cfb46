"""A fast encoder for ProduceRequest v3-v12 frames: the request a producer sends most.

``encode_request_buffers`` goes through the generic codec (a generated function per struct, the
records spliced into a GatherChunks, then cut into views).  This writes the same frame in one
function: the bytes between record batches go into small bytearrays, and each records value of
GATHER_MIN bytes or more is a buffer of its own, by reference, as the generic path does (Java's
ProduceRequest sends its MemoryRecords the same way).  Anything it does not expect (unknown tagged
fields, null or non-bytes records, values of the wrong type) returns None: the caller then takes
the generic path, whose output or error is the reference.

Layout (Kafka's ProduceRequest.json; flexible from v9): transactional_id nullable string (v3+),
acks int16, timeout_ms int32, topic_data[name string, partition_data[index int32, records
nullable records, tags (v9+)], tags (v9+)], tags (v9+).
"""

from __future__ import annotations

import struct
from typing import Any

from samsa.protocol.api_keys import ApiKey
from samsa.protocol.apis import APIS
from samsa.protocol.types import BYTES_LIKE, GATHER_MIN

__all__ = ["produce_request_buffers"]

_request_class: Any = APIS[ApiKey.PRODUCE].request_class
_FIRST_VERSION = 3
_LAST_VERSION = 12
_FIRST_FLEXIBLE = 9
# The size placeholder and request header v1 (client id: always an int16-length string).
_head = struct.Struct(">ihhih").pack
_acks_timeout = struct.Struct(">hi").pack
_i16 = struct.Struct(">h").pack
_i32 = struct.Struct(">i").pack
_pack_size = struct.Struct(">i").pack_into
# What writing a value of the wrong type raises; the generic path then reports it its way.
_WRONG_VALUE = (struct.error, TypeError, AttributeError, ValueError, OverflowError)


def produce_request_buffers(request: Any, api_version: int, correlation_id: int,
                            client_id: str | None) -> list[Any] | None:
    """The size-prefixed frame of ``request`` (a ProduceRequest) as buffers for a gather write,
    or None when the generic encoder must write it."""
    if type(request) is not _request_class or not _FIRST_VERSION <= api_version <= _LAST_VERSION:
        return None
    try:
        if api_version >= _FIRST_FLEXIBLE:
            return _encode_flexible(request, api_version, correlation_id, client_id)
        return _encode_classic(request, api_version, correlation_id, client_id)
    except _WRONG_VALUE:
        return None


def _uvarint(buf: bytearray, n: int) -> None:
    while n >= 0x80:
        buf.append((n & 0x7F) | 0x80)
        n >>= 7
    buf.append(n)


def _header(api_version: int, correlation_id: int, client_id: str | None) -> bytearray:
    if client_id is None:
        return bytearray(_head(0, ApiKey.PRODUCE, api_version, correlation_id, -1))
    raw = client_id.encode()
    buf = bytearray(_head(0, ApiKey.PRODUCE, api_version, correlation_id, len(raw)))
    buf += raw
    return buf


def _finish(out: list[Any], buf: bytearray, size: int) -> list[Any]:
    """Append the last chunk and fill in the frame's size."""
    if buf:
        out.append(buf)
        size += len(buf)
    _pack_size(out[0], 0, size - 4)
    return out


def _encode_flexible(request: Any, api_version: int, correlation_id: int,
                     client_id: str | None) -> list[Any] | None:
    if request.unknown_tags:
        return None
    buf = _header(api_version, correlation_id, client_id)
    buf.append(0)  # request header v2's tagged fields
    out: list[Any] = []
    size = 0
    txn = request.transactional_id
    if txn is None:
        buf.append(0)
    else:
        raw = txn.encode()
        _uvarint(buf, len(raw) + 1)
        buf += raw
    buf += _acks_timeout(request.acks, request.timeout_ms)
    topics = request.topic_data
    _uvarint(buf, len(topics) + 1)
    for topic in topics:
        if topic.unknown_tags:
            return None
        raw = topic.name.encode()
        _uvarint(buf, len(raw) + 1)
        buf += raw
        partitions = topic.partition_data
        _uvarint(buf, len(partitions) + 1)
        for partition in partitions:
            records = partition.records
            if partition.unknown_tags or not isinstance(records, BYTES_LIKE):
                return None
            buf += _i32(partition.index)
            n = len(records)
            m = n + 1
            while m >= 0x80:  # (_uvarint, inline)
                buf.append((m & 0x7F) | 0x80)
                m >>= 7
            buf.append(m)
            if n >= GATHER_MIN:
                out.append(buf)
                out.append(records)
                size += len(buf) + n
                buf = bytearray(b"\x00")  # the partition's tagged fields
            else:
                buf += records
                buf.append(0)
        buf.append(0)  # the topic's tagged fields
    buf.append(0)  # the request's tagged fields
    return _finish(out, buf, size)


def _encode_classic(request: Any, api_version: int, correlation_id: int,
                    client_id: str | None) -> list[Any] | None:
    buf = _header(api_version, correlation_id, client_id)
    out: list[Any] = []
    size = 0
    txn = request.transactional_id
    if txn is None:
        buf += b"\xff\xff"
    else:
        raw = txn.encode()
        buf += _i16(len(raw))
        buf += raw
    buf += _acks_timeout(request.acks, request.timeout_ms)
    topics = request.topic_data
    buf += _i32(len(topics))
    for topic in topics:
        raw = topic.name.encode()
        buf += _i16(len(raw))
        buf += raw
        partitions = topic.partition_data
        buf += _i32(len(partitions))
        for partition in partitions:
            records = partition.records
            if not isinstance(records, BYTES_LIKE):
                return None
            buf += _i32(partition.index)
            n = len(records)
            buf += _i32(n)
            if n >= GATHER_MIN:
                out.append(buf)
                out.append(records)
                size += len(buf) + n
                buf = bytearray()
            else:
                buf += records
    return _finish(out, buf, size)
