"""Fetched v2 record batches decoded straight into Arrow columns (``KafkaConsumer.poll_arrow``).

poll() builds a ``ConsumerRecord`` per record; poll_arrow() builds no Python object per
record.  The records of a run of batches (consecutive batches of one fetch, read from one
buffer) are decoded together:

1. one loop reads every record's fields -- the per-record step, since a record's start
   depends on the previous record's length -- compiled with mypyc
   (samsa.records.record_loops.record_columns): value positions and lengths and timestamps
   a list each, and keys, offsets and headers only when they are not the common case (null
   keys, offsets without gaps, no headers);
2. keys and values become Arrow ``binary_view`` arrays pointing into the buffer (lengths,
   4-byte prefixes and positions computed with numpy, short ones inlined as the view layout
   demands), cast to ``binary`` by Arrow's C++ gather; header keys and values likewise.

The layout is Kafka's DefaultRecord (see the protocol guide's "Record"): length varint,
attributes int8, timestampDelta varlong, offsetDelta varint, key, value (varint length, -1
null), header count varint, headers (key varint length + UTF-8, value varint length, -1 null).
Any structural problem makes :func:`decode_run` answer None: the caller then reads the run with
the row decoder (samsa.records.batch.iter_records), which finds the first bad record and raises
the CorruptRecordError poll() raises, after the records before it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from samsa.records import RecordBatch, TimestampType
from samsa.records.compression import decompress_scratch
from samsa.records.record_loops import RecordColumns, record_columns
from samsa.records.scratch import KEEP_BYTES

__all__ = [
    "ARROW_SCHEMA",
    "HEADERS_TYPE",
    "PIECE_SCHEMA",
    "Section",
    "decode_run",
    "decode_v2_run",
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
# One decoded run: the columns that vary per record (topic and partition are added once per
# partition by with_partition).
PIECE_SCHEMA = pa.schema([ARROW_SCHEMA.field(name) for name in
                          ("key", "value", "offset", "timestamp", "timestamp_type", "headers")])

_LOG_APPEND_TIME = int(TimestampType.LOG_APPEND_TIME)
_AR12 = np.arange(12, dtype=np.int64)
_NO_HEADERS = pa.StructArray.from_arrays([pa.array([], pa.string()), pa.array([], pa.binary())],
                                         fields=list(HEADER_TYPE))
_WORK_MIN = 1 << 20
_local = threading.local()


class Section(NamedTuple):
    """The uncompressed records of one batch: bytes [start, end) of the run's buffer."""

    start: int
    end: int
    records: int
    base_offset: int
    base_timestamp: int
    timestamp_type: int
    max_timestamp: int


class _Bad(Exception):
    """A structural problem: leave the run to the row decoder, which names it."""


# -- Arrow arrays from positions and lengths ---------------------------------------------------


def _words(buf: np.ndarray) -> np.ndarray:
    """The little-endian uint32 at every byte position but the last three (a strided view)."""
    return np.ndarray((max(len(buf) - 3, 0),), "<u4", buf, 0, (1,))


def _binary(buf: np.ndarray, arrow_buf: pa.Buffer, pos: np.ndarray, lens: np.ndarray) -> pa.Array:
    """binary values at ``pos`` of ``lens`` bytes (-1: null), through a binary_view array."""
    n = len(pos)
    valid = lens >= 0
    size = np.where(valid, lens, 0).astype(np.int32)
    views = np.zeros((n, 4), np.uint32)  # Arrow's 16-byte view: length, prefix|inline, buffer, offset
    views[:, 0] = size
    long = size > 12
    # A value longer than 12 bytes: its first 4 bytes, buffer 0, its offset.
    if long.all():
        views[:, 1] = _words(buf)[pos]
        views[:, 3] = pos
    else:
        if long.any():
            lp = pos[long]
            views[long, 1] = _words(buf)[lp]
            views[long, 3] = lp
        short = np.nonzero(~long & (size > 0))[0]
        if len(short):  # up to 12 bytes: inline, zero-padded
            sp, sl = pos[short], size[short]
            inline = buf[np.minimum(sp[:, None] + _AR12, len(buf) - 1)]
            inline[_AR12[None, :] >= sl[:, None]] = 0
            views.view(np.uint8)[short, 4:16] = inline
    nulls = n - int(np.count_nonzero(valid))
    validity = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    view = pa.Array.from_buffers(pa.binary_view(), n, [validity, pa.py_buffer(views), arrow_buf],
                                 null_count=nulls)
    return view.cast(pa.binary())


def _header_keys(keys: pa.Array) -> pa.Array:
    try:
        return keys.cast(pa.string())
    except pa.ArrowInvalid:  # not UTF-8: replaced as the row decoder does (decode "replace")
        return pa.array([k.decode("utf-8", "replace") for k in keys.to_pylist()], pa.string())


