"""Fetcher: FetchRequests per leader, parsing of fetched batches, offset resets.

Flow, as Java's ``Fetcher``/``AbstractFetch``:

* ``send_fetches`` builds one FetchRequest (v4-12; session id 0, i.e. full fetches) per leader
  for the fetchable partitions that have no buffered data and no fetch in flight to their
  leader.  The consumer calls it again right after handing records to the application, so the
  next response is on its way while they are processed (prefetch).
* A response becomes one ``CompletedFetch`` per partition with data; errors are handled at
  once (OFFSET_OUT_OF_RANGE -> reset per auto.offset.reset; leadership errors -> metadata
  refresh; others are raised from the next poll).
* ``fetched_records(n)`` drains CompletedFetches lazily: batches are CRC-checked and
  decompressed by :mod:`samsa.records` only when reached, control batches are skipped and,
  under read_committed, so are batches of aborted transactions (AbortedTransactions list).
  A CompletedFetch whose fetch offset no longer matches the position (seek, reassignment) is
  dropped.  A batch that fails its CRC, or a record that does not decode, ends a poll after
  the records before it; every later poll raises the same CorruptRecordError (naming the
  offset to seek to) until the application seeks past it.
* ``reset_offsets`` sends ListOffsets (earliest -2 / latest -1) for partitions with a
  pending reset; ``list_offsets`` is the blocking variant behind offsets_for_times and
  beginning/end_offsets.
"""

from __future__ import annotations

import gc
import heapq
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import chain, islice
from typing import TYPE_CHECKING, Any, NoReturn

from samsa.consumer.config import ConsumerConfig
from samsa.consumer.deserializers import DeserializeFn
from samsa.consumer.errors import NoOffsetForPartitionError
from samsa.consumer.records import ConsumerRecord, RecordParts
from samsa.consumer.subscription import SubscriptionState
from samsa.errors import (
    CorruptRecordError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    OffsetOutOfRangeError,
    for_code,
)
from samsa.net import ClientRequest, ClientResponse, NetworkClient
from samsa.net.cluster import Node, TopicPartition
from samsa.protocol import FetchRequest, ListOffsetsRequest
from samsa.records import (
    AnyBatch,
    ControlRecordType,
    RecordBatch,
    TimestampType,
    iter_batches,
    record_loops,
)
from samsa.records.batch import iter_records
from samsa.records.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, DecompressedSizeError
from samsa.records.record_loops import decode_rows, scan_rows

if TYPE_CHECKING:  # pyarrow is optional: poll_arrow() imports them
    from samsa.consumer.arrow_records import PollColumns, RunRead

__all__ = ["EARLIEST", "LATEST", "CompletedFetch", "Fetcher", "ResponseData"]

log = logging.getLogger(__name__)

EARLIEST = -2
LATEST = -1
FETCH_MIN_VERSION, FETCH_MAX_VERSION = 4, 12  # v13+ needs topic ids
LIST_OFFSETS_MIN_VERSION, LIST_OFFSETS_MAX_VERSION = 1, 7
_new = tuple.__new__
_LOG_APPEND_TIME = TimestampType.LOG_APPEND_TIME
_CHUNK = 500  # records a RecordSpan builds at a time (max.poll.records' default)
# The partitions of a response are joined (ResponseData) up to this many bytes in all; the
# others are copied each on its own when first read, so that their bytes live only while
# that partition is read.  Larger joins lived until the response's last partition was read,
# and glibc's heap, trimmed and grown again meanwhile, gave each one fresh pages: 30,000 to
# 50,000 page faults, a third of poll_arrow's CPU, per million 100 B records (4 MiB answers
# of the samsa broker, 0.9 MiB ones of librdkafka's mock).
_JOIN_MAX = 128 * 1024
compiled_loops = not (record_loops.__file__ or "").endswith(".py")  # setup.py's mypyc build
# Errors after which the partition's leader must be looked up again.
_METADATA_ERRORS = {3, 5, 6, 9, 74, 75, 100}  # unknown tp, leader n/a, not leader, replica n/a,
#                                              fenced/unknown leader epoch, unknown topic id


class ResponseData:
    """The records of the partitions of one fetch response (up to _JOIN_MAX bytes), joined
    into one bytes the first time poll_arrow() reads any of them (poll() reads each
    partition's as it came): the compiled loop reads bytes, and one buffer for them all makes
    one set of numpy and Arrow calls per response in PollColumns, not one per partition."""

    __slots__ = ("_data", "_parts", "_starts")

    def __init__(self) -> None:
        self._parts: list[Any] = []
        self._data: bytes | None = None
        self._starts: list[int] = []

    def add(self, records: Any) -> int:
        assert self._data is None, "every partition of a response is added before any is read"
        self._parts.append(records)
        return len(self._parts) - 1

    def joined(self, part: int) -> tuple[bytes, int]:
        """All the records, and where those of ``part`` start in them."""
        if self._data is None:
            at = 0
            for records in self._parts:
                self._starts.append(at)
                at += len(records)
            self._data = b"".join(self._parts)
            self._parts = []
        return self._data, self._starts[part]


