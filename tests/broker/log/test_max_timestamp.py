"""The log's view of timestamps: MaxTimestamp recomputed on append (LogValidator), and
ListOffsets MAX_TIMESTAMP answering the record that holds it (Kafka 3.8+, KAFKA-16310)."""

from __future__ import annotations

from pathlib import Path

from handmade_batches import handmade_batch
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.broker.log import Log, LogConfig
from samsa.records import Compression, RecordBatch, read_batch_header

from .conftest import BASE_TS

NOW = BASE_TS + 10_000_000


def open_log(path: Path, **topic: str) -> Log:
    return Log(path, LogConfig.from_configs(None, topic), topic="t", partition=0, now_ms=NOW)


def append(log: Log, timestamps: list[int], epoch: int = 0, **kwargs: object) -> None:
    log.append_as_leader(handmade_batch(timestamps, **kwargs),  # type: ignore[arg-type]
                         leader_epoch=epoch, now_ms=NOW)


def test_the_record_with_the_largest_timestamp_not_the_batch_end(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, [BASE_TS, BASE_TS + 50, BASE_TS + 10])  # 0-2: the max is offset 1
    append(log, [BASE_TS + 1, BASE_TS + 2])  # 3-4
    assert log.offset_of_max_timestamp() == (BASE_TS + 50, 1, 0)
    log.close()


def test_ties_go_to_the_earliest_record_and_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, [BASE_TS, BASE_TS + 7, BASE_TS + 7, BASE_TS])  # 0-3: first max at 1
    append(log, [BASE_TS + 7, BASE_TS + 7], epoch=3)  # 4-5: the same max, later
    assert log.offset_of_max_timestamp() == (BASE_TS + 7, 1, 0)
    log.close()


def test_across_segments_reopened_and_with_the_batch_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, [BASE_TS, BASE_TS + 1])
    log.roll(NOW)
    append(log, [BASE_TS + 5, BASE_TS + 900, BASE_TS + 3], epoch=2)  # 2-4: max at 3
    log.roll(NOW)
    append(log, [BASE_TS + 899], epoch=4)
    assert log.offset_of_max_timestamp() == (BASE_TS + 900, 3, 2)
    log.close()
    reopened = Log(tmp_path / "t-0", LogConfig(), topic="t", partition=0, clean_shutdown=True,
                   now_ms=NOW)
    assert reopened.offset_of_max_timestamp() == (BASE_TS + 900, 3, 2)
    # The time index, rebuilt or loaded, still finds records by time.
    assert reopened.offset_for_timestamp(BASE_TS + 899) == (BASE_TS + 900, 3, 2)
    reopened.close()


def test_empty_log_has_no_max(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    assert log.offset_of_max_timestamp() is None
    log.close()


@settings(max_examples=80, deadline=None)
@given(spread=st.sampled_from([30, 10**7]),  # one-byte deltas only, or any width
       offsets=st.lists(st.integers(-(10**7), 10**7), min_size=1, max_size=80),
       sizes=st.lists(st.integers(0, 300), min_size=80, max_size=80),
       uniform=st.booleans(),  # equal records (the walk's runs) or mixed sizes
       header_max=st.sampled_from([None, -1, 0, BASE_TS, BASE_TS + 10**8]),  # None: honest
       codec=st.sampled_from([Compression.NONE, Compression.LZ4]))
def test_stored_max_is_the_records_max(tmp_path_factory: object, spread: int, offsets: list[int],
                                       sizes: list[int], uniform: bool, header_max: int | None,
                                       codec: Compression) -> None:
    """Whatever the header claims, the stored MaxTimestamp is the records' largest timestamp,
    for runs of equal records and mixed sizes, one-byte and wide deltas alike."""
    path = tmp_path_factory.mktemp("log")  # type: ignore[attr-defined]
    log = open_log(path / "t-0")
    timestamps = [BASE_TS + o % (2 * spread + 1) - spread for o in offsets]
    values = [b"x" * sizes[0 if uniform else i] for i in range(len(timestamps))]
    claimed = max(timestamps) if header_max is None else header_max
    append(log, timestamps, max_timestamp=claimed, values=values, codec=codec)
    segment = log.segments[-1]
    data = segment.read_bytes(0, segment.size)
    header = read_batch_header(data)
    assert header.max_timestamp == max(timestamps)
    assert [r.timestamp for r in RecordBatch(data, 0, header)] == timestamps
    first = timestamps.index(max(timestamps))
    assert log.offset_of_max_timestamp() == (max(timestamps), first, 0)
    log.close()
