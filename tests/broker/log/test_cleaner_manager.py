"""Choosing the log to clean, the cleaner-offset-checkpoint, and the cleaner's memory bound."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path

from samsa.broker.log import LogManager
from samsa.broker.log.checkpoint import read_offset_checkpoint
from samsa.broker.log.cleaner_manager import CLEANER_OFFSET_CHECKPOINT, log_to_clean
from tests.broker.log.test_cleaner import BASE, produce, records

SMALL = {"log.cleaner.dedupe.buffer.size": 1 << 20}


def _fill(manager: LogManager, topic: str, updates: int, keys: int, **configs: str) -> None:
    manager.create_topic(topic, 1, {"cleanup.policy": "compact", "segment.bytes": "1000",
                                    **configs})
    plog = manager.get_log(topic, 0)
    for i in range(updates):
        produce(plog, [(b"k%d" % (i % keys), b"v%d" % i)], ts=BASE + i)


def test_the_dirtiest_log_is_cleaned_first(open_manager: Callable[..., LogManager]) -> None:
    manager = open_manager(SMALL)
    _fill(manager, "few-updates", 60, 50)
    _fill(manager, "many-updates", 200, 5)
    _fill(manager, "plain", 200, 5, **{"cleanup.policy": "delete"})
    cleaner = manager.cleaner
    # Half of "few-updates" is already clean (checkpoint): "many-updates" is dirtier.
    few = manager.get_log("few-updates", 0).segments_snapshot()
    cleaner._checkpoints[("few-updates", 0)] = few[len(few) // 2].base_offset
    found = cleaner.grab_filthiest(BASE + 10_000)
    assert found is not None and found.key == ("many-updates", 0) and found.ratio == 1.0
    cleaner._in_progress.clear()
    first = cleaner.new_cleaner()
    assert cleaner.clean_filthiest(first, BASE + 10_000)
    assert cleaner.checkpoint_of(("many-updates", 0)) is not None
    assert cleaner.clean_filthiest(first, BASE + 10_000)  # then the other one
    assert set(read_offset_checkpoint(manager.data_dir / CLEANER_OFFSET_CHECKPOINT)) == {
        ("few-updates", 0), ("many-updates", 0)}
    # Nothing new is dirty: no third round, and the plain topic is never compacted.
    assert not cleaner.clean_filthiest(first, BASE + 10_000)
    assert len(records(manager.get_log("plain", 0))) == 200


def test_ratio_must_be_above_min_cleanable_dirty_ratio(open_manager: Callable[..., LogManager]
                                                       ) -> None:
    manager = open_manager(SMALL)
    _fill(manager, "t", 100, 10, **{"min.cleanable.dirty.ratio": "1.0"})
    plog = manager.get_log("t", 0)
    found = log_to_clean(("t", 0), plog, None, BASE)
    assert found.ratio == 1.0 and not found.eligible
    assert manager.cleaner.grab_filthiest(BASE) is None
    manager.set_topic_configs("t", {"cleanup.policy": "compact", "segment.bytes": "1000",
                                    "min.cleanable.dirty.ratio": "0.99"})
    assert manager.cleaner.grab_filthiest(BASE) is not None


def test_min_compaction_lag_holds_young_segments_back(open_manager: Callable[..., LogManager]
                                                      ) -> None:
    manager = open_manager(SMALL)
    _fill(manager, "t", 100, 10, **{"min.compaction.lag.ms": "50"})
    plog = manager.get_log("t", 0)
    segments = plog.segments_snapshot()
    # Records have timestamps BASE + i: at BASE + 60 only records older than BASE + 10 may go.
    found = log_to_clean(("t", 0), plog, None, BASE + 60)
    young = next(s for s in segments[:-1] if s.largest_timestamp() > BASE + 10)
    assert found.first_uncleanable == young.base_offset
    late = log_to_clean(("t", 0), plog, None, BASE + 1_000_000)
    assert late.first_uncleanable == segments[-1].base_offset


def test_max_compaction_lag_makes_a_log_eligible_below_the_ratio(
        open_manager: Callable[..., LogManager]) -> None:
    manager = open_manager(SMALL)
    _fill(manager, "t", 100, 100, **{"min.cleanable.dirty.ratio": "1.0",
                                     "max.compaction.lag.ms": "1000"})
    plog = manager.get_log("t", 0)
    assert not log_to_clean(("t", 0), plog, None, BASE + 500).eligible
    found = log_to_clean(("t", 0), plog, None, BASE + 5000)
    assert found.max_compaction_delay_ms > 0 and found.eligible


def test_max_compaction_lag_caps_the_roll_age(open_manager: Callable[..., LogManager]) -> None:
    manager = open_manager(SMALL)
    manager.create_topic("t", 1, {"cleanup.policy": "compact", "max.compaction.lag.ms": "100"})
    plog = manager.get_log("t", 0)
    produce(plog, [(b"a", b"1")], ts=BASE)
    produce(plog, [(b"a", b"2")], ts=BASE + 101)
    assert len(plog.segments_snapshot()) == 2


def test_checkpoint_survives_restart_and_resets_out_of_range(
        open_manager: Callable[..., LogManager], tmp_path: Path) -> None:
    manager = open_manager(SMALL)
    _fill(manager, "t", 100, 10)
    assert manager.cleaner.clean_filthiest(manager.cleaner.new_cleaner(), BASE)
    end = manager.cleaner.checkpoint_of(("t", 0))
    assert end == manager.get_log("t", 0).active_segment.base_offset
    manager.close()
    again = open_manager(SMALL, data_dir=tmp_path / "data")
    assert again.cleaner.checkpoint_of(("t", 0)) == end
    plog = again.get_log("t", 0)
    assert log_to_clean(("t", 0), plog, end, BASE).first_dirty == end
    assert log_to_clean(("t", 0), plog, 10**9, BASE).first_dirty == plog.log_start_offset
    again.delete_topic("t")
    again.cleaner.write_checkpoint()
    assert read_offset_checkpoint(again.data_dir / CLEANER_OFFSET_CHECKPOINT) == {}


def test_cleaner_memory_stays_within_its_buffers(open_manager: Callable[..., LogManager]) -> None:
    """20,000 distinct keys (1.2 MB of log) through a 256 KiB map and 64 KiB I/O buffers: the
    round cleans what fits, and what the cleaner allocates at its peak stays within those
    buffers plus the largest batch it rebuilds."""
    dedupe, io = 256 << 10, 64 << 10
    manager = open_manager({"log.cleaner.dedupe.buffer.size": dedupe,
                            "log.cleaner.io.buffer.size": io})
    manager.create_topic("t", 1, {"cleanup.policy": "compact", "segment.bytes": "65536"})
    plog = manager.get_log("t", 0)
    for i in range(0, 20_000, 100):
        produce(plog, [(b"key-%06d" % j, b"x" * 40) for j in range(i, i + 100)])
    produce(plog, [(b"key-000000", b"new")])
    plog.roll()
    batch_bytes = max(s.size for s in plog.segments_snapshot())  # at most a segment in memory
    cleaner = manager.cleaner.new_cleaner()
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        end, _stats = cleaner.clean(plog, 0, plog.active_segment.base_offset, BASE)
        peak = tracemalloc.get_traced_memory()[1] - baseline
    finally:
        tracemalloc.stop()
    assert end < 20_000  # the map filled: only part of the log was cleaned this round
    budget = dedupe + io + batch_bytes + (256 << 10)  # + interpreter objects of one batch
    print(f"cleaner peak {peak} bytes; budget {budget}")
    assert peak <= budget, f"cleaner peak {peak} bytes > budget {budget}"
