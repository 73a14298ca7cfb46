"""Reading magic-v2 record batches: ``RecordBatch`` and its ``Record`` tuples.

The header is parsed on construction; the records are decompressed and decoded together the
first time they are asked for, in one tight loop with the common one- and two-byte varints
decoded inline (a function call per field would double the cost).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from samsa.errors import CorruptRecordError
from samsa.records.batch_header import (
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    Compression,
    TimestampType,
    compute_crc,
    read_batch_header,
    validate_batch,
)
from samsa.records.compression import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    DecompressedSizeError,
    decompress,
)
from samsa.records.control import ControlMarker, parse_control_record
from samsa.records.varint import decode_varint, decode_varlong

__all__ = ["Record", "RecordBatch", "decode_records", "iter_records"]


class Record(NamedTuple):
    """One decoded record. Headers keep their order; a header value may be None."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    timestamp_type: TimestampType


_new_record = tuple.__new__
_LOG_APPEND_TIME = TimestampType.LOG_APPEND_TIME
_CREATE_TIME = TimestampType.CREATE_TIME


def _decode_headers(data: bytes, pos: int, count: int) -> tuple[list[tuple[str, bytes | None]], int]:
    if count < 0:
        raise ValueError(f"negative header count {count}")
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        klen, pos = decode_varint(data, pos)
        if klen < 0:
            raise ValueError(f"header key length {klen} (header keys cannot be null)")
        hkey = data[pos : pos + klen].decode("utf-8", "replace")
        pos += klen
        vlen, pos = decode_varint(data, pos)
        if vlen >= 0:
            hvalue: bytes | None = data[pos : pos + vlen]
            pos += vlen
        elif vlen == -1:
            hvalue = None
        else:
            raise ValueError(f"header value length {vlen}")
        headers.append((hkey, hvalue))
    return headers, pos


def decode_records(
    data: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    timestamp_type: TimestampType,
    log_append_time: int,
) -> list[Record]:
    """All records of ``data`` as a list (see iter_records)."""
    return list(iter_records(data, count, base_offset, base_timestamp, timestamp_type, log_append_time))


