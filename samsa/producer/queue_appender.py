"""QueueAppender: appends send()'s queue (samsa.producer.record_queue) to the accumulator.

One appender per producer, shared by the sending threads, the Sender thread and close().  It
holds what an append needs (accumulator, metadata, clock) but not the producer: the Sender
thread keeps the queue and its appender alive, and a producer dropped without close() must
still be collected, so that its finalizer stops the Sender.

One lock (the drain lock) serializes appends, so a partition's records reach their batches in
the order send() queued them, whichever thread appends them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from samsa.errors import KafkaTimeoutError, ProducerClosedError
from samsa.net.clock import Time
from samsa.net.cluster import ClusterView
from samsa.producer.accumulator import RecordAccumulator
from samsa.producer.buffer_pool import BufferExhaustedError
from samsa.producer.record_queue import QueuedRecordFuture, QueuedRun, RecordQueue, group_queued

__all__ = ["TOPIC_TOUCH_INTERVAL_MS", "QueueAppender"]

log = logging.getLogger(__name__)

# How often a topic in use is marked so in Metadata (metadata.max.idle.ms is >= 5 s).
TOPIC_TOUCH_INTERVAL_MS = 1000


class QueueAppender:
    """Appends a :class:`RecordQueue` (set with :meth:`attach`) in bulk; see the module docstring.

    ``known_topics`` is the producer's topic -> (metadata snapshot, partition count, last time
    marked in use), shared: the appender marks the topics it appends to.
    """

    def __init__(
        self,
        accumulator: RecordAccumulator,
        metadata: Any,
        clock: Time,
        wakeup: Callable[[], object],
        known_topics: dict[str, tuple[Any, int, int]],
        *,
        max_block_ms: int,
        delivery_timeout_ms: int,
    ) -> None:
        self._accumulator = accumulator
        self._metadata = metadata
        self._clock = clock
        self._wakeup = wakeup
        self._known_topics = known_topics
        self._max_block_ms = max_block_ms
        self._delivery_timeout_ms = delivery_timeout_ms
        self._lock = threading.Lock()
        self._queue: RecordQueue | None = None
        self._view: ClusterView | None = None
        self._cluster: Any = None
        # The thread that must never wait here (the Sender: it frees the memory others wait for).
        self.io_thread: threading.Thread | None = None

    def attach(self, queue: RecordQueue) -> None:
        self._queue = queue

    def append(self, block: bool) -> None:
        """Append the queued records to their batches, oldest first.

        ``block`` (a sending thread): wait up to max.block.ms for the drain lock and for buffer
        memory; records left without memory stay queued and BufferExhaustedError is raised.
        Not ``block`` (the Sender): skip when another thread is appending; leave the records
        without memory queued.  Records that cannot be appended at all (the producer closed)
        fail with the error.
        """
        self.append_within(self._max_block_ms if block else 0, block)

    def settle(self, timeout: float | None) -> bool:
        """A queued future is waited on: append the queue, waiting for the drain lock and
        memory up to ``timeout`` seconds (None: max.block.ms a round).  False on the Sender
        thread: a callback there must not block the thread that frees memory."""
        if threading.current_thread() is self.io_thread:
            self.append_within(0, False)
            return False
        wait_ms = self._max_block_ms if timeout is None else min(self._max_block_ms, timeout * 1000.0)
        self.append_within(wait_ms, False)
        return True

    def append_within(self, max_wait_ms: float, raise_errors: bool) -> None:
        """:meth:`append`, waiting at most ``max_wait_ms``; raising only with ``raise_errors``."""
        lock = self._lock
        if not (lock.acquire(True, max_wait_ms / 1000.0) if max_wait_ms > 0 else lock.acquire(False)):
            if raise_errors:
                raise KafkaTimeoutError(
                    "another thread to finish appending send()'s queued records (it waits for "
                    "buffer memory; check that the brokers acknowledge records, or raise "
                    "buffer.memory)",
                    max_wait_ms,
                )
            return
        try:
            queue = self._queue
            if queue is not None and len(queue):
                oldest_ns = queue.oldest_ns
                futures = queue.take()
                if not self._expired(futures, oldest_ns, ""):
                    self._append_taken(queue, futures, oldest_ns, max_wait_ms, raise_errors)
        finally:
            lock.release()

    def _expired(self, futures: list[QueuedRecordFuture], oldest_ns: int, topic: str) -> bool:
        """Fail ``futures`` if the oldest of them was queued delivery.timeout.ms ago (it bounds the
        time from send() to an outcome, queue included: records wait there only while
        buffer.memory is exhausted)."""
        waited_ms = (self._clock.monotonic_ns() - oldest_ns) // 1_000_000
        if waited_ms < self._delivery_timeout_ms:
            return False
        expired = KafkaTimeoutError(
            f"buffer memory for records sent{' to ' + topic if topic else ''}: they waited in send()'s "
            f"queue for {waited_ms} ms, past delivery.timeout.ms={self._delivery_timeout_ms} (the brokers "
            "did not acknowledge batches fast enough to free buffer.memory)",
            self._delivery_timeout_ms,
        )
        for future in futures:
            future.fail(expired)
        return True

    def _append_taken(self, queue: RecordQueue, futures: list[QueuedRecordFuture], oldest_ns: int,
                      max_wait_ms: float, raise_errors: bool) -> None:
        clock = self._clock
        now = clock.milliseconds()
        cluster = self._metadata.fetch()
        view = self._view
        if view is None or view.cluster is not cluster:
            view = self._view = ClusterView(cluster)
        if cluster is not self._cluster:
            # Partition counts may have changed: send() checks each topic again once.
            self._cluster = cluster
            queue.topics.clear()
        deadline = now + max_wait_ms
        accumulator = self._accumulator
        known_topics = self._known_topics
        for topic, partition, group in group_queued(futures):
            known = known_topics.get(topic)
            if known is not None and now - known[2] >= TOPIC_TOUCH_INTERVAL_MS:
                self._metadata.add(topic, now)  # keeps the topic from expiring
                known_topics[topic] = (known[0], known[1], now)
            try:
                accumulator.append_run(topic, partition, QueuedRun(group), len(group),
                                       max(0.0, deadline - clock.milliseconds()), now, view, self._wakeup)
            except BufferExhaustedError:
                left = [future for future in futures if future.is_queued()]
                if not self._expired(left, oldest_ns, topic):
                    queue.give_back(left)
                if raise_errors:
                    raise
                return
            except BaseException as exc:
                for future in futures:
                    future.fail(exc)
                if raise_errors:
                    raise
                if not isinstance(exc, ProducerClosedError):
                    log.exception("Could not append queued records; they failed")
                return
