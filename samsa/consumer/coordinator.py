"""ConsumerCoordinator: classic group membership, assignment and offset commits.

Runs on the consumer's poll thread (blocking requests under the consumer's lock), with a
heartbeat thread that takes the same lock when the application is not inside poll():

* FindCoordinator -> a separate connection to the coordinator (node id 2**31-1-id, as Java,
  so heartbeats do not queue behind long-poll fetches on the same socket).
* JoinGroup (MEMBER_ID_REQUIRED handshake on v4+), the leader runs the assignor named by
  the group's chosen protocol, SyncGroup, then the assignment is applied with the listener's
  on_partitions_revoked/assigned (eager: revoke all first; cooperative: revoke only what is
  lost, then rejoin if anything was revoked).
* Heartbeats every heartbeat.interval.ms; REBALANCE_IN_PROGRESS rejoins,
  ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID reset the membership
  (on_partitions_lost) and rejoin.  max.poll.interval.ms without poll() leaves the group.
* OffsetCommit / OffsetFetch (committed positions on assignment, auto commit), LeaveGroup.
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
from samsa.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    for_code,
)
from samsa.net import NetworkClient, send_and_wait
from samsa.net.cluster import Node, TopicPartition
from samsa.protocol import (
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)

__all__ = ["ConsumerCoordinator"]

log = logging.getLogger(__name__)

MEMBER_ID_REQUIRED = 79
REBALANCE_IN_PROGRESS = 27
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
FENCED_INSTANCE_ID = 82
COORDINATOR_ERRORS = {14, 15, 16}  # load in progress, not available, not coordinator
_RESET_MEMBER = {ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID}


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
        self.rack: str | None = config["client.rack"] or None
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
        self._closing = False
        self._hb_stop = threading.Event()
        self._hb_thread: threading.Thread | None = None

    # -- helpers --------------------------------------------------------------------------------

    def _now(self) -> float:
        return self.client._clock()

    def _send(self, request: Any, timeout_ms: float, **kw: Any) -> Any:
        assert self.coordinator is not None
        try:
            return send_and_wait(self.client, self.coordinator, request, max(timeout_ms, 1), **kw)
        except KafkaConnectionError:
            self.mark_coordinator_unknown()
            raise

    def mark_coordinator_unknown(self) -> None:
        if self.coordinator is not None:
            log.info("group %s: coordinator %s marked unknown", self.group_id, self.coordinator)
            self.client.close_node(self.coordinator.id)
            self.coordinator = None

    def ensure_coordinator(self, deadline: float) -> None:
        while self.coordinator is None:
            now = self._now()
            if now >= deadline:
                raise KafkaTimeoutError(f"the coordinator of group {self.group_id!r}", None)
            node = self.client.least_loaded_node(now)
            if node is None:
                self.client.poll(min(100, deadline - now))
                continue
            try:
                body = send_and_wait(self.client, node, FindCoordinatorRequest(
                    key=self.group_id, key_type=0),
                    max(deadline - now, 1), max_version=3)
            except KafkaConnectionError:
                time.sleep(self.retry_backoff_ms / 1000)
                continue
            if body.error_code:
                err = for_code(body.error_code)
                if not err.retriable:
                    raise err(f"finding the coordinator of group {self.group_id!r}")
                time.sleep(self.retry_backoff_ms / 1000)
                continue
            self.coordinator = Node(2**31 - 1 - body.node_id, body.host, body.port)

    # -- poll-thread entry points -----------------------------------------------------------------

    def on_poll(self, now: float) -> None:
        self.last_poll_ms = time.monotonic() * 1000
        self._start_heartbeat_thread()

    def poll(self, now: float, deadline: float) -> None:
        subs = self.subscriptions
        if subs.has_auto_assigned:
            if subs.mode == "pattern":
                self._update_pattern_subscription()
            if self.coordinator is None or self.need_rejoin or self.generation < 0 or \
                    self.joined_subscription != subs.subscription:
                self.ensure_active_group(max(deadline, now + self.rebalance_timeout_ms))
            self.maybe_heartbeat(now)
        if self.auto_commit and now >= self.next_auto_commit_ms:
            self.next_auto_commit_ms = now + self.auto_commit_interval_ms
            self.maybe_auto_commit_sync()

    def _update_pattern_subscription(self) -> None:
        cluster = self.metadata.fetch()
        topics = {t for t in cluster.topics if self.subscriptions.matches(t)
                  and t not in cluster.internal_topics}
        self.subscriptions.change_subscription(topics)

    def on_subscription_change(self) -> None:
        self.need_rejoin = True

    def on_unsubscribe(self) -> None:
        if self.subscriptions.has_auto_assigned and self.generation >= 0:
            self._revoke(self.subscriptions.assigned_partitions())
            self.maybe_leave_group()
        self.need_rejoin = False

    # -- join / sync ------------------------------------------------------------------------------

    def _subscription_bytes(self) -> bytes:
        return encode_subscription(Subscription(
            sorted(self.subscriptions.subscription), None,
            self.subscriptions.assigned_partitions(), self.generation, self.rack))

    def ensure_active_group(self, deadline: float) -> None:
        while True:
            self.ensure_coordinator(deadline)
            if self._now() >= deadline:
                raise KafkaTimeoutError(f"joining group {self.group_id!r}", None)
            subs = self.subscriptions
            cooperative = any(a.cooperative for a in self.assignors if a.name == self.protocol)
            if not cooperative and subs.assigned_partitions() and self.generation >= 0:
                # Eager protocol: give everything up before rejoining.
                if self.auto_commit:
                    self.maybe_auto_commit_sync()
                self._revoke(subs.assigned_partitions())
                subs.assign_from_subscribed([])
            try:
                if self._join_and_sync(deadline):
                    return
            except KafkaConnectionError:
                pass
            time.sleep(self.retry_backoff_ms / 1000)

    def _join_and_sync(self, deadline: float) -> bool:
        subs = self.subscriptions
        self.joined_subscription = set(subs.subscription)
        metadata = self._subscription_bytes()
        request = JoinGroupRequest(
            group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.member_id,
            group_instance_id=self.group_instance_id, protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=a.name, metadata=metadata)
                       for a in self.assignors])
        timeout = self.rebalance_timeout_ms + self.request_timeout_ms
        body = self._send(request, timeout, max_version=5)
        code = body.error_code
        if code == MEMBER_ID_REQUIRED:
            self.member_id = body.member_id
            return False
        if code:
            self._handle_group_error(code, "JoinGroup")
            return False
        self.member_id = body.member_id
        generation = body.generation_id
        self.protocol = body.protocol_name
        if body.leader == body.member_id:
            assignments = self._perform_assignment(body.protocol_name, body.members)
        else:
            assignments = {}
        sync = SyncGroupRequest(
            group_id=self.group_id, generation_id=generation, member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                         for m, a in assignments.items()])
        sbody = self._send(sync, timeout, max_version=3)
        if sbody.error_code:
            self._handle_group_error(sbody.error_code, "SyncGroup")
            return False
        self.generation = generation
        self.need_rejoin = False
        self._apply_assignment(decode_assignment(sbody.assignment))
        self.next_heartbeat_ms = self._now() + self.heartbeat_interval_ms
        return not self.need_rejoin

    def _perform_assignment(self, protocol: str, members: list[Any]) -> dict[str, bytes]:
        assignor = next(a for a in self.assignors if a.name == protocol)
        subs = {m.member_id: decode_subscription(m.metadata) for m in members}
        topics = {t for s in subs.values() for t in s.topics}
        # The leader needs metadata for every member's topics.
        self.metadata.set_topics(topics | self.subscriptions.subscription)
        version = self.metadata.request_update()
        deadline = self._now() + self.request_timeout_ms
        while self.metadata.update_version <= version and self._now() < deadline:
            self.client.poll(50)
        cluster = self.metadata.fetch()
        counts = {t: len(cluster.partitions_for_topic(t)) for t in topics
                  if cluster.partitions_for_topic(t)}
        result = assignor.assign(counts, subs)
        log.info("group %s: leader assigned %s", self.group_id, result)
        return {m: encode_assignment(Assignment(parts)) for m, parts in result.items()}

    def _apply_assignment(self, assignment: Assignment) -> None:
        subs = self.subscriptions
        new = [tp for tp in assignment.partitions if subs.matches(tp.topic)]
        old = subs.assigned_partitions()
        cooperative = any(a.cooperative for a in self.assignors if a.name == self.protocol)
        if cooperative:
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
        elif code in _RESET_MEMBER:
            self._reset_member(what, code)
        elif code == REBALANCE_IN_PROGRESS:
            self.need_rejoin = True
        else:
            err = for_code(code)
            if not err.retriable:
                raise err(f"{what} for group {self.group_id!r}")

    def _reset_member(self, what: str, code: int) -> None:
        log.info("group %s: %s answered %s; rejoining as a new member", self.group_id, what,
                 for_code(code).name)
        lost = self.subscriptions.assigned_partitions()
        self.member_id = ""
        self.generation = -1
        self.need_rejoin = True
        if lost and self.subscriptions.has_auto_assigned:
            listener = self.subscriptions.listener
            if getattr(listener, "on_partitions_lost", None) is not None:
                self._call_listener("on_partitions_lost", lost)
            else:
                self._revoke(lost)
            self.subscriptions.assign_from_subscribed([])

    # -- heartbeats ---------------------------------------------------------------------------

    def maybe_heartbeat(self, now: float) -> None:
        if self.generation < 0 or self.coordinator is None or now < self.next_heartbeat_ms:
            return
        self.next_heartbeat_ms = now + self.heartbeat_interval_ms
        try:
            body = self._send(HeartbeatRequest(
                group_id=self.group_id, generation_id=self.generation, member_id=self.member_id,
                group_instance_id=self.group_instance_id), self.request_timeout_ms, max_version=3)
        except KafkaError as exc:
            log.debug("heartbeat failed: %s", exc)
            return
        if body.error_code:
            self._handle_group_error(body.error_code, "Heartbeat")

    def _start_heartbeat_thread(self) -> None:
        if self._hb_thread is None and self.subscriptions.has_auto_assigned:
            self._hb_thread = threading.Thread(target=self._heartbeat_loop, daemon=True,
                                               name=f"samsa-heartbeat-{self.group_id}")
            self._hb_thread.start()

    def _heartbeat_loop(self) -> None:
        interval = self.heartbeat_interval_ms / 1000
        while not self._hb_stop.wait(min(interval, 1.0) / 2):
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
                    self.maybe_leave_group()
                    self.need_rejoin = True
                    continue
                self.maybe_heartbeat(self._now())
            except Exception:
                log.exception("heartbeat thread error")
            finally:
                self.lock.release()

    def maybe_leave_group(self) -> None:
        if self.coordinator is None or not self.member_id or self.group_instance_id:
            self.member_id, self.generation = ("", -1) if not self.group_instance_id else (
                self.member_id, -1)
            return
        try:
            self._send(LeaveGroupRequest(
                group_id=self.group_id, member_id=self.member_id),
                self.request_timeout_ms, max_version=2)
        except KafkaError as exc:
            log.info("LeaveGroup failed: %s", exc)
        self.member_id = ""
        self.generation = -1

    # -- offsets ------------------------------------------------------------------------------

    def maybe_auto_commit_sync(self) -> None:
        if not self.auto_commit:
            return
        offsets = {tp: OffsetAndMetadata(pos, "", epoch)
                   for tp, (pos, epoch) in self.subscriptions.all_consumed().items()}
        if not offsets:
            return
        try:
            self.commit_sync(offsets, self.request_timeout_ms)
        except KafkaError as exc:
            log.warning("group %s: auto commit failed: %s", self.group_id, exc)

    def commit_sync(self, offsets: dict[TopicPartition, OffsetAndMetadata], timeout_ms: float) -> None:
        if not offsets:
            return
        deadline = self._now() + timeout_ms
        while True:
            self.ensure_coordinator(deadline)
            by_topic: dict[str, list[Any]] = {}
            for tp, om in offsets.items():
                by_topic.setdefault(tp.topic, []).append(
                    OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=tp.partition, committed_offset=om.offset,
                        committed_leader_epoch=-1 if om.leader_epoch is None else om.leader_epoch,
                        committed_metadata=om.metadata))
            member = self.generation >= 0 and self.subscriptions.has_auto_assigned
            request = OffsetCommitRequest(
                group_id=self.group_id,
                generation_id_or_member_epoch=self.generation if member else -1,
                member_id=self.member_id if member else "",
                group_instance_id=self.group_instance_id if member else None,
                retention_time_ms=-1,
                topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=p)
                        for t, p in by_topic.items()])
            try:
                body = self._send(request, deadline - self._now(), min_version=2, max_version=8)
            except KafkaConnectionError:
                if self._now() >= deadline:
                    raise
                continue
            retry = False
            for t in body.topics:
                for p in t.partitions:
                    code = p.error_code
                    if not code:
                        continue
                    if code in COORDINATOR_ERRORS:
                        self.mark_coordinator_unknown()
                        retry = True
                    elif code in _RESET_MEMBER or code == REBALANCE_IN_PROGRESS:
                        if code == REBALANCE_IN_PROGRESS:
                            self.need_rejoin = True
                        else:
                            self._reset_member("OffsetCommit", code)
                        raise CommitFailedError()
                    else:
                        raise for_code(code)(f"committing {t.name}-{p.partition_index}")
            if not retry:
                return
            if self._now() >= deadline:
                raise KafkaTimeoutError("the offset commit", timeout_ms)
            time.sleep(self.retry_backoff_ms / 1000)

    def commit_async(self, offsets: dict[TopicPartition, OffsetAndMetadata],
                     callback: Callable[[dict[TopicPartition, OffsetAndMetadata], Exception | None], Any] | None
                     ) -> None:
        # Sent and awaited on the calling thread (a simplification of Java's async commit);
        # errors go to the callback instead of being raised.
        error: Exception | None = None
        try:
            self.commit_sync(offsets, self.request_timeout_ms)
        except KafkaError as exc:
            error = exc
        if callback is not None:
            callback(offsets, error)
        elif error is not None:
            log.warning("group %s: async commit failed: %s", self.group_id, error)

    def fetch_committed(self, partitions: list[TopicPartition], timeout_ms: float
                        ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        deadline = self._now() + timeout_ms
        while True:
            self.ensure_coordinator(deadline)
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            request = OffsetFetchRequest(
                group_id=self.group_id,
                topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=p)
                        for t, p in by_topic.items()])
            try:
                body = self._send(request, deadline - self._now(), min_version=1, max_version=7)
            except KafkaConnectionError:
                if self._now() >= deadline:
                    raise
                continue
            top = getattr(body, "error_code", 0)
            if top in COORDINATOR_ERRORS:
                self.mark_coordinator_unknown()
                continue
            if top:
                raise for_code(top)(f"fetching committed offsets of group {self.group_id!r}")
            out: dict[TopicPartition, OffsetAndMetadata | None] = {}
            for t in body.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if p.error_code:
                        raise for_code(p.error_code)(f"fetching the committed offset of {tp}")
                    if p.committed_offset < 0:
                        out[tp] = None
                    else:
                        epoch = getattr(p, "committed_leader_epoch", -1)
                        out[tp] = OffsetAndMetadata(p.committed_offset, p.metadata or "",
                                                    epoch if epoch >= 0 else None)
            return out

    def refresh_committed_offsets(self, now: float) -> None:
        subs = self.subscriptions
        missing = subs.missing_positions()
        if not missing:
            return
        committed = self.fetch_committed(missing, self.request_timeout_ms)
        for tp in missing:
            om = committed.get(tp)
            if om is not None and subs.is_assigned(tp):
                subs.seek(tp, om.offset, om.leader_epoch)

    def fetching_committed(self, tp: TopicPartition) -> bool:
        return False

    def group_metadata(self) -> dict[str, Any]:
        return {"group_id": self.group_id, "generation_id": self.generation,
                "member_id": self.member_id, "group_instance_id": self.group_instance_id}

    # -- close --------------------------------------------------------------------------------

    def close(self, timeout_ms: float, autocommit: bool) -> None:
        self._closing = True
        self._hb_stop.set()
        if autocommit and self.auto_commit and self.coordinator is not None:
            self.maybe_auto_commit_sync()
        if self.subscriptions.has_auto_assigned and self.generation >= 0:
            self._revoke(self.subscriptions.assigned_partitions())
            self.maybe_leave_group()
