"""Compression codecs exactly as Kafka frames them (Kafka's CompressionType and its codecs).

* gzip: one RFC 1952 member on write; any number of members on read.
* snappy: raw snappy on write (as librdkafka); on read the xerial framing that Java and
  kafka-python write is recognised by its 8-byte magic, anything else is raw snappy.
* lz4: an LZ4 frame with *independent* blocks, no content size, 64 KiB blocks
  (header ``04 22 4D 18 60 40 82``, identical to Java's); Java rejects linked blocks.  Magic-0
  message sets carry a wrong header checksum, repaired before decoding.
* zstd: standard zstd frame(s).

Decompression is bounded: a batch's payload is a peer's, and a few KB can claim (or really
inflate to) gigabytes.  Every decoder grows its output from what the codec really produced
(gzip and zstd in chunks, lz4 block by block from sizes the input can yield, snappy after
checking its declared lengths) and raises :class:`DecompressedSizeError` once the output would
pass ``max_bytes``.  Kafka has no such limit: its LogValidator and consumer stream records
through the decompressor one at a time, so their memory follows the largest record, not the
batch; samsa holds a batch's records at once, hence the limit
(:data:`DEFAULT_MAX_DECOMPRESSED_BYTES`, the broker's and consumer's
``samsa.decompressed.batch.max.bytes``).

Levels follow Kafka's ``compression.<codec>.level`` configs: gzip 1..9 or -1 (zlib's default, 6);
lz4 1..17, default 9, where the default means lz4's fast compressor and any other level the high
compression one (as lz4-java inside Kafka); zstd -131072..22, default 3; snappy has no level.
"""

from __future__ import annotations

import struct
import threading
import zlib

import cramjam
import lz4.block
import lz4.frame
import zstandard

from samsa.records.batch_header import Compression
from samsa.records.scratch import KEEP_BYTES, scratch_buffer

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "LEVEL_RANGES",
    "LZ4_FRAME_HEADER",
    "LZ4_FRAME_MAGIC",
    "XERIAL_MAGIC",
    "DecompressedSizeError",
    "compress",
    "decompress",
    "decompress_scratch",
    "default_level",
    "lz4_fix_broken_header_checksum",
    "validate_level",
    "xxh32",
]

GZIP_DEFAULT_LEVEL = -1
LZ4_DEFAULT_LEVEL = 9
ZSTD_DEFAULT_LEVEL = 3

# Kafka's compression.<codec>.level bounds (GzipCompression, Lz4Compression, ZstdCompression).
LEVEL_RANGES: dict[Compression, tuple[int, int]] = {
    Compression.GZIP: (1, 9),
    Compression.LZ4: (1, 17),
    Compression.ZSTD: (-131072, 22),
}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16  # magic + int32 version + int32 min-compatible version
LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
_I32 = struct.Struct(">i")


def default_level(codec: Compression) -> int | None:
    """Kafka's default level for ``codec`` (None for codecs without levels)."""
    if codec == Compression.GZIP:
        return GZIP_DEFAULT_LEVEL
    if codec == Compression.LZ4:
        return LZ4_DEFAULT_LEVEL
    if codec == Compression.ZSTD:
        return ZSTD_DEFAULT_LEVEL
    return None


def validate_level(codec: Compression, level: int | None) -> int | None:
    """Return the effective level, raising ValueError for one Kafka would reject."""
    if type(codec) is not Compression:
        codec = Compression(codec)
    if level is None:
        return default_level(codec)
    if codec not in LEVEL_RANGES:
        raise ValueError(f"{codec.name.lower()} has no compression level (got {level})")
    low, high = LEVEL_RANGES[codec]
    if codec == Compression.GZIP and level == GZIP_DEFAULT_LEVEL:
        return level
    if not low <= level <= high:
        raise ValueError(
            f"{codec.name.lower()} compression level must be in [{low}, {high}]"
            + (" or -1" if codec == Compression.GZIP else "")
            + f", got {level}"
        )
    return level


# zstandard contexts are not safe for concurrent use; keep one per thread and level.
_local = threading.local()


