import gzip
import os
import struct
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import cramjam
import lz4.frame
import pytest
import xxhash
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.records import Compression, compression
from samsa.records.compression import (
    LZ4_FRAME_HEADER,
    LZ4_FRAME_MAGIC,
    XERIAL_MAGIC,
    DecompressedSizeError,
    compress,
    decompress,
    decompress_scratch,
    default_level,
    lz4_fix_broken_header_checksum,
    validate_level,
    xxh32,
)
from samsa.records.scratch import scratch_buffer
from tests.support.compression_bombs import (
    MiB,
    gzip_bomb,
    lz4_bomb,
    lz4_declared_bomb,
    snappy_raw_claim,
    snappy_xerial_bomb,
    zstd_bomb,
)
from tests.support.process_stats import peak_rss_bytes, reset_peak_rss, rss_bytes

T = TypeVar("T")

PAYLOADS = [b"", b"a", os.urandom(1000), b"kafka " * 50_000, os.urandom(70_000) + b"z" * 200_000]


@pytest.mark.parametrize("codec", list(Compression))
@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: f"{len(p)}B")
def test_roundtrip(codec: Compression, payload: bytes) -> None:
    assert decompress(codec, compress(codec, payload)) == payload
    assert decompress(codec, memoryview(compress(codec, bytearray(payload)))) == payload


@settings(max_examples=50, deadline=None)
@given(st.binary(max_size=5000), st.sampled_from(list(Compression)))
def test_roundtrip_property(payload: bytes, codec: Compression) -> None:
    assert decompress(codec, compress(codec, payload)) == payload


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: f"{len(p)}B")
@pytest.mark.parametrize("level", [None, 1, 12, 17])
def test_lz4_frame_matches_java_layout(payload: bytes, level: int | None) -> None:
    frame = compress(Compression.LZ4, payload, level)
    # Java's Lz4BlockOutputStream: magic, FLG 0x60, BD 0x40, HC 0x82
    assert frame[:7] == bytes.fromhex("04224D18604082") == LZ4_FRAME_HEADER
    assert frame[-4:] == b"\x00\x00\x00\x00"
    info = lz4.frame.get_frame_info(frame)
    assert info["block_linked"] is False and info["content_checksum"] is False
    assert info["block_size"] == 64 * 1024 and info["content_size"] == 0
    assert lz4.frame.decompress(frame) == payload
    # every block is independent and at most 64 KiB of input
    pos, out = 7, b""
    while (size := struct.unpack_from("<I", frame, pos)[0]) != 0:
        block = frame[pos + 4 : pos + 4 + (size & 0x7FFFFFFF)]
        out += block if size & 0x80000000 else lz4.block.decompress(block, uncompressed_size=65536)
        pos += 4 + (size & 0x7FFFFFFF)
    assert out == payload


def test_lz4_reads_frames_other_writers_produce() -> None:
    data = b"record " * 30_000
    variants = [
        lz4.frame.compress(data),  # linked blocks, content size (python-lz4 defaults)
        lz4.frame.compress(data, block_linked=False, store_size=True, content_checksum=True),
        lz4.frame.compress(data, block_linked=False, block_checksum=True),
        lz4.frame.compress(data, block_linked=False, block_size=lz4.frame.BLOCKSIZE_MAX4MB),
        bytes(cramjam.lz4.compress(data)),
    ]
    for frame in variants:
        assert decompress(Compression.LZ4, frame) == data


def test_lz4_rejects_bad_header_checksum_but_repairs_magic0_frames() -> None:
    frame = bytearray(lz4.frame.compress(b"abc" * 100, block_linked=False, store_size=False))
    frame[6] = 0x1A  # Kafka 0.8/0.9 hashed the magic too: 0x1A for FLG 60, BD 40
    with pytest.raises(ValueError, match="header checksum"):
        decompress(Compression.LZ4, bytes(frame))
    repaired = lz4_fix_broken_header_checksum(bytes(frame))
    assert repaired[6] == 0x82
    assert decompress(Compression.LZ4, repaired) == b"abc" * 100


