"""Produce-time validation of the records of a v2 batch, as Kafka's LogValidator does it.

Kafka parses every record of every produced batch (``LogValidator`` iterating a
``DefaultRecordBatch``, each record read by ``DefaultRecord.readFrom``) and refuses the batch,
appending nothing, if one does not parse: a record length that does not fit the batch, a key,
value or header running past its record, a negative header count, a null header key, fields
that do not end exactly where the record's length says, fewer or more records than the header
declares.  Those answer INVALID_RECORD (``InvalidRecordException``).  Beyond Kafka, a record's
OffsetDelta must be its place in the batch (0..n-1; Kafka rewrites compressed batches whose
deltas are off and trusts uncompressed ones, which then read back with wrong offsets), a null
key or value is -1 and no other negative length, and timestamps must fit 64 bits.  On a
compacted topic every record needs a key (``LogValidator.validateKey``).  Timestamps are
checked per message.timestamp.type and message.timestamp.before/after.max.ms
(``validateTimestamp``); the batch's MaxTimestamp is recomputed from the records.  Rejected
records are named, as ProduceResponse v8+ carries them (KIP-467).

Cost: parsing each record in Python would double the broker's produce CPU, so records are
taken in runs.  A producer's batch is mostly runs of records of one length (same-sized values;
the OffsetDelta widens at 64 and 8192).  The first record of a run is parsed fully; the others
are then shown to have the same layout with strided slices (one C pass per byte position):
the same bytes wherever a length or count sits (record length, key and value lengths, header
count, header key and value lengths), TimestampDeltas of the same width, and OffsetDeltas
equal to the encodings of their indices.  A record laid out like a valid one parses the same
way, so it is valid too.  Runs are grown by galloping, so that the work stays linear whatever
the input; where runs are short (sizes vary) records are parsed one at a time.

setup.py compiles this module with mypyc where it can (pure Python otherwise), which makes the
one-at-a-time parse about 21 ns a record, provided it reads a ``bytes`` (compiled, a byte of a
bytes is read in place; of a bytearray, or of a value typed as either, by a generic call: six
times the cost per record), so the records it parses are copied into one first.  Compiled, a
run costs a few microseconds however short, so batches of up to _ONE_BY_ONE_MAX records (a
16 KiB batch of 100-byte values holds 148) are parsed one at a time from the start: 3.2 us
against 4.1 for such a batch; larger ones still go by runs (80 us against 1.1 ms for 1 MiB).
The module's constants are Final: compiled code reads them as C statics, not by a dict lookup.
Hence too the annotations must be true at run time (a compiled function checks its arguments'
types), and the errors live in record_errors.py so that the compiled module and this source
raise the same classes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Final, NamedTuple

from crc32c import crc32c

from samsa.broker.log.config import LONG_MAX, LogConfig
from samsa.broker.log.record_errors import BatchPlace, RecordTimestampError, RecordValidationError
from samsa.errors import InvalidRecordError
from samsa.records import NO_TIMESTAMP, BatchHeader
from samsa.records.batch_header import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    LOG_OVERHEAD,
    MAGIC_V2,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    Compression,
)
from samsa.records.varint import decode_varint, decode_varlong

__all__ = [
    "BatchPlace",
    "RecordTimestampError",
    "RecordValidationError",
    "checked_max_timestamp",
    "sound_header",
    "walk_records",
]

_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1
_MIN_RECORD_BODY: Final = 6  # attributes, timestamp delta, offset delta, key, value, header count
# After this many runs shorter than _SHORT_RUN records, parse one record at a time.
_SHORT_RUN: Final = 4
_MAX_SHORT_RUNS: Final = 3
# Compiled (a .so, not this source): batches of up to this many records go one at a time.
_COMPILED: Final = not __file__.endswith(".py")
_ONE_BY_ONE_MAX: Final = 256
_THREE_BYTE_END: Final = 1 << 20  # OffsetDeltas of three bytes: 8192 <= index < 2**20
# A run is first checked twice as far as the previous run went (at least _MIN_STEP records;
# the first run, _FIRST_RUN), then galloping by _GALLOP: work within a multiple of the run.
_FIRST_RUN: Final = 32
_MIN_STEP: Final = 8
_GALLOP: Final = 8
_MAX_STEP: Final = 2048
# One-byte zigzag varint -> its value + 64 (0..127), order-preserving: the smallest and largest
# byte of a translated run of one-byte timestamp deltas give the run's smallest and largest.
_ZIGZAG_RANK: Final = bytes(((b >> 1) ^ -(b & 1)) + 64 if b < 0x80 else 0 for b in range(256))
# _ABOVE[v + 64]: one-byte zigzag varints whose value exceeds v -> 0x80, the rest -> 0, so that
# ``run.translate(_ABOVE[v + 64]).isascii()`` says "no delta above v" in two C passes (max()
# over a run costs ~11 ns a record).
_ABOVE: Final = tuple(bytes(0x80 if b < 0x80 and _ZIGZAG_RANK[b] > rank else 0 for b in range(256))
               for rank in range(128))
# Varint bytes -> 0 where a byte is what the place needs, 1 where not: the last byte of a
# varint has no continuation bit, the others have it.  ``.find(1)`` is then the first misfit.
_NOT_LAST: Final = bytes(0 if b < 0x80 else 1 for b in range(256))
_NOT_MORE: Final = bytes(1 if b < 0x80 else 0 for b in range(256))
_ONE_BYTE: Final = tuple(bytes((b,)) for b in range(256))
_REPEATED: Final = tuple(b * 2048 for b in _ONE_BYTE)  # as long as a step of a run (_MAX_STEP)


def _offset_digit_tables(stop: int) -> tuple[tuple[bytes, ...], ...]:
    """``tables[w - 1][d][i]``: byte ``d`` of OffsetDelta ``i``'s varint when it takes ``w``
    bytes, for i < ``stop`` (only the i of that width matter): the zigzag value 2i in 7-bit
    groups, each but the last with the continuation bit."""
    one = (bytes(range(0, 128, 2)),)
    two = (bytes(range(0x80, 0x100, 2)) * 128,
           b"".join(_ONE_BYTE[v] * 64 for v in range(128)))
    three = (bytes(range(0x80, 0x100, 2)) * (stop // 64),
             b"".join(_ONE_BYTE[0x80 | v] * 64 for v in range(128)) * (stop // 8192),
             b"".join(_ONE_BYTE[v] * 8192 for v in range(stop // 8192)))
    return one, two, three


# OffsetDelta widths: one byte below 64, two below 8192, three from there.  Runs stop at
# _RUN_INDEX_LIMIT records (a 1 MB batch holds at most ~150,000): later records go one by one.
_RUN_INDEX_LIMIT: Final = 1 << 17
_WIDTH_ENDS: Final = (64, 8192, _RUN_INDEX_LIMIT)
_OFFSET_DIGITS: Final = _offset_digit_tables(_RUN_INDEX_LIMIT)  # 400 KB


# -- a produced batch's header -------------------------------------------------------------------

# The v2 batch header (samsa/records/batch_header.py has the layout), and its constants bound
# here as Final: the compiled checks then read C globals, not the other module's attributes.
_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_OVERHEAD: Final[int] = RECORD_BATCH_OVERHEAD
_LOG_OVERHEAD: Final[int] = LOG_OVERHEAD
_MAGIC: Final[int] = MAGIC_V2
_CRC_FROM: Final[int] = ATTRIBUTES_OFFSET
_CODEC_MASK: Final[int] = COMPRESSION_CODEC_MASK
_MAX_CODEC: Final[int] = int(max(Compression))
_CONTROL: Final[int] = CONTROL_FLAG_MASK
_TRANSACTIONAL: Final[int] = TRANSACTIONAL_FLAG_MASK
_new_tuple: Final = tuple.__new__


def sound_header(buf: bytearray | memoryview, pos: int, max_bytes: int) -> BatchHeader | None:
    """The header of the produced batch at ``pos`` if it passes every check Log makes of a
    batch before walking its records (Log._checked_header: size within ``max_bytes`` and the
    buffer, magic 2, CRC-32C, records count = LastOffsetDelta + 1 >= 1, not a control batch, a
    base sequence for a producer id, a producer id for a transactional batch, a known codec),
    else None: the caller then runs those checks one by one to raise the error that names the
    problem.  One compiled call instead of those checks in Python: it runs for every batch."""
    if len(buf) - pos < _OVERHEAD:
        return None
    fields = _HEADER.unpack_from(buf, pos)
    batch_length: int = fields[1]
    magic: int = fields[3]
    attributes: int = fields[5]
    last_offset_delta: int = fields[6]
    producer_id: int = fields[9]
    base_sequence: int = fields[11]
    count: int = fields[12]
    size = batch_length + _LOG_OVERHEAD
    if (magic != _MAGIC or size > max_bytes or size < _OVERHEAD or size > len(buf) - pos
            or count != last_offset_delta + 1 or count < 1 or attributes & _CONTROL
            or (producer_id >= 0 and base_sequence < 0)
            or (attributes & _TRANSACTIONAL and producer_id < 0)
            or (attributes & _CODEC_MASK) > _MAX_CODEC):
        return None
    crc: int = fields[4]
    with memoryview(buf) as view:
        if crc32c(view[pos + _CRC_FROM : pos + size]) != crc:
            return None
    header: BatchHeader = _new_tuple(BatchHeader, fields)
    return header


def _bad(where: str | BatchPlace, index: int, problem: str) -> RecordValidationError:
    message = f"record {index}: {problem}"
    return RecordValidationError(f"{where}: {message}", [(index, message)])


# -- one record --------------------------------------------------------------------------------

def _read_record(data: bytes | bytearray, pos: int, end: int, index: int,
                 where: str | BatchPlace, skeleton: list[int] | None
                 ) -> tuple[int, int, int, int, int, int]:
    """Parse record ``index`` at ``pos`` as DefaultRecord.readFrom does, within ``end``.

    Returns (record end, TimestampDelta, body start, OffsetDelta position, key length
    position, key length).  With ``skeleton``, appends the positions of the bytes that hold
    lengths and counts (the layout's skeleton).  Raises RecordValidationError.
    """
    try:
        # Varints of one and two bytes inline (a call each would double the cost).
        b = data[pos]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            body = pos + 1
        elif data[pos + 1] < 0x80:
            n = (b & 0x7F) | (data[pos + 1] << 7)
            length = (n >> 1) ^ -(n & 1)
            body = pos + 2
        else:
            length, body = decode_varint(data, pos)
        record_end = body + length
        if length < _MIN_RECORD_BODY or record_end > end:
            raise _bad(where, index, f"length {length} does not fit the {end - body} bytes "
                                     "left in the batch")
        p = body + 1  # Attributes: unused in v2 records (DefaultRecord reads and ignores them)
        b = data[p]
        if b < 0x80:
            delta = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            delta, p = decode_varlong(data, p)
            if not _INT64_MIN <= delta <= _INT64_MAX:
                raise _bad(where, index, f"timestamp delta {delta} does not fit 64 bits")
        offset_pos = p
        b = data[p]
        if b < 0x80:
            offset_delta = b >> 1 if not b & 1 else -1 - (b >> 1)
            p += 1
        elif data[p + 1] < 0x80:
            n = (b & 0x7F) | (data[p + 1] << 7)
            offset_delta = (n >> 1) ^ -(n & 1)
            p += 2
        else:
            offset_delta, p = decode_varint(data, p)
        if offset_delta != index:
            raise _bad(where, index, f"offset delta {offset_delta} is not the record's place "
                                     f"in the batch ({index})")
        key_pos = p
        b = data[p]
        if b < 0x80:
            key_len = (b >> 1) ^ -(b & 1)
            p += 1
        elif data[p + 1] < 0x80:
            n = (b & 0x7F) | (data[p + 1] << 7)
            key_len = (n >> 1) ^ -(n & 1)
            p += 2
        else:
            key_len, p = decode_varint(data, p)
        key_data = p
        if key_len > 0:
            p += key_len
        elif key_len < -1:
            raise _bad(where, index, f"key length {key_len} (only -1, a null key, may be "
                                     "negative)")
        if p > record_end:
            raise _bad(where, index, f"key length {key_len} runs past the end of the record "
                                     f"({record_end - key_data} bytes left)")
        value_pos = p
        b = data[p]
        if b < 0x80:
            value_len = (b >> 1) ^ -(b & 1)
            p += 1
        elif data[p + 1] < 0x80:
            n = (b & 0x7F) | (data[p + 1] << 7)
            value_len = (n >> 1) ^ -(n & 1)
            p += 2
        else:
            value_len, p = decode_varint(data, p)
        value_data = p
        if value_len > 0:
            p += value_len
        elif value_len < -1:
            raise _bad(where, index, f"value length {value_len} (only -1, a null value, may "
                                     "be negative)")
        if p > record_end:
            raise _bad(where, index, f"value length {value_len} runs past the end of the "
                                     f"record ({record_end - value_data} bytes left)")
        headers_pos = p
        if data[p] == 0:
            p += 1
        else:
            headers, p = decode_varint(data, p)
            if headers < 0:
                raise _bad(where, index, f"header count {headers} is negative")
            if headers > record_end - p:
                raise _bad(where, index, f"header count {headers} exceeds the "
                                         f"{max(record_end - p, 0)} bytes left in the record")
            if skeleton is not None:
                skeleton += range(headers_pos, p)
            p = _read_headers(data, p, record_end, headers, index, where, skeleton)
        if p != record_end:
            raise _bad(where, index, f"its fields take {p - body} bytes but its length says "
                                     f"{length}")
    except (IndexError, ValueError) as exc:  # a varint ran off the data or was over-long
        raise _bad(where, index, f"malformed ({exc})") from None
    if skeleton is not None:
        if body - pos == 2 and key_data - key_pos == 1 and value_data == key_data + 1:
            skeleton += (pos, pos + 1, key_pos, value_pos)  # the usual shape
        else:
            skeleton += range(pos, body)
            skeleton += range(key_pos, key_data)
            skeleton += range(value_pos, value_data)
        if headers_pos + 1 == p:
            skeleton.append(headers_pos)  # no headers (else added with them)
    return record_end, delta, body, offset_pos, key_pos, key_len


def _one_by_one(data: bytes, pos: int, end: int, index: int, count: int,
                where: str | BatchPlace, keyless: list[tuple[int, int]] | None
                ) -> tuple[int, int, int, int]:
    """Records ``index``.. from ``pos`` on, one at a time, to ``end`` or the ``count``-th:
    (position reached, index reached, smallest and largest TimestampDelta).  Records without
    a key are added to ``keyless`` if given.

    The usual record (varints of one or two bytes, a one-byte TimestampDelta, no headers) is
    read inline; anything else by _read_record, which also names what is wrong."""
    lo = _INT64_MAX
    hi = _INT64_MIN
    while pos < end and index < count:
        record_end = -1  # stays -1 unless the inline reading gets to the end
        try:
            b = data[pos]
            if b < 0x80:
                p = pos + 1 + (b >> 1) if not b & 1 else -1
                record_end = p
                p = pos + 1
            else:
                c = data[pos + 1]
                p = pos + 2
                record_end = p + (((b & 0x7F) | (c << 7)) >> 1) if c < 0x80 and not b & 1 \
                    else -1
            if p + _MIN_RECORD_BODY <= record_end <= end and data[p + 1] < 0x80:
                b = data[p + 1]
                delta = (b >> 1) ^ -(b & 1)
                if index < 64 and data[p + 2] == index << 1:
                    p += 3
                elif 64 <= index < 8192 and data[p + 2] == ((index << 1) & 0x7F) | 0x80 \
                        and data[p + 3] == index >> 6:
                    p += 4
                elif 8192 <= index < _THREE_BYTE_END \
                        and data[p + 2] == ((index << 1) & 0x7F) | 0x80 \
                        and data[p + 3] == ((index >> 6) & 0x7F) | 0x80 \
                        and data[p + 4] == index >> 13:
                    p += 5
                else:
                    record_end = -1
                b = data[p]  # key length
                no_key = b == 1
                if b < 0x80:
                    p += 1 if no_key else 1 + (b >> 1) if not b & 1 else end
                else:
                    c = data[p + 1]
                    p += 2 + (((b & 0x7F) | (c << 7)) >> 1) if c < 0x80 and not b & 1 else end
                b = data[p] if p < record_end else 0x80  # value length
                if b < 0x80:
                    p += 1 if b == 1 else 1 + (b >> 1) if not b & 1 else end
                else:
                    c = data[p + 1]
                    p += 2 + (((b & 0x7F) | (c << 7)) >> 1) if c < 0x80 and not b & 1 else end
                if p + 1 != record_end or data[p]:  # no headers, the record's end
                    record_end = -1
            else:
                record_end = -1
        except IndexError:
            record_end = -1
        if record_end < 0:
            record_end, delta, _, _, _, key_len = _read_record(data, pos, end, index, where,
                                                               None)
            no_key = key_len < 0
        if delta < lo:  # noqa: PLR1730 -- a compare, not a call, per record
            lo = delta
        if delta > hi:  # noqa: PLR1730
            hi = delta
        if no_key and keyless is not None:
            keyless.append((index, index + 1))
        pos = record_end
        index += 1
    return pos, index, lo, hi


def _read_headers(data: bytes | bytearray, p: int, record_end: int, count: int, index: int,
                  where: str | BatchPlace, skeleton: list[int] | None) -> int:
    for h in range(count):
        start = p
        key_len, p = decode_varint(data, p)
        if key_len < 0:
            raise _bad(where, index, f"header {h} has key length {key_len}; header keys "
                                     "cannot be null")
        if skeleton is not None:
            skeleton += range(start, p)
        p += key_len
        if p > record_end:
            raise _bad(where, index, f"header {h}'s key runs past the end of the record")
        start = p
        value_len, p = decode_varint(data, p)
        if skeleton is not None:
            skeleton += range(start, p)
        if value_len > 0:
            p += value_len
        elif value_len < -1:
            raise _bad(where, index, f"header {h} has value length {value_len} (only -1, a "
                                     "null value, may be negative)")
        if p > record_end:
            raise _bad(where, index, f"header {h}'s value runs past the end of the record")
    return p


# -- runs of records of one layout ---------------------------------------------------------------

class _Layout(NamedTuple):
    """Where a valid record's fields sit, relative to its start: records whose bytes match it
    at these places parse as it did (see the module docstring)."""

    # (place, that byte repeated, that byte) for each byte of a length or a count
    skeleton: tuple[tuple[int, bytes, bytes], ...]
    ts_at: int  # TimestampDelta
    ts_width: int
    offset_at: int  # OffsetDelta, of the width its index takes
    offset_digits: tuple[bytes, ...]  # _OFFSET_DIGITS of that width
    keyless: bool


# Layouts seen lately, by record size and OffsetDelta width (size * 4 + width): a producer's
# batches repeat theirs, so a run's first record is checked against one rather than parsed.
_LAYOUTS: Final[dict[int, _Layout]] = {}
_MAX_LAYOUTS: Final = 1024


def _layout_of(data: bytes | bytearray, pos: int, skeleton: list[int], body: int,
               offset_pos: int, key_pos: int, key_len: int) -> _Layout:
    return _Layout(tuple((p - pos, _REPEATED[data[p]], _ONE_BYTE[data[p]]) for p in skeleton),
                   body + 1 - pos, offset_pos - body - 1, offset_pos - pos,
                   _OFFSET_DIGITS[key_pos - offset_pos - 1], key_len < 0)


def _matching(data: bytes | bytearray, pos: int, stride: int, first: int, stop: int,
              index: int, layout: _Layout) -> tuple[int, bytes | bytearray]:
    """How many records, from the ``first``-th to the ``stop``-th of those of size ``stride``
    from ``pos`` on (the one at ``pos`` being record ``index``), are laid out as ``layout``
    says; and the last bytes of their TimestampDeltas."""
    skeleton, ts_at, ts_width, offset_at, digits, _ = layout
    n = stop - first
    start = pos + first * stride
    limit = pos + stop * stride
    for at, repeated, one in skeleton:
        marks = data[start + at : limit : stride]
        if not repeated.startswith(marks):  # (a prefix compare: no copy)
            n -= len(marks.lstrip(one))
            if not n:
                return 0, b""
            limit = start + n * stride
    # TimestampDeltas of the same width: continuation bits on all bytes but the last.
    at = start + ts_at
    if ts_width > 1:
        for d in range(ts_width - 1):
            misfit = data[at + d : limit : stride].translate(_NOT_MORE).find(1)
            if misfit >= 0:
                n = misfit
                if not n:
                    return 0, b""
                limit = start + n * stride
    deltas = data[at + ts_width - 1 : limit : stride]
    if not deltas.isascii():
        n = deltas.translate(_NOT_LAST).find(1)
        if not n:
            return 0, b""
        limit = start + n * stride
        deltas = deltas[:n]
    # OffsetDeltas: exactly the encodings of their indices.
    # (table.startswith(marks, first): a compare in place, no slice of the table.)
    at = start + offset_at
    first += index
    for table in digits:
        marks = data[at : limit : stride]
        at += 1
        if not table.startswith(marks, first):
            expected = table[first : first + n]
            n = next(i for i in range(n) if marks[i] != expected[i])
            if not n:
                return 0, b""
            limit = start + n * stride
            deltas = deltas[:n]
    return n, deltas


def _delta_range(data: bytes | bytearray, first: int, run: int, stride: int,
                 lo: int, hi: int) -> tuple[int, int]:
    """(lo, hi) widened by the timestamp deltas at ``first``, ``first + stride``, ... (``run``
    of them): one record at a time, for runs of deltas of more than one byte."""
    for p in range(first, first + run * stride, stride):
        delta = decode_varlong(data, p)[0]
        lo = min(lo, delta)
        hi = max(hi, delta)
    return lo, hi


def walk_records(data: bytes | bytearray, pos: int, end: int, count: int,
                 where: str | BatchPlace, claimed: int = _INT64_MIN,
                 want_min: bool = True, need_key: bool = False) -> tuple[int, int]:
    """Validate the records of ``data[pos:end]``, which must be exactly ``count``; return
    their smallest and largest TimestampDelta (LogValidator recomputes MaxTimestamp from them).
    The smallest is exact only if ``want_min`` (else only multi-byte deltas are counted:
    a one-byte delta is at least -64).  ``need_key``: the topic is compacted, every record
    needs a key.  Raises RecordValidationError or InvalidRecordError.

    One-byte deltas (timestamps within 64 ms of the base, as a producer's batches usually are)
    are measured with a slice and a translate rather than a decode per record.  Cheaper still
    when the header told the truth (the usual case): ``claimed`` is its MaxTimestamp as a
    delta, and a run with no delta above it costs a translate and a byte search; only if no
    run holds ``claimed`` are the runs that were only bounded by it measured after all.
    """
    index = 0
    # (Compiled, a small batch starts where short runs would lead: one record at a time.)
    short_runs = _MAX_SHORT_RUNS if _COMPILED and count <= _ONE_BY_ONE_MAX else 0
    previous_run = _FIRST_RUN
    lo = _INT64_MAX
    hi = _INT64_MIN
    # The header's claim, if a one-byte delta: its rank table and zigzag byte.
    above = _ABOVE[claimed + 64] if -64 <= claimed <= 63 else None
    claimed_byte = (claimed << 1) ^ (claimed >> 63)
    claimed_seen = False
    bounded: list[bytes | bytearray] = []  # runs known only to stay at or below ``claimed``
    keyless: list[tuple[int, int]] = []  # (first, stop) index ranges of records without key
    layouts = _LAYOUTS
    while pos < end:
        if index >= count:
            raise InvalidRecordError(
                f"{where}: header declares {count} records but {end - pos} bytes follow the "
                "last of them (more records than declared, or trailing bytes)")
        if short_runs >= _MAX_SHORT_RUNS or index >= _RUN_INDEX_LIMIT:
            # Sizes vary: the rest one record at a time, read from a bytes (module docstring;
            # the copy costs a few ns a record, the reads of a bytearray ~170).
            rest = data if isinstance(data, bytes) else bytes(memoryview(data)[pos:end])
            first = pos if rest is data else 0
            reached, index, low, high = _one_by_one(rest, first, first + end - pos, index,
                                                    count, where, keyless if need_key else None)
            pos += reached - first
            lo = min(lo, low)
            hi = max(hi, high)
            continue
        # The record's size from its length varint (one or two bytes), to look up its layout.
        b = data[pos]
        if b < 0x80:
            stride = ((b >> 1) ^ -(b & 1)) + 1
        elif pos + 1 < end and data[pos + 1] < 0x80:
            n = (b & 0x7F) | (data[pos + 1] << 7)
            stride = ((n >> 1) ^ -(n & 1)) + 2
        else:
            stride = 0
        width = 1 if index < 64 else 2 if index < 8192 else 3
        # How far to look first: twice the last run (galloping on from there).  (Compares,
        # not min()/max() calls, on this per-run path.)
        step = 2 * previous_run
        if step < _MIN_STEP:
            step = _MIN_STEP
        elif step > _MAX_STEP:
            step = _MAX_STEP
        got = 0
        known = layouts.get(stride * 4 + width) if stride > _MIN_RECORD_BODY else None
        if known is not None:
            # Records of this size that may follow, within the count and one offset width.
            layout = known
            limit = (end - pos) // stride  # (compares, not a min() call, per run)
            if count - index < limit:  # noqa: PLR1730
                limit = count - index
            if _WIDTH_ENDS[width - 1] - index < limit:  # noqa: PLR1730
                limit = _WIDTH_ENDS[width - 1] - index
            stop = limit if limit < step else step  # noqa: FURB136
            got, deltas = _matching(data, pos, stride, 0, stop, index, layout)
        if not got:  # a new layout (or none fits): parse the record
            skeleton: list[int] = []
            record_end, delta, body, offset_pos, key_pos, key_len = _read_record(
                data, pos, end, index, where, skeleton)
            stride = record_end - pos
            limit = min((end - pos) // stride, count - index, _WIDTH_ENDS[width - 1] - index)
            if limit < 2 or key_pos - offset_pos != width or offset_pos - body > 10:
                # Alone, or an over-long OffsetDelta or a 10-byte TimestampDelta: no run.
                lo = min(lo, delta)
                hi = max(hi, delta)
                if key_len < 0 and need_key:
                    keyless.append((index, index + 1))
                short_runs += 1
                pos = record_end
                index += 1
                continue
            layout = _layout_of(data, pos, skeleton, body, offset_pos, key_pos, key_len)
            if len(layouts) >= _MAX_LAYOUTS:
                layouts.clear()
            layouts[stride * 4 + width] = layout
            stop = limit if limit < step else step  # noqa: FURB136
            got, deltas = _matching(data, pos, stride, 0, stop, index, layout)
        run = 0
        while True:  # fold in the TimestampDeltas of ``got`` more records, then gallop on
            if layout.ts_width > 1:
                lo, hi = _delta_range(data, pos + layout.ts_at + run * stride, got, stride,
                                      lo, hi)
            elif got:
                if want_min:
                    lo = min(lo, min(deltas.translate(_ZIGZAG_RANK)) - 64)
                if above is not None and deltas.translate(above).isascii():
                    if not claimed_seen and claimed_byte in deltas:
                        claimed_seen = True
                    elif not claimed_seen:
                        bounded.append(deltas)
                elif claimed > 63:
                    bounded.append(deltas)  # every one-byte delta is below it
                else:
                    hi = max(hi, max(deltas.translate(_ZIGZAG_RANK)) - 64)
            run += got
            if run < stop or stop == limit:
                break
            stop = min(limit, stop * _GALLOP, run + _MAX_STEP)
            got, deltas = _matching(data, pos, stride, run, stop, index, layout)
        previous_run = run
        if layout.keyless and need_key:
            keyless.append((index, index + run))
        if run < _SHORT_RUN:
            short_runs += 1
        pos += run * stride
        index += run
    if index != count:
        raise InvalidRecordError(
            f"{where}: header declares {count} records but the batch holds {index}")
    if keyless:
        message = "compacted topic cannot accept message without key"
        errors = [(i, f"record {i}: {message}") for first, stop in keyless
                  for i in range(first, stop)]
        raise RecordValidationError(
            f"{where}: {len(errors)} record(s) rejected: {message} (the topic's "
            f"cleanup.policy is compact), the first: record {errors[0][0]}", errors)
    if claimed_seen:
        return lo, max(hi, claimed)
    for deltas in bounded:
        hi = max(hi, max(deltas.translate(_ZIGZAG_RANK)) - 64)
    return lo, hi


# -- timestamps ----------------------------------------------------------------------------------

def _iter_timestamp_deltas(data: bytes | bytearray, pos: int, end: int) -> Iterator[int]:
    """Each record's TimestampDelta, in order (records already validated by walk_records)."""
    while pos < end:
        length, body = decode_varint(data, pos)
        yield decode_varlong(data, body + 1)[0]
        pos = body + length


def checked_max_timestamp(config: LogConfig, header: BatchHeader, lo: int, hi: int,
                          log_append_time: bool, now: int, data: bytes | bytearray, pos: int,
                          end: int, where: str | BatchPlace) -> int:
    """The batch's MaxTimestamp as Kafka's LogValidator computes it (the largest record
    timestamp, or ``now`` under LogAppendTime), after its per-record ``validateTimestamp``.

    ``lo``/``hi``: the smallest and largest TimestampDelta.  Only when the bounds they give
    break message.timestamp.before/after.max.ms (or 64 bits) are the records checked one by
    one, to skip records without a timestamp (-1) and to name the offending ones.
    """
    if header.attributes & TIMESTAMP_TYPE_MASK:
        # Flagged LogAppendTime by the producer: each record reads as MaxTimestamp
        # (DefaultRecordBatch).  Kafka takes that as the records' CreateTime on a CreateTime
        # topic and refuses it otherwise ("Producer should not set timestamp type to
        # LogAppendTime").
        if log_append_time or header.max_timestamp == NO_TIMESTAMP:
            message = "Producer should not set timestamp type to LogAppendTime"
            raise RecordTimestampError(
                f"{where}: the producer set the timestamp type to LogAppendTime, which only the "
                "broker may set", [(i, message) for i in range(header.records_count)])
        lo_ts = hi_ts = header.max_timestamp
    else:
        # Kafka starts its running max at NO_TIMESTAMP: records all below -1 still give -1.
        lo_ts, hi_ts = header.base_timestamp + lo, max(header.base_timestamp + hi, NO_TIMESTAMP)
    if log_append_time:
        return now
    after, before = config.timestamp_after_max_ms, config.timestamp_before_max_ms
    if hi_ts - now <= after and (before >= LONG_MAX or now - lo_ts <= before) \
            and hi_ts <= _INT64_MAX and lo_ts >= _INT64_MIN:
        return hi_ts
    errors = []
    same = header.max_timestamp if header.attributes & TIMESTAMP_TYPE_MASK else None
    for index, delta in enumerate(_iter_timestamp_deltas(data, pos, end)):
        ts = same if same is not None else header.base_timestamp + delta
        if not _INT64_MIN <= ts <= _INT64_MAX:
            errors.append((index, (f"Timestamp {ts} of record {index} does not fit 64 bits "
                                   "(base timestamp plus timestamp delta)")))
        elif ts != NO_TIMESTAMP and (now - ts > before or ts - now > after):
            errors.append((index, (f"Timestamp {ts} of record {index} is out of range. The "
                                   f"timestamp should be within [{now - before}, "
                                   f"{now + after}]")))
    if not errors:
        return hi_ts  # only records without a timestamp were outside the bounds
    raise RecordTimestampError(
        f"{where}: {len(errors)} record(s) rejected (message.timestamp.before.max.ms="
        f"{before}, message.timestamp.after.max.ms={after}), the first: "
        + "; ".join(message for _, message in errors[:3]),
        errors,
    )
