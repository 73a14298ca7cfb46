"""BufferPool: accounting, reuse of poolable buffers, FIFO blocking, timeout, close."""

from __future__ import annotations

import threading
import time

import pytest

from samsa.errors import KafkaTimeoutError, ProducerClosedError
from samsa.producer.buffer_pool import BufferExhaustedError, BufferPool


def wait_until(predicate, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.001)


def test_accounting_and_reuse_of_poolable_buffers() -> None:
    pool = BufferPool(1000, 100)
    a = pool.allocate(100, 0)
    assert len(a) == 100 and pool.available_memory() == 900
    pool.deallocate(a)
    assert pool.available_memory() == 1000 and pool.free_buffers() == 1
    assert pool.unallocated_memory() == 900
    assert pool.allocate(100, 0) is a  # reused
    big = pool.allocate(250, 0)
    assert len(big) == 250 and pool.available_memory() == 650
    pool.deallocate(big, 250)
    assert pool.free_buffers() == 0 and pool.available_memory() == 900


def test_free_list_is_released_for_other_sizes() -> None:
    pool = BufferPool(300, 100)
    bufs = [pool.allocate(100, 0) for _ in range(3)]
    for b in bufs:
        pool.deallocate(b)
    assert pool.free_buffers() == 3 and pool.unallocated_memory() == 0
    assert len(pool.allocate(250, 0)) == 250
    assert pool.available_memory() == 50


def test_reserve_counts_memory_without_a_buffer() -> None:
    pool = BufferPool(300, 100)
    pooled = pool.allocate(100, 0)
    pool.deallocate(pooled)
    assert pool.free_buffers() == 1
    assert pool.reserve(100, 0) is None  # takes memory, not the free buffer
    assert pool.free_buffers() == 1 and pool.available_memory() == 200
    pool.reserve(200, 0)  # the free buffer's memory is released to make room
    assert pool.free_buffers() == 0 and pool.available_memory() == 0
    with pytest.raises(BufferExhaustedError):
        pool.reserve(1, 0)
    waiter = threading.Thread(target=pool.reserve, args=(150, 10_000))
    waiter.start()
    wait_until(lambda: pool.queued() == 1)
    pool.deallocate(None, 100)
    pool.deallocate(None, 100)
    waiter.join(10)
    assert not waiter.is_alive() and pool.available_memory() == 50
    with pytest.raises(ValueError, match="buffer.memory=300"):
        pool.reserve(301, 0)


def test_a_waiter_is_woken_once_for_memory_given_back_together() -> None:
    pool = BufferPool(200, 100)
    pool.reserve(100, 0)
    pool.reserve(100, 0)
    waiter = threading.Thread(target=pool.reserve, args=(200, 10_000))
    waiter.start()
    wait_until(lambda: pool.queued() == 1)
    pool.deallocate(None, 100, wake=False)
    pool.deallocate(None, 100, wake=False)
    assert pool.queued() == 1  # not notified: still asleep
    pool.wake_waiter()
    waiter.join(10)
    assert not waiter.is_alive() and pool.available_memory() == 0


def test_larger_than_total_is_refused() -> None:
    with pytest.raises(ValueError, match="buffer.memory=100"):
        BufferPool(100, 10).allocate(101, 0)


def test_timeout_message_says_what_and_what_to_check() -> None:
    pool = BufferPool(16384 * 2, 16384)
    pool.allocate(16384, 0)
    pool.allocate(16384, 0)
    with pytest.raises(BufferExhaustedError) as info:
        pool.allocate(16384, 20)
    err = info.value
    assert isinstance(err, KafkaTimeoutError)
    message = str(err)
    assert "Failed to allocate 16384 bytes within max.block.ms=20" in message
    assert "buffer.memory=32768 is exhausted" in message
    assert "broker's reachability" in message
    assert pool.queued() == 0 and pool.available_memory() == 0


def test_partial_memory_gathered_is_returned_on_timeout() -> None:
    pool = BufferPool(100, 10)
    held = pool.allocate(60, 0)
    done = threading.Event()
    errors: list[BaseException] = []

    def big() -> None:
        try:
            pool.allocate(80, 300)
        except BufferExhaustedError as exc:
            errors.append(exc)
        done.set()

    t = threading.Thread(target=big)
    t.start()
    wait_until(lambda: pool.queued() == 1)
    pool.deallocate(
        held[:30], 30
    )  # some memory comes back: the waiter takes it but still lacks 10
    done.wait(30)
    t.join(30)
    assert isinstance(errors[0], BufferExhaustedError)
    assert pool.available_memory() == 70  # the 30 gathered bytes were given back


def test_blocked_allocation_completes_when_memory_is_freed() -> None:
    pool = BufferPool(200, 100)
    a = pool.allocate(100, 0)
    pool.allocate(100, 0)
    got: list[bytearray] = []
    t = threading.Thread(target=lambda: got.append(pool.allocate(100, 30000)))
    t.start()
    wait_until(lambda: pool.queued() == 1)
    pool.deallocate(a)
    t.join(30)
    assert got == [a] or len(got[0]) == 100
    assert pool.queued() == 0


def test_waiters_are_served_in_fifo_order() -> None:
    pool = BufferPool(100, 100)
    first = pool.allocate(100, 0)
    order: list[str] = []

    def waiter(name: str) -> None:
        buf = pool.allocate(100, 30000)
        order.append(name)
        pool.deallocate(buf)

    threads = []
    for name in ("w1", "w2", "w3"):
        t = threading.Thread(target=waiter, args=(name,))
        t.start()
        threads.append(t)
        expected = len(threads)
        wait_until(lambda n=expected: pool.queued() == n)
    pool.deallocate(first)
    for t in threads:
        t.join(30)
    assert order == ["w1", "w2", "w3"]


def test_close_wakes_waiters_and_refuses_new_allocations() -> None:
    pool = BufferPool(100, 100)
    pool.allocate(100, 0)
    errors: list[BaseException] = []

    def blocked() -> None:
        try:
            pool.allocate(100, 60000)
        except ProducerClosedError as exc:
            errors.append(exc)

    t = threading.Thread(target=blocked)
    t.start()
    wait_until(lambda: pool.queued() == 1)
    pool.close()
    t.join(30)
    assert isinstance(errors[0], ProducerClosedError)
    assert pool.closed
    with pytest.raises(ProducerClosedError):
        pool.allocate(10, 0)
