from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from samsa.broker.log import LogManager, topic_id_from_str, topic_id_to_str
from samsa.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    KafkaStorageError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from samsa.records import MemoryRecords

from .conftest import BASE_TS, build_batch

NOW = BASE_TS + 10_000
Open = Callable[..., LogManager]


def offsets(manager: LogManager, topic: str = "t", partition: int = 0, start: int = 0) -> list[int]:
    """Every offset served from ``start`` to the high watermark, fetching as a consumer does
    (a fetch returns data of one segment; the first batch may begin before ``start``)."""
    log = manager.get_log(topic, partition)
    result: list[int] = []
    position = start
    while position < log.high_watermark:
        data = log.read(position, 10**9).records
        raw = data if isinstance(data, bytes) else data.read()
        got = [r.offset for b in MemoryRecords(raw).batches() for r in b]
        assert got and got[-1] >= position, f"no progress at offset {position}"
        result += got if not result else [o for o in got if o >= position]
        position = got[-1] + 1
    return result


def append(manager: LogManager, count: int = 2, topic: str = "t", partition: int = 0, **kw: object) -> int:
    log = manager.get_log(topic, partition)
    return log.append_as_leader(build_batch(count, **kw), leader_epoch=0, now_ms=NOW).base_offset


def crash_image(tmp_path: Path) -> Path:
    """Copy the data dir of a running manager: the files exactly as a power cut leaves them."""
    image = tmp_path / f"crash-{uuid.uuid4().hex[:6]}"
    shutil.copytree(tmp_path / "data", image)
    return image


# -- topics -------------------------------------------------------------------------------------


def test_topics_are_persisted_with_ids_and_configs(open_manager: Open, tmp_path: Path) -> None:
    manager = open_manager({"num.partitions": 3})
    a = manager.create_topic("a", None, {"retention.ms": 1000})
    b = manager.create_topic("b", 2)
    assert a.partitions == 3 and a.configs == {"retention.ms": "1000"}
    assert manager.get_log("a", 0).config.retention_ms == 1000
    manager.add_partitions("b", 4)
    manager.set_topic_configs("b", {"max.message.bytes": "2000"})
    assert manager.get_log("b", 3).config.max_message_bytes == 2000
    metadata = (tmp_path / "data" / "a-1" / "partition.metadata").read_text()
    assert metadata == f"version: 0\ntopic_id: {topic_id_to_str(a.topic_id)}\n"
    manager.close()
    again = open_manager()
    topics = again.topics()
    assert set(topics) == {"a", "b"}
    assert topics["a"].topic_id == a.topic_id and topics["b"].topic_id == b.topic_id
    assert topics["b"].partitions == 4 and topics["b"].configs == {"max.message.bytes": "2000"}
    assert again.topic_by_id(b.topic_id) == topics["b"]
    assert again.get_log("b", 3).config.max_message_bytes == 2000


def test_topic_validation(open_manager: Open) -> None:
    manager = open_manager()
    manager.create_topic("ok.topic_1", 1)
    with pytest.raises(TopicAlreadyExistsError):
        manager.create_topic("ok.topic_1", 1)
    with pytest.raises(InvalidTopicError, match="collides"):
        manager.create_topic("ok_topic.1", 1)
    for bad in ("", ".", "..", "a/b", "x" * 250, "spa ce"):
        with pytest.raises(InvalidTopicError):
            manager.create_topic(bad, 1)
    with pytest.raises(InvalidPartitionsError):
        manager.create_topic("zero", 0)
    with pytest.raises(InvalidConfigError):
        manager.create_topic("cfg", 1, {"segment.ms": "soon"})
    with pytest.raises(InvalidPartitionsError):
        manager.add_partitions("ok.topic_1", 1)
    with pytest.raises(UnknownTopicOrPartitionError):
        manager.get_log("ok.topic_1", 1)
    assert manager.create_topic("dry", 2, validate_only=True).partitions == 2
    assert manager.topic("dry") is None


def test_delete_topic_removes_files(open_manager: Open, tmp_path: Path) -> None:
    manager = open_manager()
    manager.create_topic("gone", 2)
    append(manager, topic="gone")
    manager.delete_topic("gone")
    assert not any(p.name.startswith("gone") for p in (tmp_path / "data").iterdir())
    with pytest.raises(UnknownTopicOrPartitionError):
        manager.get_log("gone", 0)
    with pytest.raises(UnknownTopicOrPartitionError):
        manager.delete_topic("gone")
    manager.create_topic("gone", 1)  # the name can be reused, with a fresh log
    assert manager.get_log("gone", 0).log_end_offset == 0


def test_topic_id_text_form() -> None:
    topic_id = uuid.UUID("0cb3d2d9-94d5-4d48-b1d1-ddaf1ba3c3e7")
    text = topic_id_to_str(topic_id)
    assert len(text) == 22 and "=" not in text
    assert topic_id_from_str(text) == topic_id


def test_data_dir_lock(open_manager: Open, tmp_path: Path) -> None:
    open_manager()
    with pytest.raises(KafkaStorageError, match="in use by another broker"):
        LogManager(tmp_path / "data")


# -- checkpoints and clean shutdown ---------------------------------------------------------


