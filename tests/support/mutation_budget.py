"""Test sizes cut down inside a mutation-testing run.

mutmut reruns every test that reaches a mutated function once per mutant; scripts/mutate.py
sets SAMSA_MUTATION_RUN so that the slowest tests do less there: the property tests try a
quarter of their examples (the producer-state machine: 150 examples, about 10 s per mutant at
full count) and the volume tests send a tenth of their records (the million-record producer
test: about 50 s per surviving Sender mutant at full count). The normal suite is unchanged. A
survivor found with the cut sizes is worth a check at the full sizes before it is explained as
equivalent.
"""

from __future__ import annotations

import os

MUTATION_RUN = bool(os.environ.get("SAMSA_MUTATION_RUN"))


def examples(count: int) -> int:
    """``count`` examples, or a quarter of them (at least 10) in a mutation run."""
    return max(10, count // 4) if MUTATION_RUN else count


def records(count: int) -> int:
    """``count`` records, or a tenth of them in a mutation run."""
    return count // 10 if MUTATION_RUN else count
