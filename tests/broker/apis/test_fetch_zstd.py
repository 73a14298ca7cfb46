"""Fetch below v10 never hands out zstd batches (KIP-110; samsa/broker/apis/fetch_zstd.py)."""

from __future__ import annotations

from typing import Any

import pytest
from handmade_batches import handmade_batch

from samsa.protocol import FetchRequest
from samsa.records import Compression
from samsa.records.memory_records import iter_batches

T = 1_700_000_000_000


def fetch(client: Any, topic: str, offset: int, version: int) -> Any:
    request = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                           topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                               FetchRequest.FetchPartition(partition=0, fetch_offset=offset,
                                                           partition_max_bytes=1 << 20)])])
    return client.call(request, version).responses[0].partitions[0]


def values(records: Any) -> list[bytes | None]:
    return [r.value for b in iter_batches(records) for r in b]


@pytest.fixture
def mixed(log_manager: Any) -> Any:
    """Offsets 0-1 uncompressed, 2-3 zstd, 4 gzip."""
    log_manager.create_topic("mixed", 1)
    log = log_manager.get_log("mixed", 0)
    for codec, timestamps, names in [(Compression.NONE, [T, T], [b"a", b"b"]),
                                     (Compression.ZSTD, [T, T], [b"c", b"d"]),
                                     (Compression.GZIP, [T], [b"e"])]:
        log.append_as_leader(handmade_batch(timestamps, values=names, codec=codec),
                             leader_epoch=0)
    return log


@pytest.mark.parametrize("version", [4, 9])
def test_old_fetch_stops_before_the_first_zstd_batch(client: Any, mixed: Any,
                                                     version: int) -> None:
    first = fetch(client, "mixed", 0, version)
    assert first.error_code == 0 and values(first.records) == [b"a", b"b"]
    at_zstd = fetch(client, "mixed", 2, version)
    assert at_zstd.error_code == 76 and not at_zstd.records
    assert values(fetch(client, "mixed", 4, version).records) == [b"e"]


@pytest.mark.parametrize("version", [10, 12])
def test_fetch_v10_gets_zstd(client: Any, mixed: Any, version: int) -> None:
    part = fetch(client, "mixed", 0, version)
    assert part.error_code == 0 and values(part.records) == [b"a", b"b", b"c", b"d", b"e"]


def test_a_zstd_topic_refuses_old_fetches_as_kafka_3_9_does(client: Any,
                                                            log_manager: Any) -> None:
    log_manager.create_topic("z", 1, {"compression.type": "zstd"})
    log_manager.get_log("z", 0).append_as_leader(handmade_batch([T]), leader_epoch=0)
    assert fetch(client, "z", 0, 9).error_code == 76
    assert values(fetch(client, "z", 0, 10).records) == [b"v0"]


def test_a_slice_whose_file_was_cut_under_it_is_left_as_it_is(mixed: Any) -> None:
    import os

    from samsa.broker.apis.fetch_zstd import without_zstd

    records = mixed.read(0, 1 << 20).records
    first = next(iter_batches(records.read()))
    os.truncate(mixed.segments[0].log_path, first.size + 3)
    # No whole header after the first batch: nothing to cut (sending it fails loudly later).
    assert without_zstd(records) is records