def iter_records(
    data: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    timestamp_type: TimestampType,
    log_append_time: int,
) -> Iterator[Record]:
    """Decode ``count`` records from the (uncompressed) records section ``data``, lazily.

    Raises CorruptRecordError naming the batch's base offset and the first structural problem.
    Lazy on purpose: records handed out one at a time are freed one at a time, which keeps a
    large batch from filling memory with objects the garbage collector then has to scan.
    """
    new = _new_record
    record_cls = Record
    end = len(data)
    pos = 0
    use_log_append_time = timestamp_type == _LOG_APPEND_TIME
    try:
        for index in range(count):
            # Length (varint)
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                b1 = data[pos + 1]
                if b1 < 0x80:
                    n = (b & 0x7F) | (b1 << 7)
                    length = (n >> 1) ^ -(n & 1)
                    pos += 2
                else:
                    length, pos = decode_varint(data, pos)
            record_end = pos + length
            if length < 6 or record_end > end:
                raise ValueError(f"record length {length} at byte {pos} does not fit the batch")
            # Attributes (int8, unused), then TimestampDelta (varlong)
            b = data[pos + 1]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                ts_delta, pos = decode_varlong(data, pos + 1)
            # OffsetDelta (varint)
            b = data[pos]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                b1 = data[pos + 1]
                if b1 < 0x80:
                    n = (b & 0x7F) | (b1 << 7)
                    offset_delta = (n >> 1) ^ -(n & 1)
                    pos += 2
                else:
                    offset_delta, pos = decode_varint(data, pos)
            # Key
            b = data[pos]
            if b == 1:
                key = None
                pos += 1
            else:
                if b < 0x80:
                    n = b >> 1 if not b & 1 else -1 - (b >> 1)
                    pos += 1
                else:
                    n, pos = decode_varint(data, pos)
                if n < 0:
                    raise ValueError(f"key length {n}")
                key = data[pos : pos + n]
                pos += n
                if pos > record_end:
                    raise ValueError(f"key length {n} runs past the end of the record")
            # Value
            b = data[pos]
            if b == 1:
                value = None
                pos += 1
            else:
                if b < 0x80:
                    n = b >> 1 if not b & 1 else -1 - (b >> 1)
                    pos += 1
                else:
                    b1 = data[pos + 1]
                    if b1 < 0x80:
                        n = (b & 0x7F) | (b1 << 7)
                        n = (n >> 1) ^ -(n & 1)
                        pos += 2
                    else:
                        n, pos = decode_varint(data, pos)
                if n < 0:
                    raise ValueError(f"value length {n}")
                value = data[pos : pos + n]
                pos += n
                if pos > record_end:
                    raise ValueError(f"value length {n} runs past the end of the record")
            # Headers
            b = data[pos]
            if b == 0:
                headers: list[tuple[str, bytes | None]] = []
                pos += 1
            else:
                n, pos = decode_varint(data, pos)
                headers, pos = _decode_headers(data, pos, n)
            if pos != record_end:
                raise ValueError(f"record declared {length} bytes but its fields take {length + pos - record_end}")
            yield (
                new(
                    record_cls,
                    (
                        base_offset + offset_delta,
                        log_append_time if use_log_append_time else base_timestamp + ts_delta,
                        key,
                        value,
                        headers,
                        timestamp_type,
                    ),
                )
            )
    except IndexError:
        raise CorruptRecordError(
            f"batch at offset {base_offset}: records end early, {index} of {count} decoded "
            f"(record {index}, offset {base_offset + index}, runs past the end)"
        ) from None
    except ValueError as exc:
        raise CorruptRecordError(f"batch at offset {base_offset}: record {index} (offset "
                                 f"{base_offset + index}): {exc}") from None
    if pos != end:
        raise CorruptRecordError(
            f"batch at offset {base_offset}: {end - pos} bytes remain after the declared {count} records"
        )


