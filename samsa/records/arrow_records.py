"""v2 records encoded from Arrow columns, many at a time (no Python object per record).

A v2 record (Kafka's DefaultRecord, protocol guide "Record") is::

    length varint | attributes 0 | timestampDelta varlong | offsetDelta varint |
    keyLength varint | key | valueLength varint | value | headerCount varint | headers

Everything from keyLength on depends on the row alone: :class:`ArrowRecords` builds it once
per call for every row (the "tail", one ``binary_join_element_wise``).  The head depends on
the batch the row lands in (its base timestamp and record count), so :meth:`ArrowRecords.append_to`
works out with numpy how many rows the builder still takes (Java's
MemoryRecordsBuilder.hasRoomFor, also for compressed batches' estimated ratio), encodes those
rows' heads as varint arrays and joins heads and tails into one buffer that
``RecordBatchBuilder.append_encoded`` takes as is.  The bytes are those ``append`` writes
record by record.  Needs pyarrow and numpy (the ``arrow`` extra).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from samsa.records.batch_header import RECORD_BATCH_OVERHEAD
from samsa.records.builder import RecordBatchBuilder
from samsa.records.varint import encode_varint, encode_varlong

__all__ = ["ArrowRecords", "as_binary", "encode_varints", "upper_bounds"]

_LB = pa.large_binary()
_EMPTY = pa.scalar(b"", _LB)
_ZERO = pa.scalar(b"\x00", _LB)  # attributes; also headerCount 0
_NULL = pa.scalar(b"\x01", _LB)  # varint -1: null key / value
# Zig-zag values below this are looked up (a take) rather than encoded.
_TABLE_LIMIT = 1 << 15
# Offset deltas below this are a slice of a table of their encodings.
_COUNT_LIMIT = 1 << 17
_tables: dict[str, pa.Array] = {}
_size_tables: dict[str, np.ndarray] = {}
# The widest head: length 5, attributes 1, timestamp delta 10, offset delta 5.
_HEAD_MAX = 21


def _zigzag(values: np.ndarray) -> np.ndarray:
    v = values.astype(np.int64, copy=False)
    return ((v << 1) ^ (v >> 63)).view(np.uint64)


def _sizes(z: np.ndarray) -> np.ndarray:
    """Bytes of each unsigned LEB128 value (1..10)."""
    sizes = np.ones(len(z), np.int64)
    for bits in range(7, 64, 7):
        over = z >= np.uint64(1 << bits)
        if not over.any():
            break
        sizes += over
    return sizes


def _leb128(z: np.ndarray) -> pa.Array:
    """Unsigned LEB128 of each value, as a large_binary array."""
    n = len(z)
    sizes = _sizes(z)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    data = np.empty(int(offsets[-1]), np.uint8)
    starts = offsets[:-1]
    rest = z.copy()
    for j in range(int(sizes.max()) if n else 0):
        byte = (rest & np.uint64(0x7F)).astype(np.uint8)
        byte[sizes > j + 1] |= 0x80
        if j == 0:
            data[starts] = byte
        else:
            sel = sizes > j
            data[starts[sel] + j] = byte[sel]
        rest >>= np.uint64(7)
    return pa.Array.from_buffers(_LB, n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _table(name: str) -> pa.Array:
    table = _tables.get(name)
    if table is None:
        if name == "leb128":  # entry z: LEB128 of z
            table = _leb128(np.arange(_TABLE_LIMIT, dtype=np.uint64))
        else:  # entry c: the zig-zag varint of c (offset deltas)
            table = _leb128(_zigzag(np.arange(_COUNT_LIMIT, dtype=np.int64)))
        _tables[name] = table
    return table


def _count_sizes() -> np.ndarray:
    """Entry c: bytes of the zig-zag varint of c, for 0 <= c < _COUNT_LIMIT."""
    sizes = _size_tables.get("count")
    if sizes is None:
        sizes = _size_tables["count"] = _sizes(_zigzag(np.arange(_COUNT_LIMIT, dtype=np.int64)))
    return sizes


def _scalar(data: bytes) -> pa.Scalar:
    return pa.scalar(data, _LB)


def encode_varints(values: np.ndarray) -> pa.Array:
    """Zig-zag varints (protocol guide "Varint") of int64 ``values``, one large_binary item each."""
    z = _zigzag(values)
    if len(z) and int(z.max()) < _TABLE_LIMIT:
        return _table("leb128").take(z)
    return _leb128(z)


def _varint_sizes(values: np.ndarray) -> np.ndarray:
    return _sizes(_zigzag(values))


def as_binary(column: pa.Array | pa.ChunkedArray, name: str) -> pa.Array:
    """``column`` as one large_binary array (strings as their UTF-8 bytes)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    t = column.type
    if pa.types.is_large_binary(t):
        return column
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t) or pa.types.is_null(t):
        return column.cast(pa.large_string()).view(_LB)
    if pa.types.is_binary(t) or pa.types.is_fixed_size_binary(t) or pa.types.is_binary_view(t):
        return column.cast(_LB)
    raise TypeError(f"the {name} column is {t}; give binary or string (large, view and fixed-size "
                    "variants too), or cast it first")


