"""Metadata and Cluster: updates from responses, errors per topic, expiry, waiting."""

from __future__ import annotations

import threading

import pytest

import samsa.protocol as p
from samsa.errors import (
    IllegalStateError,
    InvalidTopicError,
    KafkaTimeoutError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from samsa.net.bootstrap import parse_bootstrap_servers
from samsa.net.cluster import Cluster, Node, TopicPartition
from samsa.net.metadata import Metadata

R = p.MetadataResponse


def response(brokers=(1, 2, 3), topics=None, controller=1, **kw):
    """topics: name -> list of (leader, epoch) per partition, or an int error code."""
    ts = []
    for name, spec in (topics or {}).items():
        if isinstance(spec, int):
            ts.append(R.MetadataResponseTopic(error_code=spec, name=name, partitions=[]))
            continue
        parts = [R.MetadataResponsePartition(
            error_code=0, partition_index=i, leader_id=leader, leader_epoch=epoch,
            replica_nodes=[leader], isr_nodes=[leader]) for i, (leader, epoch) in enumerate(spec)]
        ts.append(R.MetadataResponseTopic(error_code=0, name=name, partitions=parts))
    return R(brokers=[R.MetadataResponseBroker(node_id=b, host="127.0.0.1", port=9000 + b)
                      for b in brokers], cluster_id="c1", controller_id=controller, topics=ts,
             **kw)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def md(clock) -> Metadata:
    m = Metadata(retry_backoff_ms=100, retry_backoff_max_ms=1000, metadata_max_age_ms=60_000,
                 metadata_max_idle_ms=10_000, clock=clock)
    m.bootstrap([("127.0.0.1", 9092), ("127.0.0.1", 9093)])
    return m


def apply(md: Metadata, resp, now: float) -> None:
    plan = md.new_request_plan(now)
    md.update(resp, plan, now)


def test_bootstrap_nodes_have_negative_ids(md):
    c = md.fetch()
    assert c.is_bootstrap
    assert [n.id for n in c.nodes] == [-1, -2]
    assert md.update_requested()


def test_update_builds_cluster_with_unknown_leader_as_none(md, clock):
    md.add("t", clock.now)
    # Broker 3 is down (absent from the broker list) but still named leader of partition 2.
    apply(md, response(brokers=(1, 2), topics={"t": [(1, 0), (2, 0), (3, 0)]}), clock.now)
    c = md.fetch()
    assert not c.is_bootstrap and c.cluster_id == "c1" and c.controller == c.node_by_id(1)
    assert [n.id for n in c.nodes] == [1, 2]
    assert c.leader_for(TopicPartition("t", 0)) == Node(1, "127.0.0.1", 9001)
    assert c.leader_for(TopicPartition("t", 2)) is None
    assert [pi.partition for pi in c.available_partitions_for_topic("t")] == [0, 1]
    assert len(c.partitions_for_topic("t")) == 3
    assert [pi.partition for pi in c.partitions_for_node(2)] == [1]
    # A leaderless partition asks for another update, after the refresh backoff.
    assert md.update_requested()
    assert 0 < md.time_to_next_update(clock.now) <= 240


def test_versions_and_await_update_from_another_thread(md, clock):
    v = md.request_update()
    done = threading.Event()

    def waiter() -> None:
        md.await_update(v, 10_000)
        done.set()

    t = threading.Thread(target=waiter)
    t.start()
    apply(md, response(), clock.now)
    t.join()
    assert done.is_set()
    assert md.update_version == v + 1


def test_await_update_times_out_with_a_clear_error(md):
    v = md.request_update()
    with pytest.raises(KafkaTimeoutError, match="metadata update"):
        md.await_update(v, 1)


def test_await_update_fails_once_closed(md):
    v = md.request_update()
    threading.Timer(0.05, md.close).start()
    with pytest.raises(IllegalStateError):
        md.await_update(v, 60_000)


def test_topic_errors_unknown_retries_invalid_and_unauthorized_are_fatal(md, clock):
    for t in ("unknown", "bad name", "secret", "ok"):
        md.add(t, clock.now)
    apply(md, response(topics={"unknown": 3, "bad name": 17, "secret": 29, "ok": [(1, 0)]}),
          clock.now)
    assert isinstance(md.topic_error("unknown"), UnknownTopicOrPartitionError)
    md.maybe_throw_for_topic("unknown")  # retriable: the producer keeps waiting
    md.maybe_throw_for_topic("ok")
    with pytest.raises(InvalidTopicError):
        md.maybe_throw_for_topic("bad name")
    with pytest.raises(TopicAuthorizationFailedError):
        md.maybe_throw_for_topic("secret")
    c = md.fetch()
    assert c.invalid_topics == {"bad name"} and c.unauthorized_topics == {"secret"}
    assert md.update_requested()  # the unknown topic is retried
    # Once the topic exists its error is gone.
    clock.now += 1000
    apply(md, response(topics={"unknown": [(2, 0)], "ok": [(1, 0)]}), clock.now)
    assert md.topic_error("unknown") is None


def test_new_topics_get_partial_requests_and_partial_updates_merge(md, clock):
    md.add("a", clock.now)
    apply(md, response(topics={"a": [(1, 0)]}), clock.now)
    md.add("b", clock.now)
    plan = md.new_request_plan(clock.now)
    assert plan.is_partial and plan.topics == ["b"]
    md.update(response(topics={"b": [(2, 0), (3, 0)]}), plan, clock.now)
    c = md.fetch()
    assert c.partition_count_for_topic("a") == 1 and c.partition_count_for_topic("b") == 2
    assert not md.update_requested()
    full = md.new_request_plan(clock.now)
    assert not full.is_partial and sorted(full.topics) == ["a", "b"]


def test_topics_unused_for_max_idle_expire(md, clock):
    md.add("old", clock.now)
    md.add("fresh", clock.now)
    apply(md, response(topics={"old": [(1, 0)], "fresh": [(1, 0)]}), clock.now)
    clock.now += 6000
    md.add("fresh", clock.now)
    clock.now += 6000  # "old" unused for 12 s > metadata.max.idle.ms = 10 s
    plan = md.new_request_plan(clock.now)
    assert plan.topics == ["fresh"]
    md.update(response(topics={"old": [(1, 0)], "fresh": [(1, 0)]}), plan, clock.now)
    assert md.topics() == ["fresh"]
    assert not md.fetch().has_topic("old")


def test_periodic_refresh_after_max_age(md, clock):
    apply(md, response(), clock.now)
    assert not md.update_requested()
    assert md.time_to_next_update(clock.now) == 60_000
    clock.now += 60_000
    assert md.time_to_next_update(clock.now) == 0


def test_failed_updates_back_off_exponentially(md, clock):
    md.failed_update(clock.now)
    first = md.refresh_backoff_ms()
    md.failed_update(clock.now)
    md.failed_update(clock.now)
    third = md.refresh_backoff_ms()
    assert 160 <= first <= 240 and 640 <= third <= 1000
    assert md.time_to_next_update(clock.now) == pytest.approx(third)


def test_a_new_topic_is_asked_for_at_once_a_known_one_after_the_backoff(md, clock):
    # Java's Metadata.requestUpdateForNewTopics: a topic just added skips the refresh backoff.
    apply(md, response(topics={}), clock.now)
    md.request_update()
    assert md.time_to_next_update(clock.now) == pytest.approx(md.refresh_backoff_ms())
    md.add("t", clock.now)
    assert md.time_to_next_update(clock.now) == 0
    apply(md, response(topics={"t": [(1, 0)]}), clock.now)
    md.request_update_for_topic("t")  # no longer new: waits out the backoff again
    assert md.time_to_next_update(clock.now) == pytest.approx(md.refresh_backoff_ms())
    md.failed_update(clock.now)
    md.add("u", clock.now)
    md.failed_update(clock.now)  # "u" still unanswered, so asking for it again is immediate
    assert md.request_update_for_topic("u") == md.update_version
    assert md.time_to_next_update(clock.now) == 0


def test_stale_leader_epoch_keeps_newer_state(md, clock):
    md.add("t", clock.now)
    apply(md, response(topics={"t": [(2, 5)]}), clock.now)
    apply(md, response(topics={"t": [(1, 4)]}), clock.now)  # an older view
    info = md.fetch().partition(TopicPartition("t", 0))
    assert info is not None and info.leader_epoch == 5 and info.leader.id == 2
    apply(md, response(topics={"t": [(3, 6)]}), clock.now)
    assert md.fetch().leader_for(TopicPartition("t", 0)).id == 3


def test_empty_cluster_and_bootstrap_helpers():
    assert Cluster.empty().nodes == ()
    assert parse_bootstrap_servers("a:1, b:2,[::1]:3,a:1") == [("a", 1), ("b", 2), ("::1", 3)]
    from samsa.errors import ConfigError
    for bad in ("", "nohost", "h:0", "h:x", "::1:9092"):
        with pytest.raises(ConfigError, match="bootstrap.servers"):
            parse_bootstrap_servers(bad)
