"""Mutated frames of every API the broker serves, for a bounded time (FUZZ_SECONDS, 50 s in the
suite; `make fuzz` runs it for 10 minutes): the broker stays up, logs no uncaught exception,
keeps its RSS and descriptors bounded and serves a healthy client all along (fuzzer.py)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from tests.broker.fuzz.fuzzer import Fuzzer
from tests.broker.fuzz.healthy import HealthyClient
from tests.broker.fuzz.target import FuzzTarget

FUZZ_SECONDS = float(os.environ.get("FUZZ_SECONDS", "50"))


def test_mutated_frames_of_every_api(fuzz_target: FuzzTarget, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    findings = Path(os.environ.get("FUZZ_FINDINGS", tmp_path / "findings"))
    first_seed = int(os.environ.get("FUZZ_SEED", random.randrange(1 << 32)))
    healthy = HealthyClient(fuzz_target.port).start()
    fuzzer = Fuzzer(fuzz_target, findings, healthy=healthy)
    try:
        report = fuzzer.run(FUZZ_SECONDS, first_seed)
    finally:
        healthy.stop()
    with capsys.disabled():
        print(f"\n{report.summary()}; healthy client: {healthy.rounds} round trips")
    assert not healthy.errors, healthy.errors
    assert healthy.rounds > 0, "the healthy client never completed a round trip"
