"""The topic's compression.type applied on append (LogValidator): a produced batch of another
codec is stored recompressed with the topic's codec, at its compression.<codec>.level, with the
same records, producer fields and flags; ``producer`` stores batches as produced."""

from __future__ import annotations

from pathlib import Path

import pytest

from samsa.broker.log import Log, LogConfig
from samsa.broker.log.up_conversion import up_convert
from samsa.errors import MessageTooLargeError
from samsa.records import Compression, RecordBatchBuilder, TimestampType, iter_batches
from samsa.records.legacy_builder import build_legacy_records

from .conftest import BASE_TS, build_batch

NOW = BASE_TS + 10_000
CODECS = {"uncompressed": Compression.NONE, "gzip": Compression.GZIP,
          "snappy": Compression.SNAPPY, "lz4": Compression.LZ4, "zstd": Compression.ZSTD}


def open_log(path: Path, **topic: str) -> Log:
    return Log(path / "t-0", LogConfig.from_configs(None, topic), topic="t", partition=0,
               now_ms=NOW)


def stored(log: Log) -> list:
    return list(iter_batches(log.active_segment.log_path.read_bytes(), check_crcs=True))


def records_of(batches: list) -> list[tuple[int, int, bytes | None, bytes | None, tuple]]:
    return [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers))
            for b in batches for r in b.records()]


def with_headers(compression: Compression, count: int = 50, **producer: object) -> bytes:
    builder = RecordBatchBuilder(compression=compression, batch_size_limit=1 << 30,
                                 **producer)  # type: ignore[arg-type]
    for i in range(count):
        key = None if i % 7 == 0 else b"key-%d" % i
        value = None if i % 11 == 0 else (b"value %d " % i) * 20
        headers = [("h", b"%d" % i)] if i % 3 == 0 else []
        assert builder.append(BASE_TS + i, key, value, headers) is not None
    return builder.build()


@pytest.mark.parametrize("source", list(CODECS.values()))
@pytest.mark.parametrize("topic_codec", [*CODECS, "producer"])
def test_stored_codec_is_the_topics(tmp_path: Path, source: Compression,
                                    topic_codec: str) -> None:
    log = open_log(tmp_path, **{"compression.type": topic_codec})
    reference = open_log(tmp_path / "ref")
    for _ in range(3):
        data = with_headers(source)
        log.append_as_leader(data, leader_epoch=4, now_ms=NOW)
        reference.append_as_leader(data, leader_epoch=4, now_ms=NOW)
    batches = stored(log)
    want = source if topic_codec == "producer" else CODECS[topic_codec]
    assert [b.compression for b in batches] == [want] * 3
    assert records_of(batches) == records_of(stored(reference))
    assert [(b.base_offset, b.last_offset, b.partition_leader_epoch, b.max_timestamp,
             b.base_timestamp) for b in batches] == \
        [(0, 49, 4, BASE_TS + 49, BASE_TS), (50, 99, 4, BASE_TS + 49, BASE_TS),
         (100, 149, 4, BASE_TS + 49, BASE_TS)]
    assert log.log_end_offset == 150
    # The log's reads and indexes see the new batches.
    assert log.offset_for_timestamp(BASE_TS + 49).offset == 49
    log.close()
    reopened = open_log(tmp_path, **{"compression.type": topic_codec})
    assert reopened.log_end_offset == 150
    reopened.close()
    reference.close()


def test_producer_keeps_the_produced_buffer(tmp_path: Path) -> None:
    log = open_log(tmp_path, **{"compression.type": "producer"})
    data = bytearray(build_batch(5, compression=Compression.LZ4))
    view = memoryview(data)
    buf, headers = log._validate_client_batches(view, False, NOW)
    assert buf is view and headers[0][0] == 0
    log.close()


def test_producer_fields_and_transactional_flag_kept(tmp_path: Path) -> None:
    log = open_log(tmp_path, **{"compression.type": "zstd"})
    first = build_batch(10, pid=7, epoch=3, seq=0, transactional=True,
                        compression=Compression.LZ4)
    result = log.append_as_leader(first, leader_epoch=0, now_ms=NOW)
    assert (result.base_offset, result.last_offset, result.duplicate) == (0, 9, False)
    (batch,) = stored(log)
    assert batch.compression == Compression.ZSTD
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence,
            batch.is_transactional) == (7, 3, 0, True)
    # A retry of the same batch is a duplicate: the producer state compares sequences.
    again = log.append_as_leader(first, leader_epoch=0, now_ms=NOW)
    assert (again.base_offset, again.last_offset, again.duplicate) == (0, 9, True)
    nxt = log.append_as_leader(build_batch(5, pid=7, epoch=3, seq=10, transactional=True),
                               leader_epoch=0, now_ms=NOW)
    assert (nxt.base_offset, nxt.last_offset) == (10, 14)
    assert log.has_open_transaction(7)
    log.append_control_marker(producer_id=7, producer_epoch=3, commit=True,
                              coordinator_epoch=0, leader_epoch=0, now_ms=NOW)
    batches = stored(log)
    # Control markers are written uncompressed, as Kafka's (not client batches).
    assert [b.compression for b in batches] == [Compression.ZSTD, Compression.ZSTD,
                                                 Compression.NONE]
    assert [r.value for r in batches[0].records()] == \
        [r.value for b in iter_batches(first) for r in b.records()]
    log.close()