class CompletedFetch:
    """One partition's data from one fetch response, consumed in pieces by poll()."""

    __slots__ = (
        "_aborted",
        "_aborted_pids",
        "_batch",
        "_batches",
        "_data",
        "_error",
        "_part",
        "_records",
        "_response",
        "check_crcs",
        "fetch_offset",
        "leader_epoch",
        "max_decompressed_bytes",
        "next_offset",
        "read_committed",
        "tp",
    )

    def __init__(self, tp: TopicPartition, fetch_offset: int, data: Any, check_crcs: bool,
                 read_committed: bool, aborted: list[Any] | None, *,
                 max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
                 response: ResponseData | None = None) -> None:
        self.tp = tp
        self._response = response
        self._part = -1 if response is None else response.add(data)
        self.max_decompressed_bytes = max_decompressed_bytes
        self.fetch_offset = fetch_offset
        self.next_offset = fetch_offset
        self.check_crcs = check_crcs
        self.read_committed = read_committed
        self._data = data
        self._batches: Iterator[AnyBatch] | None = iter_batches(data, check_crcs)
        self._batch: AnyBatch | None = None
        self._records: Iterator[Any] | _RowCursor | None = None
        self._error: CorruptRecordError | None = None
        self.leader_epoch: int | None = None
        self._aborted: list[tuple[int, int]] = []
        self._aborted_pids: set[int] = set()
        if read_committed and aborted:
            self._aborted = [(a.first_offset, a.producer_id) for a in aborted]
            heapq.heapify(self._aborted)

    @property
    def consumed(self) -> bool:
        return self._batches is None

    def _next_batch(self) -> AnyBatch | None:
        batches = self._batches
        assert batches is not None
        try:
            return self._next_valid_batch(batches)
        except CorruptRecordError as exc:
            raise self._failed(exc) from None

    def _failed(self, exc: CorruptRecordError, batch: AnyBatch | None = None) -> CorruptRecordError:
        # Kafka's CompletedFetch.maybeEnsureValid names the partition and the batch; the
        # error is kept (its cachedRecordException) and raised again by every later take
        # until a seek drops this fetch: the position stays on the corrupt batch.
        text = f"partition {self.tp}: {exc.detail or exc.message}"
        if isinstance(exc.__cause__, DecompressedSizeError) and batch is not None:
            text += (" (the consumer's samsa.decompressed.batch.max.bytes); raise it to read "
                     f"the batch, or seek to offset {batch.next_offset} to skip it")
        self._error = CorruptRecordError(text)
        return self._error

    def _records_of(self, batch: AnyBatch) -> Iterator[Any]:
        """The batch's records, decompressed within this consumer's limit."""
        try:
            if type(batch) is RecordBatch:
                return batch.iterate(max_decompressed_bytes=self.max_decompressed_bytes)
            return iter(batch)
        except CorruptRecordError as exc:
            raise self._failed(exc, batch) from None

    def _next_valid_batch(self, batches: Iterator[AnyBatch]) -> AnyBatch | None:
        for batch in batches:
            if batch.next_offset <= self.next_offset:
                continue  # already returned (a fetch from inside a batch, compaction)
            if self.read_committed and batch.is_transactional:
                aborted = self._aborted
                while aborted and aborted[0][0] <= batch.last_offset:
                    self._aborted_pids.add(heapq.heappop(aborted)[1])
                pid = batch.producer_id
                if batch.is_control:
                    marker = batch.control_marker()
                    if marker is not None and marker.type == ControlRecordType.ABORT:
                        self._aborted_pids.discard(pid)
                    self.next_offset = batch.next_offset
                    continue
                if pid in self._aborted_pids:
                    self.next_offset = batch.next_offset
                    continue
            if batch.is_control:
                self.next_offset = batch.next_offset
                continue
            epoch = batch.partition_leader_epoch
            self.leader_epoch = epoch if epoch >= 0 else None
            return batch
        self._batches = None
        return None

    def take(self, max_records: int, key_fn: DeserializeFn | None,
             value_fn: DeserializeFn | None) -> list[ConsumerRecord]:
        """Up to ``max_records`` records from the current position on."""
        parts = self.take_parts(max_records, key_fn, value_fn, lazy=False)
        return parts[0] if len(parts) == 1 else [r for part in parts for r in part]

    def take_parts(self, max_records: int, key_fn: DeserializeFn | None,
                   value_fn: DeserializeFn | None, *, lazy: bool) -> list[Any]:
        """take()'s records as consecutive parts: lists of records, and with ``lazy`` (no
        deserializers) RecordSpans of v2 records, checked now and built when iterated."""
        if self._error is not None:
            raise self._error
        out: list[Any] = []
        got = 0
        while got < max_records and self._batches is not None:
            records = self._records
            if records is None:
                try:
                    batch = self._next_batch()
                    if batch is None:
                        break
                    records = self._rows_of(batch)
                except CorruptRecordError:
                    if got:
                        break  # the records before it now, the error on the next take
                    raise
                self._batch = batch
                records = self._records = self._from_position(batch, records)
            want = max_records - got
            chunk: Any
            try:
                if isinstance(records, _RowCursor):
                    # Up to _CHUNK records are built at once anyway: checking them first and
                    # building them later would read the batch twice for nothing.
                    if lazy and want > _CHUNK:
                        chunk = records.span(want, self.tp, self.leader_epoch)
                    else:
                        chunk = records.take(want, self.tp, self.leader_epoch, key_fn, value_fn)
                else:
                    chunk = self._consumer_records(islice(records, want), key_fn, value_fn)
            except CorruptRecordError as exc:
                # A record does not decode (a batch whose CRC was right, or not checked): the
                # records before it now, then the error on every take until a seek drops this
                # fetch, the position on that record (Java's CompletedFetch.fetchRecords and
                # its cachedRecordException).
                assert self._batch is not None
                chunk = self._consumer_records(self._records_before_failure(self._batch, want),
                                               key_fn, value_fn)
                if chunk:
                    out.append(chunk)
                    got += len(chunk)
                    self.next_offset = chunk[-1][2] + 1
                self._error = CorruptRecordError(
                    f"partition {self.tp}: {exc.detail or exc.message}; seek to offset "
                    f"{self._batch.next_offset} to skip the rest of its batch")
                if got:
                    return out
                raise self._error from None
            n = len(chunk)
            if n:
                out.append(chunk)
                got += n
                self.next_offset = (chunk.last_offset if type(chunk) is RecordSpan
                                    else chunk[-1][2]) + 1
            if n < want:  # batch exhausted
                assert self._batch is not None
                self.next_offset = max(self.next_offset, self._batch.next_offset)
                self._records = None
                self._batch = None
        return out

    def _rows_of(self, batch: AnyBatch) -> Iterator[Any] | _RowCursor:
        """What take() reads the batch's records from: a v2 batch through the compiled loop of
        samsa.records.record_loops, others (and every batch where that loop is not compiled:
        as plain Python, iter_records' inlined varints are faster) as Record tuples."""
        if type(batch) is RecordBatch and not batch.has_cached_records and compiled_loops:
            try:
                section = batch.records_section(max_decompressed_bytes=self.max_decompressed_bytes)
            except CorruptRecordError as exc:
                raise self._failed(exc, batch) from None
            return _RowCursor(batch, section)
        return self._records_of(batch)

    def _from_position(self, batch: AnyBatch, records: Iterator[Any] | _RowCursor
                       ) -> Iterator[Any] | _RowCursor:
        if isinstance(records, _RowCursor):
            records.min_offset = self.next_offset
            return records
        if batch.base_offset < self.next_offset:
            start = self.next_offset
            return (r for r in records if r[0] >= start)
        return records

    def take_arrow(self, max_records: int, columns: PollColumns | None = None) -> list[Any]:
        """Up to ``max_records`` records from the position on, for poll_arrow(): v2 records read
        into ``columns`` (samsa.consumer.arrow_records.Rows of it), and those the row decoder
        reads (v0/v1 message sets, a run with a corrupt record) as RecordBatches in ARROW_SCHEMA;
        the same positions, skips and errors as take().  Without ``columns``: RecordBatches."""
        if self._error is not None:
            raise self._error
        if columns is None:
            from samsa.consumer.arrow_records import PollColumns

            cols = PollColumns()
        else:
            cols = columns
        out: list[Any] = []
        got = 0
        run: list[AnyBatch] = []
        estimate = 0  # records in run, at least as many as it will yield
        # Where the run's records start: pulling batches moves next_offset past the control
        # and aborted batches it skips, which may lie between batches of the run.
        start = self.next_offset
        records = self._records
        if records is not None:
            # poll() or poll_arrow() read part of this batch: its rest from the position on.
            batch = self._batch
            assert batch is not None
            self._records = self._batch = None
            if isinstance(records, _RowCursor):
                got = self._read_cursor(records, batch, start, max_records, cols, out)
            else:
                run, estimate = [batch], batch.records_count
        while got + estimate < max_records and self._batches is not None and self._records is None:
            if not run:
                start = self.next_offset
            try:
                batch = self._next_batch()
            except CorruptRecordError:
                if out or run:
                    break  # the records before it now, the error on the next take
                raise
            if batch is None:
                break
            if run and _run_kind(batch) != _run_kind(run[0]):
                # Fewer than wanted (estimate): the whole run is handed out.
                got += self._read_run(run, start, max_records - got, cols, out)
                run, estimate = [], 0
                start = self.next_offset
                if self._error is not None:
                    return self._raise_or(out, columns is None, cols)
            run.append(batch)
            estimate += batch.records_count
        if run:
            got += self._read_run(run, start, max_records - got, cols, out)
            if self._error is not None:
                return self._raise_or(out, columns is None, cols)
        return _resolved(out, cols) if columns is None else out

    def _raise_or(self, out: list[Any], resolve: bool, cols: PollColumns) -> list[Any]:
        if out:
            return _resolved(out, cols) if resolve else out
        assert self._error is not None
        raise self._error

    def _read_cursor(self, cursor: _RowCursor, batch: AnyBatch, start: int, want: int,
                     cols: PollColumns, out: list[Any]) -> int:
        """take_arrow() on from where take() or take_arrow() stopped inside ``batch``."""
        assert type(batch) is RecordBatch
        data = cursor.data
        read = cols.read_run(self.tp, [batch], data, [(0, len(data))], start, want,
                             self.max_decompressed_bytes, resume=cursor.position)
        if read is None:
            return self._read_rows([batch], start, want, out)
        return self._took(read, batch, out)

    def _read_run(self, run: list[AnyBatch], start: int, want: int, cols: PollColumns,
                  out: list[Any]) -> int:
        """Up to ``want`` records of ``run`` (batches of one kind, see _run_kind) from offset
        ``start`` on into ``out``; after a corrupt one, the records before it, with the error
        set as take() sets it."""
        kind = _run_kind(run[0])
        if kind != _LEGACY:
            v2 = [b for b in run if type(b) is RecordBatch]
            if kind == _COMPRESSED:
                data, spans = None, None
            else:
                data, shift = self._data_bytes()
                spans = []
                for b in v2:
                    _, sec_start, sec_end = b.section_span()
                    spans.append((sec_start + shift, sec_end + shift))
            read = cols.read_run(self.tp, v2, data, spans, start, want,
                                 self.max_decompressed_bytes)
            if read is not None:
                return self._took(read, v2[-1], out)
        return self._read_rows(run, start, want, out)

    def _took(self, read: RunRead, last: RecordBatch, out: list[Any]) -> int:
        if read.rows is not None:
            out.append(read.rows)
        self.next_offset = max(self.next_offset, read.next_offset)
        if read.rest is not None:
            # Stopped inside the last batch: the next take (either kind) goes on from there.
            section, pos, left = read.rest
            self._batch = last
            self._records = _RowCursor(last, section, pos, left)
        return read.taken

    def _read_rows(self, run: list[AnyBatch], start: int, want: int, out: list[Any]) -> int:
        """_read_run by the row decoder: v0/v1 message sets, or a malformed record somewhere,
        which it names."""
        from samsa.consumer.arrow_records import rows_to_piece, with_partition

        rows: list[Any] = []
        complete = True
        for batch in run:
            try:
                rows += list(self._records_of(batch))
            except CorruptRecordError as exc:
                if self._error is None:  # else named by _records_of (decompression)
                    self._error = CorruptRecordError(
                        f"partition {self.tp}: {exc.detail or exc.message}; seek to offset "
                        f"{batch.next_offset} to skip the rest of its batch")
                rows += self._records_before_failure(batch, batch.records_count)
                complete = False
                break
        rows = [r for r in rows if r[0] >= start]
        taken = rows[:want]
        if taken:
            out.append(with_partition(self.tp.topic, self.tp.partition, [rows_to_piece(taken)]))
            self.next_offset = max(self.next_offset, taken[-1][0] + 1)
        if len(rows) > want:
            if complete:  # the rest lies in the last batch (see take_arrow)
                self._batch = run[-1]
                self._records = iter(rows[want:])
        elif complete:
            self.next_offset = max(self.next_offset, run[-1].next_offset)
        return len(taken)

    def _data_bytes(self) -> tuple[bytes, int]:
        """The fetched data as bytes, which the compiled loop reads, and where it starts in
        them: the response's partitions joined (ResponseData), or this one's copied once if
        need be."""
        if self._response is not None:
            return self._response.joined(self._part)
        data = self._data
        if type(data) is not bytes:
            with memoryview(data) as view:
                data = self._data = view.tobytes()
        return data, 0

    def _consumer_records(self, records: Iterable[Any], key_fn: DeserializeFn | None,
                          value_fn: DeserializeFn | None) -> list[ConsumerRecord]:
        topic, partition = self.tp
        cls = ConsumerRecord
        epoch = self.leader_epoch
        if key_fn is None and value_fn is None:
            return [
                _new(cls, (topic, partition, r[0], r[1], r[5], r[2], r[3], tuple(r[4]),
                           -1 if r[2] is None else len(r[2]),
                           -1 if r[3] is None else len(r[3]), epoch))
                for r in records
            ]
        kf = key_fn or _identity
        vf = value_fn or _identity
        return [
            _new(cls, (topic, partition, r[0], r[1], r[5], kf(topic, r[2]),
                       vf(topic, r[3]), tuple(r[4]),
                       -1 if r[2] is None else len(r[2]),
                       -1 if r[3] is None else len(r[3]), epoch))
            for r in records
        ]

    def _records_before_failure(self, batch: AnyBatch, limit: int) -> list[Any]:
        """Up to ``limit`` records of ``batch`` from the position on, read afresh up to the one
        that does not decode (the batch's records section is kept, so nothing is
        decompressed again)."""
        start = self.next_offset
        found: list[Any] = []
        try:
            for r in self._records_of(batch):
                if r[0] >= start:
                    found.append(r)
                    if len(found) == limit:
                        break
        except CorruptRecordError:
            pass
        return found

    def drain(self) -> None:
        self._batches = None
        self._records = None