def _headers(buf: np.ndarray, arrow_buf: pa.Buffer, cols: RecordColumns) -> pa.Array:
    n = cols.count
    list_offsets = np.zeros(n + 1, np.int32)
    if not cols.header_counts:
        return pa.ListArray.from_arrays(pa.array(list_offsets), _NO_HEADERS, type=HEADERS_TYPE)
    np.cumsum(np.array(cols.header_counts, np.int32), out=list_offsets[1:])
    keys = _header_keys(_binary(buf, arrow_buf, np.array(cols.header_key_pos, np.int64),
                                np.array(cols.header_key_len, np.int64)))
    values = _binary(buf, arrow_buf, np.array(cols.header_value_pos, np.int64),
                     np.array(cols.header_value_len, np.int64))
    structs = pa.StructArray.from_arrays([keys, values], fields=list(HEADER_TYPE))
    return pa.ListArray.from_arrays(pa.array(list_offsets), structs, type=HEADERS_TYPE)


def decode_v2_run(batches: Sequence[RecordBatch], compressed: bool, max_decompressed_bytes: int
                  ) -> pa.RecordBatch | None:
    """The records of consecutive v2 batches, all compressed or all not; None if one does not
    decode (see decode_run) or decompress."""
    sections = []
    if not compressed:
        data = batches[0].section_span()[0]
        for b in batches:
            buf, start, end = b.section_span()
            if buf is not data:
                return None
            h = b.header
            sections.append(Section(start, end, h.records_count, h.base_offset, h.base_timestamp,
                                    int(h.timestamp_type), h.max_timestamp))
        return decode_run(data, sections)
    # Decompressed once, one after the other into this thread's work buffer: nothing decoded
    # from it outlives the call (the binary columns are copies), so the next run reuses it.
    work: bytearray = getattr(_local, "work", None) or bytearray(_WORK_MIN)
    used = 0
    for b in batches:
        buf, start, end = b.section_span()
        h = b.header
        try:
            with memoryview(buf) as view:
                out, n = decompress_scratch(h.compression, view[start:end],
                                            max_bytes=max_decompressed_bytes)
        except ValueError:
            return None  # the row path raises it as poll() does
        if used + n > len(work):
            grown = bytearray(max(2 * len(work), used + n))
            grown[:used] = memoryview(work)[:used]
            work = grown
        work[used : used + n] = memoryview(out)[:n]
        sections.append(Section(used, used + n, h.records_count, h.base_offset, h.base_timestamp,
                                int(h.timestamp_type), h.max_timestamp))
        used += n
    if len(work) <= KEEP_BYTES:
        _local.work = work
    with memoryview(work) as view:
        return decode_run(bytes(view[:used]), sections)


def decode_run(data: Any, sections: Sequence[Section]) -> pa.RecordBatch | None:
    """The records of ``sections`` (all in ``data``) as one batch in PIECE_SCHEMA; None if any
    record is malformed (see the module docstring)."""
    try:
        return _decode(data, sections)
    except _Bad:
        return None


def _decode(data: Any, sections: Sequence[Section]) -> pa.RecordBatch:
    if not sections:
        return empty_piece()
    # The compiled loop reads bytes: another buffer is copied, the span the sections cover.
    shift = 0
    if type(data) is not bytes:
        shift = min(s.start for s in sections)
        with memoryview(data) as view:
            data = bytes(view[shift : max(s.end for s in sections)])
    cols = RecordColumns()
    try:
        for s in sections:
            record_columns(data, s.start - shift, s.end - shift, s.records, s.base_offset, cols)
    except (ValueError, IndexError):
        raise _Bad from None
    n = cols.count
    if n == 0:
        return empty_piece()
    buf = np.frombuffer(data, np.uint8)
    arrow_buf = pa.py_buffer(data)
    if cols.key_pos:
        keys = _binary(buf, arrow_buf, np.array(cols.key_pos, np.int64),
                       np.array(cols.key_len, np.int64))
    else:
        keys = pa.nulls(n, pa.binary())
    if cols.offsets:
        offsets = np.array(cols.offsets, np.int64)
    else:
        offsets = np.arange(cols.first_offset, cols.first_offset + n, dtype=np.int64)
    stamps = np.array(cols.timestamp_deltas, np.int64)
    if len(sections) == 1:
        s = sections[0]
        types = np.full(n, s.timestamp_type, np.int8)
        if s.timestamp_type == _LOG_APPEND_TIME:
            stamps[:] = s.max_timestamp
        else:
            stamps += s.base_timestamp
    else:
        counts = [s.records for s in sections]
        types = np.repeat(np.array([s.timestamp_type for s in sections], np.int8), counts)
        append_time = np.repeat([s.timestamp_type == _LOG_APPEND_TIME for s in sections], counts)
        stamps = np.where(append_time, np.repeat([s.max_timestamp for s in sections], counts),
                          stamps + np.repeat([s.base_timestamp for s in sections], counts))
    value_pos = np.cumsum(np.array(cols.value_steps, np.int64))
    return pa.RecordBatch.from_arrays([
        keys, _binary(buf, arrow_buf, value_pos, np.array(cols.value_len, np.int64)),
        pa.array(offsets), pa.array(stamps), pa.array(types), _headers(buf, arrow_buf, cols),
    ], schema=PIECE_SCHEMA)


# -- from records, and assembling --------------------------------------------------------------


def empty_piece() -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in PIECE_SCHEMA],
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
        key, value, pa.repeat(pa.scalar(topic, pa.string()), n).cast(pa.string()),
        pa.array(np.full(n, partition, np.int32)), offset, stamp, kind, headers,
    ], schema=ARROW_SCHEMA)