def test_clean_shutdown_writes_checkpoints_and_marker(open_manager: Open, tmp_path: Path) -> None:
    manager = open_manager()
    manager.create_topic("t", 2)
    append(manager, 3)
    append(manager, 2, partition=1)
    manager.get_log("t", 1).delete_records_before(1)
    manager.close()
    data = tmp_path / "data"
    assert (data / ".kafka_cleanshutdown").exists()
    assert (data / "recovery-point-offset-checkpoint").read_text() == "0\n2\nt 0 3\nt 1 2\n"
    assert (data / "log-start-offset-checkpoint").read_text() == "0\n2\nt 0 0\nt 1 1\n"
    again = open_manager()
    assert again.had_clean_shutdown and not (data / ".kafka_cleanshutdown").exists()
    assert again.get_log("t", 1).log_start_offset == 1
    assert offsets(again, partition=1, start=1) == [0, 1]  # the whole batch holding offset 1


def test_corrupt_index_files_are_rebuilt(open_manager: Open, tmp_path: Path) -> None:
    config = {"log.index.interval.bytes": 100}
    manager = open_manager(config)
    manager.create_topic("t", 1)
    for _ in range(20):
        append(manager, 2, value_size=60)
    expected = offsets(manager)
    index = tmp_path / "data" / "t-0" / "00000000000000000000.index"
    good_index = index.read_bytes()
    manager.close()
    index.write_bytes(good_index[:-3])  # torn entry
    timeindex = index.with_suffix(".timeindex")
    timeindex.write_bytes(b"\x7f" * 24)  # entries pointing past the end
    again = open_manager(config)
    assert offsets(again) == expected
    assert offsets(again, start=25)[0] == 24
    assert index.read_bytes() == good_index
    again.close()
    index.unlink()
    third = open_manager(config)
    assert offsets(third, start=31)[0] == 30
    assert index.read_bytes() == good_index


# -- crash recovery ------------------------------------------------------------------------------


def test_torn_batch_at_the_tail_is_cut(open_manager: Open, tmp_path: Path) -> None:
    manager = open_manager()
    manager.create_topic("t", 1)
    for _ in range(3):
        append(manager, 2)
    image = crash_image(tmp_path)
    log_file = image / "t-0" / "00000000000000000000.log"
    good_size = log_file.stat().st_size
    with open(log_file, "ab") as f:
        f.write(build_batch(5)[:-7])  # a batch cut short by the crash
    recovered = open_manager(data_dir=image)
    assert not recovered.had_clean_shutdown
    log = recovered.get_log("t", 0)
    assert log.log_end_offset == 6 and log_file.stat().st_size == good_size
    assert log.recovered_bytes_truncated > 0
    assert offsets(recovered) == list(range(6))
    assert append(recovered, 2) == 6
    assert offsets(recovered, start=6) == [6, 7]


def test_corrupt_batch_past_the_recovery_point_truncates_the_log(open_manager: Open, tmp_path: Path) -> None:
    manager = open_manager({"log.segment.bytes": 500})
    manager.create_topic("t", 1)
    log = manager.get_log("t", 0)
    for _ in range(3):
        append(manager, 2, value_size=50)
    log.flush()
    manager.checkpoint()  # recovery point 6
    for _ in range(6):
        append(manager, 2, value_size=50)
    assert len(log.segments) >= 3
    image = crash_image(tmp_path)
    # Flip one record byte of the batch at offset 8 (in a segment after the recovery point).
    segment = next(s for s in log.segments if s.base_offset <= 8 < s.next_offset)
    position = segment.translate_offset(8).position
    path = image / "t-0" / segment.log_path.name
    data = bytearray(path.read_bytes())
    data[position + 80] ^= 0x40
    path.write_bytes(data)
    later = [s.log_path.name for s in log.segments if s.base_offset > segment.base_offset]
    recovered = open_manager(data_dir=image)
    rlog = recovered.get_log("t", 0)
    assert rlog.log_end_offset == 8
    assert offsets(recovered) == list(range(8))
    assert all(not (image / "t-0" / name).exists() for name in later)
    assert (image / "recovery-point-offset-checkpoint").read_text().endswith("t 0 6\n")
    assert append(recovered, 3) == 8
    assert offsets(recovered, start=8) == [8, 9, 10]
    recovered.close()
    final = open_manager(data_dir=image)
    assert final.get_log("t", 0).log_end_offset == 11


def test_segments_before_the_recovery_point_are_trusted(open_manager: Open, tmp_path: Path) -> None:
    manager = open_manager()
    manager.create_topic("t", 1)
    append(manager, 2)
    manager.get_log("t", 0).flush()
    manager.checkpoint()
    append(manager, 2)
    image = crash_image(tmp_path)
    recovered = open_manager(data_dir=image)
    assert recovered.get_log("t", 0).log_end_offset == 4
    assert json.loads((image / "topics.json").read_text())["topics"]["t"]["partitions"] == 1


def test_tick_runs_retention_and_checkpoints(open_manager: Open, tmp_path: Path) -> None:
    manager = open_manager(
        {"log.segment.bytes": 300, "log.retention.ms": 1000, "log.retention.check.interval.ms": 5000}
    )
    manager.create_topic("t", 1)
    for i in range(4):
        manager.get_log("t", 0).append_as_leader(
            build_batch(2, ts=BASE_TS + i, value_size=100), leader_epoch=0, now_ms=NOW
        )
    start = manager._next_retention_ms
    manager.tick(start - 1)
    assert manager.get_log("t", 0).log_start_offset == 0
    manager.tick(start)
    log = manager.get_log("t", 0)
    assert len(log.segments) == 1 and log.log_start_offset == 6
    manager.checkpoint()
    assert (tmp_path / "data" / "log-start-offset-checkpoint").read_text() == "0\n1\nt 0 6\n"


def test_background_thread_stops_on_close(open_manager: Open) -> None:
    manager = open_manager()
    manager.start_background(interval_s=0.01)
    manager.close()
    assert manager._thread is not None and not manager._thread.is_alive()