_PLAIN, _COMPRESSED, _LEGACY = 0, 1, 2


class _RowCursor:
    """Where take() is in a v2 batch's records section: records are decoded a chunk at a time
    into ConsumerRecords by the compiled loop (samsa.records.record_loops.decode_rows)."""

    __slots__ = ("_append_time", "_batch", "_data", "_left", "_pos", "min_offset")

    def __init__(self, batch: RecordBatch, data: bytes, pos: int = 0, left: int = -1) -> None:
        self._batch = batch
        self._data = data  # the batch's records section
        self._pos = pos
        self._left = batch.records_count if left < 0 else left
        h = batch.header
        self._append_time = h.max_timestamp if h.timestamp_type == _LOG_APPEND_TIME else -1
        self.min_offset = 0

    @property
    def data(self) -> bytes:
        return self._data

    @property
    def position(self) -> tuple[int, int]:
        """Where the next record starts in ``data``, and how many are left."""
        return self._pos, self._left

    def span(self, want: int, tp: TopicPartition, epoch: int | None) -> RecordSpan:
        """As take() without deserializers, the records checked but not built: a RecordSpan."""
        h = self._batch.header
        pos, left = self._pos, self._left
        try:
            count, self._pos, self._left, last_offset = scan_rows(
                self._data, pos, left, want, self.min_offset, h.base_offset)
        except (ValueError, IndexError):
            self._name_the_corrupt_record()
        return RecordSpan(self._data, pos, left, count, self.min_offset, h, self._append_time,
                          tp, epoch, last_offset)

    def _name_the_corrupt_record(self) -> NoReturn:
        # The row decoder finds the same record and names it (record index and offset).
        h = self._batch.header
        for _ in iter_records(self._data, h.records_count, h.base_offset, h.base_timestamp,
                              h.timestamp_type, h.max_timestamp):
            pass
        raise CorruptRecordError(f"batch at offset {h.base_offset}: a record does not decode")

    def take(self, want: int, tp: TopicPartition, epoch: int | None,
             key_fn: DeserializeFn | None, value_fn: DeserializeFn | None) -> list[ConsumerRecord]:
        """Up to ``want`` records at or above min_offset; fewer only when the batch ends."""
        h = self._batch.header
        # A chunk is thousands of new tuples, which the cyclic GC would scan at every
        # generation-0 collection (each 700 allocations) while the chunk grows: paused, they
        # are scanned once afterwards.  Only while no application code (deserializers) runs.
        collecting = key_fn is None and value_fn is None and gc.isenabled()
        if collecting:
            gc.disable()
        try:
            rows, self._pos, self._left = decode_rows(
                self._data, self._pos, self._left, want, self.min_offset, h.base_offset,
                h.base_timestamp, self._append_time, h.timestamp_type, tp, epoch, ConsumerRecord,
                key_fn, value_fn)
        except (ValueError, IndexError):
            self._name_the_corrupt_record()
        finally:
            if collecting:
                gc.enable()
        return rows


