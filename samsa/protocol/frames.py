"""Whole frames: a 4-byte size, a request or response header, then the body.

Header versions: a request uses header v2 when its API version is flexible, else v1; a response
uses v1 when flexible, else v0 -- except ApiVersions responses, which always use v0 so that a
client can read the error of a version the broker does not know (KIP-511).
"""

from __future__ import annotations

import struct
from typing import Any

from samsa.errors import UnsupportedVersionError
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.apis import api_for
from samsa.protocol.codec import MALFORMED, decode_struct, malformed, struct_codec
from samsa.protocol.message import Message, make_class
from samsa.protocol.messages.headers import REQUEST_HEADER, RESPONSE_HEADER
from samsa.protocol.produce_request import produce_request_buffers
from samsa.protocol.produce_response import produce_response_decoder
from samsa.protocol.schema import StructSchema, build_struct
from samsa.protocol.types import (
    BYTES_LIKE,
    INT32,
    Decoder,
    ExternalChunks,
    GatherChunks,
    ProtocolDecodeError,
)

_request_header_schema = build_struct("RequestHeader", REQUEST_HEADER, {}, {})
_response_header_schema = build_struct("ResponseHeader", RESPONSE_HEADER, {}, {})
RequestHeader = make_class(_request_header_schema)
ResponseHeader = make_class(_response_header_schema)
_REQUEST_HEADER_V1 = struct.Struct(">hhih")


def request_header_version(api_key: int, api_version: int) -> int:
    return 2 if api_for(api_key).is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if api_for(api_key).is_flexible(api_version) else 0


def _with_size_prefix(buf: ExternalChunks) -> list[Any]:
    """Fill in the 4-byte size placeholder at the start of ``buf``; the frame as chunks."""
    externals = buf.externals
    if not externals:
        _pack_size(buf, 0, len(buf) - 4)
        return [bytes(buf)]
    _pack_size(buf, 0, len(buf) - 4 + sum(len(v) for _, v in externals))
    return buf.chunks()


_pack_size = INT32.pack_into
_PRODUCE_REQUEST = api_for(ApiKey.PRODUCE).request_class


def encode_request(request: Message, api_version: int, correlation_id: int,
                   client_id: str | None) -> bytes:
    """A size-prefixed request frame."""
    chunks = _with_size_prefix(_encode_request(ExternalChunks, request, api_version,
                                               correlation_id, client_id))
    # External records values (file slices) are not bytes-like: read them, as
    # encode_response_bytes does.
    return chunks[0] if len(chunks) == 1 else _join_chunks(chunks)


def encode_request_buffers(request: Message, api_version: int, correlation_id: int,
                           client_id: str | None) -> list[Any]:
    """The frame of ``encode_request`` as a list of bytes-like buffers for a gather write:
    records values of GATHER_MIN bytes or more are the caller's objects, not copies."""
    if type(request) is _PRODUCE_REQUEST:  # a producer sends one per batch of batches
        buffers = produce_request_buffers(request, api_version, correlation_id, client_id)
        if buffers is not None:
            return buffers
    buf = _encode_request(GatherChunks, request, api_version, correlation_id, client_id)
    if not buf.externals:
        _pack_size(buf, 0, len(buf) - 4)
        return [buf]
    return [c if isinstance(c, BYTES_LIKE) else c.read() for c in _with_size_prefix(buf)]


def _encode_request(buffer: type[ExternalChunks], request: Message, api_version: int,
                    correlation_id: int, client_id: str | None) -> ExternalChunks:
    plan = _request_encode_plans.get((type(request), api_version))
    if plan is None:
        plan = _request_encode_plan(request, api_version)
    key, flexible, encode = plan
    # The size placeholder and header v1; header v2 adds an empty tagged-field section.  The
    # client id is always a classic int16-length string.
    if client_id is None:
        buf = buffer(_pack_request_head(0, key, api_version, correlation_id, -1))
    else:
        raw = client_id.encode()
        buf = buffer(_pack_request_head(0, key, api_version, correlation_id, len(raw)))
        buf += raw
    if flexible:
        buf.append(0)
    encode(buf, request)
    return buf


