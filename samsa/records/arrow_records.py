"""v2 records encoded from Arrow columns, many at a time (no Python object per record).

A v2 record (Kafka's DefaultRecord, protocol guide "Record") is::

    length varint | attributes 0 | timestampDelta varlong | offsetDelta varint |
    keyLength varint | key | valueLength varint | value | headerCount varint | headers

Everything from keyLength on depends on the row alone (the "tail"): :class:`ArrowRecords` keeps
its parts (varints, keys, values, headers) and their sizes, and joins them
(``binary_join_element_wise``, which runs without the GIL) only for the rows and the path that
need them.  The head depends on
the batch the row lands in (its base timestamp and record count), so :meth:`ArrowRecords.append_to`
hands the tails to ``RecordBatchBuilder.append_tails``, whose compiled loop adds each row's head
while the batch has room (Java's MemoryRecordsBuilder.hasRoomFor, also for compressed
batches' estimated ratio): a batch costs a few microseconds, not a dozen numpy and Arrow calls.
With one timestamp for every row and no compression, the head depends only on the row's index
in its batch: the rows that fill empty batches are laid out ahead (``plan_batches``, the same
choices as the loop) and their heads joined to their tails in one Arrow call, so a planned batch
is filled with one copy; only the batch a call starts in, already holding records, takes the
loop (over the rows that could fit it).  The bytes are those ``append`` writes record by record.  Needs pyarrow and numpy (the
``arrow`` extra).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from samsa.records.batch_header import RECORD_BATCH_OVERHEAD, Compression
from samsa.records.builder import RecordBatchBuilder, plan_batches
from samsa.records.varint import encode_varint

__all__ = ["ArrowRecords", "as_binary", "encode_varints"]

_LB = pa.large_binary()
_EMPTY = pa.scalar(b"", _LB)
_ZERO = pa.scalar(b"\x00", _LB)  # attributes; also headerCount 0
_NULL = pa.scalar(b"\x01", _LB)  # varint -1: null key / value
_ZERO_DELTA = pa.scalar(b"\x00\x00", _LB)  # attributes 0, timestampDelta 0
# Zig-zag values below this are looked up (a take) rather than encoded.
_TABLE_LIMIT = 1 << 15
_tables: dict[tuple[bytes, bytes], pa.Array] = {}


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


def _table(prefix: bytes = b"", suffix: bytes = b"") -> pa.Array:
    """Entry z: ``prefix`` + the LEB128 of z + ``suffix``."""
    table = _tables.get((prefix, suffix))
    if table is None:
        table = _leb128(np.arange(_TABLE_LIMIT, dtype=np.uint64))
        if prefix or suffix:
            table = pc.binary_join_element_wise(pa.scalar(prefix, _LB), table, pa.scalar(suffix, _LB), _EMPTY)
        _tables[(prefix, suffix)] = table
    return table


def encode_varints(values: np.ndarray, prefix: bytes = b"", suffix: bytes = b"") -> pa.Array:
    """Zig-zag varints (protocol guide "Varint") of int64 ``values``, one large_binary item
    each, between ``prefix`` and ``suffix`` (one Arrow join input fewer where they are used).
    Each (prefix, suffix) pair keeps a table of _TABLE_LIMIT entries: give a few fixed ones."""
    z = _zigzag(values)
    if len(z) and int(z.max()) < _TABLE_LIMIT:
        return _table(prefix, suffix).take(z)
    if prefix or suffix:
        return pc.binary_join_element_wise(pa.scalar(prefix, _LB), _leb128(z), pa.scalar(suffix, _LB), _EMPTY)
    return _leb128(z)


def as_binary(column: pa.Array | pa.ChunkedArray, name: str) -> pa.Array:
    """``column`` as one large_binary array (strings as their UTF-8 bytes)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    t = column.type
    if pa.types.is_large_binary(t):
        return column
    if (pa.types.is_binary(t) or pa.types.is_string(t)) and len(column) and column.buffers()[2] is not None:
        # The same bytes with 64-bit offsets: a cast would copy every value.
        n = len(column)
        validity, offsets, data = column.buffers()
        wide = np.frombuffer(offsets, np.int32, column.offset + n + 1).astype(np.int64)
        return pa.Array.from_buffers(_LB, n, [validity, pa.py_buffer(wide), data], column.null_count, column.offset)
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
    if not column.null_count and pa.types.is_large_binary(column.type):
        return np.diff(_offsets_of(column))
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


def _non_null(column: pa.Array) -> pa.Array:
    """``column`` with nulls as empty items (their length says null): a join emits null rows."""
    return pc.fill_null(column, _EMPTY) if column.null_count else column


def _offsets_of(column: pa.Array) -> np.ndarray:
    """The n + 1 offsets of a large_binary array."""
    return np.frombuffer(column.buffers()[1], np.int64, len(column) + 1, column.offset * 8)


def _sliced(parts: list[Any], start: int, stop: int) -> list[Any]:
    return [part if isinstance(part, pa.Scalar) else part.slice(start, stop - start) for part in parts]


