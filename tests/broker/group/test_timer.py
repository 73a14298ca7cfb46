"""The keyed timer: rescheduling a key replaces its task, cancel drops it."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from samsa.broker.group.timer import KeyedTimer


@pytest.fixture
def timer() -> Iterator[KeyedTimer]:
    t = KeyedTimer()
    yield t
    t.close()


def test_runs_tasks_in_deadline_order(timer: KeyedTimer) -> None:
    ran: list[str] = []
    done = threading.Event()
    timer.schedule("b", 40, lambda: ran.append("b"))
    timer.schedule("a", 0, lambda: ran.append("a"))
    timer.schedule("c", 80, lambda: (ran.append("c"), done.set()))
    assert done.wait(10)
    assert ran == ["a", "b", "c"]


def test_rescheduling_replaces_and_cancel_drops(timer: KeyedTimer) -> None:
    ran: list[str] = []
    done = threading.Event()
    timer.schedule("k", 0, lambda: ran.append("old"))
    timer.schedule("k", 30, lambda: ran.append("new"))
    timer.schedule("gone", 10, lambda: ran.append("gone"))
    timer.cancel("gone")
    timer.schedule("end", 60, done.set)
    assert done.wait(10)
    assert ran == ["new"]
    assert not timer.is_scheduled("k")


def test_a_failing_task_does_not_stop_the_timer(timer: KeyedTimer) -> None:
    done = threading.Event()

    def boom() -> None:
        raise RuntimeError("boom")

    timer.schedule("x", 0, boom)
    timer.schedule("y", 10, done.set)
    assert done.wait(10)


def test_closed_timer_ignores_new_tasks() -> None:
    t = KeyedTimer()
    t.close()
    t.schedule("k", 0, lambda: None)
    assert not t.is_scheduled("k")