def test_xxh32_reference_vectors() -> None:
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F
    assert (xxh32(b"\x60\x40") >> 8) & 0xFF == 0x82
    assert (xxh32(b"\x04\x22\x4d\x18\x60\x40") >> 8) & 0xFF == 0x1A


def test_snappy_writes_raw_and_reads_xerial() -> None:
    data = b"snappy " * 20_000
    raw = compress(Compression.SNAPPY, data)
    assert bytes(cramjam.snappy.decompress_raw(raw)) == data
    assert not raw.startswith(XERIAL_MAGIC)
    # xerial framing: magic, version 1, compatible 1, then (int32 BE length, raw block) per 32 KiB
    blocks = [bytes(cramjam.snappy.compress_raw(data[i : i + 32768])) for i in range(0, len(data), 32768)]
    xerial = XERIAL_MAGIC + struct.pack(">ii", 1, 1) + b"".join(struct.pack(">i", len(b)) + b for b in blocks)
    assert decompress(Compression.SNAPPY, xerial) == data
    with pytest.raises(ValueError, match="overruns"):
        decompress(Compression.SNAPPY, xerial[:-10])


def test_gzip_reads_concatenated_members_and_rejects_truncation() -> None:
    assert decompress(Compression.GZIP, gzip.compress(b"ab") + gzip.compress(b"cd")) == b"abcd"
    assert compress(Compression.GZIP, b"x")[:2] == b"\x1f\x8b"
    with pytest.raises(ValueError):
        decompress(Compression.GZIP, gzip.compress(b"abc" * 1000)[:-5])


def test_zstd_reads_frames_without_content_size_and_several_frames() -> None:
    streamed = zstandard.ZstdCompressor(write_content_size=False).compress(b"one " * 1000)
    sized = zstandard.ZstdCompressor().compress(b"two " * 1000)
    assert decompress(Compression.ZSTD, streamed) == b"one " * 1000
    assert decompress(Compression.ZSTD, sized + streamed) == b"two " * 1000 + b"one " * 1000
    assert compress(Compression.ZSTD, b"x")[:4] == bytes.fromhex("28B52FFD")
    with pytest.raises(ValueError, match="zstd"):
        decompress(Compression.ZSTD, b"\x28\xb5\x2f\xfd garbage")


def test_levels() -> None:
    assert [default_level(c) for c in Compression] == [None, -1, None, 9, 3]
    assert validate_level(Compression.ZSTD, None) == 3
    assert validate_level(Compression.GZIP, -1) == -1
    with pytest.raises(ValueError, match=r"\[1, 9\] or -1"):
        validate_level(Compression.GZIP, 0)
    with pytest.raises(ValueError, match="no compression level"):
        validate_level(Compression.SNAPPY, 3)
    small = compress(Compression.ZSTD, b"abcdefgh" * 10_000, 19)
    assert decompress(Compression.ZSTD, small) == b"abcdefgh" * 10_000
    text = b" ".join(b"%d" % (i * i) for i in range(20_000))
    assert len(compress(Compression.GZIP, text, 9)) < len(compress(Compression.GZIP, text, 1))


def test_decompress_errors_are_value_errors() -> None:
    for codec in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD):
        with pytest.raises(ValueError):
            decompress(codec, b"\x00\x01\x02 definitely not compressed")
    with pytest.raises(ValueError):
        decompress(7, b"")  # type: ignore[arg-type]


@pytest.mark.parametrize("codec", list(Compression))
@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: f"{len(p)}B")
def test_decompress_scratch_gives_what_decompress_gives(codec: Compression, payload: bytes) -> None:
    compressed = compress(codec, payload)
    for _ in range(2):  # the second call reuses this thread's buffer
        buffer, length = decompress_scratch(codec, memoryview(compressed))
        assert bytes(buffer[:length]) == payload


