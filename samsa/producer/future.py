"""Completion of produced records: one result per batch, a thin handle per record.

As in Kafka's Java producer (``ProduceRequestResult`` + ``FutureRecordMetadata``), a
:class:`ProduceRequestResult` belongs to a batch: a done flag (and a ``threading.Event``
made by the first waiter), the base offset and log-append time the broker assigned, and the error (top-level, or per record).  Each
record's :class:`RecordFuture` only holds that result plus its relative offset, create
timestamp and serialized sizes (``__slots__``, no lock or event of its own), so ``send()``
stays cheap; ``get()`` waits on the batch's event and computes the record's
:class:`RecordMetadata` (offset = base offset + relative offset).

Completion sequence (done by ``ProducerBatch``): ``result.set(...)``, then the batch's
callbacks run in record order, then ``result.mark_done()`` wakes ``get()`` callers and runs
callbacks added later with :meth:`RecordFuture.add_callback`.

When a batch is split after MESSAGE_TOO_LARGE, the old result's ``moved_to`` lists each
record's future in the new batches (set before the old result completes); ``get()``,
``done()`` and ``value()`` follow it (and ``chain()``, which links one future explicitly).
The batch holds no reference to futures without callbacks, so a dropped future dies young.

setup.py compiles this module with mypyc where it can (the typed source is the fallback):
send() makes one RecordFuture per record.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import NamedTuple

from samsa.errors import KafkaTimeoutError

__all__ = [
    "NO_TIMESTAMP",
    "ProduceRequestResult",
    "RecordCallback",
    "RecordFuture",
    "RecordMetadata",
]

log = logging.getLogger(__name__)

NO_TIMESTAMP = -1
INVALID_OFFSET = -1

RecordCallback = Callable[["RecordMetadata | None", "BaseException | None"], object]
"""A send callback: ``callback(metadata, None)`` on success, ``callback(None, error)`` on failure."""

# Guards listener lists of all results; only used by add_callback() and completion.
_LISTENER_LOCK = threading.Lock()


class RecordMetadata(NamedTuple):
    """Where a record landed.  offset is -1 for acks=0; timestamp is the log-append time
    when the topic uses LogAppendTime, else the record's create time."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int  # -1 for a null key
    serialized_value_size: int  # -1 for a null value

    def has_offset(self) -> bool:
        return self.offset != INVALID_OFFSET

    def has_timestamp(self) -> bool:
        return self.timestamp != NO_TIMESTAMP


class ProduceRequestResult:
    """The outcome of one batch, shared by the futures of all its records."""

    __slots__ = (
        "_done",
        "_event",
        "_listeners",
        "base_offset",
        "error",
        "log_append_time",
        "moved_to",
        "partition",
        "record_errors",
        "topic",
    )

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.base_offset = INVALID_OFFSET
        self.log_append_time = NO_TIMESTAMP
        self.error: BaseException | None = None
        self.record_errors: Mapping[int, BaseException] | None = None
        self._done = False
        # Created by the first wait() only: most batches complete with nobody blocked on
        # them, and an Event (a Condition and its locks) costs more than the rest of the batch.
        self._event: threading.Event | None = None
        self._listeners: list[Callable[[], object]] | None = None
        # After a split: the future of each record (by relative offset) in its new batch.
        self.moved_to: list[RecordFuture] | None = None

    def set(
        self,
        base_offset: int,
        log_append_time: int,
        error: BaseException | None = None,
        record_errors: Mapping[int, BaseException] | None = None,
    ) -> None:
        """Record the outcome; ``record_errors`` (relative offset -> error) overrides
        ``error`` for those records.  Call :meth:`mark_done` afterwards."""
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.error = error
        self.record_errors = record_errors

    def mark_done(self) -> None:
        """Wake everyone waiting and run late-added listeners (once)."""
        with _LISTENER_LOCK:
            self._done = True
            if self._event is not None:
                self._event.set()
            listeners, self._listeners = self._listeners, None
        if listeners:
            for listener in listeners:
                try:
                    listener()
                except Exception:
                    log.exception(
                        "Error in a callback for a record sent to %s-%d",
                        self.topic,
                        self.partition,
                    )

    def add_listener(self, listener: Callable[[], object]) -> None:
        """Run ``listener()`` after completion (now, if already complete)."""
        with _LISTENER_LOCK:
            if not self._done:
                if self._listeners is None:
                    self._listeners = []
                self._listeners.append(listener)
                return
        try:
            listener()
        except Exception:
            log.exception(
                "Error in a callback for a record sent to %s-%d",
                self.topic,
                self.partition,
            )

    def is_done(self) -> bool:
        return self._done

    def wait(self, timeout: float | None = None) -> bool:
        """Block until done or ``timeout`` seconds pass; True if done."""
        if self._done:
            return True
        with _LISTENER_LOCK:  # mark_done sets the flag and any event under this lock
            if self._done:
                return True
            event = self._event
            if event is None:
                event = self._event = threading.Event()
        return event.wait(timeout)

    def error_for(self, relative_offset: int) -> BaseException | None:
        record_errors = self.record_errors
        if record_errors is not None:
            specific = record_errors.get(relative_offset)
            if specific is not None:
                return specific
        return self.error

    def has_log_append_time(self) -> bool:
        return self.log_append_time != NO_TIMESTAMP

    def record_future(self, relative_offset: int, timestamp: int, key: bytes | bytearray | memoryview | None,
                      value: bytes | bytearray | memoryview | None) -> RecordFuture:
        """The future of this batch's record at ``relative_offset`` (send() makes one per
        record: a method call here costs less than the class call's argument parsing)."""
        return RecordFuture(self, relative_offset, timestamp, -1 if key is None else len(key),
                            -1 if value is None else len(value))

    def __repr__(self) -> str:
        state = "done" if self._done else "pending"
        return f"ProduceRequestResult({self.topic}-{self.partition}, {state}, base_offset={self.base_offset})"


