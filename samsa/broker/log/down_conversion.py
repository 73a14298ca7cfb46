"""Fetch v0-v3: the log's v2 batches, converted to magic 0/1 lazily while the response is sent.

Kafka's ``LazyDownConversionRecords`` / ``LazyDownConversionRecordsSend`` (KIP-283), which keep
a broker's memory bounded however large the fetch:

* the records field's length is promised before any byte is sent, so at construction only the
  first batch that converts to something is converted:
  ``size = max(source bytes, that batch converted)`` (a consumer needs one whole batch to make
  progress), or 12 bytes if nothing converts (an oversized partial entry: the consumer reports
  the record too large), or 0 if the source held no complete batch;
* while the response is written, the rest is converted chunk by chunk, each chunk the whole
  source batches that fit in 128 KiB (at least one), and sent; a chunk is cut off where the
  promise ends (the consumer drops the partial last entry);
* when converting ends before the promise is met (conversion shrank the data, or a zstd batch
  could not be converted) the rest is an overflow stub: offset -1 and a length beyond what
  remains, which consumers discard as a truncated trailing entry.

So memory holds about one converted chunk per partition being sent.  (One deliberate
difference: Kafka's send-time iterator skips exactly one source batch after the cached first
one, so when batches converting to nothing precede it -- transaction markers -- it converts and
sends the first data batch twice; here conversion goes on after it.)  Conversion rules are
``samsa.records.conversion.down_convert`` (Kafka's ``RecordsUtil.downConvert``).
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterator

from samsa.broker.log.file_slice import FileSlice
from samsa.errors import UnsupportedCompressionTypeError
from samsa.records import LOG_OVERHEAD, MAGIC_OFFSET, MAGIC_V2, RECORD_BATCH_OVERHEAD
from samsa.records.batch import RecordBatch
from samsa.records.conversion import down_convert

__all__ = ["MAX_READ_SIZE", "LazyDownConversionRecords"]

log = logging.getLogger(__name__)

MAX_READ_SIZE = 128 * 1024  # LazyDownConversionRecordsSend.MAX_READ_SIZE
_MIN_OVERFLOW = LOG_OVERHEAD  # MIN_OVERFLOW_MESSAGE_LENGTH
_ENTRY = struct.Struct(">qi")
_HEADER_READ = 64 * 1024  # batch headers are found by reading this much at a time


class _Source:
    """The fetched bytes (a segment FileSlice, or bytes): complete batches' (position, size)."""

    def __init__(self, records: FileSlice | bytes | bytearray | memoryview) -> None:
        self._slice = records if isinstance(records, FileSlice) else None
        self._bytes = None if isinstance(records, FileSlice) else bytes(records)
        self.size = len(records)

    def read(self, pos: int, size: int) -> bytes:
        if self._bytes is not None:
            return self._bytes[pos:pos + size]
        s = self._slice
        assert s is not None
        fd, start = s.fileno(), s.position + pos
        data = os.pread(fd, size, start)
        while len(data) < size:
            more = os.pread(fd, size - len(data), start + len(data))
            if not more:
                raise OSError(f"{s!r}: the file ended {size - len(data)} bytes early")
            data += more
        return data

    def batches(self) -> Iterator[tuple[int, int]]:
        """(position, size) of each complete batch, in order; stops at a partial tail."""
        pos = 0
        buf = b""
        buf_start = 0
        while self.size - pos >= LOG_OVERHEAD + 1:
            off = pos - buf_start
            if off + LOG_OVERHEAD + 1 > len(buf):
                buf = self.read(pos, min(_HEADER_READ, self.size - pos))
                buf_start, off = pos, 0
            _, length = _ENTRY.unpack_from(buf, off)
            size = length + LOG_OVERHEAD
            if length <= 0 or size > self.size - pos:
                return
            yield pos, size
            pos += size