def _lengths(column: pa.Array | None, n: int) -> np.ndarray:
    """Byte length per row, -1 for null (and for every row of an absent column)."""
    if column is None:
        return np.full(n, -1, np.int64)
    return pc.fill_null(pc.binary_length(column), -1).to_numpy(zero_copy_only=False).astype(np.int64)


def _encode_headers(headers: pa.Array) -> tuple[Any, np.ndarray]:
    """headerCount + headers of each row (a large_binary array), and the bytes each adds to
    estimate_size_upper_bound (10 + key + value per header)."""
    if isinstance(headers, pa.ChunkedArray):
        headers = headers.combine_chunks()
    t = headers.type
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)) or not pa.types.is_struct(t.value_type):
        raise TypeError(f"the headers column is {t}; give list<struct<key: string, value: binary>>")
    counts = pc.fill_null(pc.list_value_length(headers), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    n = len(headers)
    items = pc.list_flatten(headers)  # the headers of non-null lists, row after row
    if items.null_count:
        raise ValueError("a header is null; give each header as {key, value} (a null value is allowed)")
    struct = items.type
    if struct.get_field_index("key") < 0 or struct.get_field_index("value") < 0:
        raise TypeError(f"the headers' struct is {struct}; it needs fields 'key' and 'value'")
    hkeys = as_binary(items.field("key"), "headers' key")
    if hkeys.null_count:
        raise ValueError("a header has a null key; Kafka header keys are strings, give one")
    hvalues = as_binary(items.field("value"), "headers' value")
    klen = _lengths(hkeys, len(hkeys))
    vlen = _lengths(hvalues, len(hvalues))
    each = pc.binary_join_element_wise(encode_varints(klen), hkeys, encode_varints(vlen),
                                       pc.fill_null(hvalues, _EMPTY), _EMPTY)
    first = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=first[1:])
    # Row i's headers are items first[i]..first[i+1]: a contiguous run of ``each``'s data.
    each_offsets = np.frombuffer(each.buffers()[1], np.int64, len(each) + 1, each.offset * 8)
    blob = pa.Array.from_buffers(_LB, n, [None, pa.py_buffer(np.ascontiguousarray(each_offsets[first])),
                                          each.buffers()[2]])
    extra = 10 * counts
    sums = np.zeros(len(hkeys) + 1, np.int64)
    np.cumsum(klen + np.maximum(vlen, 0), out=sums[1:])
    extra += sums[first[1:]] - sums[first[:-1]]
    return pc.binary_join_element_wise(encode_varints(counts), blob, _EMPTY), extra


def upper_bounds(keys: pa.Array | None, values: pa.Array, headers: pa.Array | None) -> np.ndarray:
    """estimate_size_upper_bound of each row (a one-record batch with the widest varints)."""
    n = len(values)
    bound = RECORD_BATCH_OVERHEAD + 31 + np.maximum(_lengths(keys, n), 0) + np.maximum(_lengths(values, n), 0)
    if headers is not None:
        bound += _encode_headers(headers)[1]
    return bound


