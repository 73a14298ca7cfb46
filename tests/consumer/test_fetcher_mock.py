"""The fetcher under injected Fetch and ListOffsets errors from librdkafka's mock cluster,
judged against Kafka's Fetcher/AbstractFetch and OffsetFetcher (no group: manual assignment).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from samsa.consumer import KafkaConsumer, NoOffsetForPartitionError, TopicPartition
from samsa.errors import KafkaTimeoutError, TopicAuthorizationFailedError
from tests.support.mock_cluster import MockCluster

TOPIC = "fetch"
PER_PARTITION = 30
FETCH = 1
LIST_OFFSETS = 2
NOT_LEADER_OR_FOLLOWER = 6
TOPIC_AUTHORIZATION_FAILED = 29
TRANSPORT = -195  # librdkafka's mock drops the connection instead of answering

TP0 = TopicPartition(TOPIC, 0)
TP1 = TopicPartition(TOPIC, 1)
MAX_POLLS = 200


@pytest.fixture(scope="module")
def cluster() -> Iterator[MockCluster]:
    with MockCluster(2, topics={TOPIC: 2}) as mc:
        p = Producer({"bootstrap.servers": mc.bootstrap_servers, "linger.ms": 50})
        for i in range(2 * PER_PARTITION):
            p.produce(TOPIC, value=b"%d" % i, partition=i % 2, timestamp=1_700_000_000_000 + i)
        assert p.flush(30) == 0
        yield mc


@pytest.fixture
def mock(cluster: MockCluster) -> Iterator[MockCluster]:
    yield cluster
    for key in (FETCH, LIST_OFFSETS):
        cluster.clear_request_errors(key)


def consumer(mc: MockCluster, **extra: Any) -> KafkaConsumer:
    return KafkaConsumer({"bootstrap.servers": mc.bootstrap_servers, "auto.offset.reset": "earliest",
                          "retry.backoff.ms": 20, "fetch.max.wait.ms": 50, "reconnect.backoff.ms": 20,
                          **{k.replace("_", "."): v for k, v in extra.items()}})


def consume(c: KafkaConsumer, n: int) -> list[tuple[int, int]]:
    got: list[tuple[int, int]] = []
    for _ in range(MAX_POLLS):
        got += [(r.partition, r.offset) for r in c.poll(0.05)]
        if len(got) >= n:
            break
    return got


def everything() -> list[tuple[int, int]]:
    return [(p, o) for p in (0, 1) for o in range(PER_PARTITION)]


def test_leadership_errors_refresh_metadata_and_fetching_goes_on(mock: MockCluster) -> None:
    # AbstractFetch.handleInitializeErrors: NOT_LEADER_OR_FOLLOWER (and the other leadership
    # errors) request a metadata update; the partition is fetched again from the same position.
    mock.partition_push_request_errors(TOPIC, 0, FETCH, [NOT_LEADER_OR_FOLLOWER] * 2)
    with consumer(mock) as c:
        c.assign([TP0, TP1])
        got = consume(c, 2 * PER_PARTITION)
    assert sorted(got) == everything()


def test_a_partition_error_is_raised_by_poll_and_the_partition_is_fetched_again(mock: MockCluster) -> None:
    # Kafka's FetchCollector: TOPIC_AUTHORIZATION_FAILED is thrown to the application
    # (TopicAuthorizationException); nothing is skipped, a later poll fetches the same offsets.
    mock.partition_push_request_errors(TOPIC, 1, FETCH, [TOPIC_AUTHORIZATION_FAILED])
    with consumer(mock) as c:
        c.assign([TP1])
        with pytest.raises(TopicAuthorizationFailedError) as info:
            consume(c, PER_PARTITION)
        assert f"{TOPIC}-1" in str(info.value)
        got = consume(c, PER_PARTITION)
    assert got == [(1, o) for o in range(PER_PARTITION)]


def test_a_whole_fetch_error_is_retried(mock: MockCluster) -> None:
    mock.push_request_errors(FETCH, [NOT_LEADER_OR_FOLLOWER])
    with consumer(mock) as c:
        c.assign([TP0])
        got = consume(c, PER_PARTITION)
    assert got == [(0, o) for o in range(PER_PARTITION)]


def test_paused_partition_keeps_its_buffered_records_for_resume(mock: MockCluster) -> None:
    # Java's FetchCollector keeps a paused partition's completed fetch (it is not fetched
    # again): after resume() its records come from where the position stood.
    with consumer(mock, max_poll_records=5) as c:
        c.assign([TP0, TP1])
        first = consume(c, 1)
        c.pause([TP0, TP1])
        assert c.poll(0.1) == {} or not list(c.poll(0.1))
        c.resume([TP0, TP1])
        rest = consume(c, 2 * PER_PARTITION - len(first))
    assert sorted(first + rest) == everything()


def test_seek_drops_buffered_records_of_the_partition(mock: MockCluster) -> None:
    # Records fetched for the old position are not handed out after a seek (Java's
    # FetchCollector drops a completed fetch whose offset no longer matches the position).
    with consumer(mock, max_poll_records=3) as c:
        c.assign([TP0])
        first = consume(c, 3)
        c.seek(TP0, 20)
        rest = consume(c, PER_PARTITION - 20)
    assert first == [(0, 0), (0, 1), (0, 2)]
    assert rest == [(0, o) for o in range(20, PER_PARTITION)]


def test_reset_retries_list_offsets_errors(mock: MockCluster) -> None:
    # OffsetFetcher.resetPositionsIfNeeded: a failed ListOffsets for a reset is retried after
    # retry.backoff.ms (with a metadata update for leadership errors).
    mock.start_request_tracking()
    mock.push_request_errors(LIST_OFFSETS, [TRANSPORT, NOT_LEADER_OR_FOLLOWER, TOPIC_AUTHORIZATION_FAILED])
    with consumer(mock) as c:
        c.assign([TP0])
        got = consume(c, PER_PARTITION)
        list_offsets = mock.requests(LIST_OFFSETS)
    assert got == [(0, o) for o in range(PER_PARTITION)]
    assert len(list_offsets) == 4


def test_reset_none_without_a_position_raises(mock: MockCluster) -> None:
    with consumer(mock, auto_offset_reset="none") as c:
        c.assign([TP0])
        with pytest.raises(NoOffsetForPartitionError) as info:
            c.poll(1.0)
        assert f"{TOPIC}-0" in str(info.value)


def test_offset_lookups_retry_leadership_errors_and_raise_others(mock: MockCluster) -> None:
    with consumer(mock) as c:
        mock.push_request_errors(LIST_OFFSETS, [TRANSPORT, NOT_LEADER_OR_FOLLOWER])
        assert c.end_offsets([TP0, TP1], timeout=10) == {TP0: PER_PARTITION, TP1: PER_PARTITION}
        assert c.beginning_offsets([TP0], timeout=10) == {TP0: 0}
        mock.push_request_errors(LIST_OFFSETS, [TOPIC_AUTHORIZATION_FAILED])
        with pytest.raises(TopicAuthorizationFailedError):
            c.end_offsets([TP1], timeout=10)


def test_offset_lookup_for_a_topic_not_yet_in_metadata_waits_for_it(mock: MockCluster) -> None:
    mock.create_topic("fetch-later", 1)
    with consumer(mock) as c:
        later = TopicPartition("fetch-later", 0)
        assert c.end_offsets([later], timeout=10) == {later: 0}


def test_offset_lookup_times_out_naming_the_partitions(mock: MockCluster) -> None:
    mock.push_request_errors(LIST_OFFSETS, [NOT_LEADER_OR_FOLLOWER] * 10_000)
    with consumer(mock) as c, pytest.raises(KafkaTimeoutError) as info:
        c.end_offsets([TP0], timeout=0.5)
    assert f"{TOPIC}-0" in str(info.value)