def test_decompress_scratch_lz4_frames_of_other_writers_and_bad_blocks() -> None:
    payload = b"kafka " * 30_000 + os.urandom(100_000)
    # Content checksum and 256 KiB blocks (lz4.frame), raw blocks (incompressible data).
    for frame in (lz4.frame.compress(payload, content_checksum=True),
                  lz4.frame.compress(payload, block_size=lz4.frame.BLOCKSIZE_MAX256KB),
                  compress(Compression.LZ4, os.urandom(150_000))):
        buffer, length = decompress_scratch(Compression.LZ4, frame)
        assert bytes(buffer[:length]) == decompress(Compression.LZ4, frame)
    good = compress(Compression.LZ4, b"kafka " * 1000)
    (size,) = struct.unpack_from("<I", good, 7)
    broken = good[:11] + b"\xff" * size + good[11 + size:]  # same length, garbage block
    with pytest.raises(ValueError, match="lz4"):
        decompress_scratch(Compression.LZ4, broken)
    with pytest.raises(ValueError, match="truncated"):
        decompress_scratch(Compression.LZ4, good[:-4])


def test_decompress_scratch_gives_small_lz4_frames_of_one_block_as_bytes() -> None:
    small = compress(Compression.LZ4, b"kafka " * 2000)  # one compressed 64 KiB block at most
    buffer, length = decompress_scratch(Compression.LZ4, memoryview(small), bytes_up_to=65536)
    assert type(buffer) is bytes and buffer == b"kafka " * 2000 == buffer[:length]
    # What the block can yield above the limit, several blocks, or a block stored raw: the
    # scratch buffer as before.
    parsed = compression._lz4_blocks(small)
    assert parsed is not None
    big = compress(Compression.LZ4, os.urandom(1000) * 100)
    raw = compress(Compression.LZ4, os.urandom(1000))
    for frame, up_to in ((small, parsed[2] - 1), (big, 1 << 20), (raw, 65536)):
        buffer, length = decompress_scratch(Compression.LZ4, frame, bytes_up_to=up_to)
        assert buffer is scratch_buffer(1) and bytes(buffer[:length]) == decompress(
            Compression.LZ4, frame)
    with pytest.raises(DecompressedSizeError):
        decompress_scratch(Compression.LZ4, small, max_bytes=11_999, bytes_up_to=65536)
    (size,) = struct.unpack_from("<I", small, 7)
    garbage = small[:11] + b"\xff" * size + small[11 + size:]
    with pytest.raises(ValueError, match="lz4"):
        decompress_scratch(Compression.LZ4, garbage, bytes_up_to=65536)


