"""ProduceRequestResult / RecordFuture: per-batch completion, thin per-record handles.

Every test runs against the installed module (compiled by setup.py where it can be) and its
pure-Python source, loaded under another name, as tests/broker/log/test_validator.py does."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from types import ModuleType

import pytest

from samsa.errors import KafkaTimeoutError, NotLeaderOrFollowerError
from samsa.producer import future
from samsa.producer.future import ProduceRequestResult, RecordFuture, RecordMetadata
from tests.support.compiled_modules import both_builds, check_compiled_in_use


@pytest.fixture(scope="module", autouse=True, params=["installed", "source"])
def implementation(request: pytest.FixtureRequest) -> Iterator[ModuleType]:
    with both_builds(request, future) as module, pytest.MonkeyPatch.context() as patch:
        for name in ("ProduceRequestResult", "RecordFuture", "RecordMetadata"):
            patch.setitem(globals(), name, getattr(module, name))
        yield module


def test_the_compiled_futures_are_in_use_where_they_can_be_built() -> None:
    check_compiled_in_use(future)


def make(n: int = 3, ts: int = 1000) -> tuple[ProduceRequestResult, list[RecordFuture]]:
    result = ProduceRequestResult("t", 2)
    return result, [RecordFuture(result, i, ts + i, 3, -1) for i in range(n)]


def test_success_metadata_uses_base_plus_relative_offset() -> None:
    result, futures = make()
    assert not futures[0].done()
    result.set(100, -1)
    result.mark_done()
    assert all(f.done() for f in futures)
    assert futures[2].get(0) == RecordMetadata("t", 2, 102, 1002, 3, -1)
    assert futures[0].exception() is None


def test_record_future_gives_the_records_handle_with_its_serialized_sizes() -> None:
    result = ProduceRequestResult("t", 2)
    keyed, keyless = result.record_future(4, 1000, b"key", b"value"), result.record_future(5, 1001, None, None)
    result.set(100, -1)
    result.mark_done()
    assert keyed.get(0) == RecordMetadata("t", 2, 104, 1000, 3, 5)
    assert keyless.get(0) == RecordMetadata("t", 2, 105, 1001, -1, -1)


def test_log_append_time_replaces_create_time() -> None:
    result, futures = make()
    result.set(0, 555)
    result.mark_done()
    assert futures[1].get().timestamp == 555


def test_acks_zero_has_no_offset() -> None:
    result, futures = make()
    result.set(-1, -1)
    result.mark_done()
    md = futures[1].get()
    assert md.offset == -1 and not md.has_offset() and md.has_timestamp()


def test_errors_top_level_and_per_record() -> None:
    result, futures = make()
    top, specific = NotLeaderOrFollowerError(), ValueError("record 1")
    result.set(-1, -1, top, {1: specific})
    result.mark_done()
    with pytest.raises(NotLeaderOrFollowerError):
        futures[0].get()
    assert futures[1].exception() is specific
    assert futures[2].outcome() == (None, top)


def test_get_timeout_says_what_was_waited_for() -> None:
    _, futures = make()
    with pytest.raises(KafkaTimeoutError) as info:
        futures[0].get(0.01)
    message = str(info.value)
    assert "t-2" in message and "delivery.timeout.ms" in message


def test_get_blocks_until_another_thread_completes() -> None:
    result, futures = make()
    got: list[RecordMetadata] = []
    waiter = threading.Thread(target=lambda: got.append(futures[0].get(30)))
    waiter.start()
    result.set(7, -1)
    result.mark_done()
    waiter.join(30)
    assert got == [RecordMetadata("t", 2, 7, 1000, 3, -1)]


def test_add_callback_before_and_after_completion() -> None:
    result, futures = make()
    calls: list[tuple[object, object]] = []
    futures[0].add_callback(lambda md, err: calls.append((md, err)))
    assert calls == []
    result.set(10, -1)
    result.mark_done()
    futures[1].add_callback(lambda md, err: calls.append((md, err)))
    assert [md.offset for md, _ in calls] == [10, 11]  # type: ignore[union-attr]


def test_callback_exceptions_are_logged_not_raised(caplog: pytest.LogCaptureFixture,
                                                   implementation: ModuleType) -> None:
    logger = implementation.log.name  # the source loaded under another name logs under it
    result, futures = make()
    ran: list[int] = []
    futures[0].add_callback(lambda md, err: 1 / 0)
    futures[0].add_callback(lambda md, err: ran.append(md.offset))  # type: ignore[union-attr]
    futures[1].add_callback(lambda md, err: ran.append(md.offset))  # type: ignore[union-attr]
    result.set(0, -1)
    with caplog.at_level(logging.ERROR, logger=logger):
        result.mark_done()  # does not raise
        # Added after completion: runs at once on this thread, and does not raise either.
        futures[1].add_callback(lambda md, err: 1 / 0)
        futures[2].add_callback(lambda md, err: ran.append(md.offset))  # type: ignore[union-attr]
    assert ran == [0, 1, 2], "a raising callback kept the others from running"
    logged = [r for r in caplog.records if r.name == logger]
    assert len(logged) == 2
    for record in logged:
        assert record.levelno == logging.ERROR
        assert "t-2" in record.getMessage()
        assert record.exc_info is not None and record.exc_info[0] is ZeroDivisionError


def test_chained_future_follows_split_batch() -> None:
    old, futures = make()
    new = ProduceRequestResult("t", 2)
    moved = RecordFuture(new, 0, 1001, 3, -1)
    futures[1].chain(moved)
    calls: list[object] = []
    futures[1].add_callback(lambda md, err: calls.append(md))
    old.set(-1, -1, RuntimeError("too large"))
    old.mark_done()
    assert not futures[1].done()
    assert calls == []
    new.set(50, -1)
    new.mark_done()
    assert futures[1].get(1).offset == 50
    assert calls == [RecordMetadata("t", 2, 50, 1001, 3, -1)]
