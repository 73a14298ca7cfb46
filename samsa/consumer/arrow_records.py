"""Fetched v2 record batches decoded straight into Arrow columns (``KafkaConsumer.poll_arrow``).

poll() builds a ``ConsumerRecord`` per record; at a million records a second those objects,
not the network, are the cost.  Here the records of a run of batches (consecutive batches of
one fetch, read from one buffer) are decoded together with numpy:

1. one loop walks the records' length varints to find where each record starts -- the only
   per-record step, because a record's start depends on the previous record's length, so it
   is compiled (samsa.records.record_loops);
2. every other field (attributes, timestamp delta, offset delta, key and value lengths, header
   count) is a vectorised varint decode at all record positions at once, field after field;
3. keys and values become Arrow ``binary_view`` arrays pointing into the buffer (lengths,
   4-byte prefixes and positions computed with numpy, short ones inlined as the view layout
   demands), cast to ``binary`` by Arrow's C++ gather;
4. headers are decoded one header index at a time over the records that have that many.

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
from samsa.records.record_loops import record_starts
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


# -- the per-record walk ----------------------------------------------------------------------


def _record_starts(data: Any, sections: Sequence[Section]) -> np.ndarray:
    """Where each record of each section starts (the byte of its length varint), by the compiled
    loop of samsa.records.record_loops, which reads ``bytes``: other buffers are copied, only
    the span the sections cover."""
    if not sections:
        return np.zeros(0, np.int64)
    lo = min(s.start for s in sections)
    if type(data) is not bytes:
        with memoryview(data) as view:
            data = bytes(view[lo : max(s.end for s in sections)])
    else:
        lo = 0
    starts: list[int] = []
    try:
        for s in sections:
            record_starts(data, s.start - lo, s.end - lo, s.records, starts)
    except (ValueError, IndexError):
        raise _Bad from None
    found = np.array(starts, np.int64)
    if lo:
        found += lo
    return found


# -- vectorised fields -------------------------------------------------------------------------


def _varints(buf: np.ndarray, pos: np.ndarray, width: int) -> tuple[np.ndarray, Any]:
    """Zigzag varints at every position: (values as int64, byte sizes: an array, or 1 when
    every one is a single byte)."""
    last = len(buf) - 1
    if len(pos) and (pos.min() < 0 or pos.max() > last):
        raise _Bad
    b = buf[pos]
    more = b >= 0x80
    if not more.any():
        small = b.astype(np.int64)
        return (small >> 1) ^ -(small & 1), 1
    value = (b & 0x7F).astype(np.uint64)
    size = np.ones(len(pos), np.int64)
    shift = 7
    while more.any():
        if shift >= 7 * width:
            raise _Bad  # longer than a varint (5 bytes) or varlong (10) may be
        b = buf[np.minimum(pos + size, last)]
        value |= np.where(more, (b & 0x7F).astype(np.uint64) << np.uint64(shift), np.uint64(0))
        size += more
        more &= b >= 0x80
        shift += 7
    # past the end only if a continuation bit was set on the buffer's last byte: caught by the
    # record-end checks, which every field position is held to
    signed = (value >> np.uint64(1)).astype(np.int64) ^ -(value & np.uint64(1)).astype(np.int64)
    return signed, size


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


def _headers(buf: np.ndarray, arrow_buf: pa.Buffer, pos: np.ndarray, counts: np.ndarray,
             ends: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """The headers column, and where each record's headers end."""
    n = len(pos)
    list_offsets = np.zeros(n + 1, np.int32)
    np.cumsum(counts, out=list_offsets[1:])
    total = int(list_offsets[-1])
    if total == 0:
        empty = pa.StructArray.from_arrays([pa.array([], pa.string()), pa.array([], pa.binary())],
                                           fields=list(HEADER_TYPE))
        return pa.ListArray.from_arrays(pa.array(list_offsets), empty, type=HEADERS_TYPE), pos
    # A header takes two bytes at least: a larger count cannot fit its record.
    if (counts * 2 > ends - pos).any():
        raise _Bad
    key_pos = np.empty(total, np.int64)
    key_len = np.empty(total, np.int64)
    val_pos = np.empty(total, np.int64)
    val_len = np.empty(total, np.int64)
    cur = pos.copy()
    for j in range(int(counts.max())):
        sel = np.nonzero(counts > j)[0]
        p = cur[sel]
        kl, ks = _varints(buf, p, 5)
        if (kl < 0).any():
            raise _Bad  # header keys cannot be null
        kp = p + ks
        vl, vs = _varints(buf, np.minimum(kp + kl, ends[sel]), 5)
        if (vl < -1).any() or (kp + kl > ends[sel]).any():
            raise _Bad
        vp = kp + kl + vs
        p = vp + np.maximum(vl, 0)
        if (p > ends[sel]).any():
            raise _Bad
        dst = list_offsets[:-1][sel] + j
        key_pos[dst], key_len[dst], val_pos[dst], val_len[dst] = kp, kl, vp, vl
        cur[sel] = p
    keys = _header_keys(_binary(buf, arrow_buf, key_pos, key_len))
    values = _binary(buf, arrow_buf, val_pos, val_len)
    structs = pa.StructArray.from_arrays([keys, values], fields=list(HEADER_TYPE))
    return pa.ListArray.from_arrays(pa.array(list_offsets), structs, type=HEADERS_TYPE), cur


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
    return decode_run(work, sections)


