from __future__ import annotations

import threading

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
