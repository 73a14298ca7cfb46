"""Compression bombs: small payloads that inflate (or claim to) to hundreds of MiB, built
without ever holding the inflated bytes, and the v2 batches that carry them.

Each codec's bomb inflates to zeros (not records): a reader must refuse it for its size
before it gets to parse anything.  ``zstd_records`` is the exception, a bomb of well-formed
records, for a broker that is told to accept it so that a consumer meets it.
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Iterable, Iterator
from functools import cache

import cramjam
import lz4.block
import zstandard
from crc32c import crc32c

from samsa.records import Compression
from samsa.records.compression import LZ4_FRAME_MAGIC, XERIAL_MAGIC, xxh32
from samsa.records.varint import encode_varint, encode_varlong

MiB = 1024 * 1024
_ZEROS = bytes(MiB)
# Attributes .. RecordsCount: what the CRC covers before the records.
_AFTER_CRC = struct.Struct(">hiqqqhii")
# BaseOffset, BatchLength, PartitionLeaderEpoch, Magic, CRC.
_BEFORE_CRC = struct.Struct(">qiibI")


def _zeros(n: int) -> Iterator[bytes]:
    for start in range(0, n, MiB):
        yield _ZEROS[: min(MiB, n - start)]


def _zstd(pieces: Iterable[bytes], size: int | None) -> bytes:
    if size is None:  # as Java's ZstdOutputStream writes: no content size in the header
        cobj = zstandard.ZstdCompressor(level=3, write_content_size=False).compressobj()
    else:
        cobj = zstandard.ZstdCompressor(level=3).compressobj(size=size)
    return b"".join(cobj.compress(p) for p in pieces) + cobj.flush()


@cache
def zstd_bomb(n: int, *, content_size: bool = True) -> bytes:
    """A zstd frame of ``n`` zero bytes (256 MiB take 8 KB), with or without the content size
    in its header."""
    return _zstd(_zeros(n), n if content_size else None)


@cache
def gzip_bomb(n: int, member: int = 16 * MiB) -> bytes:
    """Concatenated gzip members (Java's GZIPInputStream reads them all) of ``n`` zero bytes
    in all: deflate's best ratio is about 1000:1, so 512 MiB take about 520 KB."""
    assert n % member == 0
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    one = b"".join(c.compress(p) for p in _zeros(member)) + c.flush()
    return one * (n // member)


def _lz4_frame(blocks: Iterable[bytes]) -> bytes:
    descriptor = b"\x60\x70"  # independent blocks, no checksums; BD: 4 MiB blocks
    header = LZ4_FRAME_MAGIC + descriptor + bytes([(xxh32(descriptor) >> 8) & 0xFF])
    body = b"".join(struct.pack("<I", len(b)) + b for b in blocks)
    return header + body + b"\x00\x00\x00\x00"


@cache
def lz4_bomb(n: int) -> bytes:
    """An LZ4 frame of ``n`` zero bytes in 4 MiB blocks (16 KB each: 63 blocks fit in the
    default message.max.bytes and inflate to 252 MiB)."""
    assert n % (4 * MiB) == 0
    block = lz4.block.compress(bytes(4 * MiB), store_size=False)
    return _lz4_frame([block] * (n // (4 * MiB)))


def lz4_declared_bomb(blocks: int = 256) -> bytes:
    """An LZ4 frame that declares 4 MiB blocks (``blocks`` x 4 MiB = 1 GiB for 256) and holds
    ``blocks`` tiny ones of 1 KiB each: only a reader that sizes its output from the declared
    block size pays for the gigabyte."""
    return _lz4_frame([lz4.block.compress(bytes(1024), store_size=False)] * blocks)


@cache
def snappy_xerial_bomb(n: int) -> bytes:
    """xerial-framed snappy (Java's SnappyOutputStream framing) of ``n`` zero bytes in 1 MiB
    blocks: snappy's best ratio is about 21:1, so 96 MiB take 4.6 MB."""
    assert n % MiB == 0
    block = bytes(cramjam.snappy.compress_raw(_ZEROS))
    header = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    return header + (struct.pack(">i", len(block)) + block) * (n // MiB)


def snappy_raw_claim(declared: int) -> bytes:
    """Raw snappy whose header claims ``declared`` bytes while its body holds 1 KiB."""
    body = bytes(cramjam.snappy.compress_raw(bytes(1024)))
    return _uvarint(declared) + body[len(_uvarint(1024)):]


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _zero_records(count: int, value_bytes: int) -> Iterator[bytes]:
    for i in range(count):
        head = (b"\x00" + encode_varlong(0) + encode_varint(i) + encode_varint(-1)
                + encode_varint(value_bytes))
        yield encode_varint(len(head) + value_bytes + 1) + head
        yield from _zeros(value_bytes)
        yield b"\x00"  # no headers


@cache
def zstd_records(count: int, value_bytes: int) -> bytes:
    """A zstd frame (no content size, as Java writes) of ``count`` well-formed records, each
    keyless with ``value_bytes`` zero bytes as value."""
    return _zstd(_zero_records(count, value_bytes), None)


def batch_of(payload: bytes, codec: Compression, count: int = 1) -> bytes:
    """A v2 batch (base offset 0, no producer id, CreateTime now) whose records section is
    ``payload``, claiming ``count`` records."""
    now = int(time.time() * 1000)
    after_crc = _AFTER_CRC.pack(int(codec), count - 1, now, now, -1, -1, -1, count) + payload
    batch_length = 4 + 1 + 4 + len(after_crc)  # PartitionLeaderEpoch, Magic, CRC, the rest
    return _BEFORE_CRC.pack(0, batch_length, -1, 2, crc32c(after_crc)) + after_crc