class RecordBatch:
    """A v2 batch inside a buffer; header fields as attributes, iteration yields ``Record``."""

    __slots__ = ("_buf", "_data", "_pos", "_records", "header")

    magic = 2

    def __init__(
        self,
        buf: bytes | bytearray | memoryview,
        pos: int = 0,
        header: BatchHeader | None = None,
    ) -> None:
        self.header = header if header is not None else read_batch_header(buf, pos)
        if len(buf) - pos < self.header.size:
            raise CorruptRecordError(
                f"batch at offset {self.header.base_offset} (byte {pos}): truncated, claims "
                f"{self.header.size} bytes but only {len(buf) - pos} are present"
            )
        self._buf = buf
        self._pos = pos
        self._records: list[Record] | None = None
        self._data: bytes | None = None

    # Header fields ------------------------------------------------------------------------
    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def last_offset(self) -> int:
        return self.header.last_offset

    @property
    def next_offset(self) -> int:
        return self.header.next_offset

    @property
    def last_offset_delta(self) -> int:
        return self.header.last_offset_delta

    @property
    def partition_leader_epoch(self) -> int:
        return self.header.partition_leader_epoch

    @property
    def crc(self) -> int:
        return self.header.crc

    @property
    def attributes(self) -> int:
        return self.header.attributes

    @property
    def compression(self) -> Compression:
        return self.header.compression

    @property
    def timestamp_type(self) -> TimestampType:
        return self.header.timestamp_type

    @property
    def is_transactional(self) -> bool:
        return self.header.is_transactional

    @property
    def is_control(self) -> bool:
        return self.header.is_control

    @property
    def base_timestamp(self) -> int:
        return self.header.base_timestamp

    @property
    def max_timestamp(self) -> int:
        return self.header.max_timestamp

    @property
    def producer_id(self) -> int:
        return self.header.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.header.producer_epoch

    @property
    def base_sequence(self) -> int:
        return self.header.base_sequence

    @property
    def last_sequence(self) -> int:
        return self.header.last_sequence

    @property
    def records_count(self) -> int:
        return self.header.records_count

    @property
    def size(self) -> int:
        return self.header.size

    def raw(self) -> memoryview:
        """The batch's bytes (a view into the buffer it was read from)."""
        return memoryview(self._buf)[self._pos : self._pos + self.header.size]

    # Validation ---------------------------------------------------------------------------
    def is_valid(self) -> bool:
        return compute_crc(self._buf, self._pos, self.header.size) == self.header.crc

    def ensure_valid(self) -> None:
        """Raise CorruptRecordError (naming offset and reason) unless size, magic and CRC hold."""
        validate_batch(self._buf, self._pos)

    # Records ------------------------------------------------------------------------------
    @property
    def has_cached_records(self) -> bool:
        """Whether records() decoded them already (a control batch's marker, for one)."""
        return self._records is not None

    def records(self) -> list[Record]:
        """All records as a list, decoded once and cached."""
        records = self._records
        if records is None:
            records = self._records = list(self)
        return records

    def __iter__(self) -> Iterator[Record]:
        """Decode records lazily; the payload is decompressed at most once per batch."""
        return self.iterate()

    def iterate(self, *, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
                ) -> Iterator[Record]:
        """Like iter(batch), with a limit on the decompressed records (see records_section)."""
        if self._records is not None:
            return iter(self._records)
        h = self.header
        return iter_records(
            self.records_section(max_decompressed_bytes=max_decompressed_bytes),
            h.records_count,
            h.base_offset,
            h.base_timestamp,
            h.timestamp_type,
            h.max_timestamp,
        )

    def __len__(self) -> int:
        return self.header.records_count

    def control_marker(self) -> ControlMarker | None:
        """The marker of a control batch (None for data batches)."""
        if not self.header.is_control:
            return None
        records = self.records()
        if not records:
            raise CorruptRecordError(f"control batch at offset {self.header.base_offset} has no record")
        return parse_control_record(records[0].key, records[0].value)

    def section_span(self) -> tuple[bytes | bytearray | memoryview, int, int]:
        """The buffer this batch was read from and the bounds of its (possibly compressed)
        records section in it: readers that decode several batches of one buffer together
        (samsa.consumer.arrow_records) need no copy of an uncompressed section."""
        return self._buf, self._pos + RECORD_BATCH_OVERHEAD, self._pos + self.header.size

    def records_section(self, *, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
                        ) -> bytes:
        """The uncompressed records section (decompressed on first use, then cached).

        Raises CorruptRecordError if it does not decompress, or decompresses to more than
        ``max_decompressed_bytes`` (then caused by a DecompressedSizeError)."""
        data = self._data
        if data is None:
            h = self.header
            try:
                with memoryview(self._buf) as view:
                    section = view[self._pos + RECORD_BATCH_OVERHEAD : self._pos + h.size]
                    if h.attributes & 0x07:
                        data = decompress(h.compression, section, max_bytes=max_decompressed_bytes)
                    else:
                        data = bytes(section)
            except DecompressedSizeError as exc:
                raise CorruptRecordError(f"batch at offset {h.base_offset}: {exc}") from exc
            except ValueError as exc:
                raise CorruptRecordError(f"batch at offset {h.base_offset}: {exc}") from None
            self._data = data
        return data

    def __repr__(self) -> str:
        h = self.header
        return (
            f"RecordBatch(base_offset={h.base_offset}, last_offset={h.last_offset}, "
            f"count={h.records_count}, compression={h.compression.name}, "
            f"timestamp_type={h.timestamp_type.name}, producer_id={h.producer_id}, "
            f"transactional={h.is_transactional}, control={h.is_control}, size={h.size})"
        )