def test_lz4_one_block_reads_the_usual_frame_and_leaves_the_rest_to_the_full_parse() -> None:
    """_lz4_one_block: a frame of FLG 0x60 and one compressed block (what producers send for a
    batch) in one look; any other frame, malformed or not, is left to _lz4_blocks' step by
    step parse, which answers it as it would without the shortcut."""
    payload = b"kafka " * 2000
    ours = compress(Compression.LZ4, payload)
    assert ours[4:7] == b"\x60\x40\x82"
    # lz4.frame picks the smallest block size that holds the input: one block of each size.
    sizes = {lz4.frame.BLOCKSIZE_MAX64KB: 1, lz4.frame.BLOCKSIZE_MAX256KB: 20,
             lz4.frame.BLOCKSIZE_MAX1MB: 80, lz4.frame.BLOCKSIZE_MAX4MB: 300}
    frames = [(ours, payload, 4)] + [
        (lz4.frame.compress(payload * n, block_linked=False, store_size=False, block_size=code),
         payload * n, code) for code, n in sizes.items()]
    for frame, data, code in frames:
        assert frame[5] == code << 4  # BD: that block size
        max_block = 1 << (16 + 2 * (code - 4))  # 64 KiB, 256 KiB, 1 MiB, 4 MiB
        one = compression._lz4_one_block(memoryview(frame))
        assert one is not None and one[0] == max_block and bytes(one[1]) == frame[11:-4]
        assert compression._lz4_blocks(frame) == (max_block, [(False, one[1])],
                                                  min(255 * len(one[1]) + 64, max_block))
        buffer, length = decompress_scratch(Compression.LZ4, frame)
        assert bytes(buffer[:length]) == data
    head_checksum_of_bd_0x30 = (xxh32(b"\x60\x30") >> 8) & 0xFF
    refused = {  # not the usual frame, but sound: parsed as before
        "two blocks": compress(Compression.LZ4, os.urandom(1000) * 100),
        "raw block": compress(Compression.LZ4, os.urandom(1000)),
        "content size": lz4.frame.compress(payload, block_linked=False, store_size=True),
        "linked blocks": lz4.frame.compress(payload * 20, block_linked=True, store_size=False),
        "no block": compress(Compression.LZ4, b""),
    }
    malformed = {  # the problem the full parse names
        "header checksum": ours[:6] + bytes([ours[6] ^ 1]) + ours[7:],
        "follow": ours + b"\x00",
        "truncated": ours[:-4],
        "overruns": ours[:-4] + b"\x01\x00\x00\x00",
        "invalid": ours[:5] + bytes([0x30, head_checksum_of_bd_0x30]) + ours[7:],
        "descriptor": ours[:4] + b"\x62" + ours[5:],
        "magic": b"\x05" + ours[1:],
    }
    for name, frame in [*refused.items(), *malformed.items()]:
        assert compression._lz4_one_block(memoryview(frame)) is None, name
    for name, frame in refused.items():
        buffer, length = decompress_scratch(Compression.LZ4, frame)
        assert bytes(buffer[:length]) == lz4.frame.decompress(frame), name
    for problem, frame in malformed.items():
        with pytest.raises(ValueError, match=problem):
            compression._lz4_blocks(frame)
    assert compression._lz4_one_block(memoryview(ours[:15])) is None


