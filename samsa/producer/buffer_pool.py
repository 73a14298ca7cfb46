"""BufferPool: the producer's bounded batch memory (``buffer.memory``), as Kafka's Java BufferPool.

``allocate(size, max_time_ms)`` hands out a ``bytearray`` of ``size`` bytes and counts it
against ``total_memory``; ``reserve(size, max_time_ms)`` only counts (the producer's batches
build their bytes in bytearrays of their own); ``deallocate(buffer, size)`` gives the memory
back.  Buffers of
exactly ``poolable_size`` (batch.size) are kept on a free list and reused; other sizes are
just counted and left to the garbage collector.

When memory is exhausted, ``allocate`` blocks up to ``max_time_ms`` (max.block.ms).  Waiters
queue in FIFO order, each on its own Condition; freed memory wakes the first waiter, which
may gather memory over several wake-ups.  A waiter that runs out of time raises
:class:`BufferExhaustedError` (a KafkaTimeoutError) saying what was waited for and what to
check.  ``close()`` wakes all waiters with ProducerClosedError.

``queued()`` (threads waiting) is what ``RecordAccumulator.ready()`` reads to treat every
batch as sendable while memory is short; ``available_memory()`` and ``total_memory`` are the
pool's metrics (Java's buffer-available-bytes / buffer-total-bytes).
"""

from __future__ import annotations

import threading
from collections import deque

from samsa.errors import KafkaTimeoutError, ProducerClosedError
from samsa.net.clock import SYSTEM_CLOCK, Time

__all__ = ["BufferExhaustedError", "BufferPool"]


class BufferExhaustedError(KafkaTimeoutError):
    """buffer.memory stayed exhausted for max.block.ms (Java's BufferExhaustedException)."""

    name = "BUFFER_EXHAUSTED"

    def __init__(
        self,
        size: int,
        max_block_ms: float,
        total_memory: int,
        available: int | None = None,
    ) -> None:
        self.size = size
        self.max_block_ms = max_block_ms
        self.total_memory = total_memory
        self.available = available
        KafkaTimeoutError.__init__(self, f"{size} bytes of buffer.memory", max_block_ms)
        avail = f" ({available} bytes free)" if available is not None else ""
        text = (
            f"Failed to allocate {size} bytes within max.block.ms={max_block_ms:g} because "
            f"buffer.memory={total_memory} is exhausted{avail}; the producer is sending slower than "
            "records are produced: check the broker's reachability or raise buffer.memory"
        )
        self.detail = text
        self.args = (text,)

    def __reduce__(self) -> tuple[object, ...]:
        return (
            type(self),
            (self.size, self.max_block_ms, self.total_memory, self.available),
        )


