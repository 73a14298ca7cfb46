from __future__ import annotations

import json
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from samsa.broker.log import LogManager, topic_id_from_str, topic_id_to_str
from samsa.broker.log import manager as manager_module
from samsa.errors import (
    ConfigError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    KafkaStorageError,
    OffsetOutOfRangeError,
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


def test_topics_with_the_longest_names_are_deleted_and_set_aside(open_manager: Open,
                                                                  tmp_path: Path) -> None:
    # A topic name may have 249 characters; "-delete" and "-stray" directory names cut it so
    # they stay within 255 bytes (Kafka's LocalLog.logDirNameWithSuffixCappedLength).
    longest, other = "d" * 249, "s" * 249
    manager = open_manager()
    manager.create_topic(longest, 11)
    append(manager, topic=longest)
    manager.delete_topic(longest)
    data = tmp_path / "data"
    assert not any(p.name.startswith("ddd") for p in data.iterdir())
    manager.close()
    (data / f"{other}-10").mkdir()  # no topic owns it
    open_manager()
    strays = [p.name for p in data.iterdir() if p.name.endswith("-stray")]
    assert len(strays) == 1 and strays[0].startswith("sss") and len(strays[0]) == 255


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
    manager.close()  # index entries reach the file when it is trimmed, flushed or closed
    good_index = index.read_bytes()
    assert good_index
    index.write_bytes(good_index[:-3])  # torn entry
    timeindex = index.with_suffix(".timeindex")
    timeindex.write_bytes(b"\x7f" * 24)  # entries pointing past the end
    again = open_manager(config)
    assert offsets(again) == expected
    assert offsets(again, start=25)[0] == 24
    again.close()
    assert index.read_bytes() == good_index
    index.unlink()
    third = open_manager(config)
    assert offsets(third, start=31)[0] == 30
    third.close()
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


def test_loading_sets_aside_partitions_no_topic_owns(open_manager: Open, tmp_path: Path) -> None:
    # What create/delete interrupted by a crash leave (Kafka's LogManager loads only the logs of
    # known topics and renames stray ones; "-delete" dirs are finished off).
    manager = open_manager()
    manager.create_topic("t", 1)
    append(manager, 2)
    manager.close()
    data = tmp_path / "data"
    (data / "0file").write_text("not a log dir")
    (data / "1x.abc-delete").mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep").write_text("not the broker's")
    (data / "1y-delete").symlink_to(elsewhere)  # rmtree refuses symlinks: left alone
    (data / "2notpartition").mkdir()
    for name in ("t-1", "t-5", "u-0"):
        (data / name).mkdir()
    loaded = open_manager()
    names = sorted(p.name for p in data.iterdir())
    assert "1x.abc-delete" not in names
    assert {"0file", "2notpartition", "t-0"} <= set(names)
    strays = sorted(n.split(".", 1)[0] for n in names if n.endswith("-stray"))
    assert strays == ["t-1", "t-5", "u-0"]
    assert offsets(loaded) == [0, 1]
    assert (elsewhere / "keep").exists()


def test_a_lost_recovery_point_checkpoint_means_recovering_every_segment(
    open_manager: Open, tmp_path: Path
) -> None:
    manager = open_manager({"log.segment.bytes": 100})
    manager.create_topic("t", 1)
    append(manager, 1)  # offset 0 in segment 0
    append(manager, 1)  # offset 1 in segment 1
    log = manager.get_log("t", 0)
    assert [s.base_offset for s in log.segments] == [0, 1]
    image = crash_image(tmp_path)
    (image / "recovery-point-offset-checkpoint").unlink(missing_ok=True)
    path = image / "t-0" / log.segments[0].log_path.name
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x40  # a record byte of the batch at offset 0
    path.write_bytes(data)
    recovered = open_manager(data_dir=image)
    assert recovered.get_log("t", 0).log_end_offset == 0  # nothing after the damage is kept


def test_partition_metadata_is_rewritten_and_logs_know_their_name(open_manager: Open, tmp_path: Path) -> None:
    manager = open_manager()
    manager.create_topic("t", 2)
    manager.close()
    metadata = tmp_path / "data" / "t-1" / "partition.metadata"
    good = metadata.read_text()
    metadata.write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n")
    loaded = open_manager()
    assert metadata.read_text() == good
    with pytest.raises(OffsetOutOfRangeError, match="of t-1 is outside"):
        loaded.get_log("t", 1).read(5, 100)


def test_loaded_logs_keep_the_managers_clock(tmp_path: Path) -> None:
    config = {"log.flush.interval.ms": 5000}
    first = LogManager(tmp_path / "data", config, now_ms=NOW)
    first.create_topic("t", 1)
    first.close()
    manager = LogManager(tmp_path / "data", config, now_ms=NOW)
    try:
        log = manager.get_log("t", 0)
        log.append_as_leader(build_batch(2), leader_epoch=0, now_ms=NOW)
        log.maintain(NOW + 4999)
        assert log.recovery_point == 0
        log.maintain(NOW + 5000)  # flush.ms counts from the load
        assert log.recovery_point == 2
    finally:
        manager.close()


def test_topics_file_version_and_damage(open_manager: Open, tmp_path: Path) -> None:
    manager = open_manager()
    manager.create_topic("t", 1)
    manager.close()
    topics = tmp_path / "data" / "topics.json"
    assert json.loads(topics.read_text())["version"] == 1
    topics.write_text('{"version": 1}')  # no topics key: no topics
    assert open_manager().topic("t") is None
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "topics.json").write_text("{not json")
    with pytest.raises(KafkaStorageError, match="topics.json is not valid JSON .*restore it from a backup"):
        open_manager(data_dir=broken)


