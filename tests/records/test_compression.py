import gzip
import os
import struct

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.records import Compression
from samsa.records.compression import (
    LZ4_FRAME_HEADER,
    XERIAL_MAGIC,
    compress,
    decompress,
    decompress_scratch,
    default_level,
    lz4_fix_broken_header_checksum,
    validate_level,
    xxh32,
)

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
