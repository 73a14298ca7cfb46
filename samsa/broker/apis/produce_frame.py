"""The usual Produce request answered straight from its frame, on the network thread.

A librdkafka producer sends thousands of ProduceRequests a second, nearly all of one shape:
v3 or later, no transactional id, acks 1 or -1, one topic, one partition, one batch.  For those
the generic route (body decoded into message objects, a RequestContext, the inline checks,
KafkaApis.handle, handle_produce) costs about as much Python as the append itself.  Here the
few fields, request header included, are read from the frame with three struct calls, and the
append and its answer are
handle_produce's own (produce.append_to, produce.single_answer), so the bytes written to the
log and to the client are the same.

Anything else returns None before any side effect and takes the generic route, which then
decodes, checks and answers it as always: other shapes and versions, a malformed or truncated
frame, tagged fields, a transactional id, an authorizer (ACLs need the request's principal), an
internal or unknown topic, a log that fsyncs on every append (not run inline, processor.py).
"""

from __future__ import annotations

import logging
import struct
import time
from typing import Any

from samsa.broker.apis.error_codes import UNKNOWN_SERVER_ERROR, code_for
from samsa.broker.apis.error_responses import error_response
from samsa.broker.apis.produce import append_to, single_answer
from samsa.broker.apis.services import BrokerServices
from samsa.broker.apis.topic_names import INTERNAL_TOPICS
from samsa.protocol import ApiKey, decode_request_body, decode_request_header, encode_response

__all__ = ["answer_produce_frame"]

log = logging.getLogger(__name__)

_PRODUCE = int(ApiKey.PRODUCE)
_FIRST_VERSION = 3  # one batch per partition (ProduceRequest.validateRecords); no message sets
_FIRST_FLEXIBLE = 9  # and request header v2 (tagged fields after the client id)
# Request header: ApiKey, ApiVersion, CorrelationId, ClientId length (int16, -1 = null).
_REQUEST_HEAD = struct.Struct(">hhih")
# v3-v8: TransactionalId length (int16, -1 = null), Acks, TimeoutMs, topic count (int32),
# topic name length (int16).
_HEAD = struct.Struct(">hhiih")
# v9+: TransactionalId (compact: 0 = null), Acks, TimeoutMs, topic count + 1, name length + 1.
_FLEX_HEAD = struct.Struct(">BhiBB")
# partition count, partition index, records length (v3-v8: int32, -1 = null).
_PARTITION = struct.Struct(">iii")
# v9+: partition count + 1, partition index.
_FLEX_PARTITION = struct.Struct(">Bi")


def _fields(payload: Any, pos: int, version: int) -> tuple[int, str, int, Any] | None:
    """(acks, topic, partition, records) of a request of the usual shape, else None."""
    end = len(payload)
    if version < _FIRST_FLEXIBLE:
        if end - pos < _HEAD.size:
            return None
        no_txn, acks, _, topics, name_len = _HEAD.unpack_from(payload, pos)
        if no_txn != -1 or topics != 1 or name_len < 0:
            return None
        pos += _HEAD.size
        name_end = pos + name_len
        if end - name_end < _PARTITION.size:
            return None
        partitions, index, size = _PARTITION.unpack_from(payload, name_end)
        if partitions != 1 or size < 0:
            return None
        start = name_end + _PARTITION.size
        stop = start + size
        if stop > end:
            return None
    else:
        if end - pos < _FLEX_HEAD.size:
            return None
        no_txn, acks, _, topics, name_len = _FLEX_HEAD.unpack_from(payload, pos)
        # One-byte compact lengths (names under 127 bytes); a longer one goes the generic way.
        if no_txn != 0 or topics != 2 or not 0 < name_len < 0x80:
            return None
        pos += _FLEX_HEAD.size
        name_end = pos + name_len - 1
        if end - name_end < _FLEX_PARTITION.size:
            return None
        partitions, index = _FLEX_PARTITION.unpack_from(payload, name_end)
        if partitions != 2:
            return None
        # The records' compact length (an unsigned varint, length + 1; 0 = null).
        start = name_end + _FLEX_PARTITION.size
        size = shift = 0
        while True:
            if start >= end or shift > 28:
                return None
            b = payload[start]
            start += 1
            size |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
        size -= 1
        stop = start + size
        # Then no tagged fields for the partition, the topic and the request: three zeros.
        if size < 0 or stop + 3 > end or payload[stop] or payload[stop + 1] or payload[stop + 2]:
            return None
    try:
        topic = str(payload[pos:name_end], "utf-8")
    except UnicodeDecodeError:
        return None
    return acks, topic, index, payload[start:stop]


def _body_position(payload: Any, client_len: int, version: int) -> int | None:
    """Where the body starts, after the request header (as decode_request_header reads it:
    a client id that is not UTF-8 is its error to report), or None."""
    pos = _REQUEST_HEAD.size
    if client_len > 0:
        pos += client_len
        if pos > len(payload):
            return None
        try:
            str(payload[_REQUEST_HEAD.size:pos], "utf-8")
        except UnicodeDecodeError:
            return None
    if version >= _FIRST_FLEXIBLE:  # header v2: no tagged fields expected
        if pos >= len(payload) or payload[pos]:
            return None
        pos += 1
    return pos


def answer_produce_frame(services: BrokerServices, payload: Any,
                         max_version: int) -> list[Any] | None:
    """The response chunks of a Produce request of the usual shape (module docstring), which is
    appended here; None, with nothing done, for any other request.  ``payload``: the frame
    without its size prefix."""
    if len(payload) < _REQUEST_HEAD.size:
        return None
    key, version, correlation_id, client_len = _REQUEST_HEAD.unpack_from(payload, 0)
    if key != _PRODUCE or not _FIRST_VERSION <= version <= max_version \
            or services.authorizer is not None:
        return None
    pos = _body_position(payload, client_len, version)
    if pos is None:
        return None
    fields = _fields(payload, pos, version)
    if fields is None:
        return None
    acks, topic, index, records = fields
    if acks != 1 and acks != -1 or topic in INTERNAL_TOPICS:
        return None
    plog = services.logs.find_log(topic, index)
    if plog is None or plog.config.flush_messages <= 1:
        return None
    try:
        result = append_to(services, plog, topic, index, records, None,
                           time.time_ns() // 1_000_000, version)
        answer = single_answer(services, version, correlation_id, topic, index, result)
        if isinstance(answer, bytes):
            return [answer]
        return encode_response(answer, version, correlation_id)
    except Exception as exc:  # answered as KafkaApis.handle answers it
        code = code_for(exc, f"Produce v{version} to {topic}-{index}")
        if code != UNKNOWN_SERVER_ERROR:
            log.warning("Produce v%d to %s-%d failed: %s", version, topic, index, exc)
        header, pos = decode_request_header(payload)
        response = error_response(_PRODUCE, version, decode_request_body(header, payload, pos),
                                  code)
        if response is None:
            raise  # the processor closes the connection, as KafkaApis does then
        return encode_response(response, version, correlation_id)