class LazyDownConversionRecords:
    """A ``records`` value for a Fetch v0-3 partition (see the module docstring).

    The codec writes ``len()`` as the field's length and splices the object into the response;
    the network layer sends it with ``pending()``/``consume()`` (broker/network/connection.py);
    ``read()`` gives all of it at once (tests, paths without a socket).  Single use.
    Raises UnsupportedCompressionTypeError from the constructor if the first batch is zstd.
    """

    __slots__ = ("_chunks", "_piece", "_remaining", "first_offset", "size", "to_magic")

    def __init__(self, records: FileSlice | bytes | bytearray | memoryview, to_magic: int,
                 first_offset: int) -> None:
        self.to_magic = to_magic
        self.first_offset = first_offset
        source = _Source(records)
        batches = source.batches()
        first, has_batches = self._first_converted(source, batches)
        if first:
            self.size = max(source.size, len(first))
        else:
            self.size = _MIN_OVERFLOW if has_batches else 0
        # The generator must not reference self: a response dropped half-sent (the client went)
        # would leave a cycle that only the cyclic GC frees, keeping the segment file open.
        self._chunks = _convert_rest(source, batches, first, to_magic, first_offset)
        self._piece: memoryview = memoryview(b"")
        self._remaining = self.size

    def __len__(self) -> int:
        return self.size

    def _first_converted(self, source: _Source, batches: Iterator[tuple[int, int]]
                         ) -> tuple[bytes, bool]:
        """The first batch that converts to something (zstd raises), and whether the source
        had a complete batch at all."""
        seen = False
        for pos, size in batches:
            seen = True
            converted = _convert(source.read(pos, size), [(0, size)], self.to_magic,
                                 self.first_offset)
            if converted:
                return converted, True
        return b"", seen

    def _overflow(self) -> bytes:
        """LazyDownConversionRecordsSend.buildOverflowBatch for what remains of the promise."""
        remaining = self._remaining
        stub = bytearray(max(_MIN_OVERFLOW, min(remaining + 1, MAX_READ_SIZE)))
        _ENTRY.pack_into(stub, 0, -1, max(remaining + 1, RECORD_BATCH_OVERHEAD))
        return bytes(stub)

    def pending(self) -> memoryview:
        """The bytes to send next; empty once the promised size has been handed out."""
        if self._piece or not self._remaining:
            return self._piece
        try:
            piece = next(self._chunks, None)
        except Exception:  # a segment deleted or unreadable mid-send
            log.exception("down-converting fetched records failed; ending the partition's "
                          "records with an overflow entry")
            self._chunks = iter(())
            piece = None
        if piece is None:
            piece = self._overflow()
        self._piece = memoryview(piece)[:self._remaining]
        return self._piece

    def consume(self, sent: int) -> None:
        self._piece = self._piece[sent:]
        self._remaining -= sent

    def read(self) -> bytes:
        out = bytearray()
        while True:
            piece = self.pending()
            if not piece:
                return bytes(out)
            out += piece
            self.consume(len(piece))

    def __repr__(self) -> str:
        return (f"LazyDownConversionRecords(size={self.size}, to_magic={self.to_magic}, "
                f"first_offset={self.first_offset})")


def _convert(data: bytes, places: list[tuple[int, int]], to_magic: int, first_offset: int) -> bytes:
    parsed = []
    for pos, size in places:
        if data[pos + MAGIC_OFFSET] != MAGIC_V2 or size < RECORD_BATCH_OVERHEAD:
            continue  # the log writes only v2 batches
        parsed.append(RecordBatch(data, pos))
    return down_convert(parsed, to_magic, first_offset)


def _convert_rest(source: _Source, batches: Iterator[tuple[int, int]], first: bytes,
                  to_magic: int, first_offset: int) -> Iterator[bytes]:
    """The converted pieces after ``first``: whole batches up to MAX_READ_SIZE at a time."""
    if first:
        yield first
    pending: tuple[int, int] | None = None
    while True:
        chunk: list[tuple[int, int]] = [pending] if pending is not None else []
        total = pending[1] if pending is not None else 0
        pending = None
        for pos, size in batches:
            if chunk and total + size > MAX_READ_SIZE:
                pending = (pos, size)
                break
            chunk.append((pos, size))
            total += size
        if not chunk:
            return
        start = chunk[0][0]
        data = source.read(start, total)
        try:
            converted = _convert(data, [(p - start, s) for p, s in chunk], to_magic, first_offset)
        except UnsupportedCompressionTypeError:
            return  # a zstd batch mid-way: the overflow stub follows
        if converted:
            yield converted
