"""ConsumerCoordinator: classic group membership, assignment and offset commits.

Everything runs under the consumer's lock.  The rebalance is a non-blocking state machine
driven by ``poll()`` (so ``KafkaConsumer.poll(timeout)`` returns on time even while the group
waits for slow members), as Java's ``AbstractCoordinator`` with a poll timer:

    IDLE --(rejoin needed)--> JOINING --(leader)--> ASSIGNING --> SYNCING --> IDLE
                                      \\--(follower)------------/

* FindCoordinator -> a separate connection to the coordinator (node id 2**31-1-id, as Java,
  so group requests do not queue behind long-poll fetches on the same socket).
* JoinGroup (MEMBER_ID_REQUIRED handshake on v4+); the leader waits for metadata of every
  member's topics and runs the assignor the group chose; SyncGroup; the assignment is applied
  with the listener's callbacks (eager: revoke all before joining; cooperative: revoke only
  what is lost, then rejoin if anything was revoked).
* Heartbeats every heartbeat.interval.ms, sent from poll() or, between polls, from a
  background thread; their errors are acted on in poll() so listener callbacks always run on
  the application's thread.  max.poll.interval.ms without poll() leaves the group.
* OffsetCommit (sync, async with callbacks run from poll(), auto commit), OffsetFetch
  (asynchronous when positions of newly assigned partitions are needed), LeaveGroup.

Request versions come from :mod:`samsa.consumer.versions` (the broker's ranges; non-flexible
group versions for brokers without flexible ApiVersions, i.e. librdkafka's mock).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from samsa.consumer.assignors import ASSIGNORS
from samsa.consumer.config import ConsumerConfig
from samsa.consumer.errors import CommitFailedError
from samsa.consumer.fetcher import Fetcher
from samsa.consumer.group_metadata import ConsumerGroupMetadata
from samsa.consumer.protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from samsa.consumer.records import OffsetAndMetadata
from samsa.consumer.subscription import SubscriptionState
from samsa.consumer.versions import group_api_version
from samsa.errors import (
    FencedInstanceIdError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    RebalanceInProgressError,
    UnstableOffsetCommitError,
    for_code,
)
from samsa.net import NetworkClient
from samsa.net.client import ClientRequest, ClientResponse
from samsa.net.cluster import Node, TopicPartition
from samsa.net.sync import await_ready, send_and_receive
from samsa.protocol import (
    ApiKey,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    Message,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)

__all__ = ["ConsumerCoordinator"]

log = logging.getLogger(__name__)

MEMBER_ID_REQUIRED = 79
REBALANCE_IN_PROGRESS = 27
INVALID_REQUEST = 42
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
FENCED_INSTANCE_ID = 82
UNSTABLE_OFFSET_COMMIT = 88
COORDINATOR_ERRORS = {14, 15, 16}  # load in progress, not available, not coordinator
# Offset commits and fetches look the coordinator up again only after these; a coordinator
# still loading (14) is asked again as is (ConsumerCoordinator's offset response handlers).
COORDINATOR_MOVED = {15, 16}  # not available, not coordinator
_RESET_MEMBER = {ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID}

IDLE, JOINING, ASSIGNING, SYNCING = "idle", "joining", "assigning", "syncing"

CommitCallback = Callable[[dict[TopicPartition, OffsetAndMetadata], Exception | None], Any]


class ConsumerCoordinator:
    def __init__(self, client: NetworkClient, subscriptions: SubscriptionState,
                 config: ConsumerConfig, lock: threading.RLock, fetcher: Fetcher) -> None:
        self.client = client
        self.metadata = client.metadata
        self.subscriptions = subscriptions
        self.lock = lock
        self.fetcher = fetcher
        self.group_id: str = config["group.id"]
        self.group_instance_id: str | None = config["group.instance.id"]
        self.session_timeout_ms: int = config["session.timeout.ms"]
        self.rebalance_timeout_ms: int = config["max.poll.interval.ms"]
        self.heartbeat_interval_ms: int = config["heartbeat.interval.ms"]
        self.request_timeout_ms: int = config["request.timeout.ms"]
        self.retry_backoff_ms: int = config["retry.backoff.ms"]
        self.auto_commit: bool = config["enable.auto.commit"]
        self.auto_commit_interval_ms: int = config["auto.commit.interval.ms"]
        self.exclude_internal: bool = config["exclude.internal.topics"]
        self.rack: str | None = config["client.rack"] or None
        # KIP-447: a read_committed member asks for stable offsets only (OffsetFetch v7+), so
        # it never starts from a position a still-open transaction committed.
        self.require_stable: bool = config["isolation.level"] == "read_committed"
        self.assignors = [ASSIGNORS[name]() for name in config["partition.assignment.strategy"]]
        self.coordinator: Node | None = None
        self.member_id = ""
        self.generation = -1
        self.protocol: str | None = None
        self.need_rejoin = False
        self.joined_subscription: set[str] = set()
        self.last_poll_ms = time.monotonic() * 1000
        self.next_heartbeat_ms = 0.0
        self.next_auto_commit_ms = time.monotonic() * 1000 + self.auto_commit_interval_ms
        # Versions last sent per API key (for tests and debugging).
        self.versions_used: dict[int, int] = {}
        # Rebalance state machine.
        self.phase = IDLE
        self._token = 0  # bumped to orphan an in-flight JoinGroup/SyncGroup
        self._group_response: ClientResponse | None = None
        self._join_generation = -1
        self._join_body: Any = None
        self._assign_meta_version = 0
        self._assign_deadline = 0.0
        self._retry_at = 0.0
        self._revoked_for_join = False
        # Coordinator lookup.
        self._find_in_flight = False
        self._find_error: KafkaError | None = None
        self._find_retry_at = 0.0
        # Heartbeats.
        self._hb_in_flight = False
        self._hb_error = 0
        self._closing = False
        self._hb_stop = threading.Event()
        self._hb_thread: threading.Thread | None = None
        # Async commits: queued until the coordinator is known, then in flight.
        self._async_queue: list[tuple[dict[TopicPartition, OffsetAndMetadata],
                                      CommitCallback | None]] = []
        self._async_in_flight = 0
        self._completed_commits: list[tuple[CommitCallback | None,
                                            dict[TopicPartition, OffsetAndMetadata],
                                            Exception | None]] = []
        # Committed-offset lookup for newly assigned partitions.
        self._committed_request: frozenset[TopicPartition] | None = None
        self._committed_error: KafkaError | None = None
        self._committed_retry_at = 0.0
        # Why the last committed-offset lookup is being retried (named by a position() timeout).
        self.committed_retry_reason: str | None = None

    # -- helpers --------------------------------------------------------------------------------

    def _now(self) -> float:
        return self.client._clock()

    def _cooperative(self) -> bool:
        return any(a.cooperative for a in self.assignors if a.name == self.protocol)

    def _version(self, node: Node, api_key: int) -> int:
        version = group_api_version(self.client.api_versions(node.id), api_key)
        self.versions_used[api_key] = version
        return version

    def _request(self, api_key: int, build: Callable[[int], Message], timeout_ms: float
                 ) -> tuple[Any, int]:
        """Blocking request to the coordinator: (response body, version)."""
        node = self.coordinator
        assert node is not None
        try:
            await_ready(self.client, node, max(timeout_ms, 1))
            version = self._version(node, api_key)
            response = send_and_receive(self.client, node, build(version), max(timeout_ms, 1),
                                        min_version=version, max_version=version)
        except KafkaConnectionError:
            self.mark_coordinator_unknown()
            raise
        return response.body, version

    def _send_async(self, api_key: int, build: Callable[[int], Message],
                    callback: Callable[[ClientResponse], None], now: float,
                    timeout_ms: float | None = None) -> bool:
        """Send to the coordinator if its connection is ready; False if not (yet)."""
        node = self.coordinator
        if node is None:
            return False
        if not self.client.ready(node, now):
            if self.client.connection_failed(node):
                self.mark_coordinator_unknown()
            return False
        version = self._version(node, api_key)
        self.client.send(ClientRequest(node, build(version), callback=callback, created_ms=now,
                                       min_version=version, max_version=version,
                                       request_timeout_ms=timeout_ms), now)
        return True

    def mark_coordinator_unknown(self) -> None:
        if self.coordinator is not None:
            log.info("group %s: coordinator %s marked unknown", self.group_id, self.coordinator)
            node = self.coordinator
            self.coordinator = None
            self.client.close_node(node.id)

    # -- coordinator lookup -----------------------------------------------------------------------

    def _lookup_coordinator(self, now: float) -> None:
        """Send FindCoordinator if none is known or in flight (answer handled by callback)."""
        if self.coordinator is not None or self._find_in_flight or now < self._find_retry_at:
            return
        node = self.client.least_loaded_node(now)
        if node is None or not self.client.ready(node, now):
            return  # ready() started connecting; a later poll sends
        version = group_api_version(self.client.api_versions(node.id),
                                    ApiKey.FIND_COORDINATOR)
        self.versions_used[ApiKey.FIND_COORDINATOR] = version
        if version >= 4:
            request = FindCoordinatorRequest(key_type=0, coordinator_keys=[self.group_id])
        else:
            request = FindCoordinatorRequest(key=self.group_id, key_type=0)
        self._find_in_flight = True
        self.client.send(ClientRequest(node, request, callback=self._on_find_coordinator,
                                       created_ms=now, min_version=version,
                                       max_version=version), now)

    def _on_find_coordinator(self, response: ClientResponse) -> None:
        self._find_in_flight = False
        if response.body is None:
            self._find_retry_at = self._now() + self.retry_backoff_ms
            return
        body = response.body
        if response.api_version >= 4:
            found = body.coordinators[0]
            code, node_id, host, port = found.error_code, found.node_id, found.host, found.port
        else:
            code, node_id, host, port = body.error_code, body.node_id, body.host, body.port
        if code:
            err = for_code(code)
            if err.retriable:
                self._find_retry_at = self._now() + self.retry_backoff_ms
            else:
                self._find_error = err(f"finding the coordinator of group {self.group_id!r}")
            return
        self.coordinator = Node(2**31 - 1 - node_id, host, port)

    def ensure_coordinator(self, deadline: float) -> None:
        while True:
            now = self._now()
            self._lookup_coordinator(now)
            if self._find_error is not None:
                err, self._find_error = self._find_error, None
                raise err
            if self.coordinator is not None:
                return
            if now >= deadline:
                raise KafkaTimeoutError(f"the coordinator of group {self.group_id!r}", None)
            self.client.poll(min(100, deadline - now))

    # -- poll-thread entry points -----------------------------------------------------------------

    def on_poll(self, now: float) -> None:
        self.last_poll_ms = time.monotonic() * 1000
        self._start_heartbeat_thread()

    def poll(self, now: float, deadline: float) -> None:
        """One non-blocking step of group work; called from every KafkaConsumer.poll slice."""
        self._fire_commit_callbacks()
        subs = self.subscriptions
        if self._find_error is not None:
            err, self._find_error = self._find_error, None
            raise err
        if subs.has_auto_assigned:
            if self._hb_error:
                code, self._hb_error = self._hb_error, 0
                self._handle_group_error(code, "Heartbeat")
            if subs.mode == "pattern":
                self._update_pattern_subscription()
            if self.generation < 0 and self.phase == IDLE and subs.assigned_partitions():
                # Membership ended while away (max.poll.interval.ms): the partitions may be
                # someone else's already; say so before anything else.
                self._lose(subs.assigned_partitions())
            if self.coordinator is None:
                self._lookup_coordinator(now)
            self._drive_rebalance(now)
            self.maybe_heartbeat(now)
        if self.auto_commit and now >= self.next_auto_commit_ms and self.phase == IDLE:
            self.next_auto_commit_ms = now + self.auto_commit_interval_ms
            self._auto_commit_async()
        if self._async_queue:
            self._send_queued_commits(now)

    def _update_pattern_subscription(self) -> None:
        cluster = self.metadata.fetch()
        topics = {t for t in cluster.topics if self.subscriptions.matches(t)
                  and not (self.exclude_internal and t in cluster.internal_topics)}
        self.subscriptions.change_subscription(topics)

    def on_subscription_change(self) -> None:
        self.need_rejoin = True

    def on_unsubscribe(self) -> None:
        self._abandon_rebalance()
        if self.subscriptions.has_auto_assigned and self.generation >= 0:
            self._revoke(self.subscriptions.assigned_partitions())
            self.maybe_leave_group(self.request_timeout_ms)
        self.need_rejoin = False

    # -- join / sync ------------------------------------------------------------------------------

    def _rejoin_needed(self) -> bool:
        return (self.need_rejoin or self.generation < 0
                or self.joined_subscription != self.subscriptions.subscription)

    def _abandon_rebalance(self) -> None:
        self._token += 1
        self.phase = IDLE
        self._group_response = None

    def _subscription_bytes(self) -> bytes:
        return encode_subscription(Subscription(
            sorted(self.subscriptions.subscription), None,
            self.subscriptions.assigned_partitions(), self.generation, self.rack))

    def _drive_rebalance(self, now: float) -> None:
        while self._rebalance_step(now):
            now = self._now()

    def _rebalance_step(self, now: float) -> bool:
        """Advance the rebalance by one state if possible; True if it moved."""
        if self.phase == IDLE:
            if not self._rejoin_needed() or now < self._retry_at or self.coordinator is None:
                return False
            if self._committed_request is not None:
                # Let the OffsetFetch for partitions just assigned go first: behind a parked
                # JoinGroup on the same connection it would wait for the whole rebalance.
                return False
            if not self.client.ready(self.coordinator, now):
                if self.client.connection_failed(self.coordinator):
                    self.mark_coordinator_unknown()
                return False
            if not self._revoked_for_join:
                self._prepare_join()
                self._revoked_for_join = True
            return self._send_join(now)
        response = self._group_response
        if self.phase == ASSIGNING:
            if self.metadata.update_version <= self._assign_meta_version and now < self._assign_deadline:
                return False
            return self._send_sync(now, self._perform_assignment(self._join_body))
        if response is None:
            return False
        self._group_response = None
        if response.body is None:
            # Disconnected or timed out: find the coordinator again and rejoin.
            if response.version_mismatch is not None:
                raise response.version_mismatch
            self.phase = IDLE
            self.mark_coordinator_unknown()
            self._retry_at = now + self.retry_backoff_ms
            return False
        if self.phase == JOINING:
            return self._on_join_response(response.body, now)
        return self._on_sync_response(response.body, now)

    def _prepare_join(self) -> None:
        subs = self.subscriptions
        owned = subs.assigned_partitions()
        if not owned:
            return
        if self.generation < 0:
            # Our membership ended (max.poll.interval.ms, session expiry): others may own them.
            self._lose(owned)
        elif not self._cooperative():
            # Eager protocol: commit, then give everything up before rejoining.
            if self.auto_commit:
                self._auto_commit_async()
                self._send_queued_commits(self._now())
            self._revoke(owned)
            subs.assign_from_subscribed([])
            self.fetcher.clear_buffered(subs.is_assigned)
        else:
            # Cooperative: only partitions of topics no longer subscribed are given up now.
            gone = [tp for tp in owned if not subs.matches(tp.topic)]
            if gone:
                self._revoke(gone)
                subs.assign_from_subscribed([tp for tp in owned if subs.matches(tp.topic)])
                self.fetcher.clear_buffered(subs.is_assigned)

    def _group_callback(self) -> Callable[[ClientResponse], None]:
        token = self._token

        def done(response: ClientResponse) -> None:
            if token != self._token:
                return
            body = response.body
            if (self.phase == JOINING and body is not None and not body.error_code
                    and body.leader != body.member_id):
                # A follower syncs straight from the callback: librdkafka's mock answers a
                # SyncGroup that arrives after the leader's with INVALID_REQUEST.
                self._on_join_response(body, self._now())
                return
            self._group_response = response
        return done

    def _send_join(self, now: float) -> bool:
        self.need_rejoin = True  # until a SyncGroup succeeds
        self.joined_subscription = set(self.subscriptions.subscription)
        metadata = self._subscription_bytes()

        def build(version: int) -> Message:
            return JoinGroupRequest(
                group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
                rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.member_id,
                group_instance_id=self.group_instance_id, protocol_type="consumer",
                protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=a.name, metadata=metadata)
                           for a in self.assignors])

        # The coordinator parks a JoinGroup for up to the rebalance timeout.
        timeout = max(self.request_timeout_ms, self.rebalance_timeout_ms + 5000)
        if not self._send_async(ApiKey.JOIN_GROUP, build, self._group_callback(), now, timeout):
            return False
        self.phase = JOINING
        return True

    def _on_join_response(self, body: Any, now: float) -> bool:
        self.phase = IDLE
        code = body.error_code
        if code == MEMBER_ID_REQUIRED:
            self.member_id = body.member_id
            return True
        if code:
            self._handle_group_error(code, "JoinGroup")
            if code != REBALANCE_IN_PROGRESS:
                self._retry_at = now + self.retry_backoff_ms
            return False
        self.member_id = body.member_id
        self._join_generation = body.generation_id
        self.protocol = body.protocol_name
        if body.leader != body.member_id:
            return self._send_sync(now, {})
        # The leader needs fresh metadata for every member's topics before it can assign.
        self._join_body = body
        topics = {t for m in body.members for t in decode_subscription(m.metadata).topics}
        self.metadata.set_topics(topics | self.subscriptions.subscription)
        self._assign_meta_version = self.metadata.request_update()
        self._assign_deadline = now + self.request_timeout_ms
        self.phase = ASSIGNING
        return True

    def _perform_assignment(self, body: Any) -> dict[str, bytes]:
        assignor = next(a for a in self.assignors if a.name == body.protocol_name)
        subs: dict[str, Subscription] = {}
        for m in body.members:
            sub = decode_subscription(m.metadata)
            sub.group_instance_id = m.group_instance_id
            subs[m.member_id] = sub
        topics = {t for s in subs.values() for t in s.topics}
        cluster = self.metadata.fetch()
        counts = {t: len(cluster.partitions_for_topic(t)) for t in topics
                  if cluster.partitions_for_topic(t)}
        result = assignor.assign(counts, subs)
        log.info("group %s: leader assigned %s", self.group_id, result)
        return {m: encode_assignment(Assignment(parts)) for m, parts in result.items()}

    def _send_sync(self, now: float, assignments: dict[str, bytes]) -> bool:
        def build(version: int) -> Message:
            return SyncGroupRequest(
                group_id=self.group_id, generation_id=self._join_generation,
                member_id=self.member_id, group_instance_id=self.group_instance_id,
                protocol_type="consumer", protocol_name=self.protocol,
                assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                             for m, a in assignments.items()])

        self._join_body = None
        if not self._send_async(ApiKey.SYNC_GROUP, build, self._group_callback(), now,
                                max(self.request_timeout_ms, self.rebalance_timeout_ms + 5000)):
            self.phase = IDLE  # the coordinator went away: rejoin
            self.need_rejoin = True
            return False
        self.phase = SYNCING
        return True

    def _on_sync_response(self, body: Any, now: float) -> bool:
        self.phase = IDLE
        if body.error_code:
            if body.error_code == INVALID_REQUEST:
                # librdkafka's mock cluster answers a follower's SyncGroup that arrives after
                # the leader's with INVALID_REQUEST (rdkafka_mock_cgrp.c, state UP) where Kafka
                # would hand it its assignment.  librdkafka rejoins on any SyncGroup error
                # (rd_kafka_cgrp_handle_SyncGroup_memberstate); so do we for this one, instead
                # of Java's fatal "unexpected error", since rejoining can lose nothing.
                log.warning("group %s: SyncGroup answered INVALID_REQUEST; rejoining",
                            self.group_id)
            else:
                self._handle_group_error(body.error_code, "SyncGroup")
            self.need_rejoin = True
            if body.error_code != REBALANCE_IN_PROGRESS:
                self._retry_at = now + self.retry_backoff_ms
            return False
        self.generation = self._join_generation
        self.need_rejoin = False
        self._revoked_for_join = False
        self._apply_assignment(decode_assignment(body.assignment))
        self.next_heartbeat_ms = now + self.heartbeat_interval_ms
        return False

    def _apply_assignment(self, assignment: Assignment) -> None:
        subs = self.subscriptions
        new = [tp for tp in assignment.partitions if subs.matches(tp.topic)]
        old = subs.assigned_partitions()
        if self._cooperative():
            revoked = [tp for tp in old if tp not in set(new)]
            added = [tp for tp in new if tp not in set(old)]
            if revoked:
                self._revoke(revoked)
            subs.assign_from_subscribed(new)
            self.fetcher.clear_buffered(subs.is_assigned)
            self._call_listener("on_partitions_assigned", added)
            if revoked:
                self.need_rejoin = True  # follow-up rebalance hands them to their new owner
        else:
            subs.assign_from_subscribed(new)
            self.fetcher.clear_buffered(subs.is_assigned)
            self._call_listener("on_partitions_assigned", new)
        self.metadata.set_topics(subs.subscription)

    def _revoke(self, partitions: list[TopicPartition]) -> None:
        if partitions:
            self._call_listener("on_partitions_revoked", partitions)

    def _call_listener(self, method: str, partitions: list[TopicPartition]) -> None:
        listener = self.subscriptions.listener
        fn: Callable[[list[TopicPartition]], Any] | None = getattr(listener, method, None)
        if fn is None:
            return
        try:
            fn(list(partitions))
        except Exception:
            log.exception("group %s: %s raised", self.group_id, method)

    def _handle_group_error(self, code: int, what: str) -> None:
        if code in COORDINATOR_ERRORS:
            self.mark_coordinator_unknown()
        elif code == FENCED_INSTANCE_ID:
            # KIP-345: another consumer runs with this group.instance.id.  Fatal for the
            # application, as Java's FencedInstanceIdException (thrown by the next poll when the
            # heartbeat saw it); rejoining here would fence the other instance in turn.
            self._reset_member(what, code)
            raise self._fenced(what)
        elif code in _RESET_MEMBER:
            self._reset_member(what, code)
        elif code == REBALANCE_IN_PROGRESS:
            self.need_rejoin = True
        else:
            err = for_code(code)
            if not err.retriable:
                raise err(f"{what} for group {self.group_id!r}")

    def _fenced(self, what: str) -> FencedInstanceIdError:
        return FencedInstanceIdError(
            f"{what} for group {self.group_id!r}: another consumer uses group.instance.id "
            f"{self.group_instance_id!r}")

    def _reset_member(self, what: str, code: int) -> None:
        log.info("group %s: %s answered %s; rejoining as a new member", self.group_id, what,
                 for_code(code).name)
        lost = self.subscriptions.assigned_partitions()
        if code != FENCED_INSTANCE_ID or not self.group_instance_id:
            self.member_id = ""
        self.generation = -1
        self.need_rejoin = True
        self._revoked_for_join = False
        if lost and self.subscriptions.has_auto_assigned:
            self._lose(lost)

    def _lose(self, lost: list[TopicPartition]) -> None:
        # Another member may own them already: on_partitions_lost, not revoked (KIP-429);
        # a listener without on_partitions_lost gets on_partitions_revoked, as in Java.
        listener = self.subscriptions.listener
        if getattr(listener, "on_partitions_lost", None) is not None:
            self._call_listener("on_partitions_lost", lost)
        else:
            self._revoke(lost)
        self.subscriptions.assign_from_subscribed([])
        self.fetcher.clear_buffered(self.subscriptions.is_assigned)

    # -- heartbeats ---------------------------------------------------------------------------

    def maybe_heartbeat(self, now: float) -> None:
        if (self.generation < 0 or self.phase != IDLE or self._hb_in_flight or self._hb_error
                or now < self.next_heartbeat_ms or self._rejoin_needed()):
            return
        generation, member = self.generation, self.member_id

        def build(version: int) -> Message:
            return HeartbeatRequest(group_id=self.group_id, generation_id=generation,
                                    member_id=member, group_instance_id=self.group_instance_id)

        def done(response: ClientResponse) -> None:
            self._hb_in_flight = False
            if response.body is None:
                self.mark_coordinator_unknown()
            elif response.body.error_code and generation == self.generation:
                self._hb_error = response.body.error_code

        if self._send_async(ApiKey.HEARTBEAT, build, done, now, self.request_timeout_ms):
            self._hb_in_flight = True
            self.next_heartbeat_ms = now + self.heartbeat_interval_ms

    def _start_heartbeat_thread(self) -> None:
        if self._hb_thread is None and self.subscriptions.has_auto_assigned:
            self._hb_thread = threading.Thread(target=self._heartbeat_loop, daemon=True,
                                               name=f"samsa-heartbeat-{self.group_id}")
            self._hb_thread.start()

    def _heartbeat_loop(self) -> None:
        interval = min(self.heartbeat_interval_ms / 1000, 1.0) / 2
        while not self._hb_stop.wait(interval):
            if not self.lock.acquire(timeout=0.1):
                continue  # the poll thread is active and heartbeats itself
            try:
                if self._closing or self.client.closed:
                    return
                since_poll = time.monotonic() * 1000 - self.last_poll_ms
                if self.generation >= 0 and since_poll > self.rebalance_timeout_ms:
                    log.warning("group %s: poll() not called for %d ms (max.poll.interval.ms=%d)"
                                "; leaving the group", self.group_id, since_poll,
                                self.rebalance_timeout_ms)
                    self._abandon_rebalance()
                    self.maybe_leave_group(self.request_timeout_ms)
                    self.need_rejoin = True
                    continue
                now = self._now()
                self.maybe_heartbeat(now)
                self.client.poll(0, now)  # receive answers while the application is away
            except Exception:
                log.exception("group %s: heartbeat thread error", self.group_id)
            finally:
                self.lock.release()

    def maybe_leave_group(self, timeout_ms: float) -> None:
        """LeaveGroup (dynamic members only: a static member keeps its place until its
        session times out, so a restart does not rebalance)."""
        if self.group_instance_id or self.coordinator is None or not self.member_id:
            if not self.group_instance_id:
                self.member_id = ""
            self.generation = -1
            return
        member = self.member_id

        def build(version: int) -> Message:
            if version >= 3:
                return LeaveGroupRequest(group_id=self.group_id, members=[
                    LeaveGroupRequest.MemberIdentity(member_id=member, group_instance_id=None)])
            return LeaveGroupRequest(group_id=self.group_id, member_id=member)

        try:
            self._request(ApiKey.LEAVE_GROUP, build, min(timeout_ms, self.request_timeout_ms))
        except KafkaError as exc:
            log.info("group %s: LeaveGroup failed: %s", self.group_id, exc)
        self.member_id = ""
        self.generation = -1

    # -- offsets ------------------------------------------------------------------------------

    def _consumed_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return {tp: OffsetAndMetadata(pos, "", epoch)
                for tp, (pos, epoch) in self.subscriptions.all_consumed().items()}

    def maybe_auto_commit_sync(self, timeout_ms: float | None = None) -> None:
        if not self.auto_commit:
            return
        offsets = self._consumed_offsets()
        if not offsets:
            return
        try:
            self.commit_sync(offsets, self.request_timeout_ms if timeout_ms is None else timeout_ms)
        except KafkaError as exc:
            log.warning("group %s: auto commit failed: %s", self.group_id, exc)

    def _auto_commit_async(self) -> None:
        offsets = self._consumed_offsets()
        if offsets:
            self._async_queue.append((offsets, None))

    def _commit_request(self, offsets: dict[TopicPartition, OffsetAndMetadata]
                        ) -> Callable[[int], Message]:
        by_topic: dict[str, list[Any]] = {}
        for tp, om in offsets.items():
            by_topic.setdefault(tp.topic, []).append(
                OffsetCommitRequest.OffsetCommitRequestPartition(
                    partition_index=tp.partition, committed_offset=om.offset,
                    committed_leader_epoch=-1 if om.leader_epoch is None else om.leader_epoch,
                    committed_metadata=om.metadata))
        member = self.generation >= 0 and self.subscriptions.has_auto_assigned
        generation = self.generation if member else -1
        member_id = self.member_id if member else ""
        instance = self.group_instance_id if member else None

        def build(version: int) -> Message:
            return OffsetCommitRequest(
                group_id=self.group_id, generation_id_or_member_epoch=generation,
                member_id=member_id, group_instance_id=instance, retention_time_ms=-1,
                topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=p)
                        for t, p in by_topic.items()])
        return build

    def _commit_error(self, body: Any) -> tuple[KafkaError | None, bool]:
        """(error to report, whether a retry may succeed) for an OffsetCommit response."""
        for t in body.topics:
            for p in t.partitions:
                code = p.error_code
                if not code:
                    continue
                if code in COORDINATOR_MOVED:
                    self.mark_coordinator_unknown()
                    return for_code(code)(f"committing {t.name}-{p.partition_index}"), True
                if code == REBALANCE_IN_PROGRESS:
                    # OffsetCommitResponseHandler: rejoin (generation kept) and raise
                    # RebalanceInProgressException; the caller may poll() and commit again.
                    self.need_rejoin = True
                    return RebalanceInProgressError(
                        f"committing {t.name}-{p.partition_index}: the group is rebalancing; "
                        "poll() to complete the rebalance, then commit again"), False
                if code == FENCED_INSTANCE_ID:
                    # OffsetCommitResponseHandler raises FencedInstanceIdException as is.
                    return self._fenced("OffsetCommit"), False
                if code in _RESET_MEMBER:
                    self._reset_member("OffsetCommit", code)
                    return CommitFailedError(), False
                err = for_code(code)
                return err(f"committing {t.name}-{p.partition_index}"), err.retriable
        return None, False

    def commit_sync(self, offsets: dict[TopicPartition, OffsetAndMetadata], timeout_ms: float) -> None:
        self._fire_commit_callbacks()
        if not offsets:
            return
        deadline = self._now() + timeout_ms
        while True:
            self.ensure_coordinator(deadline)
            try:
                body, _ = self._request(ApiKey.OFFSET_COMMIT, self._commit_request(offsets),
                                        deadline - self._now())
            except KafkaConnectionError:
                if self._now() >= deadline:
                    raise
                continue
            error, retry = self._commit_error(body)
            if error is None:
                return
            if not retry:
                raise error
            if self._now() >= deadline:
                raise KafkaTimeoutError("the offset commit", timeout_ms)
            time.sleep(self.retry_backoff_ms / 1000)

    def commit_async(self, offsets: dict[TopicPartition, OffsetAndMetadata],
                     callback: CommitCallback | None) -> None:
        """Queue a commit; it is sent as soon as the coordinator is ready, and ``callback``
        runs from a later poll() (or commit/close) once the broker has answered."""
        self._async_queue.append((offsets, callback))
        self._send_queued_commits(self._now())

    def _send_queued_commits(self, now: float) -> None:
        if self.coordinator is None:
            self._lookup_coordinator(now)
            return
        while self._async_queue:
            offsets, callback = self._async_queue[0]
            if not offsets:
                self._async_queue.pop(0)
                self._completed_commits.append((callback, offsets, None))
                continue

            def done(response: ClientResponse, offsets: dict[TopicPartition, OffsetAndMetadata]
                     = offsets, callback: CommitCallback | None = callback) -> None:
                self._async_in_flight -= 1
                error: Exception | None
                if response.body is None:
                    self.mark_coordinator_unknown()
                    error = response.error or KafkaConnectionError("the coordinator disconnected")
                else:
                    error, _ = self._commit_error(response.body)
                self._completed_commits.append((callback, offsets, error))

            if not self._send_async(ApiKey.OFFSET_COMMIT, self._commit_request(offsets), done, now):
                return
            self._async_queue.pop(0)
            self._async_in_flight += 1

    def _fire_commit_callbacks(self) -> None:
        while self._completed_commits:
            callback, offsets, error = self._completed_commits.pop(0)
            if callback is None:
                if error is not None:
                    log.warning("group %s: async commit failed: %s", self.group_id, error)
                continue
            try:
                callback(offsets, error)
            except Exception:
                log.exception("group %s: commit callback raised", self.group_id)

    def _offset_fetch_request(self, partitions: list[TopicPartition]) -> Callable[[int], Message]:
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)

        def build(version: int) -> Message:
            # Below v7 the flag does not exist; like Java's OffsetFetchRequest.Builder (without
            # throwOnFetchStableOffsetsUnsupported) the request goes out without it.
            stable = self.require_stable and version >= 7
            if version >= 8:
                return OffsetFetchRequest(require_stable=stable, groups=[
                    OffsetFetchRequest.OffsetFetchRequestGroup(group_id=self.group_id, topics=[
                        OffsetFetchRequest.OffsetFetchRequestTopics(name=t, partition_indexes=p)
                        for t, p in by_topic.items()])])
            return OffsetFetchRequest(
                group_id=self.group_id, require_stable=stable,
                topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=p)
                        for t, p in by_topic.items()])
        return build

    def _parse_offset_fetch(self, body: Any, version: int
                            ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets from an OffsetFetch response; raises for a group-level error
        (after marking the coordinator unknown if that is the cause)."""
        if version >= 8:
            group = body.groups[0]
            top, topics = group.error_code, group.topics
        else:
            top, topics = getattr(body, "error_code", 0), body.topics
        if top in COORDINATOR_MOVED:
            self.mark_coordinator_unknown()
        if top == UNSTABLE_OFFSET_COMMIT:
            raise self._unstable([TopicPartition(t.name, p.partition_index)
                                  for t in topics for p in t.partitions])
        if top:
            raise for_code(top)(f"fetching committed offsets of group {self.group_id!r}")
        out: dict[TopicPartition, OffsetAndMetadata | None] = {}
        unstable: list[TopicPartition] = []
        for t in topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if p.error_code == UNSTABLE_OFFSET_COMMIT:
                    unstable.append(tp)  # answered for the whole request below, as Java does
                    continue
                if p.error_code:
                    raise for_code(p.error_code)(f"fetching the committed offset of {tp}")
                if p.committed_offset < 0:
                    out[tp] = None
                else:
                    epoch = getattr(p, "committed_leader_epoch", -1)
                    out[tp] = OffsetAndMetadata(p.committed_offset, p.metadata or "",
                                                epoch if epoch >= 0 else None)
        if unstable:
            raise self._unstable(unstable)
        return out

    def _unstable(self, partitions: list[TopicPartition]) -> UnstableOffsetCommitError:
        # ConsumerCoordinator.OffsetFetchResponseHandler: retried until the transaction that
        # committed offsets for these partitions (TxnOffsetCommit) commits or aborts.
        which = f"of {sorted(partitions)} " if partitions else ""
        return UnstableOffsetCommitError(
            f"the committed offsets {which}in group {self.group_id!r} wait for a transaction "
            "holding the group's offsets that is still open")

    def fetch_committed(self, partitions: list[TopicPartition], timeout_ms: float
                        ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        deadline = self._now() + timeout_ms
        while True:
            self.ensure_coordinator(deadline)
            try:
                body, version = self._request(ApiKey.OFFSET_FETCH,
                                              self._offset_fetch_request(partitions),
                                              deadline - self._now())
                return self._parse_offset_fetch(body, version)
            except KafkaConnectionError:
                if self._now() >= deadline:
                    raise
            except UnstableOffsetCommitError as exc:
                if self._now() + self.retry_backoff_ms >= deadline:
                    raise KafkaTimeoutError(
                        f"the committed offsets of {sorted(partitions)} in group "
                        f"{self.group_id!r}: a transaction holding the group's offsets is still "
                        "open (UNSTABLE_OFFSET_COMMIT); the producer that sent them must commit "
                        "or abort it, or the broker aborts it after its transaction.timeout.ms",
                        timeout_ms) from exc
                time.sleep(self.retry_backoff_ms / 1000)
            except KafkaError as exc:
                if not exc.retriable or self._now() >= deadline:
                    raise
                time.sleep(self.retry_backoff_ms / 1000)

    def refresh_committed_offsets(self, now: float) -> None:
        """Send OffsetFetch for assigned partitions without a position; the answer seeks them
        (or requests auto.offset.reset where nothing is committed) from its callback."""
        if self._committed_error is not None:
            err, self._committed_error = self._committed_error, None
            raise err
        subs = self.subscriptions
        if self._committed_request is not None or now < self._committed_retry_at:
            return
        missing = subs.missing_positions()
        if not missing:
            return
        if self.coordinator is None:
            self._lookup_coordinator(now)
            return
        parts = frozenset(missing)

        def done(response: ClientResponse) -> None:
            self._committed_request = None
            if response.body is None:
                self.mark_coordinator_unknown()
                return
            try:
                committed = self._parse_offset_fetch(response.body, response.api_version)
            except KafkaError as exc:
                if not exc.retriable:
                    self._committed_error = exc
                else:
                    # Back off: an open transaction (UNSTABLE_OFFSET_COMMIT) may take a while.
                    self._committed_retry_at = response.received_ms + self.retry_backoff_ms
                    self.committed_retry_reason = str(exc)
                    log.info("group %s: committed offsets: %s; retrying", self.group_id, exc)
                return
            self.committed_retry_reason = None
            for tp in parts:
                if tp not in committed or not subs.is_assigned(tp):
                    continue
                if subs.state(tp).position is not None or subs.state(tp).reset_strategy:
                    continue  # seeked meanwhile
                om = committed[tp]
                if om is not None:
                    subs.seek(tp, om.offset, om.leader_epoch)
                else:
                    subs.request_reset(tp)  # nothing committed: auto.offset.reset

        if self._send_async(ApiKey.OFFSET_FETCH, self._offset_fetch_request(missing), done, now):
            self._committed_request = parts

    def fetching_committed(self, tp: TopicPartition) -> bool:
        """Whether ``tp`` waits for its committed offset (so no offset reset yet)."""
        return True

    def group_metadata(self) -> ConsumerGroupMetadata:
        return ConsumerGroupMetadata(self.group_id, self.generation, self.member_id,
                                     self.group_instance_id)

    # -- close --------------------------------------------------------------------------------

    def close(self, timeout_ms: float, autocommit: bool) -> None:
        """Commit (if auto commit), wait for async commits, revoke and leave -- all within
        ``timeout_ms``."""
        self._closing = True
        self._hb_stop.set()
        deadline = self._now() + timeout_ms
        self._abandon_rebalance()
        try:
            if autocommit and self.auto_commit and self.coordinator is not None:
                self.maybe_auto_commit_sync(max(deadline - self._now(), 0))
            while (self._async_queue or self._async_in_flight) and self._now() < deadline:
                self._send_queued_commits(self._now())
                self.client.poll(min(100, max(deadline - self._now(), 0)))
            self._fire_commit_callbacks()
            if self.subscriptions.has_auto_assigned and self.generation >= 0:
                self._revoke(self.subscriptions.assigned_partitions())
                if self._now() < deadline:
                    self.maybe_leave_group(deadline - self._now())
        finally:
            for _offsets, callback in self._async_queue:
                if callback is not None:
                    self._completed_commits.append(
                        (callback, _offsets, KafkaTimeoutError("the async commit", timeout_ms)))
            self._async_queue.clear()
            self._fire_commit_callbacks()
