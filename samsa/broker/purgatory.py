"""Delayed operations: requests that wait for a condition or a deadline without holding a thread.

Kafka parks a Fetch that cannot yet return ``min_bytes`` (and, with replication, a Produce
waiting for acks=all) in a *purgatory*: the operation is watched under keys (topic-partitions);
whoever changes a key (an append) calls ``check_and_complete(key)``, which retries the
operations watching it; a timer completes whatever is still waiting when its deadline passes.
Every operation completes exactly once, whichever comes first.

One daemon timer thread per purgatory keeps the deadlines in a heap.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterable

__all__ = ["DelayedOperation", "Purgatory"]

log = logging.getLogger(__name__)

# A purge of completed operations from the timer heap waits for at least this many.
_PURGE_AT_LEAST = 100


class DelayedOperation:
    """An operation that completes when ``try_complete`` says so or when it expires.

    Subclasses implement ``try_complete`` (check the condition; if met, call
    ``force_complete()`` and return its result), ``on_complete`` (send the response; runs exactly
    once) and optionally ``on_expiration`` (runs just before ``on_complete`` on timeout).
    """

    def __init__(self, delay_ms: float) -> None:
        self.deadline = time.monotonic() + max(delay_ms, 0) / 1000.0
        self._completed = False
        self._claim = threading.Lock()
        # Serialises try_complete calls from different threads (appends to several keys).
        self._attempt = threading.Lock()
        self._flag = threading.Lock()
        self._pending = False
        self._keys: tuple[Hashable, ...] = ()

    @property
    def is_completed(self) -> bool:
        return self._completed

    def force_complete(self) -> bool:
        """Complete now unless someone else already did; True if this call completed it."""
        with self._claim:
            if self._completed:
                return False
            self._completed = True
        self.on_complete()
        return True

    def maybe_try_complete(self) -> bool:
        """try_complete without blocking: if another thread is trying right now, leave it a
        note to try once more after it finishes, so a change it could not see is not missed."""
        done = False
        while True:
            if self._attempt.acquire(blocking=False):
                try:
                    with self._flag:
                        self._pending = False
                    done = not self._completed and self.try_complete()
                finally:
                    self._attempt.release()
                with self._flag:
                    retry = self._pending
            else:
                with self._flag:
                    retry = not self._pending
                    self._pending = True
            if self._completed or not retry:
                return done

    def expire(self) -> None:
        with self._claim:
            if self._completed:
                return
            self._completed = True
        try:
            self.on_expiration()
        finally:
            self.on_complete()

    def try_complete(self) -> bool:
        raise NotImplementedError

    def on_complete(self) -> None:
        raise NotImplementedError

    def on_expiration(self) -> None:
        pass


class Purgatory:
    """Operations waiting on keys, and the timer that expires them."""

    def __init__(self, name: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self._clock = clock
        self._lock = threading.Lock()
        self._wakeup = threading.Condition(self._lock)
        self._watchers: dict[Hashable, list[DelayedOperation]] = {}
        self._timers: list[tuple[float, int, DelayedOperation]] = []
        self._seq = itertools.count()
        self._closed = False
        self._completed_in_timers = 0  # completed ops still in _timers, purged in batches
        self._thread = threading.Thread(target=self._run_timer, name=f"purgatory-{name}",
                                        daemon=True)
        self._thread.start()

    def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[Hashable], *,
                                try_first: bool = True) -> bool:
        """Complete ``op`` now if it can, else park it under ``keys`` until a key changes or
        its deadline passes.  Returns True if it completed right away.

        ``try_first=False`` skips the first check when the caller has just made it."""
        if try_first and (op.maybe_try_complete() or op.is_completed):
            return True
        op._keys = tuple(dict.fromkeys(keys))
        with self._lock:
            if self._closed:
                closed = True
            else:
                closed = False
                for key in op._keys:
                    self._watchers.setdefault(key, []).append(op)
                heapq.heappush(self._timers, (op.deadline, next(self._seq), op))
                self._wakeup.notify()
        if closed:
            op.expire()
            return True
        # An append may have landed between the first check and the watch: check again.
        if op.maybe_try_complete():
            self._unwatch(op)
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Retry the operations watching ``key``; returns how many completed."""
        if key not in self._watchers:
            # Nobody waits (the usual case on every produce).  Reading without the lock is safe:
            # a watcher added just after this look re-checks its condition once it is watching.
            return 0
        with self._lock:
            ops = list(self._watchers.get(key, ()))
        done = 0
        for op in ops:
            if op.is_completed:
                self._unwatch(op)
            elif op.maybe_try_complete():
                done += 1
                self._unwatch(op)
        return done

    def watched(self) -> int:
        """Operations still waiting (for tests and metrics)."""
        with self._lock:
            return len({id(op) for ops in self._watchers.values() for op in ops
                        if not op.is_completed})

    def _unwatch(self, op: DelayedOperation) -> None:
        with self._lock:
            if op.is_completed:
                self._purge_completed_timers()
            for key in op._keys:
                ops = self._watchers.get(key)
                if ops is None:
                    continue
                try:
                    ops.remove(op)
                except ValueError:
                    pass
                if not ops:
                    del self._watchers[key]

    def _purge_completed_timers(self) -> None:
        """Drop completed operations from the timer heap once they are half of it (as Kafka's
        purgatory purges completed operations every purgeInterval), instead of keeping each
        until its deadline: a fetch that waits up to max_wait_ms (days, if a client asks) and
        completes at once would otherwise stay referenced for that long.  Holds _lock."""
        self._completed_in_timers += 1
        if self._completed_in_timers < max(_PURGE_AT_LEAST, len(self._timers) // 2):
            return
        self._timers = [entry for entry in self._timers if not entry[2].is_completed]
        heapq.heapify(self._timers)
        self._completed_in_timers = 0

    def _run_timer(self) -> None:
        while True:
            due: list[DelayedOperation] = []
            with self._lock:
                while not self._closed:
                    now = self._clock()
                    while self._timers and (self._timers[0][0] <= now
                                            or self._timers[0][2].is_completed):
                        due.append(heapq.heappop(self._timers)[2])
                    if due:
                        break
                    timeout = self._timers[0][0] - now if self._timers else None
                    self._wakeup.wait(timeout)
                if self._closed and not due:
                    return
            for op in due:
                if not op.is_completed:
                    try:
                        op.expire()
                    except Exception:  # a failing op must not stop the timer
                        log.exception("purgatory %s: delayed operation failed on expiry",
                                      self.name)
                self._unwatch(op)

    def close(self) -> None:
        """Stop the timer and complete everything still waiting (as if it expired)."""
        with self._lock:
            self._closed = True
            pending = [op for _, _, op in self._timers]
            self._timers.clear()
            self._watchers.clear()
            self._wakeup.notify_all()
        self._thread.join(timeout=5)
        for op in pending:
            try:
                op.expire()
            except Exception:
                log.exception("purgatory %s: delayed operation failed on close", self.name)
