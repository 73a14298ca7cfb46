"""The network layer's clock: monotonic milliseconds as a float.

Every ``now`` argument in samsa.net is in these units.  Monotonic, so wall-clock jumps never
expire requests or reset backoffs; a float, so sub-millisecond waits are not rounded away.
"""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], float]


def monotonic_ms() -> float:
    return time.monotonic() * 1000.0