class ArrowRecords:
    """Rows of key/value/headers columns and their timestamps, ready to go into batches.

    ``keys`` and ``values`` are large_binary (:func:`as_binary`; None: null for every row),
    ``headers`` list<struct<key, value>> or None, ``timestamps_ms`` one int for all rows or
    an int64 array.  Rows are appended in order by :meth:`append_to`.
    """

    __slots__ = ("_key_sizes", "_parts", "_plan", "_stamp_list", "_stamps", "_tail_bytes",
                 "_tail_offset_array", "_tail_offsets", "_tail_sizes", "bounds", "constant_timestamp",
                 "value_sizes")

    def __init__(self, keys: pa.Array | None, values: pa.Array, headers: pa.Array | None,
                 timestamps_ms: int | np.ndarray) -> None:
        n = len(values)
        vlen = _lengths(values, n)
        self.value_sizes = vlen
        self._key_sizes = klen = None if keys is None else _lengths(keys, n)
        # Few numpy calls for keyless rows: each call on a long array lets the Sender take the GIL.
        values_bound = np.maximum(vlen, 0)
        bound = values_bound + (RECORD_BATCH_OVERHEAD + 31) if klen is None else (
            RECORD_BATCH_OVERHEAD + 31 + np.maximum(klen, 0) + values_bound)
        if headers is not None and headers.null_count < n:
            header_bytes, extra = _encode_headers(headers)
            bound += extra
        else:
            header_bytes = _ZERO
        self.bounds = bound
        # Each row's tail is the join of these parts (arrays, or scalars alike for every row);
        # it is joined only where needed: whole for the record loop, with the heads for a plan.
        value_lengths = encode_varints(vlen)
        parts: list[Any] = [_NULL] if klen is None else [encode_varints(klen), _non_null(keys)]
        parts += [value_lengths, _non_null(values), header_bytes]
        self._parts = parts
        # Tail sizes: the parts' sizes summed (scalars once, as a constant).
        constant = 0
        sizes = values_bound + np.diff(_offsets_of(value_lengths))
        for part in (parts[:-3] + [header_bytes]):
            if isinstance(part, pa.Scalar):
                constant += len(part.as_py())
            else:
                sizes += np.diff(_offsets_of(part))
        if constant:
            sizes += constant
        self._tail_sizes = sizes
        self._tail_offset_array: np.ndarray | None = None  # their running sums, when needed
        self._tail_bytes: bytes | None = None
        self._tail_offsets: list[int] = []
        self._plan: _Plan | None = None
        self._stamp_list: list[int] | None = None
        if isinstance(timestamps_ms, (int, np.integer)):
            self.constant_timestamp: int | None = int(timestamps_ms)
            self._stamps: np.ndarray | None = None
        else:
            self.constant_timestamp = None
            self._stamps = np.asarray(timestamps_ms, np.int64)

    @property
    def key_sizes(self) -> np.ndarray:
        """Each row's key length, -1 for null."""
        sizes = self._key_sizes
        if sizes is None:
            sizes = self._key_sizes = np.full(len(self._tail_sizes), -1, np.int64)
        return sizes

    def _tail_offsets_array(self) -> np.ndarray:
        offsets = self._tail_offset_array
        if offsets is None:
            offsets = self._tail_offset_array = np.zeros(len(self._tail_sizes) + 1, np.int64)
            np.cumsum(self._tail_sizes, out=offsets[1:])
        return offsets

    def __len__(self) -> int:
        return len(self._tail_sizes)

    def timestamp(self, row: int) -> int:
        return self.constant_timestamp if self._stamps is None else int(self._stamps[row])  # type: ignore[return-value]

    def _append_planned(self, builder: RecordBatchBuilder, start: int, end: int) -> int:
        """Rows from ``start`` into the empty uncompressed ``builder`` as one planned batch;
        0 if no plan covers it.  Rows ``start`` .. ``end - 1`` are planned when ``start`` is
        past the last plan's rows, so planning costs O(rows) over a call; a batch that starts
        elsewhere (another batch size, after a batch filled record by record) takes the loop.
        With one timestamp for every row, each timestampDelta is 0."""
        limit = builder.batch_size_limit
        plan = self._plan
        if plan is None or start >= plan.end:
            plan = self._plan = _Plan(self, start, end, limit)
        stop = plan.stops.get(start, 0) if plan.limit == limit else 0
        if not stop:
            return 0
        stop = min(stop, end)
        ts = self.constant_timestamp
        assert ts is not None
        base = plan.start
        offsets = plan.offsets
        builder.append_encoded(plan.data[int(offsets[start - base]):int(offsets[stop - base])],
                               stop - start, ts, ts)
        return stop

    def tails(self, start: int, stop: int) -> pa.Array:
        """The tails of rows ``start`` .. ``stop - 1`` (large_binary)."""
        return pc.binary_join_element_wise(*_sliced(self._parts, start, stop), _EMPTY)

    def _append_window(self, builder: RecordBatchBuilder, start: int, end: int, stamp: int) -> int:
        """append_tails over a window of rows: those whose tails take at most the rest of the
        uncompressed batch's limit, and one more (the loop stops at it)."""
        offsets = self._tail_offsets_array()
        while start < end:
            first = int(offsets[start])
            room = builder.batch_size_limit - builder.estimated_size
            stop = min(end, int(np.searchsorted(offsets, first + max(room, 0), "right")) + 1)
            window = self.tails(start, stop)
            taken = builder.append_tails(window.buffers()[2].to_pybytes(), _offsets_of(window).tolist(), 0,
                                         stop - start, stamp)
            start += taken
            if start < stop:
                break
        return start

    def append_to(self, builder: RecordBatchBuilder, start: int, end: int) -> int:
        """Append rows ``start`` .. ``end - 1`` to ``builder`` until one does not fit (the
        first row of an empty batch always does); returns the first row not appended.  The
        builder's compiled loop (append_tails) adds each row's head -- length, attributes,
        timestamp and offset deltas -- to its encoded tail, checking room as append() does."""
        if start >= end:
            return start
        if self.constant_timestamp is not None and builder.compression is Compression.NONE:
            if not builder.record_count:
                stop = self._append_planned(builder, start, end)
                plan = self._plan
                if stop and (stop == end or plan is None or stop != plan.end):
                    return stop
                if stop:  # the plan ended there (planned for a shorter call), not the batch
                    start = stop
            # Uncompressed batches are planned but for the one a call starts in: copy only
            # the rows that could fit it for the loop.
            return self._append_window(builder, start, end, self.constant_timestamp)
        if self._tail_bytes is None:  # once per call: the loop reads bytes and lists
            tails = self.tails(0, len(self))
            self._tail_bytes = tails.buffers()[2].to_pybytes() if len(tails) else b""
            self._tail_offsets = _offsets_of(tails).tolist()
        stamps: int | list[int]
        if self._stamps is None:
            assert self.constant_timestamp is not None
            stamps = self.constant_timestamp
        else:
            if self._stamp_list is None:
                self._stamp_list = self._stamps.tolist()
            stamps = self._stamp_list
        return builder.append_tails(self._tail_bytes, self._tail_offsets, start, end, stamps)