def in_a_new_thread(fn: Callable[[], T]) -> T:
    """fn's result in a thread that has used none of the per-thread caches yet."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(fn).result()


def test_xxh32_matches_the_reference_implementation() -> None:
    # Every length up to 64 covers the 16-byte stripes, the 4-byte words and the tail bytes.
    data = bytes(range(7, 7 + 64 * 3, 3))
    for n in range(len(data) + 1):
        assert xxh32(data[:n]) == xxhash.xxh32_intdigest(data[:n]), n
    assert xxh32(data, seed=12345) == xxhash.xxh32_intdigest(data, seed=12345)


def _lz4_frame(descriptor: bytes, body: bytes) -> bytes:
    """magic, descriptor, its header checksum (by the xxhash reference), then ``body``."""
    return LZ4_FRAME_MAGIC + descriptor + bytes([(xxhash.xxh32_intdigest(descriptor) >> 8) & 0xFF]) + body


_LZ4_DATA = b"kafka " * 100
_LZ4_BODY = compress(Compression.LZ4, _LZ4_DATA)[7:]  # blocks and end mark
_END_MARK = b"\x00\x00\x00\x00"


def test_lz4_header_checksums_are_computed_when_not_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compression, "_lz4_hc_cache", {})
    for descriptor in (b"\x60\x40", b"\x60\x70", b"\x68\x40" + struct.pack("<Q", len(_LZ4_DATA))):
        assert decompress(Compression.LZ4, _lz4_frame(descriptor, _LZ4_BODY)) == _LZ4_DATA
    sized = b"\x68\x40" + struct.pack("<Q", len(_LZ4_DATA))
    assert compression._lz4_hc_cache[sized] == (xxh32(sized) >> 8) & 0xFF
    # The usual FLG 0x60 (_lz4_one_block) looks its checksums up in a table made at import.
    assert compression._LZ4_USUAL_BD[0x40][0] == 0x82 == LZ4_FRAME_HEADER[6]


def test_lz4_frames_with_a_dictionary_id_are_left_to_lz4_frame() -> None:
    frame = _lz4_frame(b"\x61\x40" + struct.pack("<I", 7), _LZ4_BODY)  # FLG bit 0: DictID
    assert decompress(Compression.LZ4, frame) == _LZ4_DATA
    buffer, length = decompress_scratch(Compression.LZ4, frame)
    assert bytes(buffer[:length]) == _LZ4_DATA


_RAW = 0x80000000
MALFORMED_LZ4 = {
    "no magic": (b"\x00" * 20, r"^lz4 payload does not start with the LZ4 frame magic$"),
    "6 bytes": (LZ4_FRAME_HEADER[:6], r"^lz4 payload does not start with the LZ4 frame magic$"),
    "header only": (LZ4_FRAME_HEADER, r"^lz4 frame is truncated \(no end mark\)$"),
    "no HC after content size": (LZ4_FRAME_MAGIC + b"\x68\x40" + bytes(8), r"^lz4 frame descriptor is truncated$"),
    "bad HC": (LZ4_FRAME_MAGIC + b"\x60\x40\x1a" + _END_MARK, r"^lz4 frame header checksum mismatch$"),
    "FLG reserved bit": (_lz4_frame(b"\x62\x40", _LZ4_BODY), r"^lz4 frame descriptor FLG 0x62 BD 0x40 is invalid$"),
    "BD bit 7": (_lz4_frame(b"\x60\xc0", _LZ4_BODY), r"^lz4 frame descriptor FLG 0x60 BD 0xc0 is invalid$"),
    "BD bit 0": (_lz4_frame(b"\x60\x41", _LZ4_BODY), r"^lz4 frame descriptor FLG 0x60 BD 0x41 is invalid$"),
    "BD bit 3": (_lz4_frame(b"\x60\x48", _LZ4_BODY), r"^lz4 frame descriptor FLG 0x60 BD 0x48 is invalid$"),
    "block size code 3": (_lz4_frame(b"\x60\x30", _LZ4_BODY), r"^lz4 frame descriptor FLG 0x60 BD 0x30 is invalid$"),
    "block over 64 KiB": (LZ4_FRAME_HEADER + struct.pack("<I", 65537 | _RAW) + bytes(65537) + _END_MARK,
                          r"^lz4 block of 65537 bytes overruns the frame$"),
    "block past the end": (LZ4_FRAME_HEADER + struct.pack("<I", 100) + bytes(10),
                           r"^lz4 block of 100 bytes overruns the frame$"),
    "bytes after the end mark": (LZ4_FRAME_HEADER + _LZ4_BODY + b"xy", r"^2 bytes follow the lz4 frame$"),
}


@pytest.mark.parametrize(("frame", "message"), MALFORMED_LZ4.values(), ids=MALFORMED_LZ4.keys())
def test_malformed_lz4_frames_are_rejected_with_the_reason(frame: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        decompress(Compression.LZ4, frame)
    with pytest.raises(ValueError, match=message):
        decompress_scratch(Compression.LZ4, frame)


def test_lz4_frame_of_two_blocks() -> None:
    payload = os.urandom(1000) * 100  # 100 kB: two 64 KiB blocks
    assert decompress(Compression.LZ4, compress(Compression.LZ4, payload)) == payload


# One 64 KiB block of text whose compressed size differs between lz4's compressors and levels.
_TEXT = b" ".join(b"%d" % (i * i) for i in range(20_000))[:60_000]


@pytest.mark.parametrize("level", [None, 9, 1, 4, 12, 17])
def test_lz4_default_level_uses_the_fast_compressor_any_other_high_compression(level: int | None) -> None:
    # Kafka's Lz4BlockOutputStream: lz4-java's fastCompressor at the default level, else
    # highCompressor(level); lz4's high compression levels end at 12 (LZ4HC_CLEVEL_MAX).
    if level in (None, 9):
        block = lz4.block.compress(_TEXT, store_size=False)
    else:
        assert level is not None
        block = lz4.block.compress(_TEXT, mode="high_compression", compression=min(level, 12), store_size=False)
    expected = LZ4_FRAME_HEADER + struct.pack("<I", len(block)) + block + _END_MARK
    assert compress(Compression.LZ4, _TEXT, level) == expected


@pytest.mark.parametrize("level", [None, 12])
def test_lz4_block_that_does_not_shrink_is_stored_raw(level: int | None) -> None:
    chunk = b"aaaaa" + bytes.fromhex("38b4e652e44da7f2")  # lz4 compresses these 13 bytes to 13
    assert len(lz4.block.compress(chunk, store_size=False)) == len(chunk)
    frame = compress(Compression.LZ4, chunk, level)
    # Java's Lz4BlockOutputStream too stores a block raw unless it got smaller.
    assert frame == LZ4_FRAME_HEADER + struct.pack("<I", len(chunk) | _RAW) + chunk + _END_MARK
    assert decompress(Compression.LZ4, frame) == chunk


_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
MALFORMED_XERIAL = {
    "short header": (XERIAL_MAGIC + b"\x00\x00", r"^xerial snappy header is truncated$"),
    "short length": (_XERIAL_HEADER + b"\x00\x00", r"^xerial snappy block length is truncated$"),
    "negative length": (_XERIAL_HEADER + struct.pack(">i", -1), r"^xerial snappy block of -1 bytes overruns the payload$"),
    # an empty block is not raw snappy (that takes at least its length varint)
    "empty block": (_XERIAL_HEADER + struct.pack(">i", 0), r"^snappy decompression failed: "),
}


@pytest.mark.parametrize(("payload", "message"), MALFORMED_XERIAL.values(), ids=MALFORMED_XERIAL.keys())
def test_malformed_xerial_snappy_is_rejected_with_the_reason(payload: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        decompress(Compression.SNAPPY, payload)


def test_xerial_snappy_of_no_blocks_is_empty() -> None:
    assert decompress(Compression.SNAPPY, _XERIAL_HEADER) == b""


def test_truncated_gzip_and_unknown_codecs_are_named() -> None:
    with pytest.raises(ValueError, match=r"^gzip stream is truncated$"):
        decompress(Compression.GZIP, gzip.compress(b"abc" * 1000)[:-5])
    with pytest.raises(ValueError, match=r"^unknown compression codec id 7$"):
        decompress(7, b"")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="7 is not a valid Compression"):
        compress(7, b"x")  # type: ignore[arg-type]


@pytest.mark.parametrize(("codec", "level", "message"), [
    (Compression.GZIP, 0, r"^gzip compression level must be in \[1, 9\] or -1, got 0$"),
    (Compression.LZ4, 18, r"^lz4 compression level must be in \[1, 17\], got 18$"),
    (Compression.ZSTD, 23, r"^zstd compression level must be in \[-131072, 22\], got 23$"),
    (Compression.SNAPPY, 3, r"^snappy has no compression level \(got 3\)$"),
    (Compression.NONE, 1, r"^none has no compression level \(got 1\)$"),
])
def test_rejected_levels_name_codec_range_and_level(codec: Compression, level: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate_level(codec, level)


def test_zstd_in_a_thread_that_has_not_used_it_yet() -> None:
    data = b"abcdefgh" * 10_000

    def roundtrip() -> tuple[bytes, bytes, bytes]:
        first = compress(Compression.ZSTD, data, 19)
        again = compress(Compression.ZSTD, data, 19)  # the thread's cached context
        return first, again, decompress(Compression.ZSTD, first)

    first, again, back = in_a_new_thread(roundtrip)
    assert first == again == zstandard.ZstdCompressor(level=19).compress(data)
    assert back == data


def test_decompress_scratch_lz4_fills_the_threads_scratch_buffer() -> None:
    payload = b"0123456789abcdef" * (3 * 65536)  # 3 MiB, 48 blocks: more than a new buffer's 1 MiB
    frame = compress(Compression.LZ4, payload)

    def look() -> tuple[bool, bytes]:
        buffer, length = decompress_scratch(Compression.LZ4, frame)
        return buffer is scratch_buffer(1), bytes(buffer[:length])

    is_scratch, out = in_a_new_thread(look)
    assert is_scratch and out == payload


def test_lz4_fix_broken_header_checksum_rejects_what_is_not_an_lz4_frame() -> None:
    with pytest.raises(ValueError, match=r"^not an LZ4 frame$"):
        lz4_fix_broken_header_checksum(b"\x00" * 20)
    with pytest.raises(ValueError, match=r"^not an LZ4 frame$"):
        lz4_fix_broken_header_checksum(LZ4_FRAME_HEADER[:6])
    with pytest.raises(ValueError, match=r"^LZ4 frame descriptor is truncated$"):
        lz4_fix_broken_header_checksum(LZ4_FRAME_MAGIC + b"\x68\x40" + bytes(8))  # no HC byte
    assert lz4_fix_broken_header_checksum(LZ4_FRAME_MAGIC + b"\x60\x40\x1a") == LZ4_FRAME_HEADER


@pytest.mark.parametrize("descriptor", [
    b"\x68\x40" + struct.pack("<Q", 600),  # content size
    b"\x61\x40" + struct.pack("<I", 7),  # dictionary id
    b"\x69\x40" + struct.pack("<QI", 600, 7),  # both
], ids=["content size", "dict id", "both"])
def test_lz4_fix_broken_header_checksum_finds_the_hc_byte(descriptor: bytes) -> None:
    broken = LZ4_FRAME_MAGIC + descriptor + b"\x00" + _LZ4_BODY
    assert lz4_fix_broken_header_checksum(broken) == _lz4_frame(descriptor, _LZ4_BODY)


# -- bounded decompression: compression bombs ------------------------------------------------

LIMIT = compression.DEFAULT_MAX_DECOMPRESSED_BYTES
# What a refused bomb may cost beyond the limit: one output piece or LZ4 block, zstd's window,
# the allocator's slack.  Every bomb below inflates to 3 to 128 times the limit.
SLACK = 16 * MiB
BOMBS: dict[str, tuple[Compression, Callable[[], bytes]]] = {
    "zstd-256MiB": (Compression.ZSTD, lambda: zstd_bomb(256 * MiB)),
    "zstd-256MiB-no-content-size": (Compression.ZSTD,
                                    lambda: zstd_bomb(256 * MiB, content_size=False)),
    "gzip-512MiB": (Compression.GZIP, lambda: gzip_bomb(512 * MiB)),
    "lz4-252MiB": (Compression.LZ4, lambda: lz4_bomb(252 * MiB)),
    "snappy-xerial-96MiB": (Compression.SNAPPY, lambda: snappy_xerial_bomb(96 * MiB)),
    "snappy-raw-claims-4GiB": (Compression.SNAPPY, lambda: snappy_raw_claim(2**32 - 1)),
}


def peak_growth(fn: Callable[[], object]) -> int:
    """How far this process's resident memory rose above where it was while ``fn`` ran."""
    pid = os.getpid()
    before = rss_bytes(pid)
    reset_peak_rss(pid)
    fn()
    return peak_rss_bytes(pid) - before


