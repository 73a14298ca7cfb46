"""Metadata: the client's versioned, thread-safe cache of cluster metadata.

The producer's flow, as Java's KafkaProducer.waitOnMetadata: ``send()`` on a caller thread adds its topic (``add``), asks for an
update (``request_update_for_topic``) and blocks in ``await_update(version, max_block_ms)``; the
Sender thread's NetworkClient sees the update is due (``time_to_next_update``), sends a
MetadataRequest, and hands the response to ``update`` which swaps in a new immutable ``Cluster``,
bumps ``update_version`` and wakes the waiters.

* Refresh: every metadata.max.age.ms, or sooner on request, never more often than the refresh
  backoff (retry.backoff.ms doubling per failed attempt up to retry.backoff.max.ms).
* Topics of interest: the producer adds topics as it uses them; a topic unused for
  metadata.max.idle.ms is dropped at the next update.  A topic not yet in the cache is "new":
  the next request asks for the new topics only (a partial update) so a producer with many
  topics does not refetch everything.  Consumers set their subscription with ``set_topics``
  (never expires) or ``need_all_topics``.
* Errors per topic are kept for waiters: UNKNOWN_TOPIC_OR_PARTITION (auto-creation off or not
  done yet) and LEADER_NOT_AVAILABLE trigger retries; INVALID_TOPIC_EXCEPTION and
  TOPIC_AUTHORIZATION_FAILED are fatal for that topic (``maybe_throw_for_topic``).
* Stale responses: a partition whose leader epoch is older than one already seen keeps its
  newer cached state.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterable
from typing import Any

from samsa.errors import (
    IllegalStateError,
    InvalidTopicError,
    KafkaError,
    KafkaTimeoutError,
    TopicAuthorizationFailedError,
    for_code,
)
from samsa.net.backoff import ExponentialBackoff
from samsa.net.clock import Clock, monotonic_ms
from samsa.net.cluster import Cluster, Node, PartitionInfo, TopicPartition

log = logging.getLogger(__name__)

_NEVER = float("inf")
_ZERO_UUID = uuid.UUID(int=0)
_INVALID_TOPIC = InvalidTopicError.code
_TOPIC_AUTHORIZATION_FAILED = TopicAuthorizationFailedError.code


class MetadataRequestPlan:
    """What the next MetadataRequest asks for: ``topics`` None = all topics."""

    __slots__ = ("allow_auto_topic_creation", "is_partial", "request_version", "topics")

    def __init__(self, topics: list[str] | None, is_partial: bool, request_version: int,
                 allow_auto_topic_creation: bool) -> None:
        self.topics = topics
        self.is_partial = is_partial
        self.request_version = request_version
        self.allow_auto_topic_creation = allow_auto_topic_creation


class Metadata:
    def __init__(self, *, retry_backoff_ms: float = 100, retry_backoff_max_ms: float = 1000,
                 metadata_max_age_ms: float = 300000,
                 metadata_max_idle_ms: float | None = 300000,
                 allow_auto_topic_creation: bool = True, need_all_topics: bool = False,
                 clock: Clock = monotonic_ms) -> None:
        self._cond = threading.Condition(threading.RLock())
        self._clock = clock
        self._refresh_backoff = ExponentialBackoff(retry_backoff_ms, 2, retry_backoff_max_ms)
        self._refresh_backoff_ms = self._refresh_backoff.backoff(0)
        self.metadata_max_age_ms = metadata_max_age_ms
        self.metadata_max_idle_ms = metadata_max_idle_ms
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.need_all_topics = need_all_topics

        self._cluster = Cluster.empty()
        self._update_version = 0
        self._request_version = 0
        self._need_full_update = False
        self._need_partial_update = False
        self._last_refresh_ms = 0.0
        # Counts as fresh until bootstrap() or a request asks for an update.
        self._last_successful_refresh_ms = clock()
        self._attempts = 0

        self._topics: dict[str, float] = {}  # topic -> expiry (ms, monotonic)
        self._new_topics: set[str] = set()
        self._topic_errors: dict[str, KafkaError] = {}
        self._fatal_error: KafkaError | None = None
        # The last connection's authentication failure, until an update succeeds again.
        self._auth_error: KafkaError | None = None
        self._last_seen_epochs: dict[TopicPartition, int] = {}
        self._closed = False

    # -- reading -------------------------------------------------------------------------

    def fetch(self) -> Cluster:
        """The current snapshot (immutable; safe to use from any thread)."""
        return self._cluster

    @property
    def update_version(self) -> int:
        return self._update_version

    def topics(self) -> list[str]:
        return list(self._topics)

    def topic_error(self, topic: str) -> KafkaError | None:
        """The error the last response gave for ``topic`` (None if it was fine or absent)."""
        return self._topic_errors.get(topic)

    def maybe_throw_for_topic(self, topic: str) -> None:
        """Raise the topic's fatal error (invalid name, not authorized) or a global fatal one."""
        if self._fatal_error is not None:
            raise self._fatal_error
        if self._auth_error is not None:
            raise self._auth_error
        error = self._topic_errors.get(topic)
        if error is not None and error.code in (_INVALID_TOPIC, _TOPIC_AUTHORIZATION_FAILED):
            raise error

    def maybe_throw_any_exception(self) -> None:
        if self._fatal_error is not None:
            raise self._fatal_error
        if self._auth_error is not None:
            raise self._auth_error

    @property
    def authentication_error(self) -> KafkaError | None:
        return self._auth_error

    def authentication_failed(self, error: KafkaError) -> None:
        """A connection failed to authenticate (Java's Metadata.fatalError for an
        AuthenticationException): waiters and ``maybe_throw_*`` raise it until an update
        succeeds (the NetworkClient keeps reconnecting with backoff meanwhile)."""
        with self._cond:
            self._auth_error = error
            self._cond.notify_all()

    # -- interest ------------------------------------------------------------------------

    def bootstrap(self, addresses: Iterable[tuple[str, int]]) -> None:
        """Start from the bootstrap servers: nodes -1, -2, ... and a full update due."""
        with self._cond:
            self._cluster = Cluster.bootstrap(addresses)
            self._need_full_update = True
            self._request_version += 1
            self._update_version += 1
            self._cond.notify_all()

    def add(self, topic: str, now: float | None = None) -> None:
        """Mark a topic as used (producer); a topic not seen before triggers a partial update."""
        expiry = _NEVER if self.metadata_max_idle_ms is None else \
            (self._clock() if now is None else now) + self.metadata_max_idle_ms
        topics = self._topics
        if topic in topics:
            topics[topic] = expiry  # a dict store is atomic; the hot path takes no lock
            return
        with self._cond:
            if topic not in topics:
                self._new_topics.add(topic)
                self._request_update_for_new_topics()
            topics[topic] = expiry

    def set_topics(self, topics: Iterable[str]) -> None:
        """Replace the topics of interest (consumer subscription; they never expire)."""
        with self._cond:
            wanted = set(topics)
            if wanted - set(self._topics):
                self._need_full_update = True
                self._request_version += 1
            self._topics = dict.fromkeys(wanted, _NEVER)
            self._new_topics &= wanted

    def request_update(self) -> int:
        """Ask for a full update soon; returns the version to pass to ``await_update``."""
        with self._cond:
            self._need_full_update = True
            self._request_version += 1
            return self._update_version

    def request_update_for_topic(self, topic: str) -> int:
        with self._cond:
            if topic in self._new_topics:
                self._request_update_for_new_topics()
            else:
                self._need_full_update = True
                self._request_version += 1
            return self._update_version

    def _request_update_for_new_topics(self) -> None:
        # A topic the client has just started to use is asked for at once, not after the
        # refresh backoff of the last update (Java's Metadata.requestUpdateForNewTopics resets
        # lastRefreshMs): its first send would otherwise wait up to retry.backoff.ms.
        self._last_refresh_ms = 0.0
        self._need_partial_update = True
        self._request_version += 1

    def update_requested(self) -> bool:
        return self._need_full_update or self._need_partial_update

    def time_to_next_update(self, now: float) -> float:
        """Ms until an update is due (0 = now): requested updates wait only for the backoff."""
        if self._need_full_update or self._need_partial_update:
            expire = 0.0
        else:
            expire = self._last_successful_refresh_ms + self.metadata_max_age_ms - now
        allow = self._last_refresh_ms + self._refresh_backoff_ms - now
        m = max(allow, expire)
        return max(0.0, m)

    def refresh_backoff_ms(self) -> float:
        return self._refresh_backoff_ms

    # -- request and response ------------------------------------------------------------

    def new_request_plan(self, now: float) -> MetadataRequestPlan:
        with self._cond:
            if self.need_all_topics:
                topics, partial = None, False
            elif self._need_partial_update and not self._need_full_update and self._new_topics:
                topics, partial = sorted(self._new_topics), True
            else:
                topics = [t for t, exp in self._topics.items() if exp > now]
                partial = False
            return MetadataRequestPlan(topics, partial, self._request_version,
                                       self.allow_auto_topic_creation)

    def update(self, response: Any, plan: MetadataRequestPlan, now: float) -> None:
        """Apply a MetadataResponse (any version) received for ``plan``."""
        with self._cond:
            if self._closed:
                return
            top_error = getattr(response, "error_code", 0) or 0
            if top_error:
                self.failed_update(now, for_code(top_error)(
                    "the Metadata response carried a top-level error"))
                return
            self._auth_error = None  # a connection authenticated since
            self._apply(response, plan, now)
            self._cond.notify_all()

    def _apply(self, response: Any, plan: MetadataRequestPlan, now: float) -> None:
        old = self._cluster
        nodes = [Node(b.node_id, b.host, b.port, b.rack) for b in response.brokers]
        by_id = {n.id: n for n in nodes}
        retry = False
        partitions: list[PartitionInfo] = []
        topic_ids: dict[str, object] = {}
        unauthorized: set[str] = set()
        invalid: set[str] = set()
        internal: set[str] = set()
        seen_topics: set[str] = set()
        last_seen = self._last_seen_epochs
        expired = {t for t, exp in self._topics.items() if exp <= now}
        for t in expired:
            del self._topics[t]
            self._new_topics.discard(t)
            self._topic_errors.pop(t, None)
        wanted = None if self.need_all_topics else self._topics

        for topic in response.topics:
            name = topic.name
            if name is None:
                continue  # v12+ may answer a topic-id lookup without a name
            seen_topics.add(name)
            self._new_topics.discard(name)
            if wanted is not None and name not in wanted:
                continue
            tid = getattr(topic, "topic_id", None)
            if tid is not None and tid != _ZERO_UUID:
                topic_ids[name] = tid
            if getattr(topic, "is_internal", False):
                internal.add(name)
            code = topic.error_code
            if code:
                error = for_code(code)(f"topic {name!r}: {for_code(code).message}")
                self._topic_errors[name] = error
                if code == _INVALID_TOPIC:
                    invalid.add(name)
                elif code == _TOPIC_AUTHORIZATION_FAILED:
                    unauthorized.add(name)
                elif error.invalid_metadata or error.retriable:
                    retry = True
                    log.debug("Metadata for topic %s: %s; will retry", name, error)
                continue
            self._topic_errors.pop(name, None)
            for p in topic.partitions:
                tp = TopicPartition(name, p.partition_index)
                epoch = getattr(p, "leader_epoch", -1)
                seen = last_seen.get(tp, -1)
                if 0 <= epoch < seen:
                    # An older view than one we already had: keep what we knew.
                    prev = old.partition(tp)
                    if prev is not None:
                        leader = by_id.get(prev.leader.id) if prev.leader else None
                        partitions.append(prev._replace(leader=leader))
                        continue
                if epoch >= 0:
                    last_seen[tp] = epoch
                leader = by_id.get(p.leader_id) if p.leader_id >= 0 else None
                if leader is None or p.error_code:
                    retry = True  # leaderless, or the leader is not among the brokers
                partitions.append(PartitionInfo(
                    name, p.partition_index, leader, tuple(p.replica_nodes), tuple(p.isr_nodes),
                    tuple(getattr(p, "offline_replicas", ()) or ()), epoch, p.error_code))

        if plan.is_partial:
            # Keep what we knew about the topics this response did not cover.
            for name in old.topics:
                if name in seen_topics or name not in self._topics:
                    continue
                for p in old.partitions_for_topic(name):
                    leader = by_id.get(p.leader.id) if p.leader is not None else None
                    partitions.append(p._replace(leader=leader))
                tid = old.topic_id(name)
                if tid is not None:
                    topic_ids[name] = tid
                if name in old.internal_topics:
                    internal.add(name)
            unauthorized |= {t for t in old.unauthorized_topics
                             if t not in seen_topics and t in self._topics}
            invalid |= {t for t in old.invalid_topics
                        if t not in seen_topics and t in self._topics}

        controller_id = getattr(response, "controller_id", -1)
        self._cluster = Cluster(
            nodes, partitions, topic_ids=topic_ids, unauthorized_topics=unauthorized,
            invalid_topics=invalid, internal_topics=internal,
            controller=by_id.get(controller_id), cluster_id=getattr(response, "cluster_id", None))
        self._update_version += 1
        self._last_refresh_ms = now
        self._last_successful_refresh_ms = now
        if plan.is_partial:
            self._need_partial_update = plan.request_version < self._request_version and \
                bool(self._new_topics)
        else:
            self._need_full_update = plan.request_version < self._request_version
            self._need_partial_update = self._need_partial_update and bool(self._new_topics)
        if retry:
            self._need_full_update = True
            self._attempts += 1
        else:
            self._attempts = 0
        self._refresh_backoff_ms = self._refresh_backoff.backoff(self._attempts)
        log.debug("Updated cluster metadata (version %d): %s", self._update_version,
                  self._cluster)

    def failed_update(self, now: float, error: KafkaError | None = None,
                      fatal: bool = False) -> None:
        """A metadata request failed (disconnect, timeout, error); back off before retrying."""
        with self._cond:
            self._last_refresh_ms = now
            self._attempts += 1
            self._refresh_backoff_ms = self._refresh_backoff.backoff(self._attempts)
            if fatal and error is not None:
                self._fatal_error = error
                self._cond.notify_all()

    # -- waiting -------------------------------------------------------------------------

    def await_update(self, last_version: int, timeout_ms: float) -> None:
        """Block until ``update_version > last_version``; raises KafkaTimeoutError after
        ``timeout_ms``, a recorded fatal error at once, IllegalStateError once closed."""
        if timeout_ms < 0:
            raise ValueError(f"timeout must be >= 0 ms, got {timeout_ms}")
        deadline = time.monotonic() + timeout_ms / 1000.0
        with self._cond:
            while self._update_version <= last_version:
                if self._closed:
                    raise IllegalStateError("the client's metadata was closed while waiting "
                                            "for an update")
                if self._fatal_error is not None:
                    raise self._fatal_error
                if self._auth_error is not None:
                    raise self._auth_error
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise KafkaTimeoutError("a metadata update", timeout_ms)
                self._cond.wait(remaining)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return (f"Metadata(version={self._update_version}, topics={sorted(self._topics)}, "
                f"cluster={self._cluster})")
