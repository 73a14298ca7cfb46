"""One cleaning round (cleaner.py, cleaner_filter.py): what is kept of each record and batch."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from samsa.broker.log import Log, LogConfig, LogManager
from samsa.broker.log.cleaner import Cleaner, group_segments
from samsa.errors import OutOfOrderSequenceNumberError
from samsa.records import Compression, RecordBatchBuilder, iter_batches

BASE = 1_700_000_000_000
DAY = 86_400_000


def produce(plog: Log, records: list[tuple[bytes | None, bytes | None]], *, ts: int = BASE,
            pid: int = -1, epoch: int = -1, seq: int = -1, txn: bool = False,
            codec: Compression = Compression.NONE) -> int:
    builder = RecordBatchBuilder(compression=codec, producer_id=pid, producer_epoch=epoch,
                                 base_sequence=seq, is_transactional=txn,
                                 batch_size_limit=1 << 30)
    for key, value in records:
        builder.append(ts, key, value)
    return plog.append_as_leader(builder.build(), leader_epoch=0, now_ms=ts).base_offset


def batches(plog: Log) -> list:
    found = []
    for segment in plog.segments_snapshot():
        data = segment.read_bytes(0, segment.size)
        found.extend(iter_batches(data))
    return found


def records(plog: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for b in batches(plog) if not b.is_control for r in b]


def cleaner(memory: int = 1 << 20, io: int = 64 << 10) -> Cleaner:
    return Cleaner(map_memory=memory, io_buffer_size=io, max_io_buffer_size=1 << 20)


def clean(plog: Log, now: int = BASE + 1000, *, first_dirty: int | None = None,
          c: Cleaner | None = None) -> int:
    first_uncleanable = min(plog.last_stable_offset, plog.active_segment.base_offset)
    start = plog.log_start_offset if first_dirty is None else first_dirty
    end, _ = (c or cleaner()).clean(plog, start, first_uncleanable, now)
    return end


@pytest.fixture
def compacted(open_manager: Callable[..., LogManager]) -> Callable[..., Log]:
    def make(**configs: str) -> Log:
        manager = open_manager({"log.cleaner.dedupe.buffer.size": 1 << 20})
        topic = f"t{len(manager.topics())}"
        manager.create_topic(topic, 1, {"cleanup.policy": "compact", "segment.bytes": "1000",
                                        **configs})
        return manager.get_log(topic, 0)
    return make


def test_latest_value_per_key_kept_offsets_preserved(compacted: Callable[..., Log]) -> None:
    plog = compacted()
    for i in range(60):
        produce(plog, [(b"k%d" % (i % 5), b"v%d" % i)])
    plog.roll()
    produce(plog, [(b"k0", b"active")])  # the active segment is never cleaned
    before = plog.log_end_offset
    assert clean(plog) == 60
    assert records(plog) == [(55 + i, b"k%d" % i, b"v%d" % (55 + i)) for i in range(5)] + [
        (60, b"k0", b"active")]
    assert plog.log_end_offset == before and plog.log_start_offset == 0
    # A fetch from inside a gap gets the next record.
    data = plog.read(10, 1 << 20).records
    first = next(iter_batches(data.read() if hasattr(data, "read") else data))
    assert first.last_offset >= 10


def test_tombstone_kept_until_its_horizon_then_removed(compacted: Callable[..., Log]) -> None:
    plog = compacted(**{"delete.retention.ms": str(DAY)})
    produce(plog, [(b"a", b"1"), (b"b", b"1")])
    produce(plog, [(b"a", None)])  # tombstone
    plog.roll()
    produce(plog, [(b"c", b"x")])
    clean(plog, now=BASE)
    assert records(plog) == [(1, b"b", b"1"), (2, b"a", None), (3, b"c", b"x")]
    stamped = next(b for b in batches(plog) if b.base_offset == 2)
    assert stamped.header.has_delete_horizon and stamped.base_timestamp == BASE + DAY
    assert [r.timestamp for r in stamped] == [BASE]  # the record's own time is unchanged
    clean(plog, now=BASE + DAY - 1, first_dirty=0)
    assert (2, b"a", None) in records(plog)
    clean(plog, now=BASE + DAY, first_dirty=0)
    assert records(plog) == [(1, b"b", b"1"), (3, b"c", b"x")]


def test_keyless_records_are_dropped(open_manager: Callable[..., LogManager]) -> None:
    manager = open_manager()
    manager.create_topic("t", 1, {"segment.bytes": "1000"})
    plog = manager.get_log("t", 0)
    produce(plog, [(None, b"no key"), (b"k", b"1")])
    manager.set_topic_configs("t", {"cleanup.policy": "compact", "segment.bytes": "1000"})
    produce(plog, [(b"k", b"2")])
    plog.roll()
    produce(plog, [(b"z", b"z")])
    clean(plog)
    assert records(plog) == [(2, b"k", b"2"), (3, b"z", b"z")]


def test_compressed_batch_rebuilt_with_the_kept_records(compacted: Callable[..., Log]) -> None:
    plog = compacted()
    produce(plog, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1")], codec=Compression.ZSTD)
    produce(plog, [(b"b", b"2")])
    plog.roll()
    produce(plog, [(b"z", b"z")])
    clean(plog)
    first = batches(plog)[0]
    assert first.header.compression == Compression.ZSTD
    assert (first.base_offset, first.last_offset) == (0, 2)  # LastOffsetDelta kept
    assert records(plog) == [(0, b"a", b"1"), (2, b"c", b"1"), (3, b"b", b"2"), (4, b"z", b"z")]


def test_aborted_transactions_removed_committed_kept_markers_until_horizon(
        compacted: Callable[..., Log]) -> None:
    plog = compacted(**{"delete.retention.ms": "1000"})
    produce(plog, [(b"x", b"aborted")], pid=7, epoch=0, seq=0, txn=True)
    plog.append_control_marker(producer_id=7, producer_epoch=0, commit=False,
                               coordinator_epoch=0, leader_epoch=0, now_ms=BASE)
    produce(plog, [(b"y", b"committed")], pid=8, epoch=0, seq=0, txn=True)
    plog.append_control_marker(producer_id=8, producer_epoch=0, commit=True,
                               coordinator_epoch=0, leader_epoch=0, now_ms=BASE)
    produce(plog, [(b"x", b"plain")])
    plog.roll()
    produce(plog, [(b"open", b"1")], pid=9, epoch=0, seq=0, txn=True)  # above the LSO
    produce(plog, [(b"z", b"z")])
    # Both producers' last batches are kept (empty for the aborted one) for their sequences.
    clean(plog, now=BASE)
    kept = batches(plog)
    aborted_data = [b for b in kept if b.producer_id == 7 and not b.is_control]
    assert [len(b) for b in aborted_data] == [0]  # emptied, still there for the sequence
    assert (0, b"x", b"aborted") not in records(plog)
    assert (2, b"y", b"committed") in records(plog)
    assert [(b.producer_id, b.base_offset) for b in kept if b.is_control] == [(7, 1), (8, 3)]
    assert (5, b"open", b"1") in records(plog)
    # The abort's .txnindex entry follows its kept marker into the cleaned segment.
    assert [t.producer_id for t in plog.aborted_transactions(0, 5)] == [7]
    # Once the producers are forgotten (expired), the markers go after their horizon.
    plog.producer_state.producers.pop(7)
    plog.producer_state.producers.pop(8)
    clean(plog, now=BASE + 10, first_dirty=0)  # the last data of 7 goes
    clean(plog, now=BASE + 20, first_dirty=0)  # none left: its marker gets a horizon
    assert [b.producer_id for b in batches(plog) if b.is_control] == [7, 8]
    clean(plog, now=BASE + 1020, first_dirty=0)  # past it
    kept = batches(plog)
    assert [b.producer_id for b in kept if b.is_control] == [8]  # commit still has data
    assert records(plog)[:2] == [(2, b"y", b"committed"), (4, b"x", b"plain")]


def test_idempotent_producer_keeps_its_sequence_across_cleaning_and_restart(
        open_manager: Callable[..., LogManager], tmp_path: Path) -> None:
    manager = open_manager({"log.cleaner.dedupe.buffer.size": 1 << 20})
    manager.create_topic("t", 1, {"cleanup.policy": "compact", "segment.bytes": "1000"})
    plog = manager.get_log("t", 0)
    for seq in range(30):
        produce(plog, [(b"k", b"v%d" % seq)], pid=3, epoch=0, seq=seq)
    produce(plog, [(b"k", b"last-plain")])  # supersedes the producer's last batch
    plog.roll()
    clean(plog)
    kept = [b for b in batches(plog) if b.producer_id == 3]
    assert kept[-1].base_sequence == 29 and len(kept[-1]) == 0  # kept, emptied
    assert all(len(b) == 0 for b in kept)
    manager.close()
    reopened = open_manager(data_dir=tmp_path / "data")
    plog = reopened.get_log("t", 0)
    produce(plog, [(b"k", b"next")], pid=3, epoch=0, seq=30)  # no sequence error
    with pytest.raises(OutOfOrderSequenceNumberError):
        produce(plog, [(b"k", b"gap")], pid=3, epoch=0, seq=40)


def test_full_map_cleans_what_fits_and_the_next_round_goes_on(
        compacted: Callable[..., Log]) -> None:
    plog = compacted()
    for i in range(100):
        produce(plog, [(b"k%d" % i, b"1")])
    for i in range(100):
        produce(plog, [(b"k%d" % i, b"2")])
    plog.roll()
    small = cleaner(memory=40 * 24)  # 36 keys fit (load factor 0.9)
    end = clean(plog, c=small)
    assert end == 36
    assert len(records(plog)) == 200  # nothing before offset 36 was superseded within it
    end = clean(plog, first_dirty=36, c=small)
    end = clean(plog, first_dirty=end, c=small)
    assert end == 108
    assert [r[0] for r in records(plog)][:8] == [8, 9, 10, 11, 12, 13, 14, 15]


def test_group_segments_fit_one_segment(compacted: Callable[..., Log]) -> None:
    plog = compacted()
    for i in range(40):
        produce(plog, [(b"k%d" % i, b"x" * 50)])
    segments = plog.segments_snapshot()[:-1]
    sizes = [s.size for s in segments]
    groups = group_segments(segments, max(sizes) * 2, 1 << 20, plog.log_end_offset)
    assert [s for g in groups for s in g] == segments
    assert all(sum(s.size for s in g) <= max(sizes) * 2 for g in groups)
    assert len(groups[0]) == 2
    assert [len(g) for g in group_segments(segments, 10, 1 << 20, 40)] == [1] * len(segments)


def test_cleaned_log_reloads_with_indexes(compacted: Callable[..., Log], tmp_path: Path) -> None:
    plog = compacted()
    for i in range(200):
        produce(plog, [(b"k%d" % (i % 10), b"v%d" % i)], ts=BASE + i)
    plog.roll()
    clean(plog, now=BASE + 1000)
    assert not list(plog.dir.glob("*.cleaned")) + list(plog.dir.glob("*.swap"))
    # The replaced segments' files wait file.delete.delay.ms (60 s) as *.deleted.
    assert list(plog.dir.glob("*.deleted"))
    plog.maintain(now_ms=int(time.time() * 1000) + 60_000)
    assert not list(plog.dir.glob("*.deleted"))
    found = plog.offset_for_timestamp(BASE + 195)
    assert found is not None and found.offset == 195
    kept = records(plog)
    config = LogConfig.from_configs(None, {"cleanup.policy": "compact"})
    plog.close()
    again = Log(plog.dir, config, topic=plog.topic, partition=0, clean_shutdown=True)
    try:
        assert records(again) == kept
    finally:
        again.close()
