"""A per-thread scratch buffer for looks at batch bytes that end before the thread's next look.

Checking a produced batch needs its records as bytes-like data to walk (and, when compressed,
decompressed somewhere).  Allocating that per batch costs little at 16 KiB but, at 1 MiB, a
fresh buffer means an mmap and hundreds of page faults per batch; reusing one per thread does
not.  A buffer larger than ``KEEP_BYTES`` is handed out but not kept.
"""

from __future__ import annotations

import threading

__all__ = ["KEEP_BYTES", "scratch_buffer"]

KEEP_BYTES = 16 * 1024 * 1024
_MIN_BYTES = 1024 * 1024
_local = threading.local()


def scratch_buffer(size: int) -> bytearray:
    """This thread's scratch buffer, at least ``size`` bytes (its contents are undefined).

    Valid until the thread asks again: callers must be done with it before any call that may
    use it too."""
    buf: bytearray | None = getattr(_local, "buffer", None)
    if buf is None or len(buf) < size:
        buf = bytearray(max(size, _MIN_BYTES, 2 * len(buf) if buf is not None else 0))
        if len(buf) <= KEEP_BYTES:
            _local.buffer = buf
    return buf