def decode_run(data: Any, sections: Sequence[Section]) -> pa.RecordBatch | None:
    """The records of ``sections`` (all in ``data``) as one batch in PIECE_SCHEMA; None if any
    record is malformed (see the module docstring)."""
    try:
        return _decode(data, sections)
    except _Bad:
        return None


def _decode(data: Any, sections: Sequence[Section]) -> pa.RecordBatch:
    starts = _record_starts(data, sections)
    buf = np.frombuffer(data, np.uint8)
    arrow_buf = pa.py_buffer(data)
    n = len(starts)
    if n == 0:
        return empty_piece()
    length, size = _varints(buf, starts, 5)
    ends = starts + size + length
    pos = starts + size + 1  # attributes: unused by readers
    ts_delta, size = _varints(buf, pos, 10)
    pos += size
    offset_delta, size = _varints(buf, pos, 5)
    pos += size
    key_len, size = _varints(buf, pos, 5)
    key_pos = pos + size
    if (key_len < -1).any():
        raise _Bad
    pos = key_pos + np.maximum(key_len, 0)
    if (pos >= ends).any():
        raise _Bad
    value_len, size = _varints(buf, pos, 5)
    value_pos = pos + size
    if (value_len < -1).any():
        raise _Bad
    pos = value_pos + np.maximum(value_len, 0)
    if (pos >= ends).any():
        raise _Bad
    header_count, size = _varints(buf, pos, 5)
    if (header_count < 0).any():
        raise _Bad
    headers, pos = _headers(buf, arrow_buf, pos + size, header_count, ends)
    if (pos != ends).any():
        raise _Bad
    counts = [s.records for s in sections]
    if len(sections) == 1:
        s = sections[0]
        offsets = offset_delta + s.base_offset
        if s.timestamp_type == _LOG_APPEND_TIME:
            stamps = np.full(n, s.max_timestamp, np.int64)
        else:
            stamps = ts_delta + s.base_timestamp
        types = np.full(n, s.timestamp_type, np.int8)
    else:
        offsets = offset_delta + np.repeat([s.base_offset for s in sections], counts)
        append_time = np.repeat([s.timestamp_type == _LOG_APPEND_TIME for s in sections], counts)
        stamps = np.where(append_time, np.repeat([s.max_timestamp for s in sections], counts),
                          ts_delta + np.repeat([s.base_timestamp for s in sections], counts))
        types = np.repeat(np.array([s.timestamp_type for s in sections], np.int8), counts)
    return pa.RecordBatch.from_arrays([
        _binary(buf, arrow_buf, key_pos, key_len),
        _binary(buf, arrow_buf, value_pos, value_len),
        pa.array(offsets), pa.array(stamps), pa.array(types), headers,
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
