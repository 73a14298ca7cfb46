from __future__ import annotations

import threading

from samsa.broker.purgatory import DelayedOperation, Purgatory


class Counter(DelayedOperation):
    """Completes once ``source['n']`` reaches ``target``."""

    def __init__(self, source: dict[str, int], target: int, delay_ms: float = 600_000) -> None:
        super().__init__(delay_ms)
        self.source = source
        self.target = target
        self.completions = 0
        self.expired = False
        self.done = threading.Event()

    def try_complete(self) -> bool:
        if self.source["n"] >= self.target:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.completions += 1
        self.done.set()

    def on_expiration(self) -> None:
        self.expired = True


def test_completes_at_once_when_possible() -> None:
    purgatory = Purgatory("t")
    try:
        op = Counter({"n": 5}, 1)
        assert purgatory.try_complete_else_watch(op, ["k"]) is True
        assert op.completions == 1 and purgatory.watched() == 0
    finally:
        purgatory.close()


def test_woken_by_its_key_only() -> None:
    purgatory = Purgatory("t")
    try:
        source = {"n": 0}
        op = Counter(source, 2)
        assert purgatory.try_complete_else_watch(op, ["a", "b"]) is False
        source["n"] = 2
        assert purgatory.check_and_complete("other") == 0
        assert op.completions == 0
        assert purgatory.check_and_complete("b") == 1
        assert op.completions == 1 and not op.expired
        assert purgatory.check_and_complete("a") == 0  # already done, and unwatched
        assert purgatory.watched() == 0
    finally:
        purgatory.close()


def test_expires_after_its_delay() -> None:
    purgatory = Purgatory("t")
    try:
        op = Counter({"n": 0}, 1, delay_ms=10)
        purgatory.try_complete_else_watch(op, ["k"])
        assert op.done.wait(10)
        assert op.expired and op.completions == 1
    finally:
        purgatory.close()


def test_close_expires_everything_waiting() -> None:
    purgatory = Purgatory("t")
    ops = [Counter({"n": 0}, 1) for _ in range(3)]
    for op in ops:
        purgatory.try_complete_else_watch(op, ["k"])
    purgatory.close()
    assert all(op.expired and op.completions == 1 for op in ops)
    late = Counter({"n": 0}, 1)
    assert purgatory.try_complete_else_watch(late, ["k"]) is True  # closed: expired at once
    assert late.expired


def test_each_operation_completes_exactly_once_under_concurrent_wakes() -> None:
    purgatory = Purgatory("t")
    try:
        source = {"n": 0}
        ops = [Counter(source, target) for target in range(1, 201)]
        for op in ops:
            purgatory.try_complete_else_watch(op, [op.target % 3])

        lock = threading.Lock()

        def bump() -> None:
            for _ in range(100):
                with lock:
                    source["n"] += 1
                for key in range(3):
                    purgatory.check_and_complete(key)

        threads = [threading.Thread(target=bump) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for key in range(3):
            purgatory.check_and_complete(key)
        assert all(op.completions == 1 for op in ops)
        assert purgatory.watched() == 0
    finally:
        purgatory.close()


def test_operations_completed_long_before_their_deadline_are_let_go() -> None:
    """A completed operation must not stay referenced until its (days away) deadline: a
    delayed fetch's result holds segment files open."""
    import gc
    import weakref

    purgatory = Purgatory("t")
    try:
        # A waiting operation due first keeps the timer from reaching the completed ones.
        purgatory.try_complete_else_watch(Counter({"n": 0}, 1, delay_ms=3_600_000), ["other"])
        source = {"n": 0}
        ops = [Counter(source, 1, delay_ms=86_400_000) for _ in range(300)]
        for i, op in enumerate(ops):
            assert purgatory.try_complete_else_watch(op, [f"k{i}"]) is False
        refs = [weakref.ref(op) for op in ops]
        source["n"] = 1
        for i in range(len(ops)):
            assert purgatory.check_and_complete(f"k{i}") == 1
        del ops, op
        gc.collect()
        assert sum(ref() is not None for ref in refs) < 100
    finally:
        purgatory.close()