def _encode_planned(records: ArrowRecords, deltas: np.ndarray, start: int, end: int) -> pa.Array:
    """Rows ``start`` .. ``end - 1`` as whole records, each row's offsetDelta given (its index
    in its planned batch; every timestampDelta is 0): one Arrow join of heads and tails."""
    parts = records._parts
    tail_sizes = records._tail_sizes[start:end]
    values = records.value_sizes[start:end]
    if parts[0] is _NULL and isinstance(parts[-1], pa.Scalar) and values.min() == values.max():
        # Keyless, headerless rows of one value length: a record's head (length, attributes,
        # deltas, null key, value length) depends only on its offsetDelta, so the heads are
        # looked up in a table of the call's offsetDeltas; the join takes 3 inputs, not 5.
        indexes = np.arange(int(deltas.max()) + 1, dtype=np.int64)
        value_length = encode_varint(int(values[0]))
        # A small table (a batch's records), built each time: no cached table per value length.
        middle = pc.binary_join_element_wise(_ZERO_DELTA, encode_varints(indexes),
                                             pa.scalar(b"\x01" + value_length, _LB), _EMPTY)
        lengths = np.diff(_offsets_of(middle)) - 1 - len(value_length) + int(tail_sizes[0])
        heads = pc.binary_join_element_wise(encode_varints(lengths), middle, _EMPTY).take(deltas)
        return pc.binary_join_element_wise(heads, parts[2].slice(start, end - start), parts[3], _EMPTY)
    # attributes 0, timestampDelta 0, offsetDelta, and a null key's marker where it follows.
    marker = b"\x01" if parts[0] is _NULL else b""
    middle = encode_varints(deltas, b"\x00\x00", marker)
    lengths = np.diff(_offsets_of(middle)) + tail_sizes - len(marker)
    return pc.binary_join_element_wise(encode_varints(lengths), middle,
                                       *_sliced(parts[1:] if marker else parts, start, end), _EMPTY)


class _Plan:
    """Rows ``start`` .. of an :class:`ArrowRecords` laid out in empty uncompressed batches of
    ``limit`` bytes (:func:`~samsa.records.builder.plan_batches`) and encoded whole: heads and
    tails joined in one Arrow call, so that filling a planned batch is one copy."""

    __slots__ = ("data", "end", "limit", "offsets", "start", "stops")

    def __init__(self, records: ArrowRecords, start: int, end: int, limit: int) -> None:
        # A list for the compiled loop, of these rows only (plans of a call do not overlap).
        counts = plan_batches(records._tail_sizes[start:end].tolist(), 0, end - start, limit, 1)
        stops = np.cumsum(counts) + start
        rows = end - start
        # Each record's offsetDelta: its index in its planned batch.
        deltas = np.arange(rows, dtype=np.int64) - np.repeat(stops - start - counts, counts)
        joined = _encode_planned(records, deltas, start, end)
        self.start = start
        self.end = end
        self.limit = limit
        self.stops = dict(zip((stops - counts).tolist(), stops.tolist(), strict=True))
        self.offsets = _offsets_of(joined)
        self.data = memoryview(joined.buffers()[2])

