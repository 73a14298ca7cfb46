"""validator.sound_header, the one-call check of a produced batch's header, agrees with the
step-by-step checks (Log._checked_header) that name the problem: None exactly where those
raise, the same header where they pass."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from samsa.broker.log import Log, LogConfig
from samsa.broker.log.validator import sound_header
from samsa.errors import KafkaError
from samsa.records import Compression, read_batch_header, rewrite_crc

from .conftest import BASE_TS, build_batch

# (byte position, struct format) of header fields a client controls.
_LENGTH, _MAGIC, _CRC, _ATTRIBUTES, _LAST_DELTA = (8, ">i"), (16, ">b"), (17, ">I"), (21, ">h"), (23, ">i")
_PRODUCER_ID, _BASE_SEQUENCE, _COUNT = (43, ">q"), (53, ">i"), (57, ">i")


def _with(batch: bytes, field: tuple[int, str], value: int, *, fix_crc: bool = True) -> bytearray:
    buf = bytearray(batch)
    struct.pack_into(field[1], buf, field[0], value)
    if fix_crc and field[0] >= 21:
        rewrite_crc(buf)
    return buf


def _cases() -> list[tuple[str, bytes | bytearray]]:
    plain = build_batch(5)
    idempotent = build_batch(3, pid=7, epoch=0, seq=0)
    transactional = build_batch(3, pid=7, epoch=0, seq=0, transactional=True)
    lz4 = build_batch(20, compression=Compression.LZ4)
    return [
        ("plain", plain),
        ("idempotent", idempotent),
        ("transactional", transactional),
        ("lz4", lz4),
        ("two batches", plain + idempotent),
        ("empty", b""),
        ("short", plain[:40]),
        ("header only", plain[:61]),
        ("truncated", plain[:-1]),
        ("magic 1", _with(plain, _MAGIC, 1)),
        ("bad crc", _with(plain, _CRC, 12345)),
        ("flipped record byte", bytes(plain[:-2]) + bytes([plain[-2] ^ 1]) + plain[-1:]),
        ("length too small", _with(plain, _LENGTH, 40)),
        ("length past the buffer", _with(plain, _LENGTH, len(plain))),
        ("negative length", _with(plain, _LENGTH, -12)),
        ("count off", _with(plain, _COUNT, 4)),
        ("count zero", _with(_with(plain, _COUNT, 0), _LAST_DELTA, -1)),
        ("negative count", _with(_with(plain, _COUNT, -3), _LAST_DELTA, -4)),
        ("control", _with(plain, _ATTRIBUTES, 0x20)),
        ("no sequence", _with(idempotent, _BASE_SEQUENCE, -1)),
        ("transactional without producer", _with(plain, _ATTRIBUTES, 0x10)),
        ("codec 5", _with(plain, _ATTRIBUTES, 5)),
        ("codec 7 transactional", _with(transactional, _ATTRIBUTES, 0x17)),
        ("log append time flag", _with(plain, _ATTRIBUTES, 0x08)),
        ("producer without transaction flag", _with(plain, _PRODUCER_ID, 9)),
    ]


@pytest.mark.parametrize(("name", "batch"), _cases(), ids=[name for name, _ in _cases()])
@pytest.mark.parametrize("max_bytes", [1 << 20, 100])
def test_sound_header_agrees_with_the_checks_that_name_the_problem(
        tmp_path: Path, name: str, batch: bytes | bytearray, max_bytes: int) -> None:
    log = Log(tmp_path, LogConfig(max_message_bytes=max_bytes), topic="t", partition=0,
              now_ms=BASE_TS)
    try:
        buf = bytearray(batch)
        for view in (buf, memoryview(buf)):
            found = sound_header(view, 0, max_bytes)
            try:
                expected = log._checked_header(view, 0)
            except KafkaError:
                assert found is None, name
            else:
                assert found == expected == read_batch_header(buf, 0), name
    finally:
        log.close()


def test_a_batch_after_the_first_is_checked_at_its_own_position() -> None:
    first, second = build_batch(2), build_batch(3, ts=BASE_TS + 5)
    buf = bytearray(first + second)
    header = sound_header(buf, len(first), 1 << 20)
    assert header == read_batch_header(buf, len(first))
    assert sound_header(buf[:-1], len(first), 1 << 20) is None
