"""Exponential backoff with jitter, as Kafka's ExponentialBackoff.

``backoff(attempts) = initial * multiplier ** attempts * random(1 - jitter, 1 + jitter)``, never
above ``max``.  Used for reconnects (reconnect.backoff.ms -> reconnect.backoff.max.ms),
connection setup timeouts and metadata refresh retries (retry.backoff.ms -> .max.ms).
"""

from __future__ import annotations

import math
import random


class ExponentialBackoff:
    __slots__ = ("_exp_max", "initial", "jitter", "max", "multiplier")

    def __init__(self, initial_ms: float, multiplier: float, max_ms: float,
                 jitter: float = 0.2) -> None:
        if multiplier <= 1:
            raise ValueError(f"multiplier must be > 1, got {multiplier}")
        self.initial = min(initial_ms, max_ms)
        self.multiplier = multiplier
        self.max = max_ms
        self.jitter = jitter
        # A maximum at or below the initial interval means a constant backoff.
        self._exp_max = (math.log(max_ms / max(self.initial, 1)) / math.log(multiplier)
                         if max_ms > self.initial else 0.0)

    def backoff(self, attempts: int) -> float:
        if self._exp_max == 0.0:
            return self.initial
        term = self.initial * self.multiplier ** min(attempts, self._exp_max)
        if self.jitter > 0:
            term *= random.uniform(1 - self.jitter, 1 + self.jitter)
        return min(float(int(term)), self.max)  # whole ms, as Java's long arithmetic

    def __repr__(self) -> str:
        return (f"ExponentialBackoff(initial={self.initial}, multiplier={self.multiplier}, "
                f"max={self.max}, jitter={self.jitter})")
