"""A keyed timer for the group coordinator's deadlines (sessions, joins, syncs).

Scheduling a key replaces that key's earlier deadline, as Kafka's coordinator timer does, so
a heartbeat simply reschedules its member's expiry.  One daemon thread sleeps until the next
deadline and runs the task there, outside the timer's lock.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Hashable

log = logging.getLogger(__name__)

Task = Callable[[], None]


class KeyedTimer:
    def __init__(self, name: str = "group-timer",
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._wakeup = threading.Condition(self._lock)
        self._heap: list[tuple[float, int, Hashable]] = []
        self._tasks: dict[Hashable, tuple[int, Task]] = {}
        self._seq = itertools.count()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def schedule(self, key: Hashable, delay_ms: float, task: Task) -> None:
        """Run ``task`` after ``delay_ms`` unless ``key`` is rescheduled or cancelled first."""
        deadline = self._clock() + max(delay_ms, 0) / 1000.0
        with self._lock:
            if self._closed:
                return
            seq = next(self._seq)
            self._tasks[key] = (seq, task)
            heapq.heappush(self._heap, (deadline, seq, key))
            self._wakeup.notify()

    def cancel(self, key: Hashable) -> None:
        with self._lock:
            self._tasks.pop(key, None)

    def is_scheduled(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._tasks

    def _run(self) -> None:
        while True:
            with self._lock:
                task: Task | None = None
                while task is None:
                    if self._closed:
                        return
                    if not self._heap:
                        self._wakeup.wait()
                        continue
                    deadline, seq, key = self._heap[0]
                    current = self._tasks.get(key)
                    if current is None or current[0] != seq:
                        heapq.heappop(self._heap)  # replaced or cancelled
                        continue
                    now = self._clock()
                    if deadline > now:
                        self._wakeup.wait(deadline - now)
                        continue
                    heapq.heappop(self._heap)
                    del self._tasks[key]
                    task = current[1]
            try:
                task()
            except Exception:  # one failing task must not stop the others
                log.exception("group coordinator timer task %r failed", key)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._tasks.clear()
            self._heap.clear()
            self._wakeup.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)