_pack_request_head = struct.Struct(">ihhih").pack
# (request class, version) -> (api key, flexible, body encoder); filled on first use.
_request_encode_plans: dict[tuple[type, int], tuple[int, bool, Any]] = {}


def _request_encode_plan(request: Message, api_version: int) -> tuple[int, bool, Any]:
    api = request.api
    if api is None or type(request) is not api.request_class:
        raise TypeError(f"{type(request).__name__} is not a request message")
    api_for(api.key, api_version)
    flexible = api.is_flexible(api_version)
    plan = (api.key, flexible, struct_codec(api.request_schema, api_version, flexible)[0])
    _request_encode_plans[(type(request), api_version)] = plan
    return plan


def decode_request_header(payload: Any) -> tuple[Any, int]:
    """Parse a request header (payload = the frame without its size prefix).

    Returns ``(header, body_position)``.  The key and version are not checked here, so a
    broker can answer an ApiVersions request of a version it does not know; for a known
    flexible version the header's tagged fields are consumed too.
    """
    if len(payload) < _HEADER_V1_SIZE:
        raise ProtocolDecodeError(f"request of {len(payload)} bytes is shorter than a header")
    key, version, correlation_id, client_len = _unpack_header_v1(payload, 0)
    pos = _HEADER_V1_SIZE
    client_id = None
    if client_len >= 0:
        end = pos + client_len
        if end > len(payload):
            raise ProtocolDecodeError("request header client id runs past the end of the frame")
        try:
            client_id = str(payload[pos:end], "utf-8")
        except UnicodeDecodeError:
            raise ProtocolDecodeError("request header client id is not valid UTF-8") from None
        pos = end
    # As RequestHeader(...) would build it, without the keyword-argument call.
    header: Any = _new(RequestHeader)
    header.request_api_key = key
    header.request_api_version = version
    header.correlation_id = correlation_id
    header.client_id = client_id
    header.unknown_tags = None
    plan = _request_plans.get((key, version))
    if plan is None:
        try:
            plan = _request_plan(key, version)
        except UnsupportedVersionError:
            return header, pos
    if plan[0]:
        # Header v2 ends with tagged fields: usually none (one zero byte); otherwise decode
        # them with the declared schema.
        if pos < len(payload) and payload[pos] == 0:
            return header, pos + 1
        _, pos = decode_struct(_request_header_schema, 2, True, payload, 0)
    return header, pos


_new = object.__new__
_unpack_header_v1 = _REQUEST_HEADER_V1.unpack_from
_HEADER_V1_SIZE = _REQUEST_HEADER_V1.size

# (api key, version) -> (flexible, request schema, body decoder), for the versions samsa knows;
# filled on first use so that a request costs one dict lookup instead of the API checks.
_request_plans: dict[tuple[int, int], tuple[bool, StructSchema, Decoder]] = {}


def _request_plan(key: int, version: int) -> tuple[bool, StructSchema, Decoder]:
    """Raises UnsupportedVersionError for a key or version samsa does not know."""
    api = api_for(key, version)
    flexible = api.is_flexible(version)
    schema = api.request_schema
    plan = (flexible, schema, struct_codec(schema, version, flexible)[1])
    _request_plans[(key, version)] = plan
    return plan


def decode_request_body(header: Any, payload: Any, pos: int) -> Any:
    key, version = header.request_api_key, header.request_api_version
    plan = _request_plans.get((key, version))
    if plan is None:
        plan = _request_plan(key, version)
    _, schema, decode = plan
    try:
        return decode(payload, pos)[0]
    except ProtocolDecodeError:
        raise
    except MALFORMED as e:  # as decode_struct: truncated or malformed input
        raise malformed(schema, version, e) from None


def decode_request(payload: Any) -> tuple[Any, Any]:
    """``(header, body)`` of a request frame given without its size prefix."""
    header, pos = decode_request_header(payload)
    return header, decode_request_body(header, payload, pos)


def encode_response(response: Message, api_version: int, correlation_id: int) -> list[Any]:
    """A size-prefixed response frame as chunks: bytes, and any external records values
    (file slices) spliced in where they belong, so the caller can send them zero-copy."""
    cls = type(response)
    plan = _response_plans.get((cls, api_version))
    if plan is None:
        plan = _response_plan(response, api_version)
    pack_header, encode = plan
    buf = ExternalChunks(pack_header(0, correlation_id))
    encode(buf, response)
    if buf.externals:
        return _with_size_prefix(buf)
    _pack_size(buf, 0, len(buf) - 4)  # _with_size_prefix's common case, inline
    return [bytes(buf)]