@pytest.mark.parametrize("name", list(BOMBS))
@pytest.mark.parametrize("scratch", [False, True], ids=["decompress", "decompress_scratch"])
def test_bomb_is_refused_with_memory_bounded_by_the_limit(name: str, scratch: bool) -> None:
    codec, make = BOMBS[name]
    bomb = make()
    assert len(bomb) < 5 * MiB

    def refuse() -> None:
        with pytest.raises(DecompressedSizeError, match=f"limit of {LIMIT} bytes") as info:
            if scratch:
                in_a_new_thread(lambda: decompress_scratch(codec, bomb))
            else:
                decompress(codec, bomb)
        assert isinstance(info.value, ValueError) and info.value.limit == LIMIT

    growth = peak_growth(refuse)
    assert growth < LIMIT + SLACK, f"{name}: resident memory rose by {growth / MiB:.0f} MiB"


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4,
                                   Compression.ZSTD])
def test_a_batch_of_exactly_the_limit_decompresses_one_byte_more_is_refused(
        codec: Compression) -> None:
    payload = (os.urandom(300_000) + b"kafka " * 400_000) * 2  # ~5 MiB: several pieces
    frame = compress(codec, payload)
    assert decompress(codec, frame, max_bytes=len(payload)) == payload
    buffer, length = decompress_scratch(codec, frame, max_bytes=len(payload))
    assert bytes(buffer[:length]) == payload
    with pytest.raises(DecompressedSizeError, match=f"limit of {len(payload) - 1} bytes"):
        decompress(codec, frame, max_bytes=len(payload) - 1)
    with pytest.raises(DecompressedSizeError):
        decompress_scratch(codec, frame, max_bytes=len(payload) - 1)


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4,
                                   Compression.ZSTD])
