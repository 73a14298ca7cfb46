"""The clients' one clock: SystemClock is the time module's functions, MockClock moves when told."""

from __future__ import annotations

import time

from samsa.net.clock import SYSTEM_CLOCK, MockClock, SystemClock, Time, monotonic_ms


def test_system_clock_is_the_time_module() -> None:
    # The producer binds these on its hot path: they must be the C functions themselves.
    assert SYSTEM_CLOCK.monotonic_ns is time.monotonic_ns
    assert SYSTEM_CLOCK.time_ns is time.time_ns
    assert SYSTEM_CLOCK.monotonic is time.monotonic
    assert SYSTEM_CLOCK.monotonic_ms is monotonic_ms
    before = time.monotonic_ns() // 1_000_000
    now = SYSTEM_CLOCK.milliseconds()
    assert before <= now <= time.monotonic_ns() // 1_000_000
    assert isinstance(SystemClock(), SystemClock)


def test_mock_clock_moves_only_when_told() -> None:
    clock: Time = MockClock(now_ms=1_000, wall_start_ms=1_600_000_000_000)
    assert isinstance(clock, MockClock)
    assert clock.milliseconds() == 1_000 and clock.monotonic_ms() == 1_000.0
    assert clock.monotonic() == 1.0 and clock.monotonic_ns() == 1_000_000_000
    assert clock.time_ns() == 1_600_000_000_000 * 1_000_000
    clock.advance(2.5)
    assert clock.monotonic_ms() == 1_002.5 and clock.milliseconds() == 1_002
    clock.sleep(1.0)
    assert clock.milliseconds() == 2_002
    assert clock.time_ns() // 1_000_000 == 1_600_000_001_002
    clock.set_ms(10)
    assert clock.milliseconds() == 10 and clock.time_ns() // 1_000_000 == 1_599_999_999_010