# (response class, version) -> (header packer, body encoder); filled on first use.
_response_plans: dict[tuple[type, int], tuple[Any, Any]] = {}
# The size placeholder and the correlation id; header v1 adds an empty tagged-field section
# (the pad byte "x" packs as zero).
_RESPONSE_HEADER_V0 = struct.Struct(">ii")
_RESPONSE_HEADER_V1 = struct.Struct(">iix")


def _response_plan(response: Message, api_version: int) -> tuple[Any, Any]:
    api = response.api
    if api is None or type(response) is not api.response_class:
        raise TypeError(f"{type(response).__name__} is not a response message")
    api_for(api.key, api_version)
    header_version = response_header_version(api.key, api_version)
    encode = struct_codec(api.response_schema, api_version, api.is_flexible(api_version))[0]
    header = _RESPONSE_HEADER_V1 if header_version >= 1 else _RESPONSE_HEADER_V0
    plan = (header.pack, encode)
    _response_plans[(type(response), api_version)] = plan
    return plan


def _join_chunks(chunks: list[Any]) -> bytes:
    return b"".join(c if isinstance(c, bytes) else c.read() for c in chunks)


def encode_response_bytes(response: Message, api_version: int, correlation_id: int) -> bytes:
    return _join_chunks(encode_response(response, api_version, correlation_id))


def decode_response(api_key: int, api_version: int, payload: Any) -> tuple[int, Any]:
    """``(correlation_id, body)`` of a response frame given without its size prefix."""
    plan = _response_decode_plans.get((api_key, api_version))
    if plan is None:
        plan = _response_decode_plan(api_key, api_version)
    header_version, schema, decode = plan
    pos = 4 + header_version  # header v1 ends with a tagged-field section: usually one 0 byte
    if len(payload) >= pos and (header_version == 0 or payload[4] == 0):
        correlation_id = _unpack_i32(payload, 0)[0]
    else:
        header, pos = decode_struct(_response_header_schema, header_version,
                                    header_version >= 1, payload, 0)
        correlation_id = header.correlation_id
    try:
        return correlation_id, decode(payload, pos)[0]
    except ProtocolDecodeError:
        raise
    except MALFORMED as e:  # as decode_struct: truncated or malformed input
        raise malformed(schema, api_version, e) from None


_unpack_i32 = INT32.unpack_from
# (api key, version) -> (response header version, response schema, body decoder).
_response_decode_plans: dict[tuple[int, int], tuple[int, StructSchema, Decoder]] = {}


def _response_decode_plan(api_key: int, api_version: int) -> tuple[int, StructSchema, Decoder]:
    """Raises UnsupportedVersionError for a key or version samsa does not know."""
    api = api_for(api_key, api_version)
    flexible = api.is_flexible(api_version)
    schema = api.response_schema
    decode = struct_codec(schema, api_version, flexible)[1]
    if api_key == ApiKey.PRODUCE:  # a producer reads one per request
        decode = produce_response_decoder(api_version, decode)
    plan = (response_header_version(api_key, api_version), schema, decode)
    _response_decode_plans[(api_key, api_version)] = plan
    return plan


def peek_correlation_id(payload: Any) -> int:
    return INT32.unpack_from(payload, 0)[0]


def encode_body(message: Message, api_version: int) -> bytes:
    """Just the body of a request or response (no header, no size), for tests and tools."""
    api = message.api
    assert api is not None
    api_for(api.key, api_version)  # as decode_body: an unknown version is an error, not a guess
    buf = ExternalChunks()
    struct_codec(message._schema, api_version, api.is_flexible(api_version))[0](buf, message)
    return bytes(buf) if not buf.externals else _join_chunks(buf.chunks())


def decode_body(cls: type[Message], api_version: int, payload: Any) -> Any:
    api = cls.api
    assert api is not None
    api_for(api.key, api_version)
    body, _ = decode_struct(cls._schema, api_version, api.is_flexible(api_version), payload, 0)
    return body