class BufferPool:
    """``total_memory`` bytes handed out as bytearrays; ``poolable_size`` buffers are reused."""

    def __init__(self, total_memory: int, poolable_size: int, clock: Time = SYSTEM_CLOCK) -> None:
        if total_memory < 0:
            raise ValueError(f"total_memory must be >= 0, got {total_memory}")
        self.total_memory = total_memory
        self.poolable_size = poolable_size
        self._clock = clock
        self._lock = threading.Lock()
        self._free: deque[bytearray] = deque()
        self._waiters: deque[threading.Condition] = deque()
        # Memory not on the free list and not handed out.
        self._non_pooled_available = total_memory
        self._closed = False

    def allocate(self, size: int, max_time_ms: float) -> bytearray:
        """A buffer of ``size`` bytes, blocking up to ``max_time_ms`` while memory is exhausted."""
        buffer = self._take(size, max_time_ms, True)
        return bytearray(size) if buffer is None else buffer

    def reserve(self, size: int, max_time_ms: float) -> None:
        """Count ``size`` bytes against ``total_memory`` without handing out a buffer, blocking
        as :meth:`allocate` does; give them back with ``deallocate(None, size)``.  For callers
        that keep their bytes elsewhere: the accumulator's batch builders grow bytearrays of
        their own, so a zeroed buffer per batch would be memory touched for nothing (the first
        buffer.memory of batches each took fresh pages)."""
        self._take(size, max_time_ms, False)

    def _take(self, size: int, max_time_ms: float, pooled: bool) -> bytearray | None:
        """Take ``size`` bytes: a pooled buffer if ``pooled`` and one is free, else None (the
        memory counted as handed out)."""
        if size > self.total_memory:
            raise ValueError(
                f"cannot allocate {size} bytes: buffer.memory={self.total_memory} is the hard limit "
                "(the record is larger than the whole buffer; raise buffer.memory)"
            )
        buffer: bytearray | None = None
        with self._lock:
            if self._closed:
                raise ProducerClosedError("Producer closed while allocating memory")
            try:
                if pooled and size == self.poolable_size and self._free:
                    return self._free.popleft()
                if (
                    self._non_pooled_available + len(self._free) * self.poolable_size
                    >= size
                ):
                    self._free_up(size)
                    self._non_pooled_available -= size
                else:
                    buffer = self._wait_for_memory(size, max_time_ms, pooled)
            finally:
                # Leftover memory: let the next waiter try.
                if (self._non_pooled_available > 0 or self._free) and self._waiters:
                    self._waiters[0].notify()
        return buffer

    def _wait_for_memory(self, size: int, max_time_ms: float, pooled: bool) -> bytearray | None:
        """Called with the lock held: queue up and gather ``size`` bytes (or a pooled buffer)."""
        more_memory = threading.Condition(self._lock)
        self._waiters.append(more_memory)
        accumulated = 0
        buffer: bytearray | None = None
        monotonic = self._clock.monotonic
        deadline = monotonic() + max_time_ms / 1000.0
        try:
            while accumulated < size:
                remaining = deadline - monotonic()
                timed_out = remaining <= 0 or not more_memory.wait(remaining)
                if self._closed:
                    raise ProducerClosedError("Producer closed while allocating memory")
                if timed_out:
                    raise BufferExhaustedError(
                        size, max_time_ms, self.total_memory, self._available_locked()
                    )
                if pooled and accumulated == 0 and size == self.poolable_size and self._free:
                    buffer = self._free.popleft()
                    accumulated = size
                else:
                    self._free_up(size - accumulated)
                    got = min(size - accumulated, self._non_pooled_available)
                    self._non_pooled_available -= got
                    accumulated += got
            accumulated = 0  # success: keep it
            return buffer
        finally:
            # On failure give back what was gathered so far.
            self._non_pooled_available += accumulated
            self._waiters.remove(more_memory)

    def _free_up(self, size: int) -> None:
        free = self._free
        while free and self._non_pooled_available < size:
            self._non_pooled_available += len(free.pop())

    def deallocate(self, buffer: bytearray | None, size: int | None = None, wake: bool = True) -> None:
        """Return ``size`` bytes (default ``len(buffer)``); poolable buffers are kept for reuse.
        ``wake=False`` leaves the first waiter asleep: the caller gives back more and then
        calls :meth:`wake_waiter` once."""
        if size is None:
            if buffer is None:
                return
            size = len(buffer)
        with self._lock:
            if (
                buffer is not None
                and size == self.poolable_size
                and len(buffer) == size
            ):
                self._free.append(buffer)
            else:
                self._non_pooled_available += size
            if wake and self._waiters:
                self._waiters[0].notify()

    def wake_waiter(self) -> None:
        """Wake the first thread waiting for memory (after deallocate(..., wake=False))."""
        with self._lock:
            if self._waiters:
                self._waiters[0].notify()

    def _available_locked(self) -> int:
        return self._non_pooled_available + len(self._free) * self.poolable_size

    def available_memory(self) -> int:
        """Bytes not handed out (unallocated or on the free list)."""
        with self._lock:
            return self._available_locked()

    def unallocated_memory(self) -> int:
        """Bytes neither handed out nor on the free list."""
        with self._lock:
            return self._non_pooled_available

    def queued(self) -> int:
        """Threads blocked waiting for memory.  Read without the lock: a hint, as in ready()."""
        return len(self._waiters)

    def free_buffers(self) -> int:
        return len(self._free)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Fail all current and future allocations with ProducerClosedError."""
        with self._lock:
            self._closed = True
            for waiter in self._waiters:
                waiter.notify()

    def __repr__(self) -> str:
        return (
            f"BufferPool(total_memory={self.total_memory}, poolable_size={self.poolable_size}, "
            f"available={self._non_pooled_available + len(self._free) * self.poolable_size}, "
            f"waiters={len(self._waiters)})"
        )
