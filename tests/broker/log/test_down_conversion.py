"""Lazy, chunked down-conversion for Fetch v0-3 (down_conversion.py), over a real log's file
slices and through the network layer's writer."""

from __future__ import annotations

import os
import selectors
import socket
import struct
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from samsa.broker.log import FileSlice, Log, LogManager
from samsa.broker.log.down_conversion import MAX_READ_SIZE, LazyDownConversionRecords, _Source
from samsa.broker.log.file_slice import FileHandle
from samsa.broker.network.connection import Outgoing
from samsa.errors import UnsupportedCompressionTypeError
from samsa.records import Compression, MemoryRecords, build_control_batch, iter_batches
from samsa.records.control import ControlRecordType
from samsa.records.conversion import down_convert
from tests.records.legacy_data import message_set

from .conftest import build_batch


def open_log(open_manager: Callable[..., LogManager], batches: list[bytes]) -> Log:
    manager = open_manager()
    manager.create_topic("t", 1)
    log = manager.get_log("t", 0)
    for batch in batches:
        log.append_as_leader(batch, leader_epoch=0)
    return log


def read_all(log: Log, offset: int = 0, max_bytes: int = 1 << 30) -> FileSlice:
    records = log.read(offset, max_bytes).records
    assert isinstance(records, FileSlice)
    return records


def offsets(data: bytes) -> list[int]:
    return [r.offset for r in MemoryRecords(data).records()]


@pytest.mark.parametrize("magic", [0, 1])
def test_everything_converts_and_the_promise_is_kept(open_manager: Callable[..., LogManager],
                                                    magic: int) -> None:
    log = open_log(open_manager, [build_batch(5), build_batch(3, compression=Compression.GZIP),
                                  build_batch(4)])
    source = read_all(log)
    lazy = LazyDownConversionRecords(source, magic, 0)
    first = next(iter_batches(source.read()))
    first_converted = down_convert([first], magic, 0)  # type: ignore[list-item]
    assert lazy.size == max(len(source), len(first_converted))
    data = lazy.read()
    assert len(data) == lazy.size
    # Growing conversions are cut where the promise ends (the client drops the partial last
    # message and fetches again from there), but the first batch is always whole.
    got = offsets(data)
    assert got == list(range(len(got))) and len(got) >= 5
    assert {b.magic for b in iter_batches(data)} == {magic}
    while got[-1] < 11:  # a consumer's next fetches
        more = offsets(LazyDownConversionRecords(read_all(log, got[-1] + 1), magic,
                                                 got[-1] + 1).read())
        assert more and more[0] == got[-1] + 1
        got += more
    assert got == list(range(12))


def test_first_offset_inside_an_uncompressed_batch(open_manager: Callable[..., LogManager]
                                                   ) -> None:
    log = open_log(open_manager, [build_batch(6)])
    data = LazyDownConversionRecords(read_all(log, 4), 1, 4).read()
    assert offsets(data) == [4, 5]


def test_growth_is_promised_for_the_first_batch(open_manager: Callable[..., LogManager]) -> None:
    """Tiny records grow in v1 (22-byte message headers + 12 log overhead each vs ~8 bytes in
    a v2 batch): the promise covers the first converted batch even so."""
    log = open_log(open_manager, [build_batch(200, value_size=1)])
    source = read_all(log)
    lazy = LazyDownConversionRecords(source, 1, 0)
    assert lazy.size > len(source)
    assert offsets(lazy.read()) == list(range(200))


def test_shrinking_data_ends_with_an_overflow_stub() -> None:
    # A control batch converts to nothing: what the promise still holds is an overflow entry.
    marker = bytearray(build_control_batch(ControlRecordType.COMMIT, 3, 0, 0, 1_700_000_000_000))
    struct.pack_into(">q", marker, 0, 2)
    source = build_batch(2) + bytes(marker)
    lazy = LazyDownConversionRecords(source, 1, 0)
    data = lazy.read()
    assert len(data) == lazy.size == len(source)
    converted = down_convert(list(iter_batches(source)), 1, 0)  # type: ignore[arg-type]
    assert data[:len(converted)] == converted and offsets(data) == [0, 1]
    offset, length = struct.unpack_from(">qi", data, len(converted))
    assert offset == -1 and length == len(data) - len(converted) + 1  # beyond the end


def test_nothing_convertible_promises_an_oversized_entry() -> None:
    marker = bytearray(build_control_batch(ControlRecordType.ABORT, 3, 0, 0, 1_700_000_000_000))
    lazy = LazyDownConversionRecords(bytes(marker), 1, 0)
    assert lazy.size == 12
    data = lazy.read()
    assert struct.unpack(">qi", data) == (-1, 61)  # offset -1, longer than what follows
    partial = build_batch(3)[:-5]
    assert LazyDownConversionRecords(partial, 1, 0).size == 0


