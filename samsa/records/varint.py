"""Zigzag varints (protobuf style), as used inside v2 records.

Zigzag maps signed to unsigned (0→0, −1→1, 1→2, −2→3, …), then LEB128 writes 7 bits a byte,
low group first, high bit set on every byte but the last.  Varints hold int32 values and varlongs
int64; both encode the same way, only the range differs.
"""

from __future__ import annotations

__all__ = [
    "SMALL_VARINTS",
    "SMALL_VARINT_LIMIT",
    "decode_varint",
    "decode_varlong",
    "encode_varint",
    "encode_varlong",
    "size_of_varint",
    "size_of_varlong",
]

_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


def _encode(value: int) -> bytes:
    n = (value << 1) ^ (value >> 63)  # zigzag; exact for any int64
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Zigzag-encode an int32."""
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"varint out of int32 range: {value}")
    return _encode(value)


def encode_varlong(value: int) -> bytes:
    """Zigzag-encode an int64."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {value}")
    return _encode(value)


# Encodings of 0 <= n < SMALL_VARINT_LIMIT, looked up on the hot path instead of encoding:
# covers lengths, offset deltas and timestamp deltas of typical batches.
SMALL_VARINT_LIMIT = 1 << 14
SMALL_VARINTS: tuple[bytes, ...] = tuple(_encode(i) for i in range(SMALL_VARINT_LIMIT))


def _decode(buf: bytes | bytearray | memoryview, pos: int, max_bytes: int) -> tuple[int, int]:
    n = 0
    shift = 0
    limit = pos + max_bytes
    while True:
        if pos >= limit:
            raise ValueError(f"varint longer than {max_bytes} bytes")
        b = buf[pos]  # IndexError on truncated input; callers map it to a corrupt record
        pos += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return (n >> 1) ^ -(n & 1), pos
        shift += 7


def decode_varint(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """Decode an int32 varint at ``pos``; returns ``(value, next_pos)``."""
    return _decode(buf, pos, 5)


def decode_varlong(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """Decode an int64 varlong at ``pos``; returns ``(value, next_pos)``."""
    return _decode(buf, pos, 10)


def size_of_varint(value: int) -> int:
    """Bytes the zigzag encoding of ``value`` takes."""
    n = (value << 1) ^ (value >> 63)
    size = 1
    while n >= 0x80:
        n >>= 7
        size += 1
    return size


size_of_varlong = size_of_varint
