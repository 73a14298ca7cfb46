"""The clients' clock: one injectable time source, as Java's ``Time`` / ``SystemTime`` / ``MockTime``.

Every ``now`` argument in samsa.net is monotonic milliseconds as a float (:data:`Clock`,
:func:`monotonic_ms`): monotonic, so wall-clock jumps never expire requests or reset backoffs;
a float, so sub-millisecond waits are not rounded away.

The producer takes a :class:`Time` object (:data:`SYSTEM_CLOCK` unless a test injects a
:class:`MockClock`) and reads all its times from it: ``milliseconds()`` (monotonic int ms) for
batch ages, linger, backoffs and expiry; ``time_ns()`` for record timestamps (wall clock, as
Java's ``time.milliseconds()`` in ``KafkaProducer.doSend``); ``monotonic()`` seconds for
blocking deadlines.  SystemClock's methods are the ``time`` module's C functions themselves,
so a producer bound to them pays nothing over calling ``time`` directly on its hot path.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["SYSTEM_CLOCK", "Clock", "MockClock", "SystemClock", "Time", "monotonic_ms"]

Clock = Callable[[], float]


def monotonic_ms() -> float:
    return time.monotonic() * 1000.0


class Time(Protocol):
    """What the producer reads the time from (Java's ``org.apache.kafka.common.utils.Time``)."""

    def monotonic_ns(self) -> int:
        """Monotonic nanoseconds (Java's ``Time.nanoseconds``)."""
        ...

    def monotonic(self) -> float:
        """Monotonic seconds, for deadlines of blocking waits."""
        ...

    def time_ns(self) -> int:
        """Wall-clock nanoseconds since the epoch: record timestamps."""
        ...

    def milliseconds(self) -> int:
        """Monotonic milliseconds as an int: the producer's ``now_ms``."""
        ...

    def monotonic_ms(self) -> float:
        """Monotonic milliseconds as a float: the network layer's :data:`Clock`."""
        ...


class SystemClock:
    """The real clock (Java's ``SystemTime``)."""

    __slots__ = ()

    monotonic_ns = staticmethod(time.monotonic_ns)
    monotonic = staticmethod(time.monotonic)
    time_ns = staticmethod(time.time_ns)
    monotonic_ms = staticmethod(monotonic_ms)

    @staticmethod
    def milliseconds() -> int:
        return time.monotonic_ns() // 1_000_000

    def __repr__(self) -> str:
        return "SystemClock()"


SYSTEM_CLOCK = SystemClock()


class MockClock:
    """A clock that moves only when told to (Java's ``MockTime``), for tests.

    Monotonic time starts at ``now_ms``; the wall clock is ``wall_start_ms`` plus the same
    elapsed time.  ``sleep`` advances instead of sleeping, as MockTime's does.
    """

    def __init__(self, now_ms: int = 0, wall_start_ms: int = 1_700_000_000_000) -> None:
        self._ns = now_ms * 1_000_000
        self._wall_offset_ns = (wall_start_ms - now_ms) * 1_000_000

    def set_ms(self, now_ms: int) -> None:
        """Jump to ``now_ms`` (tests may step back to replay a scenario)."""
        self._ns = now_ms * 1_000_000

    def advance(self, ms: float) -> None:
        self._ns += int(ms * 1_000_000)

    def sleep(self, seconds: float) -> None:
        self.advance(seconds * 1000.0)

    def monotonic_ns(self) -> int:
        return self._ns

    def monotonic(self) -> float:
        return self._ns / 1e9

    def time_ns(self) -> int:
        return self._ns + self._wall_offset_ns

    def milliseconds(self) -> int:
        return self._ns // 1_000_000

    def monotonic_ms(self) -> float:
        return self._ns / 1e6

    def __repr__(self) -> str:
        return f"MockClock(now_ms={self.milliseconds()})"