def test_tick_runs_each_job_at_its_interval(tmp_path: Path) -> None:
    config = {
        "producer.id.expiration.ms": 1000, "producer.id.expiration.check.interval.ms": 1000,
        "log.retention.check.interval.ms": 1000, "log.retention.ms": 1500,
        "log.flush.offset.checkpoint.interval.ms": 1000, "log.flush.interval.ms": 100,
        "log.segment.bytes": 300,
    }
    starts = tmp_path / "data" / "log-start-offset-checkpoint"
    manager = LogManager(tmp_path / "data", config, now_ms=NOW)
    try:
        manager.create_topic("t", 1)
        log = manager.get_log("t", 0)
        for seq in range(0, 6, 2):  # three segments of one idempotent producer's batches
            ts = NOW - 1000 if seq == 0 else NOW  # the first expires by NOW + 501
            log.append_as_leader(build_batch(2, ts=ts, pid=7, epoch=0, seq=seq, value_size=100),
                                 leader_epoch=0, now_ms=NOW)
        assert len(log.segments) == 3
        log.delete_records_before(1)
        manager.tick(NOW + 999)  # no job is due before NOW + 1000
        assert len(log.segments) == 3 and list(log.producer_state.producers) == [7]
        assert starts.read_text() == "0\n0\n"  # as written at load, before the topic existed
        manager.tick(NOW + 1000)  # every job is due
        assert len(log.segments) == 2 and log.producer_state.producers == {}
        assert starts.read_text() == "0\n1\nt 0 2\n"
        log.append_as_leader(build_batch(1, ts=NOW, pid=7, epoch=0, seq=40), leader_epoch=0, now_ms=NOW)
        manager.tick(NOW + 1999)  # expired producer and segments, but no job is due before NOW + 2000
        assert list(log.producer_state.producers) == [7] and len(log.segments) == 3
        manager.tick(NOW + 2000)
        assert log.producer_state.producers == {} and log.log_start_offset == 6
        assert starts.read_text() == "0\n1\nt 0 6\n"
        log.delete_records_before(7)
        manager.tick(NOW + 2999)
        assert starts.read_text() == "0\n1\nt 0 6\n"  # the next checkpoint is at NOW + 3000
        manager.tick()  # the wall clock
    finally:
        manager.close()


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda m: m.create_topic("zero", 0), InvalidPartitionsError, "'zero'.*at least 1, got 0"),
        (lambda m: m.create_topic("t", 1), TopicAlreadyExistsError, "topic 't' already exists"),
        (lambda m: m.create_topic("t.x", 1), InvalidTopicError,
         r"'t\.x' collides with existing topic 't_x' .*interchangeable in metric names\)$"),
        (lambda m: m.delete_topic("nope"), UnknownTopicOrPartitionError, "topic 'nope' does not exist"),
        (lambda m: m.add_partitions("nope", 3), UnknownTopicOrPartitionError, "topic 'nope' does not exist"),
        (lambda m: m.add_partitions("t", 1), InvalidPartitionsError,
         "topic 't' has 2 partitions; the new count 1 must be larger"),
        (lambda m: m.set_topic_configs("nope", {}), UnknownTopicOrPartitionError, "topic 'nope' does not exist"),
        (lambda m: m.get_log("t", 2), UnknownTopicOrPartitionError, "t-2 does not exist on this broker"),
    ],
    ids=["zero-partitions", "exists", "collides", "delete-unknown", "grow-unknown", "grow-smaller",
         "configs-unknown", "log-unknown"],
)
def test_topic_errors_say_what_is_wrong(open_manager: Open, call: Callable[[LogManager], object],
                                        error: type[Exception], match: str) -> None:
    manager = open_manager()
    manager.create_topic("t", 2)
    manager.create_topic("t_x", 1)
    with pytest.raises(error, match=match):
        call(manager)


