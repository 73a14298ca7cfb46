"""The consumer's per-record loops over a v2 records section, compiled with mypyc at install.

A fetched record's start depends on the previous record's length, so reading records is a
loop with a step per record; in the interpreter that step, not the network, bounds how fast
a consumer reads.  setup.py compiles this module with mypyc (same typed source); without a
compiler it runs as plain Python, and tests/records/test_record_loops.py runs every case
against both forms.

The layout is Kafka's DefaultRecord (the protocol guide's "Record"): length varint,
attributes int8, timestampDelta varlong, offsetDelta varint, key and value (varint length, -1
null), header count varint, headers (key varint length + UTF-8, value varint length, -1 null).
Both loops take ``bytes`` (mypyc checks the exact type): callers pass the batch's records
section.  A structural problem raises ValueError (or IndexError for a record running past the
data); the callers hand the batch to the row decoder of samsa.records.batch, which names it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

__all__ = ["RecordColumns", "decode_rows", "record_columns", "record_starts", "scan_rows"]

_NEW: Final[Callable[..., Any]] = tuple.__new__
_MAX_VARINT_SHIFT: Final = 28  # 5 bytes
_MAX_VARLONG_SHIFT: Final = 63  # 10 bytes


def _varint(data: bytes, pos: int, max_shift: int) -> tuple[int, int]:
    """The zigzag varint at ``pos`` and the position after it."""
    b = data[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    value = b & 0x7F
    b = data[pos + 1]
    if b < 0x80:  # two bytes, the other common case: record and value lengths 64-8191
        value |= b << 7
        return (value >> 1) ^ -(value & 1), pos + 2
    value |= (b & 0x7F) << 7
    shift = 14
    pos += 2
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
        if shift > max_shift:
            raise ValueError(f"varint longer than {max_shift // 7 + 1} bytes at byte {pos}")


def record_starts(data: bytes, start: int, end: int, count: int, out: list[int]) -> None:
    """Append to ``out`` where each of the ``count`` records of ``data[start:end]`` starts (the
    byte of its length varint).  ValueError unless they fill [start, end) exactly."""
    pos = start
    for _ in range(count):
        if pos >= end:
            raise ValueError(f"records end at byte {pos}, before the declared {count}")
        out.append(pos)
        length, after = _varint(data, pos, _MAX_VARINT_SHIFT)
        if length < 6:  # attributes + four one-byte varints at least, as the row decoder
            raise ValueError(f"record length {length} at byte {pos}")
        pos = after + length
    if pos != end:
        raise ValueError(f"the declared {count} records end at byte {pos}, not {end}")


def _headers(data: bytes, pos: int, count: int, record_end: int
             ) -> tuple[list[tuple[str, bytes | None]], int]:
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        klen, key_pos = _varint(data, pos, _MAX_VARINT_SHIFT)
        pos = _skip_headers(data, pos, 1, record_end)  # the checks, in one place
        hkey = data[key_pos : key_pos + klen].decode("utf-8", "replace")
        vlen, value_pos = _varint(data, key_pos + klen, _MAX_VARINT_SHIFT)
        headers.append((hkey, None if vlen < 0 else data[value_pos : value_pos + vlen]))
    return headers, pos


def _sized(data: bytes, pos: int, record_end: int, what: str) -> tuple[int, int, int]:
    """A varint length (-1: null) and the bytes it counts, inside the record: (length, start,
    end)."""
    length, start = _varint(data, pos, _MAX_VARINT_SHIFT)
    if length >= 0:
        end = start + length
        if end > record_end:
            raise ValueError(f"{what} length {length} runs past the end of the record")
        return length, start, end
    if length != -1:
        raise ValueError(f"{what} length {length}")
    return length, start, start


def _record_fields(data: bytes, pos: int, end: int
                   ) -> tuple[int, int, int, int, int, int, int, int, int]:
    """The record at ``pos`` (its length varint), which must end by ``end``: (record_end,
    timestamp_delta, offset_delta, key_pos, key_len, value_pos, value_len, headers_pos,
    header_count); a length of -1 is null.  The headers are left to the caller, which must find
    them ending at record_end."""
    length, pos = _varint(data, pos, _MAX_VARINT_SHIFT)
    record_end = pos + length
    if length < 6 or record_end > end:
        raise ValueError(f"record length {length} at byte {pos} does not fit the batch")
    # One-byte varints, the common case, are read here rather than by a call each.
    b = data[pos + 1]  # after the attributes
    if b < 0x80:
        ts_delta = (b >> 1) ^ -(b & 1)
        pos += 2
    else:
        ts_delta, pos = _varint(data, pos + 1, _MAX_VARLONG_SHIFT)
    b = data[pos]
    if b < 0x80:
        offset_delta = (b >> 1) ^ -(b & 1)
        pos += 1
    else:
        offset_delta, pos = _varint(data, pos, _MAX_VARINT_SHIFT)
    if data[pos] == 1:  # a null key
        key_len = -1
        pos += 1
        key_pos = pos
    else:
        key_len, key_pos, pos = _sized(data, pos, record_end, "key")
    value_len, value_pos, pos = _sized(data, pos, record_end, "value")
    b = data[pos]
    if b < 0x80:
        header_count = (b >> 1) ^ -(b & 1)
        pos += 1
    else:
        header_count, pos = _varint(data, pos, _MAX_VARINT_SHIFT)
    if header_count < 0:
        raise ValueError(f"negative header count {header_count}")
    return (record_end, ts_delta, offset_delta, key_pos, key_len, value_pos, value_len, pos,
            header_count)


def _skip_headers(data: bytes, pos: int, count: int, record_end: int) -> int:
    for _ in range(count):
        klen, pos = _varint(data, pos, _MAX_VARINT_SHIFT)
        if klen < 0:
            raise ValueError(f"header key length {klen} (header keys cannot be null)")
        pos += klen
        if pos > record_end:
            raise ValueError(f"header key length {klen} runs past the end of the record")
        vlen, pos = _varint(data, pos, _MAX_VARINT_SHIFT)
        if vlen >= 0:
            pos += vlen
        elif vlen != -1:
            raise ValueError(f"header value length {vlen}")
        if pos > record_end:
            raise ValueError(f"header value length {vlen} runs past the end of the record")
    return pos


def _ends_at(pos: int, record_end: int) -> None:
    if pos != record_end:
        raise ValueError(f"a record's fields end at byte {pos}, its length at {record_end}")


def scan_rows(data: bytes, pos: int, left: int, want: int, min_offset: int, base_offset: int
              ) -> tuple[int, int, int, int]:
    """What decode_rows with the same arguments would return, checked as it checks, without
    building anything: (how many rows, the position after, records left, the last row's
    offset or -1).  A poll hands out the rows it counts; they are built when iterated."""
    taken = 0
    last_offset = -1
    end = len(data)
    while left > 0 and taken < want:
        (record_end, _ts, offset_delta, _kp, _kl, _vp, _vl, pos,
         header_count) = _record_fields(data, pos, end)
        if header_count:
            pos = _skip_headers(data, pos, header_count, record_end)
        _ends_at(pos, record_end)
        left -= 1
        offset = base_offset + offset_delta
        if offset >= min_offset:
            taken += 1
            last_offset = offset
    if left == 0 and pos != end:
        raise ValueError(f"{end - pos} bytes remain after the declared records")
    return taken, pos, left, last_offset


def decode_rows(data: bytes, pos: int, left: int, want: int, min_offset: int,
                base_offset: int, base_timestamp: int, append_time: int, timestamp_type: object,
                prefix: tuple[str, int], epoch: object, record_cls: type,
                key_fn: Callable[[str, bytes | None], Any] | None,
                value_fn: Callable[[str, bytes | None], Any] | None,
                ) -> tuple[list[Any], int, int]:
    """Up to ``want`` of the ``left`` records at ``pos`` as ``record_cls`` tuples (the fields of
    samsa.consumer.records.ConsumerRecord), skipping those below ``min_offset``.

    ``prefix`` is (topic, partition); ``append_time`` >= 0 stamps every record with the batch's
    LogAppendTime, else a record's timestamp is base_timestamp + its delta.  Returns the rows,
    the position after the last record read and how many records are left; once none are left,
    the records must have ended exactly at the end of ``data``."""
    topic, partition = prefix
    rows: list[Any] = []
    end = len(data)
    while left > 0 and len(rows) < want:
        (record_end, ts_delta, offset_delta, key_pos, key_len, value_pos, value_len, pos,
         header_count) = _record_fields(data, pos, end)
        headers: tuple[tuple[str, bytes | None], ...] = ()  # shared: no allocation, no GC work
        if header_count:
            found, pos = _headers(data, pos, header_count, record_end)
            headers = tuple(found)
        _ends_at(pos, record_end)
        left -= 1
        offset = base_offset + offset_delta
        if offset < min_offset:
            continue  # returned before (a fetch from inside a batch)
        key = None if key_len < 0 else data[key_pos : key_pos + key_len]
        value = None if value_len < 0 else data[value_pos : value_pos + value_len]
        rows.append(_NEW(record_cls, (
            topic, partition, offset,
            append_time if append_time >= 0 else base_timestamp + ts_delta, timestamp_type,
            key if key_fn is None else key_fn(topic, key),
            value if value_fn is None else value_fn(topic, value),
            headers, key_len, value_len, epoch)))
    if left == 0 and pos != end:
        raise ValueError(f"{end - pos} bytes remain after the declared records")
    return rows, pos, left


class RecordColumns:
    """The fields of the records read by record_columns, a list each, for poll_arrow to turn
    into Arrow buffers (samsa.consumer.arrow_records).  Numbers are kept small -- CPython keeps
    one object each of -5..256, so a record costs no allocation -- by storing distances rather
    than positions, and by leaving lists empty in the common case: ``key_back``/``key_len``
    while every key is null, ``value_len`` while every value is ``value_size`` long (a
    stream of fixed-size records), ``header_counts`` while no record has headers (each then
    filled in for the records before), and offsets but where one does not follow on from the record
    before (``offset_rows``/``offset_values``: the first record of each batch of another
    partition, or after a gap compaction left)."""

    def __init__(self) -> None:
        self.count = 0
        # value_gaps: a value's position minus the previous value's end (across buffers too:
        # the sums give back each position in its own buffer).
        self.value_gaps: list[int] = []
        self.value_len: list[int] = []  # -1: null
        self.value_size = 0  # every value's length while value_len is empty
        self.timestamp_deltas: list[int] = []  # from the record's batch's base timestamp
        self.last_value_end = 0
        self.next_offset = -1  # the offset that follows on from the last record read
        self.offset_rows: list[int] = []
        self.offset_values: list[int] = []
        self.key_back: list[int] = []  # the value's position minus the key's
        self.key_len: list[int] = []  # -1: null
        self.header_counts: list[int] = []
        self.header_key_at: list[int] = []  # a header key's position minus its record's value end
        self.header_key_len: list[int] = []
        self.header_value_at: list[int] = []  # a header value's position minus its key's
        self.header_value_len: list[int] = []  # -1: null


def record_columns(data: bytes, pos: int, end: int, left: int, want: int, min_offset: int,
                   base_offset: int, out: RecordColumns) -> tuple[int, int]:
    """Add the fields of up to ``want`` of the ``left`` records at ``pos`` (of a batch whose
    records section ends at ``end``) to ``out``, skipping (but checking) records below
    ``min_offset``, as decode_rows; returns the position after the last record read and how
    many are left.  Once none are left the records must end at ``end`` exactly.  ValueError
    (or IndexError) for a record that does not decode; ``out`` is then partly filled."""
    value_gaps = out.value_gaps
    value_len = out.value_len
    timestamp_deltas = out.timestamp_deltas
    last_end = out.last_value_end
    next_offset = out.next_offset
    count = out.count
    taken = 0
    while left > 0 and taken < want:
        (record_end, ts_delta, offset_delta, key_pos, key_len, value_pos, vlen, pos,
         header_count) = _record_fields(data, pos, end)
        left -= 1
        offset = base_offset + offset_delta
        if offset < min_offset:  # returned before (a fetch from inside a batch)
            if header_count:
                pos = _skip_headers(data, pos, header_count, record_end)
            _ends_at(pos, record_end)
            continue
        if key_len != -1 or out.key_len:
            if not out.key_len:
                out.key_back.extend([0] * count)
                out.key_len.extend([-1] * count)
            out.key_back.append(value_pos - key_pos)
            out.key_len.append(key_len)
        value_gaps.append(value_pos - last_end)
        last_end = value_pos + vlen if vlen > 0 else value_pos
        if not count:
            out.value_size = vlen
        elif vlen != out.value_size or value_len:
            if not value_len:
                value_len.extend([out.value_size] * count)
            value_len.append(vlen)
        if header_count or out.header_counts:
            if not out.header_counts:
                out.header_counts.extend([0] * count)
            out.header_counts.append(header_count)
            if header_count:
                pos = _header_columns(data, pos, header_count, record_end, last_end, out)
        _ends_at(pos, record_end)
        timestamp_deltas.append(ts_delta)
        if offset != next_offset:
            out.offset_rows.append(count)
            out.offset_values.append(offset)
        next_offset = offset + 1
        count += 1
        taken += 1
    out.count = count
    out.last_value_end = last_end
    out.next_offset = next_offset
    if left == 0 and pos != end:
        raise ValueError(f"{end - pos} bytes remain after the declared records")
    return pos, left


def _header_columns(data: bytes, pos: int, count: int, record_end: int, value_end: int,
                    out: RecordColumns) -> int:
    if count * 2 > record_end - pos:  # two bytes a header at least
        raise ValueError(f"header count {count} does not fit the record")
    for _ in range(count):
        klen, key_pos = _varint(data, pos, _MAX_VARINT_SHIFT)
        pos = _skip_headers(data, pos, 1, record_end)  # the checks, in one place
        vlen, value_pos = _varint(data, key_pos + klen, _MAX_VARINT_SHIFT)
        out.header_key_at.append(key_pos - value_end)
        out.header_key_len.append(klen)
        out.header_value_at.append(value_pos - key_pos)
        out.header_value_len.append(vlen)
    return pos
