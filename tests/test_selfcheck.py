"""`make run`'s end-to-end self-check: embedded broker, samsa producer, samsa consumer."""

from __future__ import annotations

import pytest

from samsa import selfcheck


def test_selfcheck_moves_every_record_exactly_once(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(selfcheck, "NUM_RECORDS", 5_000)
    assert selfcheck.main() == 0
    assert "read back exactly once" in capsys.readouterr().out