class ArrowRecords:
    """Rows of key/value/headers columns and their timestamps, ready to go into batches.

    ``keys`` and ``values`` are large_binary (:func:`as_binary`; None: null for every row),
    ``headers`` list<struct<key, value>> or None, ``timestamps_ms`` one int for all rows or
    an int64 array.  Rows are appended in order by :meth:`append_to`.
    """

    __slots__ = ("_min_prefix", "_stamps", "_tail_sizes", "_tails", "bounds", "constant_timestamp",
                 "key_sizes", "value_sizes")

    def __init__(self, keys: pa.Array | None, values: pa.Array, headers: pa.Array | None,
                 timestamps_ms: int | np.ndarray) -> None:
        n = len(values)
        klen = _lengths(keys, n)
        vlen = _lengths(values, n)
        self.key_sizes = klen
        self.value_sizes = vlen
        bound = RECORD_BATCH_OVERHEAD + 31 + np.maximum(klen, 0) + np.maximum(vlen, 0)
        if headers is not None and headers.null_count < n:
            header_bytes, extra = _encode_headers(headers)
            bound += extra
        else:
            header_bytes = _ZERO
        self.bounds = bound
        key_part = (_NULL, _EMPTY) if keys is None else (encode_varints(klen), pc.fill_null(keys, _EMPTY))
        self._tails = tails = pc.binary_join_element_wise(
            *key_part, encode_varints(vlen), pc.fill_null(values, _EMPTY), header_bytes, _EMPTY)
        offsets = np.frombuffer(tails.buffers()[1], np.int64, n + 1, tails.offset * 8)
        self._tail_sizes = sizes = np.diff(offsets)
        # Prefix sums of each row's smallest possible size (head of 4 one-byte varints): bounds
        # how many rows a batch could still take before sizing them exactly.
        self._min_prefix = np.zeros(n + 1, np.int64)
        np.cumsum(sizes + 4, out=self._min_prefix[1:])
        if isinstance(timestamps_ms, (int, np.integer)):
            self.constant_timestamp: int | None = int(timestamps_ms)
            self._stamps: np.ndarray | None = None
        else:
            self.constant_timestamp = None
            self._stamps = np.asarray(timestamps_ms, np.int64)

    def __len__(self) -> int:
        return len(self._tail_sizes)

    def timestamp(self, row: int) -> int:
        return self.constant_timestamp if self._stamps is None else int(self._stamps[row])  # type: ignore[return-value]

    def append_to(self, builder: RecordBatchBuilder, start: int, end: int) -> int:
        """Append rows ``start`` .. ``end - 1`` to ``builder`` until one does not fit (the
        first row of an empty batch always does); returns the first row not appended."""
        if start >= end:
            return start
        count = builder.record_count
        used = builder.uncompressed_size
        limit = builder.batch_size_limit
        ratio = builder.estimated_compression_ratio
        # Bytes the rows before the last one that fits can add at most (every head at its
        # narrowest): hasRoomFor needs estimate(used + before) < limit + 1.
        if ratio is None or ratio >= 1.0:
            room = limit - used
        else:
            room = int((limit - RECORD_BATCH_OVERHEAD + 1) / ratio) - (used - RECORD_BATCH_OVERHEAD) + 1
        window = int(np.searchsorted(self._min_prefix, self._min_prefix[start] + max(room, 0), "right"))
        stop = min(end, max(window, start + 1))
        base = builder.base_timestamp
        stamps = self._stamps
        k = stop - start
        if count + k <= _COUNT_LIMIT:
            od_sizes = _count_sizes()[count:count + k]
        else:
            od_sizes = _varint_sizes(np.arange(count, count + k, dtype=np.int64))
        ts_bytes: bytes | None = None
        if stamps is None:
            # One timestamp for every row: one delta, encoded once.
            first_ts = max_ts = self.timestamp(start)
            ts_bytes = encode_varlong(first_ts - (first_ts if base is None else base))
            body = (1 + len(ts_bytes)) + od_sizes + self._tail_sizes[start:stop]
        else:
            chunk = stamps[start:stop]
            first_ts = int(chunk[0])
            ts_delta = chunk - (first_ts if base is None else base)
            body = 1 + _varint_sizes(ts_delta) + od_sizes + self._tail_sizes[start:stop]
        top = int(body.max())
        len_sizes = _count_sizes()[body] if top < _COUNT_LIMIT else _varint_sizes(body)
        added = len_sizes + body
        before = used + np.cumsum(added) - added
        if ratio is None:
            fits = before + added <= limit
        else:
            estimated = RECORD_BATCH_OVERHEAD + ((before - RECORD_BATCH_OVERHEAD) * ratio).astype(np.int64)
            fits = estimated + added <= limit
        if count == 0:
            fits[0] = True
        if not fits.all():
            k = int(np.argmin(fits))
            stop = start + k
            if k == 0:
                return start
            body, added = body[:k], added[:k]
        if stamps is not None:
            ts_delta = ts_delta[:k]
            max_ts = int(stamps[start:stop].max())
        ts_part = _scalar(ts_bytes) if ts_bytes is not None else encode_varints(ts_delta)
        od_part = (_table("count").slice(count, k) if count + k <= _COUNT_LIMIT
                   else encode_varints(np.arange(count, count + k, dtype=np.int64)))
        lo = int(body.min())
        len_part = _scalar(encode_varint(lo)) if lo == top else encode_varints(body)
        joined = pc.binary_join_element_wise(len_part, _ZERO, ts_part, od_part,
                                             self._tails.slice(start, k), _EMPTY)
        total = int(added.sum())
        data = joined.buffers()[2]
        builder.append_encoded(memoryview(data)[:total], k, first_ts, max_ts)
        return stop