def test_partition_count_default_and_growth(open_manager: Open) -> None:
    manager = open_manager({"num.partitions": 3})
    assert manager.create_topic("a", -1).partitions == 3  # -1: the broker's num.partitions
    assert manager.create_topic("b", 1).partitions == 1
    manager.create_topic("c", 1, {"retention.ms": "1000"})
    first = manager.get_log("c", 0)
    manager.add_partitions("c", 3)
    info = manager.topic("c")
    assert info is not None and (info.name, info.partitions, info.configs) == ("c", 3, {"retention.ms": "1000"})
    assert manager.get_log("c", 0) is first  # existing partitions stay open as they were
    assert [manager.get_log("c", p).partition for p in (1, 2)] == [1, 2]
    manager.set_topic_configs("c", {"retention.ms": "2000"})
    assert manager.topic("c").name == "c"


def test_deleting_a_topic_closes_its_logs(open_manager: Open) -> None:
    manager = open_manager()
    manager.create_topic("t", 1)
    log = manager.get_log("t", 0)
    manager.delete_topic("t")
    with pytest.raises(KafkaStorageError, match="closed"):
        log.append_as_leader(build_batch(1), leader_epoch=0, now_ms=NOW)


def test_new_topic_ids_avoid_the_reserved_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    # Kafka's Uuid.randomUuid: never ZERO_UUID (0) nor METADATA_TOPIC_ID (1), nor an id whose
    # text starts with "-" (it would read as a command-line option).
    dash = next(u for u in (uuid.UUID(int=n << 122) for n in range(64)) if topic_id_to_str(u).startswith("-"))
    candidates = iter([uuid.UUID(int=0), uuid.UUID(int=1), dash, uuid.UUID(int=2)])
    monkeypatch.setattr(manager_module.uuid, "uuid4", lambda: next(candidates))
    assert manager_module._new_topic_id() == uuid.UUID(int=2)


def test_topic_names_at_the_length_limit_and_errors(open_manager: Open) -> None:
    manager = open_manager()
    assert manager.create_topic("x" * 249, 1).partitions == 1
    with pytest.raises(InvalidTopicError, match="topic name is 250 characters; the maximum is 249"):
        manager.create_topic("y" * 250, 1)
    with pytest.raises(InvalidTopicError, match=r"topic name '\.\.' is not allowed"):
        manager.create_topic("..", 1)
    with pytest.raises(InvalidTopicError, match="'a b' may contain only ASCII letters, digits"):
        manager.create_topic("a b", 1)
    assert manager.topic_by_id(uuid.uuid4()) is None


