"""Lazy, chunked down-conversion for Fetch v0-3 (down_conversion.py), over a real log's file
slices and through the network layer's writer."""

from __future__ import annotations

import selectors
import socket
import struct
import threading
from collections.abc import Callable

import pytest

from samsa.broker.log import FileSlice, Log, LogManager
from samsa.broker.log.down_conversion import MAX_READ_SIZE, LazyDownConversionRecords
from samsa.broker.network.connection import Outgoing
from samsa.errors import UnsupportedCompressionTypeError
from samsa.records import Compression, MemoryRecords, build_control_batch, iter_batches
from samsa.records.control import ControlRecordType
from samsa.records.conversion import down_convert

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