def _zstd_compressor(level: int) -> zstandard.ZstdCompressor:
    cache: dict[int, zstandard.ZstdCompressor] | None = getattr(_local, "zstd_c", None)
    if cache is None:
        cache = _local.zstd_c = {}
    cctx = cache.get(level)
    if cctx is None:
        cctx = cache[level] = zstandard.ZstdCompressor(level=level)
    return cctx


def _zstd_decompressor() -> zstandard.ZstdDecompressor:
    dctx: zstandard.ZstdDecompressor | None = getattr(_local, "zstd_d", None)
    if dctx is None:
        dctx = _local.zstd_d = zstandard.ZstdDecompressor()
    return dctx


def compress(codec: Compression, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """Compress ``data`` the way Kafka expects inside a record batch."""
    if codec == Compression.NONE:
        return bytes(data)
    level = validate_level(codec, level)
    if codec == Compression.GZIP:
        assert level is not None
        return zlib.compress(data, level, 31)  # wbits 31 = gzip container
    if codec == Compression.SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == Compression.LZ4:
        assert level is not None
        return _lz4_compress(data, level)
    # validate_level() raised for anything but a Compression member: ZSTD is what is left.
    assert codec == Compression.ZSTD
    assert level is not None
    return _zstd_compressor(level).compress(data)


# Why 32 MiB: producers bound a batch's uncompressed size themselves: librdkafka by its
# message.max.bytes (1 MB by default), Java and samsa by batch.size counted in compressed bytes
# estimated from the ratio seen so far, and when such a batch inflates past the broker's limit
# the broker answers MESSAGE_TOO_LARGE, on which they split it and send the halves (Java's
# Sender, RecordAccumulator.splitAndReenqueue).  32 times the default message.max.bytes leaves
# every batch a default client sends far below it, and bounds what checking one batch costs.
DEFAULT_MAX_DECOMPRESSED_BYTES = 32 * 1024 * 1024
# Output is taken in pieces of at most this size, so a refused payload costs at most the limit
# plus one piece (one piece holds a typical batch: a single call, no join).
_CHUNK = 1024 * 1024


class DecompressedSizeError(ValueError):
    """A payload decompresses (or declares that it does) to more than the allowed bytes."""

    def __init__(self, codec: Compression, limit: int, declared: int | None = None) -> None:
        self.codec = Compression(codec)
        self.limit = limit
        self.declared = declared
        name = self.codec.name.lower()
        if declared is not None:
            text = (f"{name} payload declares {declared} decompressed bytes, more than the "
                    f"limit of {limit} bytes on one batch")
        else:
            text = f"{name} payload decompresses to more than the limit of {limit} bytes on one batch"
        super().__init__(text)


def decompress(codec: Compression, data: bytes | bytearray | memoryview, *,
               max_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> bytes:
    """Decompress a batch payload of at most ``max_bytes`` decompressed bytes.

    Raises DecompressedSizeError (a ValueError) past ``max_bytes``, ValueError (with the
    reason) on corrupt input; memory follows the real output, never a declared size."""
    try:
        if codec == Compression.NONE:
            return bytes(data)
        if codec == Compression.GZIP:
            return _gunzip(data, max_bytes)
        if codec == Compression.SNAPPY:
            return _unsnappy(data, max_bytes)
        if codec == Compression.LZ4:
            return _unlz4(data, max_bytes)
        if codec == Compression.ZSTD:
            return _unzstd(data, max_bytes)
    except ValueError:
        raise
    except MemoryError:
        raise
    except Exception as exc:  # codec libraries raise their own error types
        raise ValueError(f"{Compression(codec).name.lower()} decompression failed: {exc}") from exc
    raise ValueError(f"unknown compression codec id {int(codec)}")


def _joined(parts: list[bytes]) -> bytes:
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _gunzip(data: bytes | bytearray | memoryview, limit: int) -> bytes:
    # Java's GZIPInputStream reads concatenated members; so do we.  max_length caps each call's
    # output; the input it did not get to waits in unconsumed_tail.
    parts: list[bytes] = []
    total = 0
    rest: bytes | bytearray | memoryview = data
    while True:
        d = zlib.decompressobj(47)  # 32 + 15: auto-detect gzip/zlib header
        pending = rest
        while True:
            piece = d.decompress(pending, min(_CHUNK, limit + 1 - total))
            total += len(piece)
            if total > limit:
                raise DecompressedSizeError(Compression.GZIP, limit)
            if piece:
                parts.append(piece)
            if d.eof:
                break
            pending = d.unconsumed_tail
            if not pending and not piece:
                raise ValueError("gzip stream is truncated")
        rest = d.unused_data
        if not rest:
            break
    return _joined(parts) if parts else b""


def _snappy_raw(block: memoryview, limit: int, total: int) -> bytes:
    # Raw snappy starts with the decompressed length, which the decoder allocates at once:
    # check the claim first.  (Real snappy output is at most ~21 times its input.)
    declared = cramjam.snappy.decompress_raw_len(block)
    if total + declared > limit:
        raise DecompressedSizeError(Compression.SNAPPY, limit, total + declared)
    return bytes(cramjam.snappy.decompress_raw(block))


def _unsnappy(data: bytes | bytearray | memoryview, limit: int) -> bytes:
    view = memoryview(data)
    if view[:8] != XERIAL_MAGIC:
        return _snappy_raw(view, limit, 0)
    if len(view) < _XERIAL_HEADER_SIZE:
        raise ValueError("xerial snappy header is truncated")
    out: list[bytes] = []
    total = 0
    pos = _XERIAL_HEADER_SIZE
    end = len(view)
    while pos < end:
        if end - pos < 4:
            raise ValueError("xerial snappy block length is truncated")
        (length,) = _I32.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise ValueError(f"xerial snappy block of {length} bytes overruns the payload")
        piece = _snappy_raw(view[pos : pos + length], limit, total)
        total += len(piece)
        out.append(piece)
        pos += length
    return b"".join(out)


# LZ4 frames are assembled here from lz4.block output: for batch-sized inputs this is several
# times faster than lz4.frame (which sets up a frame context per call) and yields the same bytes
# layout as Java's Lz4BlockOutputStream: magic, FLG 0x60 (v01, independent blocks, no checksums,
# no content size), BD 0x40 (64 KiB blocks), HC 0x82, blocks, end mark.
LZ4_FRAME_HEADER = LZ4_FRAME_MAGIC + b"\x60\x40\x82"
_LZ4_BLOCK_SIZE = 64 * 1024
_LZ4_UNCOMPRESSED_BIT = 0x80000000
_LZ4_END_MARK = b"\x00\x00\x00\x00"
_U32LE = struct.Struct("<I")
# BD bits 4-6 -> maximum block size
_LZ4_MAX_BLOCK = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}
_lz4_hc_cache: dict[bytes, int] = {}
# The usual frame's head (ours, Java's Lz4BlockOutputStream's, librdkafka's): magic, FLG 0x60,
# BD, HC and the first block's size, read with one call (_lz4_one_block).
_LZ4_ONE_BLOCK = struct.Struct("<IBBBI")
_LZ4_MAGIC_LE = _U32LE.unpack(LZ4_FRAME_MAGIC)[0]
_LZ4_USUAL_FLG = 0x60


def _lz4_compress(data: bytes | bytearray | memoryview, level: int) -> bytes:
    view = memoryview(data)
    total = len(view)
    parts = [LZ4_FRAME_HEADER]
    pack = _U32LE.pack
    fast = level == LZ4_DEFAULT_LEVEL
    for start in range(0, total, _LZ4_BLOCK_SIZE):
        chunk = view[start : start + _LZ4_BLOCK_SIZE]
        if fast:
            block = lz4.block.compress(chunk, store_size=False)
        else:
            block = lz4.block.compress(
                chunk, mode="high_compression", compression=min(level, 12), store_size=False
            )
        if len(block) < len(chunk):
            parts.append(pack(len(block)))
            parts.append(block)
        else:  # incompressible: store as is, as the frame format allows
            parts.append(pack(len(chunk) | _LZ4_UNCOMPRESSED_BIT))
            parts.append(bytes(chunk))
    parts.append(_LZ4_END_MARK)
    return b"".join(parts)


def _lz4_header_checksum(descriptor: bytes) -> int:
    hc = _lz4_hc_cache.get(descriptor)
    if hc is None:
        hc = _lz4_hc_cache[descriptor] = (xxh32(descriptor) >> 8) & 0xFF
    return hc


def _lz4_one_block(view: memoryview) -> tuple[int, memoryview] | None:
    """(maximum block size, block) of the usual frame: FLG 0x60 (v01, independent blocks, no
    checksums, no content size), a valid BD and header checksum, one compressed block, the end
    mark and nothing after it.  None for anything else, well-formed or not: _lz4_blocks then
    parses it step by step (and names what is wrong).

    A 16 KiB batch from any client is one such frame: one struct call and one look at the end
    mark instead of _lz4_blocks' dozen slices, calls and lookups (a third of its cost)."""
    end = len(view)
    if end <= 15:
        return None
    magic, flg, bd, hc, size = _LZ4_ONE_BLOCK.unpack_from(view, 0)
    # size == end - 15: the block ends where the 4-byte end mark must start, and it is not
    # stored raw (that bit would make size far larger than any frame here).
    if magic != _LZ4_MAGIC_LE or flg != _LZ4_USUAL_FLG or size != end - 15:
        return None
    known = _LZ4_USUAL_BD.get(bd)  # None for an invalid BD
    if known is None or hc != known[0] or size > known[1] \
            or _U32LE.unpack_from(view, end - 4)[0]:
        return None
    return known[1], view[11 : end - 4]


def _lz4_blocks(data: bytes | bytearray | memoryview
                ) -> tuple[int, list[tuple[bool, memoryview]], int] | None:
    """Parse an LZ4 frame of independent blocks: (maximum block size, [(stored raw, block)],
    the most bytes the blocks can decompress to).

    None for frames only lz4.frame can decode and verify (linked blocks, block or content
    checksums, a dictionary).  Raises ValueError for a malformed frame."""
    view = data if type(data) is memoryview else memoryview(data)
    one = _lz4_one_block(view)
    if one is not None:
        max_block, block = one
        return max_block, [(False, block)], _lz4_block_bound(len(block), max_block)
    end = len(view)
    # The frame header (magic, descriptor, header checksum: at most 15 bytes) read from one
    # bytes copy: each look into a memoryview costs a slice or an item call (every produced
    # lz4 batch comes through here).
    head = view[:15].tobytes()
    if end < 7 or not head.startswith(LZ4_FRAME_MAGIC):
        raise ValueError("lz4 payload does not start with the LZ4 frame magic")
    flg = head[4]
    bd = head[5]
    # Reserved bits must be 0 and the block size code 4..7 (Java's Lz4BlockInputStream FLG/BD
    # validate(), the LZ4 frame format); lz4.frame rejects such frames too.
    if flg & 0x02 or bd & 0x8F or (bd >> 4) not in _LZ4_MAX_BLOCK:
        raise ValueError(f"lz4 frame descriptor FLG {flg:#04x} BD {bd:#04x} is invalid")
    # Ours: version 01, independent blocks, no block/content checksum, no dictionary.
    if (flg & 0xF5) != 0x60:
        return None
    pos = 6 + (8 if flg & 0x08 else 0)
    if end <= pos:
        raise ValueError("lz4 frame descriptor is truncated")
    if head[pos] != _lz4_header_checksum(head[4:pos]):
        raise ValueError("lz4 frame header checksum mismatch")
    pos += 1
    max_block = _LZ4_MAX_BLOCK[bd >> 4]
    blocks = []
    bound = 0
    unpack = _U32LE.unpack_from
    while True:
        if end - pos < 4:
            raise ValueError("lz4 frame is truncated (no end mark)")
        (size,) = unpack(view, pos)
        pos += 4
        if size == 0:
            break
        raw = size >= _LZ4_UNCOMPRESSED_BIT
        size &= ~_LZ4_UNCOMPRESSED_BIT
        if size > max_block or pos + size > end:
            raise ValueError(f"lz4 block of {size} bytes overruns the frame")
        blocks.append((raw, view[pos : pos + size]))
        if raw:
            bound += size
        else:  # _lz4_block_bound inline: a Python call less per block
            bound += min(255 * size + 64, max_block)
        pos += size
    if pos != end:
        raise ValueError(f"{end - pos} bytes follow the lz4 frame")
    return max_block, blocks, bound


# Most bytes one compressed LZ4 block of n bytes can yield: a match grows by at most 255 bytes
# per input byte (its length's extension bytes), so bounds follow the input, not the frame's
# declared block size (an attacker's frame may declare 4 MiB blocks and carry 10-byte ones).
def _lz4_block_bound(size: int, max_block: int) -> int:
    return min(max_block, 255 * size + 64)


def _unlz4(data: bytes | bytearray | memoryview, limit: int) -> bytes:
    parsed = _lz4_blocks(data)
    if parsed is None:
        return _unlz4_frame(data, limit)
    max_block, blocks, _ = parsed
    parts = []
    total = 0
    for raw, block in blocks:
        if raw:
            piece = bytes(block)
        else:
            piece = lz4.block.decompress(block, uncompressed_size=_lz4_block_bound(len(block), max_block))
        total += len(piece)
        if total > limit:
            raise DecompressedSizeError(Compression.LZ4, limit)
        parts.append(piece)
    return _joined(parts) if parts else b""


def _unlz4_frame(data: bytes | bytearray | memoryview, limit: int) -> bytes:
    # Frames only lz4.frame decodes (linked blocks, checksums): in pieces of at most _CHUNK.
    d = lz4.frame.LZ4FrameDecompressor()
    parts: list[bytes] = []
    total = 0
    pending: bytes | bytearray | memoryview = data
    while True:
        piece = d.decompress(pending, min(_CHUNK, limit + 1 - total))
        total += len(piece)
        if total > limit:
            raise DecompressedSizeError(Compression.LZ4, limit)
        if piece:
            parts.append(piece)
        if d.eof:
            break
        if d.needs_input:
            raise ValueError("lz4 frame is truncated (no end mark)")
        pending = b""
    if d.unused_data:
        raise ValueError(f"{len(d.unused_data)} bytes follow the lz4 frame")
    return _joined(parts) if parts else b""


def decompress_scratch(codec: Compression, data: bytes | bytearray | memoryview, *,
                       max_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES, bytes_up_to: int = 0
                       ) -> tuple[bytes | bytearray, int]:
    """Decompress a batch payload for a look that ends before this thread's next use of
    samsa.records.scratch: ``(buffer, length)``, the output being ``buffer[:length]``.

    LZ4 blocks are decompressed into the thread's scratch buffer, so checking a 1 MiB batch
    allocates (and page-faults) nothing once it has grown; other codecs (and LZ4 frames whose
    blocks could yield more than the scratch buffer keeps) return a fresh ``bytes``.  So does an
    LZ4 frame of one compressed block that can yield at most ``bytes_up_to`` bytes: for a caller
    that reads a bytes fastest (the broker's compiled record walk), lz4.block's own output is
    cheaper than the scratch buffer and a copy.  Raises as decompress() does,
    DecompressedSizeError past ``max_bytes`` included."""
    if codec == Compression.LZ4:
        try:
            parsed = _lz4_blocks(data)
            if parsed is not None:
                _, blocks, bound = parsed
                if bound <= bytes_up_to and len(blocks) == 1 and not blocks[0][0]:
                    out = lz4.block.decompress(blocks[0][1], uncompressed_size=bound)
                    if len(out) > max_bytes:
                        raise DecompressedSizeError(Compression.LZ4, max_bytes)
                    return out, len(out)
                # The buffer is sized from what the blocks can really yield; beyond what the
                # scratch buffer keeps, grow with the real output instead (decompress()).
                if bound <= KEEP_BYTES:
                    return _unlz4_scratch(blocks, bound, max_bytes)
        except ValueError:
            raise
        except Exception as exc:  # cramjam's DecompressionError
            raise ValueError(f"lz4 decompression failed: {exc}") from exc
    out = decompress(codec, data, max_bytes=max_bytes)
    return out, len(out)


def _unlz4_scratch(blocks: list[tuple[bool, memoryview]], bound: int, limit: int
                   ) -> tuple[bytearray, int]:
    buf = scratch_buffer(bound)
    view = memoryview(buf)
    used = 0
    for raw, block in blocks:
        if raw:
            view[used : used + len(block)] = block
            used += len(block)
        else:  # the room left is enough: the bound holds for every block
            used += _lz4_block_into(block, view[used:bound], output_len=bound - used)
    if used > limit:  # (the bound kept memory within the scratch buffer's)
        raise DecompressedSizeError(Compression.LZ4, limit)
    return buf, used


_lz4_block_into = cramjam.lz4.decompress_block_into


def lz4_fix_broken_header_checksum(data: bytes | bytearray | memoryview) -> bytes:
    """Rewrite the header checksum of a magic-0 LZ4 frame.

    Kafka before 0.10 hashed the 4 magic bytes together with the frame descriptor, so the HC byte
    is wrong for every other reader; Java ignores it on magic 0 and librdkafka rewrites it.
    """
    buf = bytearray(data)
    if buf[:4] != LZ4_FRAME_MAGIC or len(buf) < 7:
        raise ValueError("not an LZ4 frame")
    flg = buf[4]
    descriptor_end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if len(buf) <= descriptor_end:
        raise ValueError("LZ4 frame descriptor is truncated")
    buf[descriptor_end] = (xxh32(bytes(buf[4:descriptor_end])) >> 8) & 0xFF
    return bytes(buf)


def _unzstd(data: bytes | bytearray | memoryview, limit: int) -> bytes:
    dctx = _zstd_decompressor()
    declared = zstandard.frame_content_size(data)  # -1: not recorded
    if declared > limit:
        raise DecompressedSizeError(Compression.ZSTD, limit, declared)
    if declared >= 0:
        try:
            # Fast path: one frame that records its (now checked) content size, as zstandard
            # and librdkafka write; the output is allocated at that size.
            return dctx.decompress(data, allow_extra_data=False)
        except zstandard.ZstdError:
            pass  # several frames, or a frame that lied about its size: stream it
    # Streaming writers (Java's ZstdOutputStream) omit the size; several frames may follow.
    # The stream's window is allocated from the frame's window size (at most zstd's default
    # limit, 128 MiB) but only touched as output is written, so it costs at most as much as
    # the output read here.
    reader = dctx.stream_reader(data, read_across_frames=True)
    parts: list[bytes] = []
    total = 0
    while True:
        piece = reader.read(min(_CHUNK, limit + 1 - total))
        if not piece:
            break
        total += len(piece)
        if total > limit:
            raise DecompressedSizeError(Compression.ZSTD, limit)
        parts.append(piece)
    return _joined(parts) if parts else b""


# xxHash32, only for LZ4 frame header checksums (a few bytes), so a plain implementation suffices.
_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 of ``data`` (reference algorithm)."""
    n = len(data)
    pos = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while pos + 16 <= n:
            for i in range(4):
                lane = int.from_bytes(data[pos : pos + 4], "little")
                v[i] = (_rotl((v[i] + lane * _P2) & _M32, 13) * _P1) & _M32
                pos += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while pos + 4 <= n:
        h = (_rotl((h + int.from_bytes(data[pos : pos + 4], "little") * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    while pos < n:
        h = (_rotl((h + data[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


# BD -> (header checksum of FLG 0x60 and that BD, maximum block size): _lz4_one_block's table
# (every valid BD: bits 4-6 a size code, the rest 0).
_LZ4_USUAL_BD: dict[int, tuple[int, int]] = {
    code << 4: (_lz4_header_checksum(bytes((_LZ4_USUAL_FLG, code << 4))), size)
    for code, size in _LZ4_MAX_BLOCK.items()}