def test_data_dir_is_created_locked_and_marked_clean(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        manager = LogManager(tmp_path / "new" / "data")
    finally:
        os.umask(old)
    data = tmp_path / "new" / "data"
    assert (data / ".lock").stat().st_mode & 0o777 == 0o644
    with pytest.raises(KafkaStorageError, match="is held\\); stop that broker or use another directory$"):
        LogManager(data)
    manager.close()
    assert json.loads((data / ".kafka_cleanshutdown").read_text()) == {"version": 0}
    with pytest.raises(KafkaStorageError, match="the log manager of .* is closed"):
        manager.create_topic("t", 1)


def test_background_thread_ticks(open_manager: Open, monkeypatch: pytest.MonkeyPatch) -> None:
    manager = open_manager()
    ticked = threading.Event()
    monkeypatch.setattr(manager, "tick", lambda now_ms=None: ticked.set())
    manager.start_background(0.01)
    assert ticked.wait(10)
    thread = next(t for t in threading.enumerate() if t.name == "samsa-log-manager")
    assert thread.daemon


def test_the_manager_schedules_from_the_wall_clock_by_default(open_manager: Open) -> None:
    before = time.time_ns() // 1_000_000
    manager = open_manager({"log.flush.offset.checkpoint.interval.ms": 60_000})
    after = time.time_ns() // 1_000_000
    assert before + 60_000 <= manager._next_checkpoint_ms <= after + 60_000
    assert type(manager._next_checkpoint_ms) is int


def test_reconfigure_applies_broker_settings_to_every_log_that_does_not_override_them(open_manager: Open) -> None:
    # Kafka's DynamicLogConfig: a broker-level change reaches every open log at once, except
    # where the topic sets its own value; a bad value changes nothing.
    manager = open_manager()
    manager.create_topic("plain", 2)
    manager.create_topic("own", 1, {"retention.ms": "1000"})
    manager.reconfigure({"log.retention.ms": "5000", "producer.id.expiration.ms": "7000"})
    assert manager.config["log.retention.ms"] == 5000
    for partition in (0, 1):
        log = manager.get_log("plain", partition)
        assert (log.config.retention_ms, log.producer_state.expiration_ms) == (5000, 7000)
    assert manager.get_log("own", 0).config.retention_ms == 1000
    with pytest.raises(ConfigError, match="log.retention.ms"):
        manager.reconfigure({"log.retention.ms": "soon"})
    assert manager.get_log("plain", 0).config.retention_ms == 5000
    manager.close()
    with pytest.raises(KafkaStorageError, match="is closed"):
        manager.reconfigure({"log.retention.ms": "1"})


# -- capacity and failed creations ---------------------------------------------------------------


def test_partitions_past_max_broker_partitions_are_refused_before_any_work(
        open_manager: Open, tmp_path: Path) -> None:
    from samsa.errors import PolicyViolationError

    manager = open_manager({"max.broker.partitions": 10})
    manager.create_topic("a", 6)
    with pytest.raises(PolicyViolationError, match="max.broker.partitions=10") as raised:
        manager.create_topic("b", 5)
    assert "would bring this broker to 11" in str(raised.value)
    with pytest.raises(PolicyViolationError, match="max.broker.partitions=10"):
        manager.create_topic("b", 5, validate_only=True)
    with pytest.raises(PolicyViolationError, match="max.broker.partitions=10"):
        manager.add_partitions("a", 11)
    assert not (tmp_path / "data" / "b-0").exists() and not (tmp_path / "data" / "a-6").exists()
    manager.create_topic("b", 4)  # exactly at the limit
    assert sum(t.partitions for t in manager.topics().values()) == 10


def _enospc_on_the_nth_partition(monkeypatch: pytest.MonkeyPatch, n: int) -> list[int]:
    """partition.metadata writes fail with ENOSPC from the ``n``-th on; returns the call count."""
    import errno

    calls = [0]
    real = manager_module.atomic_write

    def write(path: Path, data: bytes, *, sync: bool = True) -> None:
        if path.name == "partition.metadata":
            calls[0] += 1
            if calls[0] >= n:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real(path, data, sync=sync)

    monkeypatch.setattr(manager_module, "atomic_write", write)
    return calls


def test_a_creation_failing_half_way_removes_what_it_made(
        open_manager: Open, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    manager = open_manager()
    manager.create_topic("kept", 2)
    descriptors = len(os.listdir("/proc/self/fd"))
    with monkeypatch.context() as patch:
        _enospc_on_the_nth_partition(patch, 4)
        with pytest.raises(KafkaStorageError) as raised:
            manager.create_topic("half", 8)
        message = str(raised.value)
        assert "half-3" in message and "partition.metadata" in message
        assert "No space left on device" in message
        with pytest.raises(KafkaStorageError):
            manager.add_partitions("kept", 6)
    assert manager.topic("half") is None and manager.topic("kept").partitions == 2
    assert sorted(p.name for p in data.iterdir() if p.is_dir()) == ["kept-0", "kept-1"]
    assert len(os.listdir("/proc/self/fd")) == descriptors
    assert json.loads((data / "topics.json").read_text())["topics"].keys() == {"kept"}
    with pytest.raises(UnknownTopicOrPartitionError):
        manager.get_log("half", 0)
    manager.close()
    again = open_manager()
    assert sorted(again.topics()) == ["kept"]
    assert sorted(p.name for p in data.iterdir() if p.is_dir()) == ["kept-0", "kept-1"]
    again.create_topic("half", 8)  # space is back
    again.add_partitions("kept", 6)
    assert again.topic("half").partitions == 8 and again.topic("kept").partitions == 6


def test_a_registry_that_cannot_be_written_undoes_the_creation(
        open_manager: Open, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    manager = open_manager()
    real = manager_module.atomic_write

    def write(path: Path, data: bytes, *, sync: bool = True) -> None:
        if path.name == "topics.json":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real(path, data, sync=sync)

    with monkeypatch.context() as patch:
        patch.setattr(manager_module, "atomic_write", write)
        with pytest.raises(KafkaStorageError, match="topics.json"):
            manager.create_topic("t", 3)
    assert manager.topic("t") is None
    assert not [p for p in (tmp_path / "data").iterdir() if p.name.startswith("t-")]