def test_log_append_time_topic(tmp_path: Path) -> None:
    log = open_log(tmp_path, **{"compression.type": "gzip",
                                "message.timestamp.type": "LogAppendTime"})
    result = log.append_as_leader(build_batch(4), leader_epoch=0, now_ms=NOW)
    assert result.log_append_time_ms == NOW
    (batch,) = stored(log)
    assert batch.compression == Compression.GZIP
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in batch.records()] == [NOW] * 4
    log.close()


def test_zstd_level_shows_in_the_size(tmp_path: Path) -> None:
    def stored_size(level: str, name: str) -> int:
        log = open_log(tmp_path / name, **{"compression.type": "zstd",
                                           "compression.zstd.level": level})
        builder = RecordBatchBuilder(batch_size_limit=1 << 30)
        for i in range(2000):  # text-like values: levels differ
            builder.append(BASE_TS, b"%d" % i, b" ".join(b"word%d" % ((i * j) % 97)
                                                        for j in range(60)))
        data = builder.build()
        log.append_as_leader(data, leader_epoch=0, now_ms=NOW)
        (batch,) = stored(log)
        assert batch.compression == Compression.ZSTD
        size = batch.size
        log.close()
        return size

    low, high = stored_size("1", "one"), stored_size("19", "nineteen")
    assert high < low * 0.9, (low, high)


def test_gzip_level_from_the_broker_setting(tmp_path: Path) -> None:
    sizes = []
    for level in (1, 9):
        config = LogConfig.from_configs({"compression.type": "gzip",
                                         "compression.gzip.level": level})
        log = Log(tmp_path / f"l{level}" / "t-0", config, topic="t", partition=0, now_ms=NOW)
        builder = RecordBatchBuilder(batch_size_limit=1 << 30)
        for i in range(2000):
            builder.append(BASE_TS, b"%d" % i, b" ".join(b"w%d" % ((i * j) % 89)
                                                        for j in range(40)))
        log.append_as_leader(builder.build(), leader_epoch=0, now_ms=NOW)
        (batch,) = stored(log)
        sizes.append(batch.size)
        log.close()
    assert sizes[1] < sizes[0]


def test_recompressed_batch_above_max_message_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path, **{"compression.type": "uncompressed",
                                "max.message.bytes": "5000"})
    data = build_batch(200, value_size=200, compression=Compression.ZSTD)
    assert len(data) < 5000
    with pytest.raises(MessageTooLargeError, match="recompressed.*max.message.bytes=5000"):
        log.append_as_leader(data, leader_epoch=0, now_ms=NOW)
    assert log.log_end_offset == 0
    log.close()


def test_level_ranges_checked_on_topics() -> None:
    from samsa.broker.log.config import validate_topic_configs
    from samsa.errors import InvalidConfigError

    with pytest.raises(InvalidConfigError, match="compression.zstd.level.*22"):
        validate_topic_configs({"compression.zstd.level": "23"})
    with pytest.raises(InvalidConfigError, match="compression.gzip.level"):
        validate_topic_configs({"compression.gzip.level": "0"})
    assert validate_topic_configs({"compression.gzip.level": "-1",
                                   "compression.lz4.level": "17"}) == \
        {"compression.gzip.level": "-1", "compression.lz4.level": "17"}


def test_up_conversion_uses_the_level() -> None:
    legacy = build_legacy_records(1, Compression.NONE, [
        (i, NOW, b"%d" % i, b" ".join(b"w%d" % ((i * j) % 89) for j in range(40)))
        for i in range(500)])
    sizes = [len(up_convert(legacy, LogConfig.from_configs(None, {"compression.zstd.level": level}),
                            NOW, "zstd")) for level in ("1", "19")]
    assert sizes[1] < sizes[0] * 0.95, sizes
