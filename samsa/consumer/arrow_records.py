"""Fetched v2 record batches decoded straight into Arrow columns (``KafkaConsumer.poll_arrow``).

poll() builds a ``ConsumerRecord`` per record; poll_arrow() builds no Python object per
record.  Every v2 batch a poll hands out is read into one :class:`PollColumns`:

1. as the poll takes records, one loop reads every record's fields -- the per-record step,
   since a record's start depends on the previous record's length -- compiled with mypyc
   (samsa.records.record_loops.record_columns): small numbers into lists (distances between
   values, lengths, timestamp deltas; keys, headers and offsets only when they are not the
   common case of null keys, no headers, offsets that follow on);
2. when the poll is done, the lists of all its partitions become Arrow arrays at once (so a
   poll of many small fetches costs no more numpy and Arrow calls than one of one): keys and
   values as ``binary_view`` arrays pointing into the fetched (or decompressed) buffers, cast
   to ``binary`` by Arrow's C++ gather; header keys and values likewise.  Each partition's
   records are a slice of that one batch.

The layout is Kafka's DefaultRecord (see the protocol guide's "Record"): length varint,
attributes int8, timestampDelta varlong, offsetDelta varint, key, value (varint length, -1
null), header count varint, headers (key varint length + UTF-8, value varint length, -1 null).
A run of batches with any structural problem is not read here (:meth:`PollColumns.read_run`
answers None): the caller then reads it with the row decoder (samsa.records.batch.iter_records),
which finds the first bad record and raises the CorruptRecordError poll() raises, after the
records before it.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from samsa.net.cluster import TopicPartition
from samsa.records import RecordBatch, TimestampType
from samsa.records.compression import decompress_scratch
from samsa.records.record_loops import RecordColumns, record_columns
from samsa.records.scratch import KEEP_BYTES

__all__ = [
    "ARROW_SCHEMA",
    "HEADERS_TYPE",
    "PIECE_SCHEMA",
    "PollColumns",
    "Rows",
    "RunRead",
    "assemble",
    "empty_piece",
    "rows_to_piece",
    "with_partition",
]

HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADERS_TYPE = pa.list_(HEADER_TYPE)

# What poll_arrow returns per partition.  timestamp is int64 ms as ConsumerRecord.timestamp
# (-1 for v0 messages); timestamp_type is TimestampType's value (-1 none, 0 create, 1 append).
ARROW_SCHEMA = pa.schema([
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string(), nullable=False),
    pa.field("partition", pa.int32(), nullable=False),
    pa.field("offset", pa.int64(), nullable=False),
    pa.field("timestamp", pa.int64(), nullable=False),
    pa.field("timestamp_type", pa.int8(), nullable=False),
    pa.field("headers", HEADERS_TYPE, nullable=False),
])
# Records read by the row decoder (v0/v1 message sets, the records before a corrupt one): the
# columns that vary per record (topic and partition are added by with_partition).
PIECE_SCHEMA = pa.schema([ARROW_SCHEMA.field(name) for name in
                          ("key", "value", "offset", "timestamp", "timestamp_type", "headers")])

_LOG_APPEND_TIME = int(TimestampType.LOG_APPEND_TIME)
_AR12 = np.arange(12, dtype=np.int64)
_NO_HEADERS = pa.StructArray.from_arrays([pa.nulls(0, pa.string()), pa.nulls(0, pa.binary())],
                                         fields=list(HEADER_TYPE))
_WORK_MIN = 1 << 20
_local = threading.local()


class Rows(NamedTuple):
    """Records a poll took into its PollColumns: rows [start, start + num_rows)."""

    start: int
    num_rows: int


class RunRead(NamedTuple):
    """What PollColumns.read_run took: how many records (``rows``: where, None if none), the
    offset after the last one, and, when it stopped inside the run's last batch, that batch's
    records section (a copy) with the position of the next record in it and how many are
    left."""

    taken: int
    rows: Rows | None
    next_offset: int
    rest: tuple[bytes, int, int] | None


def _fixed(values: np.ndarray, type_: pa.DataType) -> pa.Array:
    """A fixed-width Arrow array over the buffer of ``values`` (of type_'s width).  pa.array()
    on a numpy array looks for pandas first, importing it on first use (~0.2 s)."""
    return pa.Array.from_buffers(type_, len(values), [None, pa.py_buffer(values)])


def _int64s(values: list[int]) -> np.ndarray:
    # struct packs a list of ints about four times faster than numpy converts one.
    return np.frombuffer(struct.pack(f"{len(values)}q", *values), np.int64)


def _int32s(values: list[int]) -> np.ndarray:
    return np.frombuffer(struct.pack(f"{len(values)}i", *values), np.int32)


# -- Arrow arrays from positions and lengths ---------------------------------------------------


class _Buffers:
    """The buffers a poll's records lie in, and which rows lie in which (``segments``:
    consecutive rows [a, b) of one buffer k, as (a, b, k))."""

    def __init__(self, arrays: list[np.ndarray], arrow: list[pa.Buffer],
                 row_buffer: np.ndarray | None, segments: list[tuple[int, int, int]]) -> None:
        self.arrays = arrays
        self.arrow = arrow
        self.row_buffer = row_buffer  # the buffer of every row; None: all in buffer 0
        self.segments = segments

    @classmethod
    def of(cls, data: list[bytes], row_buffer: np.ndarray | None,
           segments: list[tuple[int, int, int]]) -> _Buffers:
        return cls([np.frombuffer(d, np.uint8) for d in data], [pa.py_buffer(d) for d in data],
                   row_buffer, segments)

    def of_items(self, counts: np.ndarray) -> _Buffers:
        """The same for items counted per row (headers): item ranges for row ranges."""
        ends = np.cumsum(counts)
        starts = ends - counts
        segments = [(int(starts[a]), int(ends[b - 1]), k) for a, b, k in self.segments]
        row_buffer = None if self.row_buffer is None else np.repeat(self.row_buffer, counts)
        return _Buffers(self.arrays, self.arrow, row_buffer, segments)


def _words(buf: np.ndarray) -> np.ndarray:
    """The little-endian uint32 at every byte position but the last three (a strided view)."""
    return np.ndarray((max(len(buf) - 3, 0),), "<u4", buf, 0, (1,))


def _binary(bufs: _Buffers, pos: np.ndarray, lens: np.ndarray) -> pa.Array:
    """binary values at ``pos`` of ``lens`` bytes (-1: null), through a binary_view array."""
    n = len(pos)
    valid = lens >= 0
    size = np.where(valid, lens, 0).astype(np.int32)
    views = np.zeros((n, 4), np.uint32)  # Arrow's 16-byte view: length, prefix|inline, buffer, offset
    views[:, 0] = size
    long = size > 12
    all_long = bool(long.all())
    # A value longer than 12 bytes: its first 4 bytes, its buffer, its offset.
    if all_long:
        views[:, 3] = pos
        if bufs.row_buffer is not None:
            views[:, 2] = bufs.row_buffer
    else:
        views[long, 3] = pos[long]
        if bufs.row_buffer is not None:
            views[long, 2] = bufs.row_buffer[long]
    for a, b, k in bufs.segments:
        if a == b:
            continue
        buf = bufs.arrays[k]
        seg_pos = pos[a:b]
        if all_long:
            views[a:b, 1] = _words(buf)[seg_pos]
            continue
        seg_long = long[a:b]
        seg_views = views[a:b]
        if seg_long.any():
            seg_views[seg_long, 1] = _words(buf)[seg_pos[seg_long]]
        short = np.nonzero(~seg_long & (size[a:b] > 0))[0]
        if len(short):  # up to 12 bytes: inline, zero-padded
            sp, sl = seg_pos[short], size[a:b][short]
            inline = buf[np.minimum(sp[:, None] + _AR12, len(buf) - 1)]
            inline[_AR12[None, :] >= sl[:, None]] = 0
            seg_views.view(np.uint8)[short, 4:16] = inline
    nulls = n - int(np.count_nonzero(valid))
    validity = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    view = pa.Array.from_buffers(pa.binary_view(), n, [validity, pa.py_buffer(views), *bufs.arrow],
                                 null_count=nulls)
    return view.cast(pa.binary())


def _header_keys(keys: pa.Array) -> pa.Array:
    try:
        return keys.cast(pa.string())
    except pa.ArrowInvalid:  # not UTF-8: replaced as the row decoder does (decode "replace")
        return pa.array([k.decode("utf-8", "replace") for k in keys.to_pylist()], pa.string())


def _headers(bufs: _Buffers, cols: RecordColumns, value_end: np.ndarray) -> pa.Array:
    n = cols.count
    list_offsets = np.zeros(n + 1, np.int32)
    if not cols.header_counts:
        return pa.ListArray.from_arrays(_fixed(list_offsets, pa.int32()), _NO_HEADERS,
                                        type=HEADERS_TYPE)
    counts = _int32s(cols.header_counts)
    np.cumsum(counts, out=list_offsets[1:])
    key_pos = np.repeat(value_end, counts) + _int64s(cols.header_key_at)
    value_pos = key_pos + _int64s(cols.header_value_at)
    items = bufs.of_items(counts)
    keys = _header_keys(_binary(items, key_pos, _int64s(cols.header_key_len)))
    values = _binary(items, value_pos, _int64s(cols.header_value_len))
    structs = pa.StructArray.from_arrays([keys, values], fields=list(HEADER_TYPE))
    return pa.ListArray.from_arrays(_fixed(list_offsets, pa.int32()), structs, type=HEADERS_TYPE)


# -- one poll's records ------------------------------------------------------------------------


class PollColumns:
    """The v2 records one poll_arrow() takes, of every partition: read into one RecordColumns
    batch by batch as the poll takes them (read_run), turned into Arrow arrays once
    (finish)."""

    def __init__(self) -> None:
        self.cols = RecordColumns()
        self._buffers: list[bytes] = []
        self._partitions: list[TopicPartition] = []
        # Per batch read: its rows, buffer, partition, timestamp type, base and max timestamp.
        self._sections: list[tuple[int, int, int, int, int, int]] = []
        self._batch: pa.RecordBatch | None = None

    @property
    def count(self) -> int:
        return self.cols.count

    def read_run(self, tp: TopicPartition, batches: Sequence[RecordBatch], data: bytes | None,
                 spans: Sequence[tuple[int, int]] | None, start: int, want: int,
                 max_decompressed_bytes: int, resume: tuple[int, int] | None = None
                 ) -> RunRead | None:
        """Up to ``want`` records from offset ``start`` on of consecutive v2 batches of one
        partition: all compressed (``data`` None), or all not, their records sections at
        ``spans`` of ``data``.  ``resume``: where to go on in the first batch (a position in
        its span and how many records are left).  None, and nothing taken, if one does not
        decompress or a record does not decode (see the module docstring)."""
        assert self._batch is None, "read after finish()"
        if data is None:
            got = _decompressed(batches, max_decompressed_bytes)
            if got is None:
                return None
            data, spans = got
        assert spans is not None
        cols = self.cols
        mark = _mark(cols)
        secs = len(self._sections)
        if self._buffers and self._buffers[-1] is data:
            buffer = len(self._buffers) - 1
        else:
            buffer = len(self._buffers)
            self._buffers.append(data)
        if not self._partitions or self._partitions[-1] != tp:
            self._partitions.append(tp)
        partition = len(self._partitions) - 1
        taken = 0
        rest: tuple[bytes, int, int] | None = None
        try:
            for i, b in enumerate(batches):
                h = b.header
                sec_start, sec_end = spans[i]
                pos, left = (sec_start, h.records_count) if resume is None or i else resume
                before = cols.count
                pos, left = record_columns(data, pos, sec_end, left, want - taken, start,
                                           h.base_offset, cols)
                rows = cols.count - before
                if rows:
                    self._sections.append((rows, buffer, partition, int(h.timestamp_type),
                                           h.base_timestamp, h.max_timestamp))
                    taken += rows
                if left:
                    # Stopped at ``want``: only ever in the run's last batch (the caller adds
                    # a batch only while the run holds fewer records than it wants).
                    assert i == len(batches) - 1
                    section = data
                    if sec_start or sec_end != len(data):
                        section = data[sec_start:sec_end]
                    rest = (section, pos - sec_start, left)
        except (ValueError, IndexError):
            _rollback(cols, mark)
            del self._sections[secs:]
            return None
        next_offset = cols.next_offset if rest is not None else batches[-1].next_offset
        return RunRead(taken, Rows(cols.count - taken, taken) if taken else None, next_offset,
                       rest)

    def finish(self) -> pa.RecordBatch:
        """Every record read, in ARROW_SCHEMA, in the order read."""
        if self._batch is None:
            self._batch = self._build()
        return self._batch

    def _build(self) -> pa.RecordBatch:
        cols = self.cols
        n = cols.count
        if n == 0:
            return with_partition("", 0, [empty_piece()])
        counts, buffers, partitions, kinds, base_ts, max_ts = zip(*self._sections, strict=True)
        sec_rows = _int64s(list(counts))
        # Which rows lie in which buffer.
        segments: list[tuple[int, int, int]] = []
        row = 0
        for rows, k in zip(counts, buffers, strict=True):
            if segments and segments[-1][2] == k:
                segments[-1] = (segments[-1][0], row + rows, k)
            else:
                segments.append((row, row + rows, k))
            row += rows
        row_buffer = None
        if len(self._buffers) > 1:
            row_buffer = np.repeat(np.array(buffers, np.int32), sec_rows)
        bufs = _Buffers.of(self._buffers, row_buffer, segments)
        # A value's position: the previous value's end plus its gap.
        value_len = (_int64s(cols.value_len) if cols.value_len
                     else np.full(n, cols.value_size, np.int64))
        value_size = np.maximum(value_len, 0)
        value_pos = np.cumsum(_int64s(cols.value_gaps))
        value_pos[1:] += np.cumsum(value_size[:-1])
        values = _binary(bufs, value_pos, value_len)
        if cols.key_len:
            keys = _binary(bufs, value_pos - _int64s(cols.key_back), _int64s(cols.key_len))
        else:
            keys = pa.nulls(n, pa.binary())
        # Offsets follow on from the last listed one.
        rows_at = _int64s([*cols.offset_rows, n])
        offsets = np.arange(n, dtype=np.int64) + np.repeat(
            _int64s(cols.offset_values) - rows_at[:-1], np.diff(rows_at))
        stamps = _int64s(cols.timestamp_deltas) + np.repeat(_int64s(list(base_ts)), sec_rows)
        types = np.array(kinds, np.int8)
        if _LOG_APPEND_TIME in kinds:  # every record gets its batch's max timestamp
            stamps = np.where(np.repeat(types == _LOG_APPEND_TIME, sec_rows),
                              np.repeat(_int64s(list(max_ts)), sec_rows), stamps)
        tps = self._partitions
        return pa.RecordBatch.from_arrays([
            keys, values, _topics(tps, partitions, counts, sec_rows),
            _fixed(np.repeat(np.array([tps[p].partition for p in partitions], np.int32),
                             sec_rows), pa.int32()),
            _fixed(offsets, pa.int64()), _fixed(stamps, pa.int64()),
            _fixed(np.repeat(types, sec_rows), pa.int8()),
            _headers(bufs, cols, value_pos + value_size),
        ], schema=ARROW_SCHEMA)


def _topics(tps: list[TopicPartition], partitions: Sequence[int], counts: Sequence[int],
            sec_rows: np.ndarray) -> pa.Array:
    """The topic column: each section's partition's topic, once per row."""
    names = [tp.topic.encode() for tp in tps]
    lengths = np.repeat(np.array([len(names[p]) for p in partitions], np.int32), sec_rows)
    offsets = np.zeros(len(lengths) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    data = b"".join([names[p] * rows for p, rows in zip(partitions, counts, strict=True)])
    return pa.Array.from_buffers(pa.string(), len(lengths),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _repeated(name: bytes, n: int) -> pa.Array:
    """A string column of ``n`` times ``name``."""
    offsets = np.arange(n + 1, dtype=np.int32) * np.int32(len(name))
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets),
                                                  pa.py_buffer(name * n)])


def _mark(cols: RecordColumns) -> tuple[int, ...]:
    return (cols.count, cols.last_value_end, cols.next_offset, len(cols.offset_rows),
            len(cols.key_len), len(cols.header_counts), len(cols.header_key_len))


def _rollback(cols: RecordColumns, mark: tuple[int, ...]) -> None:
    """Undo what record_columns added since ``mark`` (a list empty then is empty again)."""
    count, cols.last_value_end, cols.next_offset, offsets, keys, counts, headers = mark
    cols.count = count
    for lst in (cols.value_gaps, cols.value_len, cols.timestamp_deltas):
        del lst[count:]
    for lst in (cols.offset_rows, cols.offset_values):
        del lst[offsets:]
    for lst in (cols.key_back, cols.key_len):
        del lst[keys:]
    del cols.header_counts[counts:]
    for lst in (cols.header_key_at, cols.header_key_len, cols.header_value_at,
                cols.header_value_len):
        del lst[headers:]


def _decompressed(batches: Sequence[RecordBatch], max_decompressed_bytes: int
                  ) -> tuple[bytes, list[tuple[int, int]]] | None:
    """The records sections of compressed ``batches``, decompressed one after the other into
    one buffer, and where each lies in it; None if one does not decompress (the row path
    raises it as poll() does)."""
    # Decompressed into this thread's work buffer first: one bytes copy for the run.
    work: bytearray = getattr(_local, "work", None) or bytearray(_WORK_MIN)
    used = 0
    spans = []
    for b in batches:
        buf, start, end = b.section_span()
        try:
            with memoryview(buf) as view:
                out, n = decompress_scratch(b.header.compression, view[start:end],
                                            max_bytes=max_decompressed_bytes)
        except ValueError:
            return None
        if used + n > len(work):
            grown = bytearray(max(2 * len(work), used + n))
            grown[:used] = memoryview(work)[:used]
            work = grown
        work[used : used + n] = memoryview(out)[:n]
        spans.append((used, used + n))
        used += n
    if len(work) <= KEEP_BYTES:
        _local.work = work
    with memoryview(work) as view:
        return bytes(view[:used]), spans


# -- from records, and assembling --------------------------------------------------------------


def empty_piece() -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.nulls(0, f.type) for f in PIECE_SCHEMA],
                                      schema=PIECE_SCHEMA)


def rows_to_piece(records: Sequence[Any]) -> pa.RecordBatch:
    """Decoded ``Record`` tuples (v0/v1 message sets, and the records before a corrupt one)."""
    if not records:
        return empty_piece()
    offsets, stamps, keys, values, headers, types = zip(*records, strict=True)
    return pa.RecordBatch.from_arrays([
        pa.array(keys, pa.binary()), pa.array(values, pa.binary()),
        pa.array(offsets, pa.int64()), pa.array(stamps, pa.int64()),
        pa.array([int(t) for t in types], pa.int8()),
        pa.array([[{"key": k, "value": v} for k, v in h] for h in headers], HEADERS_TYPE),
    ], schema=PIECE_SCHEMA)


def with_partition(topic: str, partition: int, pieces: Sequence[pa.RecordBatch]) -> pa.RecordBatch:
    """One partition's pieces as one RecordBatch in ARROW_SCHEMA."""
    if len(pieces) == 1:
        piece = pieces[0]
    else:
        piece = pa.Table.from_batches(pieces, schema=PIECE_SCHEMA).combine_chunks().to_batches()[0]
    n = piece.num_rows
    key, value, offset, stamp, kind, headers = piece.columns
    return pa.RecordBatch.from_arrays([
        key, value, _repeated(topic.encode(), n),
        _fixed(np.full(n, partition, np.int32), pa.int32()), offset, stamp, kind, headers,
    ], schema=ARROW_SCHEMA)


def assemble(columns: PollColumns, pieces: Sequence[Any]) -> pa.RecordBatch:
    """One partition's pieces of a poll -- Rows of ``columns``, or RecordBatches in
    ARROW_SCHEMA (records the row decoder read) -- as one RecordBatch in ARROW_SCHEMA."""
    parts: list[Any] = []
    for piece in pieces:
        last = parts[-1] if parts else None
        if type(piece) is Rows and type(last) is Rows and last.start + last.num_rows == piece.start:
            parts[-1] = Rows(last.start, last.num_rows + piece.num_rows)  # read one after the other
        else:
            parts.append(piece)
    batches = [columns.finish().slice(p.start, p.num_rows) if type(p) is Rows else p
               for p in parts]
    if len(batches) == 1:
        return batches[0]
    return pa.concat_batches(batches)