class RecordSpan:
    """Records of one batch that a poll() hands out, checked (scan_rows) but built only when
    iterated, _CHUNK at a time: a large poll then costs no more per record than a small one,
    as its records are made and dropped while still in the CPU's cache."""

    __slots__ = ("_append_time", "_data", "_epoch", "_header", "_left", "_min_offset", "_pos",
                 "_tp", "count", "last_offset")

    def __init__(self, data: bytes, pos: int, left: int, count: int, min_offset: int,
                 header: Any, append_time: int, tp: TopicPartition, epoch: int | None,
                 last_offset: int) -> None:
        self._data = data
        self._pos = pos
        self._left = left
        self.count = count
        self._min_offset = min_offset
        self._header = header
        self._append_time = append_time
        self._tp = tp
        self._epoch = epoch
        self.last_offset = last_offset

    def __len__(self) -> int:
        return self.count

    def chunks(self) -> Iterator[list[ConsumerRecord]]:
        """The records as lists of up to _CHUNK, built as they are asked for."""
        h = self._header
        pos, left, todo = self._pos, self._left, self.count
        while todo > 0:
            rows, pos, left = decode_rows(
                self._data, pos, left, min(todo, _CHUNK), self._min_offset, h.base_offset,
                h.base_timestamp, self._append_time, h.timestamp_type, self._tp, self._epoch,
                ConsumerRecord, None, None)
            todo -= len(rows)
            yield rows

    def __iter__(self) -> Iterator[ConsumerRecord]:
        return chain.from_iterable(self.chunks())


