from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from samsa.records.scratch import KEEP_BYTES, scratch_buffer


def test_the_buffer_is_reused_grown_and_per_thread() -> None:
    first = scratch_buffer(10)
    assert len(first) >= 10
    assert scratch_buffer(100) is first  # big enough already
    grown = scratch_buffer(len(first) + 1)
    assert grown is not first and len(grown) > len(first)
    assert scratch_buffer(5) is grown
    other: list[bytearray] = []
    thread = threading.Thread(target=lambda: other.append(scratch_buffer(5)))
    thread.start()
    thread.join()
    assert other[0] is not grown


def test_a_huge_buffer_is_handed_out_but_not_kept() -> None:
    kept = scratch_buffer(1)
    huge = scratch_buffer(KEEP_BYTES + 1)
    assert len(huge) > KEEP_BYTES
    assert scratch_buffer(1) is kept


def _in_a_new_thread(fn: Callable[[], None]) -> None:
    """Run fn in a thread that has no scratch buffer yet."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(fn).result()


def test_a_new_buffer_is_one_mib_and_grows_by_doubling() -> None:
    def check() -> None:
        first = scratch_buffer(10)
        assert len(first) == 1024 * 1024  # small looks share one buffer from the start
        assert scratch_buffer(len(first)) is first  # exactly big enough
        grown = scratch_buffer(len(first) + 1)
        assert len(grown) == 2 * len(first)
        assert scratch_buffer(len(grown)) is grown

    _in_a_new_thread(check)


def test_a_buffer_of_keep_bytes_is_kept() -> None:
    def check() -> None:
        kept = scratch_buffer(KEEP_BYTES)
        assert len(kept) == KEEP_BYTES
        assert scratch_buffer(1) is kept

    _in_a_new_thread(check)