def test_zstd_first_is_refused_and_later_cut_off(open_manager: Callable[..., LogManager]
                                                  ) -> None:
    with pytest.raises(UnsupportedCompressionTypeError):
        LazyDownConversionRecords(build_batch(2, compression=Compression.ZSTD), 1, 0)
    big = [build_batch(300, value_size=1000) for _ in range(2)]  # > MAX_READ_SIZE each
    data = big[0] + big[1] + build_batch(2, compression=Compression.ZSTD)
    lazy = LazyDownConversionRecords(data, 1, 0)
    out = lazy.read()
    assert len(out) == lazy.size
    assert offsets(out)[:300] == list(range(300))


def test_chunks_are_bounded(open_manager: Callable[..., LogManager]) -> None:
    """Memory: each converted piece covers at most MAX_READ_SIZE of source batches (plus the
    conversion's growth), however large the fetch."""
    batches = [build_batch(100, value_size=200) for _ in range(60)]  # ~1.3 MiB in 60 batches
    log = open_log(open_manager, batches)
    lazy = LazyDownConversionRecords(read_all(log), 1, 0)
    pieces = []
    while True:
        piece = lazy.pending()
        if not piece:
            break
        pieces.append(len(piece))
        lazy.consume(len(piece))
    assert sum(pieces) == lazy.size
    assert len(pieces) > 5
    assert max(pieces) < 2 * MAX_READ_SIZE


def test_sent_through_a_socket_in_pieces(open_manager: Callable[..., LogManager]) -> None:
    """Outgoing writes a lazy value piece by piece as the socket takes it."""
    log = open_log(open_manager, [build_batch(100, value_size=500) for _ in range(30)])
    lazy = LazyDownConversionRecords(read_all(log), 0, 0)
    size = lazy.size
    a, b = socket.socketpair()
    a.setblocking(False)
    received = bytearray()

    def reader() -> None:
        while len(received) < size + 3:
            chunk = b.recv(65536)
            if not chunk:
                return
            received.extend(chunk)

    thread = threading.Thread(target=reader)
    thread.start()
    out = Outgoing([b"abc", lazy])
    with selectors.DefaultSelector() as sel:
        sel.register(a, selectors.EVENT_WRITE)
        while not out.write_to(a):
            sel.select(5)
    thread.join(10)
    a.close()
    b.close()
    assert received[:3] == b"abc" and len(received) == size + 3
    assert bytes(received[3:]) == LazyDownConversionRecords(read_all(log), 0, 0).read()
    got = offsets(bytes(received[3:]))
    assert got == list(range(len(got))) and len(got) > 2000


# Framing of the source (down_conversion._Source): what counts as a complete batch.

TINY = struct.pack(">qi", 0, 1) + b"\x02"  # the smallest complete entry: 13 bytes


def slice_of(tmp_path: Path, data: bytes, size: int | None = None) -> FileSlice:
    path = tmp_path / "source.log"
    path.write_bytes(data)
    handle = FileHandle(os.open(path, os.O_RDONLY), str(path))
    return FileSlice(handle, 0, len(data) if size is None else size)


def test_source_frames_complete_batches_and_stops_at_a_partial_tail() -> None:
    one, two = build_batch(2), build_batch(5)
    assert list(_Source(one + two + b"\x00" * 11).batches()) == [(0, len(one)), (len(one), len(two))]
    assert list(_Source(one + two[:-1]).batches()) == [(0, len(one))]
    assert list(_Source(TINY + one).batches()) == [(0, 13), (13, len(one))]
    assert list(_Source(TINY[:-1]).batches()) == []
    assert list(_Source(struct.pack(">qi", 0, 0) + one).batches()) == []  # length 0: corrupt


def test_source_frames_headers_across_its_read_buffer(tmp_path: Path) -> None:
    # A header split 11/1 across the first 64 KiB read; from a file, the re-read must not go
    # past the slice's end.
    first = struct.pack(">qi", 0, 65536 - 11 - 12) + b"\x00" * (65536 - 11 - 12)
    data = first + TINY + TINY
    expected = [(0, len(first)), (len(first), 13), (len(first) + 13, 13)]
    assert list(_Source(data).batches()) == expected
    assert list(_Source(slice_of(tmp_path, data)).batches()) == expected


def test_source_reads_files_through_short_reads(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    data = bytes(range(50))
    source = _Source(slice_of(tmp_path, data))
    real = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, offset: real(fd, min(n, 5), offset))
    assert source.read(3, 43) == data[3:46]
    with pytest.raises(OSError, match=r"the file ended 7 bytes early"):
        _Source(slice_of(tmp_path, data, 57)).read(0, 57)


