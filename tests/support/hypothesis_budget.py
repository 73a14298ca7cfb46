"""Hypothesis example counts, cut down inside a mutation-testing run.

mutmut reruns every test that reaches a mutated function once per mutant; scripts/mutate.py
sets SAMSA_MUTATION_RUN so that the slowest property tests try a quarter of their examples there
(the producer-state machine: 150 examples, about 10 s per mutant at full count). The normal suite
is unchanged. A survivor found with the cut count is worth a check at the full count before it is
explained as equivalent.
"""

from __future__ import annotations

import os

MUTATION_RUN = bool(os.environ.get("SAMSA_MUTATION_RUN"))


def examples(count: int) -> int:
    """``count`` examples, or a quarter of them (at least 10) in a mutation run."""
    return max(10, count // 4) if MUTATION_RUN else count