def _resolved(pieces: list[Any], columns: PollColumns) -> list[Any]:
    """take_arrow()'s pieces as RecordBatches (each read into ``columns`` a slice of it)."""
    from samsa.consumer.arrow_records import assemble

    return [assemble(columns, [p]) for p in pieces]


def _run_kind(batch: AnyBatch) -> int:
    """Batches of one kind are decoded together: uncompressed v2 ones from the fetched bytes,
    compressed ones from one buffer they are decompressed into, v0/v1 ones as records."""
    if type(batch) is not RecordBatch:
        return _LEGACY
    return _COMPRESSED if batch.attributes & 0x07 else _PLAIN


def _identity(topic: str, data: Any) -> Any:
    return data


class Fetcher:
    def __init__(self, client: NetworkClient, subscriptions: SubscriptionState,
                 config: ConsumerConfig, lock: threading.RLock) -> None:
        self.client = client
        self.metadata = client.metadata
        self.subscriptions = subscriptions
        self.lock = lock
        self.min_bytes = config["fetch.min.bytes"]
        self.max_bytes = config["fetch.max.bytes"]
        self.max_wait_ms = config["fetch.max.wait.ms"]
        self.partition_max_bytes = config["max.partition.fetch.bytes"]
        self.check_crcs = config["check.crcs"]
        self.max_decompressed_bytes = config["samsa.decompressed.batch.max.bytes"]
        self.read_committed = config["isolation.level"] == "read_committed"
        self.isolation_level = 1 if self.read_committed else 0
        # ListOffsets carries isolation_level from v2 (KIP-98): a read_committed consumer must
        # not be answered the high watermark by an older version (ListOffsetsRequest.Builder).
        self.list_offsets_min_version = 2 if self.read_committed else LIST_OFFSETS_MIN_VERSION
        self.request_timeout_ms = config["request.timeout.ms"]
        self.retry_backoff_ms = config["retry.backoff.ms"]
        self.client_rack = config["client.rack"]
        self.key_fn: DeserializeFn | None = None
        self.value_fn: DeserializeFn | None = None
        self.completed: deque[CompletedFetch] = deque()
        self._current: CompletedFetch | None = None
        self._fetch_nodes: set[int] = set()  # nodes with a fetch in flight
        # The leaders of the assigned partitions, for a metadata snapshot and an assignment.
        self._leaders: tuple[Any, Any, frozenset[int] | None] | None = None
        self._pending_error: KafkaError | None = None
        self._reset_in_flight: set[TopicPartition] = set()
        self._reset_retry_at = 0.0

    # -- fetch requests ---------------------------------------------------------------------

    def _buffered(self) -> set[TopicPartition]:
        tps = {cf.tp for cf in self.completed}
        if self._current is not None and not self._current.consumed:
            tps.add(self._current.tp)
        return tps

    def send_fetches(self, now: float) -> int:
        """Send a FetchRequest to each leader that has fetchable partitions; returns how many."""
        subs = self.subscriptions
        cluster = self.metadata.fetch()
        if self._fetch_nodes:
            # A poll waiting for a response calls this at every wake-up: while every leader has
            # a fetch in flight, nothing can go (one fetch per node).
            leaders = self._assigned_leaders(cluster)
            if leaders is not None and leaders <= self._fetch_nodes:
                return 0
        buffered = self._buffered()
        by_node: dict[int, tuple[Node, dict[str, list[Any]]]] = {}
        positions: dict[TopicPartition, int] = {}
        need_metadata = False
        for tp in subs.fetchable_partitions():
            if tp in buffered:
                continue
            leader = cluster.leader_for(tp)
            if leader is None:
                need_metadata = True
                continue
            if leader.id in self._fetch_nodes:
                continue
            st = subs.assignment[tp]
            entry = by_node.get(leader.id)
            if entry is None:
                entry = by_node[leader.id] = (leader, {})
            info = cluster.partition(tp)
            epoch = info.leader_epoch if info is not None else -1
            assert st.position is not None
            entry[1].setdefault(tp.topic, []).append(FetchRequest.FetchPartition(
                partition=tp.partition, current_leader_epoch=epoch,
                fetch_offset=st.position, log_start_offset=-1,
                partition_max_bytes=self.partition_max_bytes))
            positions[tp] = st.position
        if need_metadata:
            self.metadata.request_update()
        sent = 0
        waiting_nodes = self._nodes_with_buffered(buffered, cluster) if buffered else set()
        for node_id, (node, topics) in by_node.items():
            if node_id in waiting_nodes and self._all_caught_up(topics, positions):
                # Every partition asked for is at its end: the broker would hold the request
                # up to fetch.max.wait.ms, and the partitions of this node still buffered
                # could not be fetched meanwhile (one fetch per node in flight).  They go
                # out together once those are drained.
                continue
            if not self.client.ready(node, now):
                continue
            request = FetchRequest(
                replica_id=-1, max_wait_ms=self.max_wait_ms, min_bytes=self.min_bytes,
                max_bytes=self.max_bytes, isolation_level=self.isolation_level,
                session_id=0, session_epoch=-1,
                topics=[FetchRequest.FetchTopic(topic=t, partitions=p) for t, p in topics.items()],
                forgotten_topics_data=[], rack_id=self.client_rack)
            context = (positions, subs.assignment_id)
            self.client.send(ClientRequest(
                node, request, callback=self._on_fetch_response, created_ms=now,
                min_version=FETCH_MIN_VERSION, max_version=FETCH_MAX_VERSION,
                request_timeout_ms=self.request_timeout_ms + self.max_wait_ms,
                context=context), now)
            self._fetch_nodes.add(node_id)
            sent += 1
        return sent

    def _assigned_leaders(self, cluster: Any) -> frozenset[int] | None:
        """The leaders of the assigned partitions; None if one has no leader."""
        assignment = self.subscriptions.assignment
        cached = self._leaders
        if cached is not None and cached[0] is cluster and cached[1] is assignment:
            return cached[2]
        ids: set[int] = set()
        for tp in assignment:
            leader = cluster.leader_for(tp)
            if leader is None:
                self._leaders = (cluster, assignment, None)
                return None
            ids.add(leader.id)
        self._leaders = (cluster, assignment, frozenset(ids))
        return self._leaders[2]

    def _nodes_with_buffered(self, buffered: set[TopicPartition], cluster: Any) -> set[int]:
        nodes = set()
        for tp in buffered:
            leader = cluster.leader_for(tp)
            if leader is not None:
                nodes.add(leader.id)
        return nodes

    def _all_caught_up(self, topics: dict[str, list[Any]],
                       positions: dict[TopicPartition, int]) -> bool:
        assignment = self.subscriptions.assignment
        for topic, partitions in topics.items():
            for p in partitions:
                tp = TopicPartition(topic, p.partition)
                st = assignment[tp]
                end = st.last_stable_offset if self.read_committed else st.high_watermark
                if end < 0 or positions[tp] < end:
                    return False
        return True

    def in_flight(self) -> bool:
        return bool(self._fetch_nodes)

    def _on_fetch_response(self, response: ClientResponse) -> None:
        self._fetch_nodes.discard(response.destination)
        body = response.body
        if body is None:  # disconnected / timed out / version mismatch
            if response.version_mismatch is not None:
                self._pending_error = response.version_mismatch
            else:
                self.metadata.request_update()
            return
        positions, assignment_id = response.request.context
        if body.error_code:
            log.warning("fetch from node %s failed: %s", response.destination,
                        for_code(body.error_code)())
            return
        subs = self.subscriptions
        stale = assignment_id != subs.assignment_id
        response_data: ResponseData | None = None
        joined_bytes = 0
        for topic_data in body.responses:
            topic = topic_data.topic
            for p in topic_data.partitions:
                tp = TopicPartition(topic, p.partition_index)
                fetch_offset = positions.get(tp)
                st = subs.assignment.get(tp)
                if fetch_offset is None or st is None or st.position != fetch_offset:
                    continue  # seeked or reassigned meanwhile
                code = p.error_code
                if code == 0:
                    st.high_watermark = p.high_watermark
                    if p.last_stable_offset >= 0:
                        st.last_stable_offset = p.last_stable_offset
                    if p.log_start_offset >= 0:
                        st.log_start_offset = p.log_start_offset
                    records = p.records
                    if records:
                        joined = None
                        if joined_bytes + len(records) <= _JOIN_MAX:
                            if response_data is None:
                                response_data = ResponseData()
                            joined = response_data
                            joined_bytes += len(records)
                        self.completed.append(CompletedFetch(
                            tp, fetch_offset, records, self.check_crcs, self.read_committed,
                            p.aborted_transactions,
                            max_decompressed_bytes=self.max_decompressed_bytes,
                            response=joined))
                elif code == OffsetOutOfRangeError.code:
                    if subs.default_reset == "none" or stale:
                        self._pending_error = OffsetOutOfRangeError(
                            f"fetch offset {fetch_offset} is out of range for {tp} and "
                            "auto.offset.reset=none; seek() to a valid offset")
                    else:
                        log.info("offset %d out of range for %s; resetting to %s",
                                 fetch_offset, tp, subs.default_reset)
                        subs.request_reset(tp)
                elif code in _METADATA_ERRORS:
                    self.metadata.request_update()
                else:
                    self._pending_error = for_code(code)(f"fetching {tp} at offset {fetch_offset}")

    # -- handing records out ----------------------------------------------------------------

    def fetched_records(self, max_records: int) -> dict[TopicPartition, RecordParts]:
        """Up to ``max_records`` records by partition, as the parts ConsumerRecords holds."""
        key_fn, value_fn = self.key_fn, self.value_fn
        lazy = key_fn is None and value_fn is None  # a deserializer's error belongs to poll()
        out: dict[TopicPartition, RecordParts] = {}

        def take(cf: CompletedFetch, n: int) -> int:
            parts = cf.take_parts(n, key_fn, value_fn, lazy=lazy)
            got = sum(len(p) for p in parts)
            if got:
                held = out.get(cf.tp)
                if held is None:
                    out[cf.tp] = RecordParts(parts, got)
                else:
                    held.parts += parts
                    held.count += got
            return got

        self._collect(max_records, take, out)
        return out

    def fetched_arrow(self, max_records: int) -> dict[TopicPartition, Any]:
        """As fetched_records, each partition's records as one pyarrow.RecordBatch (see
        CompletedFetch.take_arrow): the v2 records of every partition are read into one
        PollColumns, whose Arrow arrays are built once for the whole poll."""
        current = self._current
        if (not self.completed and (current is None or current.consumed)
                and self._pending_error is None):
            return {}  # a poll waiting for a response: nothing to read
        from samsa.consumer.arrow_records import PollColumns, assemble

        columns = PollColumns()
        pieces: dict[TopicPartition, list[Any]] = {}

        def take(cf: CompletedFetch, n: int) -> int:
            got = cf.take_arrow(n, columns)
            if got:
                pieces.setdefault(cf.tp, []).extend(got)
            return sum(p.num_rows for p in got)

        self._collect(max_records, take, pieces)
        if pieces:
            # The positions have moved: the next fetch goes out now, before the Arrow arrays
            # are built (about half of the poll's work), so that the broker answers meanwhile.
            # poll()'s records are built after it returns, with its fetch on the way.
            self.send_fetches(self.client._clock())
        return {tp: assemble(columns, p) for tp, p in pieces.items()}

    def _collect(self, max_records: int, take: Callable[[CompletedFetch, int], int],
                 out: dict[TopicPartition, Any]) -> None:
        """Drain buffered fetches through ``take`` (records into ``out``, returns how many) until
        ``max_records``; positions follow what was taken."""
        if self._pending_error is not None:
            err, self._pending_error = self._pending_error, None
            raise err
        remaining = max_records
        subs = self.subscriptions
        while remaining > 0:
            cf = self._current
            if cf is None or cf.consumed:
                if not self.completed:
                    self._current = None
                    break
                cf = self._current = self.completed.popleft()
            st = subs.assignment.get(cf.tp)
            if st is None or st.paused or st.position != cf.next_offset:
                if st is not None and st.paused and st.position == cf.next_offset:
                    # Keep it for resume(); look at other partitions meanwhile.
                    self.completed.append(cf)
                    self._current = None
                    if all(subs.assignment.get(c.tp) is None or subs.assignment[c.tp].paused
                           for c in self.completed):
                        break
                    continue
                cf.drain()
                continue
            try:
                taken = take(cf, remaining)
            except CorruptRecordError:
                if out:
                    # Kafka's FetchCollector.collectFetch: what was collected first, the error
                    # on the next poll (cf stays next in line, still holding it).
                    return
                raise
            st.position = cf.next_offset
            if cf.leader_epoch is not None:
                st.leader_epoch = cf.leader_epoch
            remaining -= taken

    def clear_buffered(self, keep: Callable[[TopicPartition], bool] | None = None) -> None:
        if keep is None:
            self.completed.clear()
            self._current = None
            return
        self.completed = deque(cf for cf in self.completed if keep(cf.tp))
        if self._current is not None and not keep(self._current.tp):
            self._current = None

    # -- offsets ----------------------------------------------------------------------------

    def reset_offsets(self, now: float) -> None:
        """Send ListOffsets for partitions awaiting a reset (answers set their positions)."""
        subs = self.subscriptions
        todo = [tp for tp in subs.partitions_needing_reset() if tp not in self._reset_in_flight]
        if not todo or now < self._reset_retry_at:
            return
        for tp in todo:
            if subs.assignment[tp].reset_strategy == "none":
                raise NoOffsetForPartitionError(
                    f"no committed offset for {tp} and auto.offset.reset=none; seek() first")
        cluster = self.metadata.fetch()
        by_node: dict[int, tuple[Node, dict[TopicPartition, int]]] = {}
        for tp in todo:
            leader = cluster.leader_for(tp)
            if leader is None:
                self.metadata.request_update()
                continue
            ts = EARLIEST if subs.assignment[tp].reset_strategy == "earliest" else LATEST
            by_node.setdefault(leader.id, (leader, {}))[1][tp] = ts
        for node, stamps in by_node.values():
            if not self.client.ready(node, now):
                continue
            self._reset_in_flight.update(stamps)
            self.client.send(ClientRequest(
                node, self._list_offsets_request(stamps), callback=self._on_reset_response,
                created_ms=now, min_version=self.list_offsets_min_version,
                max_version=LIST_OFFSETS_MAX_VERSION, context=stamps), now)

    def _list_offsets_request(self, stamps: dict[TopicPartition, int]) -> Any:
        topics: dict[str, list[Any]] = {}
        cluster = self.metadata.fetch()
        for tp, ts in stamps.items():
            info = cluster.partition(tp)
            topics.setdefault(tp.topic, []).append(ListOffsetsRequest.ListOffsetsPartition(
                partition_index=tp.partition, timestamp=ts,
                current_leader_epoch=info.leader_epoch if info is not None else -1))
        return ListOffsetsRequest(
            replica_id=-1, isolation_level=self.isolation_level,
            topics=[ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=p)
                    for t, p in topics.items()], timeout_ms=self.request_timeout_ms)

    def _on_reset_response(self, response: ClientResponse) -> None:
        stamps: dict[TopicPartition, int] = response.request.context
        self._reset_in_flight.difference_update(stamps)
        if response.body is None:
            self.metadata.request_update()
            self._reset_retry_at = response.received_ms + self.retry_backoff_ms
            return
        subs = self.subscriptions
        for t in response.body.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                st = subs.assignment.get(tp)
                if st is None or st.reset_strategy is None:
                    continue
                if p.error_code:
                    if p.error_code in _METADATA_ERRORS:
                        self.metadata.request_update()
                    else:
                        log.warning("offset reset of %s failed: %s", tp,
                                    for_code(p.error_code)())
                    self._reset_retry_at = response.received_ms + self.retry_backoff_ms
                    continue
                want = EARLIEST if st.reset_strategy == "earliest" else LATEST
                if stamps.get(tp) != want:
                    continue  # the strategy changed while the request was in flight
                st.seek(p.offset, p.leader_epoch if p.leader_epoch >= 0 else None)

    def list_offsets(self, stamps: dict[TopicPartition, int], timeout_ms: float
                     ) -> dict[TopicPartition, tuple[int, int, int | None] | None]:
        """Blocking ListOffsets: tp -> (offset, timestamp, leader epoch), None if no such offset.

        Retries leadership errors after a metadata refresh until ``timeout_ms``.
        """
        client = self.client
        clock = client._clock
        deadline = clock() + timeout_ms
        result: dict[TopicPartition, tuple[int, int, int | None] | None] = {}
        todo = dict(stamps)
        topics = {tp.topic for tp in todo}
        while todo:
            now = clock()
            if now >= deadline:
                raise KafkaTimeoutError(f"offsets of {sorted(map(str, todo))}", timeout_ms)
            cluster = self.metadata.fetch()
            missing = [t for t in topics if not cluster.partitions_for_topic(t)]
            by_node: dict[int, tuple[Node, dict[TopicPartition, int]]] = {}
            for tp, ts in todo.items():
                leader = cluster.leader_for(tp)
                if leader is not None:
                    by_node.setdefault(leader.id, (leader, {}))[1][tp] = ts
            if missing or len(by_node) == 0 or sum(len(s) for _, s in by_node.values()) < len(todo):
                for t in missing:
                    self.metadata.maybe_throw_for_topic(t)
                    self.metadata.add(t, now)
                version = self.metadata.request_update()
                self._await_metadata(version, deadline, todo, timeout_ms)
                continue
            retry = False
            for node, part in by_node.values():
                try:
                    body = _send_and_wait(client, node, self._list_offsets_request(part),
                                          deadline - clock(), self.list_offsets_min_version)
                except KafkaConnectionError:
                    retry = True
                    continue
                for t in body.topics:
                    for p in t.partitions:
                        tp = TopicPartition(t.name, p.partition_index)
                        if tp not in todo:
                            continue
                        if p.error_code == 0:
                            result[tp] = None if p.offset < 0 else (
                                p.offset, p.timestamp, p.leader_epoch if p.leader_epoch >= 0 else None)
                            del todo[tp]
                        elif p.error_code in _METADATA_ERRORS:
                            retry = True
                        else:
                            raise for_code(p.error_code)(f"listing offsets of {tp}")
            if retry and todo:
                version = self.metadata.request_update()
                self._await_metadata(version, deadline, todo, timeout_ms)
        return result

    def _await_metadata(self, version: int, deadline: float, todo: dict[TopicPartition, int],
                        timeout_ms: float) -> None:
        client = self.client
        clock = client._clock
        while self.metadata.update_version <= version:
            now = clock()
            if now >= deadline:
                # Name what the caller asked for, as the ListOffsets timeout does.
                raise KafkaTimeoutError(
                    f"offsets of {sorted(map(str, todo))} (no metadata update for their leaders)",
                    timeout_ms)
            client.poll(min(deadline - now, 100), now)


def _send_and_wait(client: NetworkClient, node: Node, request: Any, timeout_ms: float,
                   min_version: int) -> Any:
    from samsa.net import send_and_wait

    return send_and_wait(client, node, request, max(timeout_ms, 1), min_version=min_version,
                         max_version=LIST_OFFSETS_MAX_VERSION)