def test_empty_source_has_nothing_pending() -> None:
    lazy = LazyDownConversionRecords(b"", 1, 0)
    assert lazy.size == 0 and isinstance(lazy.pending(), memoryview) and bytes(lazy.pending()) == b""


def test_a_legacy_entry_is_not_converted() -> None:
    """The log holds only v2 batches; anything else converts to nothing (an oversized stub)."""
    legacy = message_set(1, [(b"k", b"v" * 60, 0)])
    lazy = LazyDownConversionRecords(legacy, 1, 0)
    assert lazy.size == 12 and struct.unpack(">qi", lazy.read()) == (-1, 61)


def test_batches_after_an_unconvertible_entry_still_convert() -> None:
    data = build_batch(2) + TINY + build_batch(3)
    out = LazyDownConversionRecords(data, 0, 0).read()
    assert len(offsets(out)) == 5


def test_a_partly_sent_piece_is_sent_on() -> None:
    lazy = LazyDownConversionRecords(build_batch(3), 1, 0)
    piece = bytes(lazy.pending())
    assert bytes(lazy.pending()) == piece
    lazy.consume(5)
    assert bytes(lazy.pending()) == piece[5:]
    lazy.consume(len(piece) - 5)
    assert lazy.read() == b""


def test_chunk_boundaries_and_the_overflow_stub(caplog: pytest.LogCaptureFixture) -> None:
    """After the first batch, each piece is the whole batches that fit in MAX_READ_SIZE (one
    more byte starts a new piece); a batch larger than that is a piece of its own; what the
    shrunken conversion leaves of the promise is one overflow entry with zeros after it."""
    a, b2 = build_batch(1), build_batch(1, value_size=60_000)
    value = MAX_READ_SIZE - len(b2) - 100
    while len(b2) + len(b3 := build_batch(1, value_size=value)) < MAX_READ_SIZE:
        value += 1
    assert len(b2) + len(b3) == MAX_READ_SIZE
    big, b4 = build_batch(1, value_size=MAX_READ_SIZE + 10), build_batch(2)
    source = a + b2 + b3 + big + b4
    lazy = LazyDownConversionRecords(source, 0, 0)

    def conv(*batches: bytes) -> bytes:
        return down_convert(list(iter_batches(b"".join(batches))), 0, 0)  # type: ignore[arg-type]

    expected = [conv(a), conv(b2, b3), conv(big), conv(b4)]
    pieces = []
    with caplog.at_level("WARNING"):
        while piece := bytes(lazy.pending()):
            pieces.append(piece)
            lazy.consume(len(piece))
    assert not caplog.records
    assert pieces[:4] == expected
    (stub,) = pieces[4:]
    remaining = len(source) - sum(map(len, expected))
    assert len(stub) == remaining > 13
    assert stub == struct.pack(">qi", -1, remaining + 1) + bytes(remaining - 12)


def test_a_failing_read_mid_send_ends_with_an_overflow_stub(tmp_path: Path,
                                                             caplog: pytest.LogCaptureFixture
                                                             ) -> None:
    first, big = build_batch(1), build_batch(1, value_size=300_000)
    records = slice_of(tmp_path, first + big)
    lazy = LazyDownConversionRecords(records, 1, 0)
    os.truncate(tmp_path / "source.log", len(first) + 10)  # the segment is cut mid-send
    with caplog.at_level("ERROR"):
        out = lazy.read()
    assert len(out) == lazy.size
    converted = down_convert(list(iter_batches(first)), 1, 0)  # type: ignore[arg-type]
    remaining = lazy.size - len(converted)
    assert out[:len(converted)] == converted
    assert out[len(converted):][:12] == struct.pack(">qi", -1, remaining + 1)
    (record,) = caplog.records
    assert record.exc_info is not None and isinstance(record.exc_info[1], OSError)
    assert f"the file ended {len(big) - 10} bytes early" in str(record.exc_info[1])


def test_a_conversion_dropped_half_sent_closes_its_file_at_once(tmp_path: Path) -> None:
    """A client that goes mid-response drops the conversion: the segment file it reads must
    close then, not whenever the cyclic garbage collector runs (a deleted segment's file
    would stay open meanwhile)."""
    import gc

    records = slice_of(tmp_path, build_batch(3) + build_batch(4))
    fd = records.fileno()
    lazy = LazyDownConversionRecords(records, 1, 0)
    lazy.consume(len(lazy.pending()) - 1)
    del records
    gc.disable()
    try:
        del lazy
        with pytest.raises(OSError):
            os.fstat(fd)
    finally:
        gc.enable()
