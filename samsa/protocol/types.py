"""Primitive wire types of the Kafka protocol: fixed-width integers, varints, strings, bytes, UUIDs.

Encoders append to a bytearray: ``enc(buf, value) -> None``.
Decoders read from a bytes-like object: ``dec(buf, pos) -> (value, new_pos)``.
Compact (flexible-version) strings, bytes and arrays carry an unsigned varint of length + 1,
with 0 meaning null; classic ones carry an int16/int32 length with -1 meaning null.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from samsa.errors import KafkaError

Encoder = Callable[[bytearray, Any], None]
Decoder = Callable[[Any, int], tuple[Any, int]]


class ProtocolDecodeError(KafkaError):
    """Bytes that do not parse as the declared message (truncated, bad length, bad UTF-8)."""


INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
UINT16 = struct.Struct(">H")
INT32 = struct.Struct(">i")
UINT32 = struct.Struct(">I")
INT64 = struct.Struct(">q")
FLOAT64 = struct.Struct(">d")


# -- varints ----------------------------------------------------------------------------------

def write_uvarint(buf: bytearray, n: int) -> None:
    """Unsigned LEB128: 7 bits per byte, low group first."""
    while n >= 0x80:
        buf.append((n & 0x7F) | 0x80)
        n >>= 7
    buf.append(n)


def read_uvarint(buf: Any, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    # Unrolled for two and three bytes (lengths up to 2 MiB, such as a records batch's).
    result = b & 0x7F
    b = buf[pos + 1]
    if b < 0x80:
        return result | b << 7, pos + 2
    result |= (b & 0x7F) << 7
    b = buf[pos + 2]
    if b < 0x80:
        return result | b << 14, pos + 3
    result |= (b & 0x7F) << 14
    shift = 21
    pos += 2
    while True:
        pos += 1
        b = buf[pos]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos + 1
        shift += 7
        if shift > 63:
            raise ProtocolDecodeError(f"varint longer than 10 bytes at position {pos}")


def uvarint_size(n: int) -> int:
    size = 1
    while n >= 0x80:
        n >>= 7
        size += 1
    return size


def write_varint(buf: bytearray, n: int) -> None:
    """Zigzag-encoded signed varint (32-bit)."""
    # Without this check the mask would silently write another number (2**31 -> 0).
    if not -0x80000000 <= n <= 0x7FFFFFFF:
        raise ValueError(f"varint {n} is outside the int32 range")
    write_uvarint(buf, ((n << 1) ^ (n >> 31)) & 0xFFFFFFFF)


def write_varlong(buf: bytearray, n: int) -> None:
    """Zigzag-encoded signed varlong (64-bit)."""
    if not -0x8000000000000000 <= n <= 0x7FFFFFFFFFFFFFFF:
        raise ValueError(f"varlong {n} is outside the int64 range")
    write_uvarint(buf, ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF)


def read_varint(buf: Any, pos: int) -> tuple[int, int]:
    """Reads a zigzag varint or varlong (the decoding is the same)."""
    u, pos = read_uvarint(buf, pos)
    return (u >> 1) ^ -(u & 1), pos


read_varlong = read_varint


# -- fixed width ------------------------------------------------------------------------------

def _fixed(st: struct.Struct) -> tuple[Encoder, Decoder]:
    pack, unpack_from, size = st.pack, st.unpack_from, st.size

    def enc(buf: bytearray, v: Any) -> None:
        buf += pack(v)

    def dec(buf: Any, pos: int) -> tuple[Any, int]:
        return unpack_from(buf, pos)[0], pos + size

    return enc, dec


def enc_bool(buf: bytearray, v: Any) -> None:
    buf.append(1 if v else 0)


def dec_bool(buf: Any, pos: int) -> tuple[bool, int]:
    return buf[pos] != 0, pos + 1


def enc_uuid(buf: bytearray, v: Any) -> None:
    buf += v.bytes if isinstance(v, uuid.UUID) else bytes(v)


def dec_uuid(buf: Any, pos: int) -> tuple[uuid.UUID, int]:
    end = pos + 16
    if end > len(buf):
        raise IndexError
    return uuid.UUID(bytes=bytes(buf[pos:end])), end


FIXED: dict[str, tuple[Encoder, Decoder]] = {
    "int8": _fixed(INT8),
    "int16": _fixed(INT16),
    "uint16": _fixed(UINT16),
    "int32": _fixed(INT32),
    "uint32": _fixed(UINT32),
    "int64": _fixed(INT64),
    "float64": _fixed(FLOAT64),
    "bool": (enc_bool, dec_bool),
    "uuid": (enc_uuid, dec_uuid),
}
# struct format characters, used to merge runs of fixed-width fields into one pack/unpack.
FIXED_FORMAT = {"int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
                "int64": "q", "float64": "d", "bool": "?"}


# -- lengths ----------------------------------------------------------------------------------

def length_codec(compact: bool, wide: bool) -> tuple[Callable[[bytearray, int], None],
                                                    Callable[[Any, int], tuple[int, int]]]:
    """Length prefix writer/reader; -1 stands for null.

    ``wide`` selects int32 (bytes, arrays) over int16 (strings) in classic versions.
    """
    if compact:
        def write(buf: bytearray, n: int) -> None:
            write_uvarint(buf, n + 1)

        def read(buf: Any, pos: int) -> tuple[int, int]:
            n, pos = read_uvarint(buf, pos)
            return n - 1, pos

        return write, read
    st = INT32 if wide else INT16
    pack, unpack_from, size = st.pack, st.unpack_from, st.size

    def write_fixed(buf: bytearray, n: int) -> None:
        buf += pack(n)

    def read_fixed(buf: Any, pos: int) -> tuple[int, int]:
        return unpack_from(buf, pos)[0], pos + size

    return write_fixed, read_fixed


def past_end(what: str, pos: int, n: int, size: int) -> ProtocolDecodeError:
    """The error for a length-prefixed value of ``n`` bytes at ``pos`` that overruns the
    ``size``-byte input (raised by the caller, so the hot path only compares two ints)."""
    return ProtocolDecodeError(f"{what} of {n} bytes at position {pos} runs past the end "
                               f"of a {size}-byte message")


def _null_length(compact: bool, wide: bool) -> bytes:
    """The length prefix that stands for null: varint 0, or int16/int32 -1."""
    if compact:
        return b"\0"
    return b"\xff\xff\xff\xff" if wide else b"\xff\xff"


# The codecs below are used for tagged fields, arrays of strings and by tests; the struct
# codec generates the same logic inline for ordinary fields (codec.py).  Compact lengths take
# the one-byte varint path inline: nearly every length is below 127.

def string_codec(compact: bool, nullable: bool, field: str) -> tuple[Encoder, Decoder]:
    write_len, read_len = length_codec(compact, wide=False)
    null = _null_length(compact, wide=False)
    what = f"string {field!r}"

    def enc(buf: bytearray, v: Any) -> None:
        if v is None:
            if not nullable:
                raise ValueError(f"field {field!r} is not nullable in this version")
            buf += null
            return
        b = v.encode()
        n = len(b)
        if compact and n < 0x7F:
            buf.append(n + 1)
        else:
            write_len(buf, n)
        buf += b

    def dec(buf: Any, pos: int) -> tuple[Any, int]:
        if compact and buf[pos] < 0x80:
            n = buf[pos] - 1
            pos += 1
        else:
            n, pos = read_len(buf, pos)
        if n < 0:
            if not nullable:
                raise ProtocolDecodeError(f"non-nullable string {field!r} was null")
            return None, pos
        end = pos + n
        if end > len(buf):
            raise past_end(what, pos, n, len(buf))
        try:
            return str(buf[pos:end], "utf-8"), end
        except UnicodeDecodeError as e:
            raise ProtocolDecodeError(f"string {field!r} is not valid UTF-8: {e}") from None

    return enc, dec


def bytes_codec(compact: bool, nullable: bool, field: str) -> tuple[Encoder, Decoder]:
    write_len, read_len = length_codec(compact, wide=True)
    null = _null_length(compact, wide=True)
    what = f"bytes {field!r}"

    def enc(buf: bytearray, v: Any) -> None:
        if v is None:
            if not nullable:
                raise ValueError(f"field {field!r} is not nullable in this version")
            buf += null
            return
        n = len(v)
        if compact and n < 0x7F:
            buf.append(n + 1)
        else:
            write_len(buf, n)
        buf += v

    def dec(buf: Any, pos: int) -> tuple[Any, int]:
        if compact and buf[pos] < 0x80:
            n = buf[pos] - 1
            pos += 1
        else:
            n, pos = read_len(buf, pos)
        if n < 0:
            if not nullable:
                raise ProtocolDecodeError(f"non-nullable bytes {field!r} was null")
            return None, pos
        end = pos + n
        if end > len(buf):
            raise past_end(what, pos, n, len(buf))
        return bytes(buf[pos:end]), end

    return enc, dec


class ExternalChunks(bytearray):
    """An output buffer that may splice in external chunks (file slices for zero-copy sends).

    A ``records`` value that is not bytes-like (e.g. the broker's FileSlice) is not copied:
    its length prefix is written and ``(position, value)`` is remembered; ``chunks()`` returns
    the bytes pieces and the external values in order.
    """

    # No __init__, so making one costs what a bytearray does: the empty tuple is shared, and an
    # instance gets its own list when the first external value is added.
    externals: list[tuple[int, Any]] | tuple[()] = ()

    def add_external(self, value: Any) -> None:
        """Splice ``value`` in at the current end of the buffer."""
        if not self.externals:
            self.externals = []
        self.externals.append((len(self), value))

    def chunks(self) -> list[Any]:
        if not self.externals:
            return [bytes(self)]
        out: list[Any] = []
        start = 0
        for pos, value in self.externals:
            out.append(bytes(self[start:pos]))
            out.append(value)
            start = pos
        out.append(bytes(self[start:]))
        return out


class GatherChunks(ExternalChunks):
    """ExternalChunks for a gather write (``socket.sendmsg``): records values of at least
    ``GATHER_MIN`` bytes are spliced in by reference too, bytes-like or not, so that a Produce
    request's record batches go to the socket without being copied into the frame (Java's
    ProduceRequest sends its MemoryRecords' buffers the same way, as a MultiRecordsSend).
    ``chunks()`` gives views of the buffer between them, not copies."""

    def chunks(self) -> list[Any]:
        if not self.externals:
            return [self]
        view = memoryview(self)
        out: list[Any] = []
        start = 0
        for pos, value in self.externals:
            if pos > start:
                out.append(view[start:pos])
            out.append(value)
            start = pos
        if start < len(self):
            out.append(view[start:])
        return out


# Smaller records values are cheaper to copy than to send as a buffer of their own.
GATHER_MIN = 1024
BYTES_LIKE = (bytes, bytearray, memoryview)


def write_records(buf: bytearray, v: Any) -> None:
    """The payload of a non-null records value (its length is already written): bytes-like
    values are copied (spliced in by a GatherChunks if large), others (file slices) are
    spliced in when ``buf`` allows it, else read."""
    if isinstance(v, BYTES_LIKE):
        if type(buf) is GatherChunks and len(v) >= GATHER_MIN:
            buf.add_external(v)
        else:
            buf += v
    elif isinstance(buf, ExternalChunks):
        buf.add_external(v)
    else:
        buf += v.read()


def records_codec(compact: bool, nullable: bool, field: str) -> tuple[Encoder, Decoder]:
    write_len, read_len = length_codec(compact, wide=True)
    null = _null_length(compact, wide=True)
    what = f"records {field!r}"

    def enc(buf: bytearray, v: Any) -> None:
        if v is None:
            if not nullable:
                raise ValueError(f"field {field!r} is not nullable in this version")
            buf += null
            return
        write_len(buf, len(v))
        write_records(buf, v)

    def dec(buf: Any, pos: int) -> tuple[Any, int]:
        n, pos = read_len(buf, pos)
        if n < 0:
            return None, pos
        end = pos + n
        if end > len(buf):
            raise past_end(what, pos, n, len(buf))
        # A slice, not a copy, when the input is a memoryview (the broker's frames).
        return buf[pos:end], end

    return enc, dec
