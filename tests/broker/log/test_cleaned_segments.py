"""The cleaner's .cleaned -> .swap -> final protocol interrupted at each step, then the log
reopened as after a crash (cleaned_segments.recover_swaps in Log loading)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from samsa.broker.log import Log, LogConfig, LogManager
from samsa.broker.log import cleaner as cleaner_module
from tests.broker.log.test_cleaner import BASE, cleaner, produce, records


class Crash(Exception):
    pass


def _filled(open_manager: Callable[..., LogManager]) -> Log:
    manager = open_manager()
    manager.create_topic("t", 1, {"cleanup.policy": "compact", "segment.bytes": "1000"})
    plog = manager.get_log("t", 0)
    produce(plog, [(b"solo", b"only value")])  # live, in the first group
    for i in range(120):
        value = None if i == 100 else b"v%d" % i  # k0's tombstone
        produce(plog, [(b"k%d" % (i % 10), value)])
    plog.roll()
    produce(plog, [(b"k1", b"active")])
    return plog


def _latest(rows: list[tuple[int, bytes | None, bytes | None]]) -> dict[bytes | None, bytes | None]:
    return {key: value for _, key, value in rows}


def _crash_at(point: str, plog: Log, monkeypatch: pytest.MonkeyPatch) -> None:
    def hook(name: str) -> None:
        if name == point:
            raise Crash(name)
    monkeypatch.setattr(cleaner_module, "crash_point", hook)
    with pytest.raises(Crash):
        cleaner().clean(plog, 0, plog.active_segment.base_offset, BASE)
    plog.abandon()  # as a SIGKILL: nothing more is written


def _reopen(directory: Path) -> Log:
    config = LogConfig.from_configs(None, {"cleanup.policy": "compact", "segment.bytes": "1000"})
    return Log(directory, config, topic="t", partition=0, clean_shutdown=False)


@pytest.mark.parametrize("point", ["cleaned", "swap", "deleted", "swapped"])
def test_crash_at_each_step_loses_nothing_not_superseded(
        point: str, open_manager: Callable[..., LogManager],
        monkeypatch: pytest.MonkeyPatch) -> None:
    plog = _filled(open_manager)
    expected = _latest(records(plog))
    _crash_at(point, plog, monkeypatch)
    left = {p.suffix for p in plog.dir.iterdir()}
    assert left & {".cleaned", ".swap", ".deleted"}
    reopened = _reopen(plog.dir)
    try:
        assert _latest(records(reopened)) == expected
        assert not [p for p in reopened.dir.iterdir()
                    if p.suffix in (".cleaned", ".swap", ".deleted")]
        offsets = [o for o, _, _ in records(reopened)]
        assert offsets == sorted(set(offsets))  # no segment twice, order kept
        assert reopened.log_end_offset == 122
    finally:
        reopened.close()


def test_a_half_renamed_swap_is_undone(open_manager: Callable[..., LogManager],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Step 1 interrupted: the .log is .swap but an index still .cleaned -> the swap is
    dropped and the old segments serve (KAFKA-6264)."""
    plog = _filled(open_manager)
    before = records(plog)
    _crash_at("swap", plog, monkeypatch)
    index = next(plog.dir.glob("*.index.swap"))
    index.rename(index.with_name(index.name.replace(".swap", ".cleaned")))
    reopened = _reopen(plog.dir)
    try:
        assert records(reopened) == before  # the old segments, untouched
    finally:
        reopened.close()


def test_completed_swap_removes_the_old_segments(open_manager: Callable[..., LogManager],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    plog = _filled(open_manager)
    second_base = plog.segments_snapshot()[1].base_offset
    _crash_at("deleted", plog, monkeypatch)  # after the first group's old files were renamed
    reopened = _reopen(plog.dir)
    try:
        assert reopened.segments_snapshot()[0].base_offset == 0
        # The first segment is the cleaned one: every record in it but one was superseded.
        assert records(reopened)[0] == (0, b"solo", b"only value")
        assert records(reopened)[1][0] >= second_base
        assert reopened.segments_snapshot()[1].base_offset == second_base
    finally:
        reopened.close()
