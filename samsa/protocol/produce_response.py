"""A fast decoder for ProduceResponse v3-v12: the response a producer reads for every request.

The generic decoder (samsa.protocol.codec) calls a generated function per struct and per array
element.  The usual answer has, per partition, no error message, no record errors and no tagged
fields; this decoder reads each such partition with one ``struct`` call that also unpacks those
empty markers, and builds the same message objects the generic decoder builds.  Anything else
(an error message, record errors, tagged fields such as KIP-951's current_leader and
node_endpoints, a null string or array, malformed input) is decoded again from the start by the
generic decoder, so results and errors are exactly the generic codec's.

Layout (Kafka's ProduceResponse.json; flexible from v9): responses[name, partition_responses[
index int32, error_code int16, base_offset int64, log_append_time_ms int64 (v2+),
log_start_offset int64 (v5+), record_errors[] (v8+), error_message nullable string (v8+),
tags (v9+)], tags (v9+)], throttle_time_ms int32 (v1+), tags (v9+).
"""

from __future__ import annotations

import struct
from typing import Any

from samsa.protocol.api_keys import ApiKey
from samsa.protocol.apis import APIS
from samsa.protocol.types import Decoder, read_uvarint

__all__ = ["FIRST_FAST_VERSION", "produce_response_decoder"]

FIRST_FAST_VERSION = 3  # the producer's oldest (v2 record batches)
_LAST_KNOWN_VERSION = 12

_response_class: Any = APIS[ApiKey.PRODUCE].response_class
_topic_class: Any = _response_class.TopicProduceResponse
_partition_class: Any = _response_class.PartitionProduceResponse
_leader_class: Any = _response_class.LeaderIdAndEpoch
_new = object.__new__
_unpack_i16 = struct.Struct(">h").unpack_from
_unpack_i32 = struct.Struct(">i").unpack_from
# Input the generic decoder reports (or handles otherwise): decode it again that way.
_FALLBACK = (struct.error, IndexError, ValueError)


def _partition_format(version: int) -> struct.Struct:
    """A partition's fixed-width fields, followed (v8+) by the markers of the usual case:
    v8: record_errors count 0 and error_message length -1 (null);
    v9+: compact record_errors length 1 (empty), error_message 0 (null), no tagged fields."""
    fmt = ">ihqq"  # index, error_code, base_offset, log_append_time_ms (v2+)
    if version >= 5:
        fmt += "q"  # log_start_offset
    if version >= 9:
        fmt += "BBB"
    elif version == 8:
        fmt += "ih"
    return struct.Struct(fmt)


def produce_response_decoder(version: int, generic: Decoder) -> Decoder:
    """The body decoder of ProduceResponse ``version``: ``generic`` (that version's generated
    decoder) behind a fast path for the usual answer; ``generic`` itself outside v3-v12."""
    if not FIRST_FAST_VERSION <= version <= _LAST_KNOWN_VERSION:
        return generic
    fast = _flexible_decoder(version) if version >= 9 else _classic_decoder(version)

    def decode(buf: Any, pos: int) -> tuple[Any, int]:
        try:
            result = fast(buf, pos)
        except _FALLBACK:
            result = None
        return generic(buf, pos) if result is None else result

    return decode


def _new_partition(index: int, error_code: int, base_offset: int, log_append_time_ms: int,
                   log_start_offset: int) -> Any:
    """A PartitionProduceResponse as the generic decoder makes it for the usual case: empty
    record_errors, no error message, current_leader at its default (-1, -1)."""
    p = _new(_partition_class)
    p.index = index
    p.error_code = error_code
    p.base_offset = base_offset
    p.log_append_time_ms = log_append_time_ms
    p.log_start_offset = log_start_offset
    p.record_errors = []
    p.error_message = None
    leader = _new(_leader_class)
    leader.leader_id = -1
    leader.leader_epoch = -1
    leader.unknown_tags = None
    p.current_leader = leader
    p.unknown_tags = None
    return p


def _new_response(topics: list[Any], throttle_time_ms: int) -> Any:
    response = _new(_response_class)
    response.responses = topics
    response.throttle_time_ms = throttle_time_ms
    response.node_endpoints = []
    response.unknown_tags = None
    return response


def _new_topic(name: str, partitions: list[Any]) -> Any:
    topic = _new(_topic_class)
    topic.name = name
    topic.partition_responses = partitions
    topic.unknown_tags = None
    return topic


def _flexible_decoder(version: int) -> Any:
    """v9+: compact arrays and strings, a tagged-field section per struct."""
    partition = _partition_format(version)
    unpack, size = partition.unpack_from, partition.size

    def fast(buf: Any, pos: int) -> tuple[Any, int] | None:
        n = buf[pos]
        if n < 0x80:
            pos += 1
        else:
            n, pos = read_uvarint(buf, pos)
        if n == 0:  # null (not allowed)
            return None
        topics = []
        for _ in range(n - 1):
            length = buf[pos]
            if length < 0x80:
                pos += 1
            else:
                length, pos = read_uvarint(buf, pos)
            end = pos + length - 1
            if length == 0 or end > len(buf):  # null, or past the end
                return None
            name = str(buf[pos:end], "utf-8")
            pos = end
            k = buf[pos]
            if k < 0x80:
                pos += 1
            else:
                k, pos = read_uvarint(buf, pos)
            if k == 0:
                return None
            partitions = []
            for _ in range(k - 1):
                index, error, base, append_time, start, errors, message, tags = unpack(buf, pos)
                if errors != 1 or message != 0 or tags != 0:
                    return None
                pos += size
                partitions.append(_new_partition(index, error, base, append_time, start))
            if buf[pos] != 0:  # the topic's tagged fields
                return None
            pos += 1
            topics.append(_new_topic(name, partitions))
        throttle, = _unpack_i32(buf, pos)
        if buf[pos + 4] != 0:  # node_endpoints (KIP-951) or unknown tags
            return None
        return _new_response(topics, throttle), pos + 5

    return fast


def _classic_decoder(version: int) -> Any:
    """v3-v8: int32 array and int16 string lengths, no tagged fields."""
    partition = _partition_format(version)
    unpack, size = partition.unpack_from, partition.size
    with_start = version >= 5
    with_markers = version == 8

    def fast(buf: Any, pos: int) -> tuple[Any, int] | None:
        n, = _unpack_i32(buf, pos)
        pos += 4
        if n < 0:
            return None
        topics = []
        for _ in range(n):
            length, = _unpack_i16(buf, pos)
            pos += 2
            end = pos + length
            if length < 0 or end > len(buf):
                return None
            name = str(buf[pos:end], "utf-8")
            pos = end
            k, = _unpack_i32(buf, pos)
            pos += 4
            if k < 0:
                return None
            partitions = []
            for _ in range(k):
                fields = unpack(buf, pos)
                if with_markers and (fields[5] != 0 or fields[6] != -1):
                    return None
                pos += size
                partitions.append(_new_partition(fields[0], fields[1], fields[2], fields[3],
                                                 fields[4] if with_start else -1))
            topics.append(_new_topic(name, partitions))
        throttle, = _unpack_i32(buf, pos)
        return _new_response(topics, throttle), pos + 4

    return fast