class RecordFuture:
    """The future ``send()`` returns: a thin handle on the batch's result."""

    __slots__ = (
        "_key_size",
        "_next",
        "_relative_offset",
        "_result",
        "_timestamp",
        "_value_size",
    )

    def __init__(
        self,
        result: ProduceRequestResult,
        relative_offset: int,
        timestamp: int,
        serialized_key_size: int,
        serialized_value_size: int,
    ) -> None:
        self._result = result
        self._relative_offset = relative_offset
        self._timestamp = timestamp
        self._key_size = serialized_key_size
        self._value_size = serialized_value_size
        self._next: RecordFuture | None = None

    @property
    def relative_offset(self) -> int:
        return self._relative_offset

    @property
    def topic(self) -> str:
        return self._final()._result.topic

    @property
    def partition(self) -> int:
        return self._final()._result.partition

    def chain(self, future: RecordFuture) -> None:
        """After a split: this record now lives in ``future``'s batch."""
        if self._next is None:
            self._next = future
        else:
            self._next.chain(future)

    def _successor(self) -> RecordFuture | None:
        """Where the record went when its batch was split (None: it is still here)."""
        nxt = self._next
        if nxt is None:
            moved_to = self._result.moved_to
            if moved_to is not None:
                nxt = moved_to[self._relative_offset]
        return nxt

    def _final(self) -> RecordFuture:
        future = self
        while (nxt := future._successor()) is not None:
            future = nxt
        return future

    def done(self) -> bool:
        nxt = self._successor()
        if nxt is not None:
            return nxt.done()
        return self._result.is_done()

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """The record's metadata, waiting up to ``timeout`` seconds (None: forever).

        Raises the Kafka error the record failed with, or KafkaTimeoutError if the wait ran
        out (the record may still be delivered later).
        """
        return self._wait(timeout).value()

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """:meth:`get`, as concurrent.futures spells it (a method: mypyc compiles no alias)."""
        return self._wait(timeout).value()

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The error the record failed with, None on success; waits like :meth:`get`."""
        return self._wait(timeout).outcome()[1]

    def _wait(self, timeout: float | None) -> RecordFuture:
        """Wait for completion, following split chains; returns the final future."""
        deadline = None if timeout is None else time.monotonic() + timeout
        future = self
        while True:
            result = future._result
            if not result._done:
                remaining = (
                    None if deadline is None else max(0.0, deadline - time.monotonic())
                )
                if not result.wait(remaining):
                    raise KafkaTimeoutError(
                        f"the broker to acknowledge a record sent to {result.topic}-{result.partition} "
                        "(its batch is still queued or in flight; the producer keeps trying until "
                        "delivery.timeout.ms; a longer get() timeout waits for that)",
                        None if timeout is None else timeout * 1000.0,
                    )
            nxt = future._successor()
            if nxt is None:
                return future
            future = nxt

    def value(self) -> RecordMetadata:
        """Metadata of a completed record (raises its error if it failed)."""
        nxt = self._successor()
        if nxt is not None:
            return nxt.value()
        result = self._result
        error = result.error_for(self._relative_offset)
        if error is not None:
            raise error
        return self._metadata()

    def _metadata(self) -> RecordMetadata:
        result = self._result
        base = result.base_offset
        return RecordMetadata(
            result.topic,
            result.partition,
            INVALID_OFFSET if base == INVALID_OFFSET else base + self._relative_offset,
            result.log_append_time
            if result.log_append_time != NO_TIMESTAMP
            else self._timestamp,
            self._key_size,
            self._value_size,
        )

    def outcome(self) -> tuple[RecordMetadata | None, BaseException | None]:
        """(metadata, None) or (None, error) of a completed record, for callbacks."""
        nxt = self._successor()
        if nxt is not None:
            return nxt.outcome()
        error = self._result.error_for(self._relative_offset)
        if error is not None:
            return None, error
        return self._metadata(), None

    def add_callback(self, callback: RecordCallback) -> None:
        """Call ``callback(metadata, error)`` once the record completes (now if it has).

        Runs on the thread that completes the batch (the Sender) or on the caller's thread
        if already complete.  Prefer the ``callback`` argument of ``send()``: it costs less.
        """

        def fire() -> None:
            moved = self._successor()
            if moved is not None:  # split: wait for the record's new batch
                moved.add_callback(callback)
                return
            metadata, error = self.outcome()
            callback(metadata, error)

        nxt = self._successor()
        if nxt is not None:
            nxt.add_callback(callback)
        else:
            self._result.add_listener(fire)

    def __repr__(self) -> str:
        result = self._final()._result
        state = "done" if self.done() else "pending"
        return f"RecordFuture({result.topic}-{result.partition}, relative_offset={self._relative_offset}, {state})"