def test_legit_large_batches_pass_the_default_limit(codec: Compression) -> None:
    payload = os.urandom(1 * MiB) * 24  # 24 MiB, compressible 24:1 across 1 MiB repeats
    frames = [compress(codec, payload)]
    if codec == Compression.ZSTD:  # as Java writes it: no content size, streamed
        frames.append(zstandard.ZstdCompressor(write_content_size=False).compress(payload))
    if codec == Compression.LZ4:  # lz4.frame's 4 MiB blocks with a content checksum
        frames.append(lz4.frame.compress(payload, block_size=lz4.frame.BLOCKSIZE_MAX4MB,
                                         content_checksum=True))
    for frame in frames:
        assert decompress(codec, frame) == payload
        buffer, length = decompress_scratch(codec, frame)
        assert length == len(payload) and bytes(buffer[:length]) == payload


def test_lz4_output_follows_the_blocks_not_the_declared_block_size() -> None:
    frame = lz4_declared_bomb(256)  # declares 256 x 4 MiB, holds 256 x 1 KiB
    out = decompress(Compression.LZ4, frame)
    assert out == bytes(256 * 1024)

    def look() -> bytes:
        buffer, length = decompress_scratch(Compression.LZ4, frame)
        return bytes(buffer[:length])

    growth = peak_growth(lambda: in_a_new_thread(look))
    assert growth < SLACK, f"resident memory rose by {growth / MiB:.0f} MiB"


def test_declared_sizes_past_the_limit_are_refused_before_decompressing() -> None:
    with pytest.raises(DecompressedSizeError,
                       match=f"zstd payload declares {256 * MiB} decompressed bytes"):
        decompress(Compression.ZSTD, zstd_bomb(256 * MiB))
    with pytest.raises(DecompressedSizeError, match=f"snappy payload declares {2**32 - 1}"):
        decompress(Compression.SNAPPY, snappy_raw_claim(2**32 - 1))
    # A claim within the limit that the data does not keep is corrupt, not a bomb.
    with pytest.raises(ValueError, match="snappy decompression failed"):
        decompress(Compression.SNAPPY, snappy_raw_claim(4096))


def test_lz4_frames_only_lz4_frame_reads_are_bounded_too() -> None:
    payload = bytes(40 * MiB)
    frame = lz4.frame.compress(payload, block_linked=True, content_checksum=True)
    with pytest.raises(DecompressedSizeError, match="lz4 payload decompresses to more than"):
        decompress(Compression.LZ4, frame)
    assert decompress(Compression.LZ4, frame, max_bytes=len(payload)) == payload
    with pytest.raises(ValueError, match="truncated"):
        decompress(Compression.LZ4, frame[:-6], max_bytes=len(payload))
