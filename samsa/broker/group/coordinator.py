"""The group coordinator: Kafka's classic group protocol on one node (its GroupCoordinator).

States Empty -> PreparingRebalance -> CompletingRebalance -> Stable (and Dead when deleted).

* JoinGroup: a v4+ member without an id gets ``MEMBER_ID_REQUIRED`` and an id, and is
  *pending* until it rejoins with it.  Joins are parked (their callbacks kept) until every known
  member has rejoined or the rebalance timeout passes; members that did not rejoin are dropped.
  The first rebalance of an Empty group waits ``group.initial.rebalance.delay.ms`` (extended
  while new members keep arriving, bounded by the rebalance timeout).  Completing the join
  bumps the generation, selects the protocol by vote, keeps the leader if it rejoined, and
  answers every member; only the leader gets the member list.
* SyncGroup: followers are parked until the leader sends the assignments, which are stored
  (``__consumer_offsets``) before anyone is answered; then Stable.
* Heartbeats reschedule each member's session deadline; an expired session removes the member
  and rebalances.  LeaveGroup removes at once.
* Static members (group.instance.id) that come back with the same protocols get a new member id
  and their old assignment without a rebalance; the old id is fenced.
* OffsetCommit validates generation and member, stores the commit, then answers.
* TxnOffsetCommit stores offsets in a transactional batch; they stay pending (txn_offsets.py)
  until the transaction coordinator has ``complete_transaction`` write the marker.
* Every ``offsets.retention.check.interval.ms`` expired offsets are removed (KIP-211, the rules
  in expiration.py) with tombstones in ``__consumer_offsets``, and an Empty group left without
  offsets is deleted (Kafka's GroupCoordinatorShard.cleanupGroupMetadata).

Everything runs under one lock.  Responses are never sent under it: callbacks queue up in an
outbox that is drained once the lock is released.  Timers (KeyedTimer) run their tasks on
their own thread, which takes the same lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from samsa.broker.group.expiration import expired_offsets
from samsa.broker.group.group import (
    ClassicGroup,
    GroupState,
    JoinCallback,
    JoinResult,
    Member,
    SyncCallback,
    SyncResult,
)
from samsa.broker.group.offsets import (
    OffsetAndMetadata,
    PartitionCommit,
    metadata_too_large,
)
from samsa.broker.group.records import (
    GroupValue,
    MemberValue,
    OffsetValue,
    group_key,
    group_value,
    offset_key,
    offset_value,
)
from samsa.broker.group.replay import Replay
from samsa.broker.group.store import GroupStore
from samsa.broker.group.subscriptions import CONSUMER_PROTOCOL_TYPE, subscribed_topics
from samsa.broker.group.timer import KeyedTimer
from samsa.broker.group.txn_offsets import PendingOffset, PendingTxnOffsets
from samsa.broker.log import LogManager
from samsa.errors import (
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    InvalidProducerEpochError,
    InvalidSessionTimeoutError,
    InvalidTxnStateError,
    KafkaError,
    MemberIdRequiredError,
    NonEmptyGroupError,
    OffsetMetadataTooLargeError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)

log = logging.getLogger(__name__)

NONE = 0
UNKNOWN_MEMBER_ID = ""
EMPTY_ASSIGNMENT = b""
# Kafka answers failed coordinator writes with COORDINATOR_NOT_AVAILABLE (retriable).
STORE_ERROR = CoordinatorNotAvailableError.code
_INT64_MAX = 2**63 - 1

# Broker settings this module reads, with Kafka's defaults.
GROUP_DEFAULTS: dict[str, int] = {
    "group.initial.rebalance.delay.ms": 3000,
    "group.min.session.timeout.ms": 6000,
    "group.max.session.timeout.ms": 1_800_000,
    "group.max.size": 2**31 - 1,
    "offset.metadata.max.bytes": 4096,
    "offsets.topic.num.partitions": 50,
    "offsets.topic.segment.bytes": 104_857_600,
    # KIP-211: offsets expire this long after their group became Empty (or after their commit
    # for groups without members), checked every offsets.retention.check.interval.ms.
    "offsets.retention.minutes": 10_080,
    "offsets.retention.check.interval.ms": 600_000,
}
# A new member's parked join is dropped after this (it cannot heartbeat; Kafka's value).
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000


@dataclass(slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool  # JoinGroup v4+
    supports_skip_assignment: bool = False  # JoinGroup v9+


@dataclass(slots=True)
class SyncRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: dict[str, bytes]


@dataclass(frozen=True, slots=True)
class GroupOverview:
    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    # (member_id, group_instance_id, client_id, client_host, metadata, assignment)
    members: list[tuple[str, str | None, str, str, bytes, bytes]]


class GroupCoordinator:
    def __init__(self, logs: LogManager, config: Mapping[str, Any] | None = None, *,
                 partition_exists: Callable[[str, int], bool] | None = None,
                 on_append: Callable[[str, int], object] | None = None) -> None:
        given = dict(config or {})
        self.settings: dict[str, int] = {}
        for name, default in GROUP_DEFAULTS.items():
            value = given.get(name)
            self.settings[name] = default if value is None else int(value)
        self.store = GroupStore(logs, num_partitions=self.settings["offsets.topic.num.partitions"],
                                segment_bytes=self.settings["offsets.topic.segment.bytes"],
                                on_append=on_append)
        self._partition_exists = partition_exists or _log_exists(logs)
        self._lock = threading.Lock()
        self._outbox: list[Callable[[], None]] = []
        self.groups: dict[str, ClassicGroup] = {}
        self.pending_offsets = PendingTxnOffsets()
        self.timer = KeyedTimer()
        self._closed = False
        self._load()
        self._schedule_expiration()

    # -- plumbing -------------------------------------------------------------------------------

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the lock; afterwards (lock released) send the responses queued meanwhile."""
        with self._lock:
            try:
                yield
            finally:
                outbox, self._outbox = self._outbox, []
        for send in outbox:
            try:
                send()
            except Exception:
                log.exception("answering a group request failed")

    def _complete_join(self, member: Member, result: JoinResult) -> None:
        callback = member.join_callback
        if callback is None:
            return
        member.join_callback = None
        self._outbox.append(lambda: callback(result))

    def _complete_sync(self, member: Member, result: SyncResult) -> bool:
        callback = member.sync_callback
        if callback is None:
            return False
        member.sync_callback = None
        self._outbox.append(lambda: callback(result))
        return True

    @staticmethod
    def _reply(callback: Callable[[Any], None], result: Any) -> Callable[[], None]:
        return lambda: callback(result)

    def _group(self, group_id: str) -> ClassicGroup | None:
        # No Dead group is ever found: _delete_group and delete_offsets remove a group from
        # ``groups`` in the locked section that makes it Dead.
        return self.groups.get(group_id)

    # -- timers ---------------------------------------------------------------------------------

    def _schedule_heartbeat(self, group: ClassicGroup, member: Member,
                            timeout_ms: int | None = None) -> None:
        group_id, member_id = group.group_id, member.member_id
        delay = member.session_timeout_ms if timeout_ms is None else timeout_ms
        self.timer.schedule(("heartbeat", group_id, member_id), delay,
                            lambda: self._on_timer(self._expire_heartbeat, group_id, member_id))

    def _cancel_heartbeat(self, group: ClassicGroup, member_id: str) -> None:
        self.timer.cancel(("heartbeat", group.group_id, member_id))

    def _on_timer(self, task: Callable[..., None], *args: Any) -> None:
        with self._locked():
            if not self._closed:
                task(*args)

    def _schedule_expiration(self) -> None:
        self.timer.schedule(("expire-offsets",),
                            self.settings["offsets.retention.check.interval.ms"],
                            lambda: self._on_timer(self._expiration_due))

    def _expiration_due(self) -> None:
        try:
            self.expire_offsets(_now_ms(), locked=True)
        finally:
            self._schedule_expiration()

    def expire_offsets(self, now_ms: int | None = None, *, locked: bool = False) -> int:
        """Remove the expired offsets of every group (expiration.py), writing their tombstones,
        and delete the Empty groups left with none (GroupCoordinatorShard.cleanupGroupMetadata);
        returns how many offsets expired.  Runs every offsets.retention.check.interval.ms."""
        if not locked:
            with self._locked():
                return self.expire_offsets(now_ms, locked=True)
        now = _now_ms() if now_ms is None else now_ms
        retention_ms = self.settings["offsets.retention.minutes"] * 60_000
        total = 0
        for group_id, group in list(self.groups.items()):
            pending = self.pending_offsets.pending_partitions(group_id)
            expiry = expired_offsets(group, now, retention_ms, pending)
            # GroupMetadataManager.maybeDeleteGroup: only an Empty group with nothing left and
            # no open transaction.
            drop_group = (expiry.all_expired and not pending and not group.members
                          and group.is_in(GroupState.EMPTY))
            tombstones: list[tuple[bytes, bytes | None]] = [
                (offset_key(group_id, topic, partition), None)
                for topic, partition in expiry.expired]
            if drop_group:
                tombstones.append((group_key(group_id), None))
            if not tombstones:
                continue
            try:
                self.store.append(group_id, tombstones)
            except KafkaError as exc:
                log.warning("group %s: writing the tombstones of expired offsets failed (tried "
                            "again in offsets.retention.check.interval.ms): %s", group_id, exc)
                continue
            for tp in expiry.expired:
                group.remove_offset(tp)
            total += len(expiry.expired)
            if drop_group:
                group.transition_to(GroupState.DEAD)
                del self.groups[group_id]
            log.info("group %s: %d committed offset(s) expired%s", group_id,
                     len(expiry.expired), "; group removed" if drop_group else "")
        return total

    # -- JoinGroup ------------------------------------------------------------------------------

    def join_group(self, req: JoinRequest, callback: JoinCallback) -> None:
        """Answers through ``callback`` -- now, or later when the rebalance completes."""
        with self._locked():
            error = self._validate_join(req)
            if error is not None:
                self._outbox.append(self._reply(callback, JoinResult(error, req.member_id)))
                return
            unknown = req.member_id == UNKNOWN_MEMBER_ID
            group = self._group(req.group_id)
            if group is None:
                if not unknown:
                    self._outbox.append(self._reply(
                        callback, JoinResult(UnknownMemberIdError.code, req.member_id)))
                    return
                group = self.groups[req.group_id] = ClassicGroup(req.group_id)
            if not self._accepts_joining_member(group, req.member_id):
                self._outbox.append(self._reply(
                    callback, JoinResult(GroupMaxSizeReachedError.code, UNKNOWN_MEMBER_ID)))
                return
            if not group.supports_protocols(req.protocol_type,
                                            [name for name, _ in req.protocols]):
                self._outbox.append(self._reply(
                    callback, JoinResult(InconsistentGroupProtocolError.code, req.member_id)))
                return
            if unknown:
                self._join_new_member(group, req, callback)
            else:
                self._join_existing_member(group, req, callback)

    def _validate_join(self, req: JoinRequest) -> int | None:
        if not req.group_id:
            return InvalidGroupIdError.code
        low = self.settings["group.min.session.timeout.ms"]
        high = self.settings["group.max.session.timeout.ms"]
        if not low <= req.session_timeout_ms <= high:
            return InvalidSessionTimeoutError.code
        return None

    def _accepts_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        limit = self.settings["group.max.size"]
        if group.is_in(GroupState.EMPTY, GroupState.DEAD):
            return True
        member = group.members.get(member_id)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return (member is not None and member.is_awaiting_join) or \
                group.awaiting_join_count() < limit
        return member is not None or len(group.members) < limit

    def _join_new_member(self, group: ClassicGroup, req: JoinRequest,
                         callback: JoinCallback) -> None:
        new_id = group.new_member_id(req.client_id, req.group_instance_id)
        if req.group_instance_id is not None:
            existing = group.static_member_id(req.group_instance_id)
            if existing is not None:
                self._update_static_member(group, req, existing, new_id, callback)
            else:
                self._add_member_and_rebalance(group, req, new_id, callback)
        elif req.require_known_member_id:
            group.pending_members.add(new_id)
            group_id = group.group_id
            self.timer.schedule(("heartbeat", group_id, new_id), req.session_timeout_ms,
                                lambda: self._on_timer(self._expire_heartbeat, group_id, new_id))
            self._outbox.append(self._reply(callback, JoinResult(MemberIdRequiredError.code,
                                                                 new_id)))
        else:
            self._add_member_and_rebalance(group, req, new_id, callback)

    def _join_existing_member(self, group: ClassicGroup, req: JoinRequest,
                              callback: JoinCallback) -> None:
        member_id = req.member_id
        if member_id in group.pending_members:
            self._add_member_and_rebalance(group, req, member_id, callback)
            return
        try:
            group.validate_member(member_id, req.group_instance_id)
        except KafkaError as exc:
            self._outbox.append(self._reply(callback, JoinResult(exc.code, member_id)))
            return
        member = group.members[member_id]
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, req, callback)
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            if member.matches(req.protocols):
                # It missed the first answer: repeat it.
                self._outbox.append(self._reply(callback, group.current_join_result(
                    member_id, with_members=group.is_leader(member_id))))
            else:
                self._update_member_and_rebalance(group, member, req, callback)
        else:  # Stable: an Empty group has no members, and no Dead group is ever looked up
            if group.is_leader(member_id) or not member.matches(req.protocols):
                # A leader's join forces a rebalance (e.g. it saw new partitions).
                self._update_member_and_rebalance(group, member, req, callback)
            else:
                self._outbox.append(self._reply(callback, group.current_join_result(
                    member_id, with_members=False)))

    def _add_member_and_rebalance(self, group: ClassicGroup, req: JoinRequest, member_id: str,
                                  callback: JoinCallback) -> None:
        member = Member(member_id, req.group_instance_id, req.client_id, req.client_host,
                        req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
                        list(req.protocols), is_new=True)
        if group.is_in(GroupState.PREPARING_REBALANCE) and \
                group.previous_state == GroupState.EMPTY:
            group.new_member_added = True
        group.add(member, callback)
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"member {member_id} joined")

    def _update_member_and_rebalance(self, group: ClassicGroup, member: Member,
                                     req: JoinRequest, callback: JoinCallback) -> None:
        self._update_member(member, req, callback)
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")

    @staticmethod
    def _update_member(member: Member, req: JoinRequest, callback: JoinCallback | None) -> None:
        member.protocols = list(req.protocols)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.join_callback = callback

    def _update_static_member(self, group: ClassicGroup, req: JoinRequest, old_id: str,
                              new_id: str, callback: JoinCallback) -> None:
        assert req.group_instance_id is not None
        old_member = group.members[old_id]
        # The old instance's parked requests learn that it was replaced.
        self._complete_join(old_member, JoinResult(FencedInstanceIdError.code, old_id))
        self._complete_sync(old_member, SyncResult(FencedInstanceIdError.code))
        self._cancel_heartbeat(group, old_id)
        saved = (list(old_member.protocols), old_member.rebalance_timeout_ms,
                 old_member.session_timeout_ms)
        member = group.replace_static_member(req.group_instance_id, old_id, new_id)
        self._update_member(member, req, callback)
        self._schedule_heartbeat(group, member)
        log.info("group %s: static member %s rejoined as %s (was %s)", group.group_id,
                 req.group_instance_id, new_id, old_id)
        if group.is_in(GroupState.STABLE):
            if group.protocol_name == group.select_protocol():
                # Nothing the assignment depends on changed: no rebalance, just persist the new
                # member id and hand back the current generation.
                try:
                    self._store_group(group)
                except KafkaError:
                    member.join_callback = None
                    member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms = saved
                    group.replace_static_member(req.group_instance_id, new_id, old_id)
                    self._cancel_heartbeat(group, new_id)
                    self._schedule_heartbeat(group, member)
                    self._outbox.append(self._reply(callback, JoinResult(
                        STORE_ERROR, UNKNOWN_MEMBER_ID, group.generation_id,
                        group.protocol_type, group.protocol_name, group.leader_id or "")))
                    return
                is_leader = group.is_leader(new_id)
                if req.supports_skip_assignment:
                    result = group.current_join_result(new_id, with_members=is_leader)
                    result.skip_assignment = is_leader
                else:
                    result = group.current_join_result(new_id, with_members=False)
                self._complete_join(member, result)
            else:
                self._maybe_prepare_rebalance(group, f"static member {new_id} changed protocols")
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            # The leader may be assigning to the old id: start over.
            self._prepare_rebalance(group, f"static member {new_id} rejoined mid-rebalance")
        else:
            self._maybe_complete_join(group)

    # -- rebalancing ----------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join(group)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment(group, RebalanceInProgressError.code)
        group.pending_sync.clear()
        self.timer.cancel(("sync", group.group_id))
        initial = group.is_in(GroupState.EMPTY)
        group.transition_to(GroupState.PREPARING_REBALANCE)
        log.info("group %s: preparing to rebalance (generation %d): %s", group.group_id,
                 group.generation_id, reason)
        if initial:
            delay = self.settings["group.initial.rebalance.delay.ms"]
            remaining = max(group.max_rebalance_timeout_ms() - delay, 0)
            self._schedule_initial_join(group, delay, remaining)
        elif group.has_all_members_joined():
            self._complete_rebalance_join(group)
        else:
            self._schedule_join(group)

    def _schedule_initial_join(self, group: ClassicGroup, delay: int, remaining: int) -> None:
        group_id = group.group_id
        self.timer.schedule(("join", group_id), delay, lambda: self._on_timer(
            self._initial_join_expired, group_id, delay, remaining))

    def _initial_join_expired(self, group_id: str, delay: int, remaining: int) -> None:
        group = self._group(group_id)
        if group is None or not group.is_in(GroupState.PREPARING_REBALANCE):
            return
        if group.new_member_added and remaining > 0:
            # Members are still arriving: wait a little longer, within the rebalance timeout.
            group.new_member_added = False
            next_delay = min(self.settings["group.initial.rebalance.delay.ms"], remaining)
            self._schedule_initial_join(group, next_delay, max(remaining - delay, 0))
        else:
            self._complete_rebalance_join(group)

    def _schedule_join(self, group: ClassicGroup) -> None:
        group_id = group.group_id
        self.timer.schedule(("join", group_id), group.max_rebalance_timeout_ms(),
                            lambda: self._on_timer(self._join_expired, group_id))

    def _join_expired(self, group_id: str) -> None:
        group = self._group(group_id)
        if group is not None and group.is_in(GroupState.PREPARING_REBALANCE):
            self._complete_rebalance_join(group)

    def _maybe_complete_join(self, group: ClassicGroup) -> None:
        if (group.is_in(GroupState.PREPARING_REBALANCE)
                and group.previous_state != GroupState.EMPTY  # the initial delay decides
                and group.has_all_members_joined()):
            self._complete_rebalance_join(group)

    def _complete_rebalance_join(self, group: ClassicGroup) -> None:
        self.timer.cancel(("join", group.group_id))
        for member in group.not_yet_rejoined():
            if member.group_instance_id is None:  # static members may still come back
                group.remove(member.member_id)
                self._cancel_heartbeat(group, member.member_id)
                log.info("group %s: removed %s, which did not rejoin in time", group.group_id,
                         member.member_id)
        if not group.elect_joined_leader():
            # Nobody rejoined: wait another rebalance timeout for sessions to expire.
            self._schedule_join(group)
            return
        group.init_next_generation()
        if group.is_in(GroupState.EMPTY):
            log.info("group %s is empty at generation %d", group.group_id, group.generation_id)
            try:
                self._store_group(group)
            except KafkaError as exc:
                log.warning("group %s: could not store its empty state: %s", group.group_id, exc)
            return
        log.info("group %s: generation %d with %d member(s), protocol %s, leader %s",
                 group.group_id, group.generation_id, len(group.members), group.protocol_name,
                 group.leader_id)
        for member in group.members.values():
            result = group.current_join_result(member.member_id,
                                               with_members=group.is_leader(member.member_id))
            self._complete_join(member, result)
            self._schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        group_id, generation = group.group_id, group.generation_id
        self.timer.schedule(("sync", group_id), group.max_rebalance_timeout_ms(),
                            lambda: self._on_timer(self._sync_expired, group_id, generation))

    def _sync_expired(self, group_id: str, generation: int) -> None:
        group = self._group(group_id)
        if group is None or group.generation_id != generation:
            return
        if group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE) and group.pending_sync:
            missing = sorted(group.pending_sync)
            for member_id in missing:
                group.remove(member_id)
                self._cancel_heartbeat(group, member_id)
            self._prepare_rebalance(group, f"members {missing} did not sync in time")

    def _reset_and_propagate_assignment(self, group: ClassicGroup, error: int) -> None:
        for member in group.members.values():
            member.assignment = EMPTY_ASSIGNMENT
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: ClassicGroup, error: int) -> None:
        for member in group.members.values():
            result = SyncResult(error, member.assignment if error == NONE else b"",
                                group.protocol_type if error == NONE else None,
                                group.protocol_name if error == NONE else None)
            if self._complete_sync(member, result):
                self._schedule_heartbeat(group, member)

    # -- SyncGroup ------------------------------------------------------------------------------

    def sync_group(self, req: SyncRequest, callback: SyncCallback) -> None:
        with self._locked():
            group = self._group(req.group_id)
            if group is None:  # (an Empty group has no members: _validate_sync answers that)
                self._outbox.append(self._reply(callback, SyncResult(UnknownMemberIdError.code)))
                return
            error = self._validate_sync(group, req)
            if error:
                self._outbox.append(self._reply(callback, SyncResult(error)))
                return
            member = group.members[req.member_id]
            if group.is_in(GroupState.PREPARING_REBALANCE):
                self._outbox.append(self._reply(callback,
                                                SyncResult(RebalanceInProgressError.code)))
            elif group.is_in(GroupState.COMPLETING_REBALANCE):
                member.sync_callback = callback
                self._synced(group, req.member_id)
                if group.is_leader(req.member_id):
                    self._apply_leader_assignment(group, req.assignments)
            else:  # Stable: hand back the current assignment
                self._synced(group, req.member_id)
                self._schedule_heartbeat(group, member)
                self._outbox.append(self._reply(callback, SyncResult(
                    NONE, member.assignment, group.protocol_type, group.protocol_name)))

    @staticmethod
    def _validate_sync(group: ClassicGroup, req: SyncRequest) -> int:
        try:
            group.validate_member(req.member_id, req.group_instance_id)
        except KafkaError as exc:
            return exc.code
        if req.generation_id != group.generation_id:
            return IllegalGenerationError.code
        if (req.protocol_type is not None and req.protocol_type != group.protocol_type) or \
                (req.protocol_name is not None and req.protocol_name != group.protocol_name):
            return InconsistentGroupProtocolError.code
        return NONE

    def _synced(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self.timer.cancel(("sync", group.group_id))

    def _apply_leader_assignment(self, group: ClassicGroup, assignments: dict[str, bytes]) -> None:
        for member in group.members.values():
            member.assignment = assignments.get(member.member_id, EMPTY_ASSIGNMENT)
        try:
            self._store_group(group)
        except KafkaError:
            self._reset_and_propagate_assignment(group, STORE_ERROR)
            self._maybe_prepare_rebalance(group, "storing the assignment failed")
            return
        self._propagate_assignment(group, NONE)
        group.transition_to(GroupState.STABLE)
        log.info("group %s: generation %d is stable", group.group_id, group.generation_id)

    # -- Heartbeat ------------------------------------------------------------------------------

    def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                  group_instance_id: str | None = None) -> int:
        with self._locked():
            group = self._group(group_id)
            if group is None:
                return UnknownMemberIdError.code
            try:
                group.validate_member(member_id, group_instance_id)
            except KafkaError as exc:
                return exc.code
            if generation_id != group.generation_id:
                return IllegalGenerationError.code
            # (An Empty group has no members: validate_member answered UNKNOWN_MEMBER_ID.)
            self._schedule_heartbeat(group, group.members[member_id])
            if group.is_in(GroupState.PREPARING_REBALANCE):
                return RebalanceInProgressError.code
            return NONE

    def _expire_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self._group(group_id)
        if group is None:
            return
        if member_id in group.pending_members:
            log.info("group %s: pending member %s never joined; dropped", group_id, member_id)
            group.remove(member_id)
            self._maybe_complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        log.info("group %s: member %s's session expired", group_id, member_id)
        self._remove_member_and_rebalance(group, member, "session expired")

    def _remove_member_and_rebalance(self, group: ClassicGroup, member: Member,
                                     reason: str) -> None:
        # A parked join of a removed member is answered so that the client joins afresh.  (A
        # parked sync counts as a heartbeat, so an expiring member has none.)
        self._complete_join(member, JoinResult(UnknownMemberIdError.code, UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, f"{member.member_id}: {reason}")
        elif group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
            self._complete_rebalance_join(group)

    # -- LeaveGroup -----------------------------------------------------------------------------

    def leave_group(self, group_id: str,
                    members: Sequence[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """(group error, one error per (member_id, group_instance_id) leaving)."""
        with self._locked():
            group = self._group(group_id)
            if group is None:
                return UnknownMemberIdError.code, [UnknownMemberIdError.code] * len(members)
            errors: list[int] = []
            left: list[str] = []
            for member_id, instance_id in members:
                errors.append(self._leave_one(group, member_id, instance_id, left))
            if left and group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance(group, f"{', '.join(left)} left the group")
            elif group.is_in(GroupState.PREPARING_REBALANCE):
                self._maybe_complete_join(group)
            return NONE, errors

    def _leave_one(self, group: ClassicGroup, member_id: str, instance_id: str | None,
                   left: list[str]) -> int:
        if member_id == UNKNOWN_MEMBER_ID:
            # An administrator removing a static member by its instance id.
            existing = group.static_member_id(instance_id)
            if existing is None:
                return UnknownMemberIdError.code
            member_id = existing
        elif member_id in group.pending_members:
            # Not a member yet: no rebalance (GroupCoordinator.removePendingMemberAndUpdateGroup),
            # but a rebalance may have been waiting for it.
            group.remove(member_id)
            self._cancel_heartbeat(group, member_id)
            return NONE
        else:
            try:
                group.validate_member(member_id, instance_id)
            except KafkaError as exc:
                return exc.code
        member = group.members[member_id]
        self._cancel_heartbeat(group, member_id)
        self._complete_join(member, JoinResult(UnknownMemberIdError.code, UNKNOWN_MEMBER_ID))
        self._complete_sync(member, SyncResult(UnknownMemberIdError.code))
        group.remove(member_id)
        log.info("group %s: member %s left", group.group_id, member_id)
        left.append(member_id)
        return NONE

    # -- offsets --------------------------------------------------------------------------------

    def commit_offsets(self, group_id: str, generation_id: int, member_id: str,
                       group_instance_id: str | None, commits: Sequence[PartitionCommit], *,
                       api_version: int = 8) -> list[int]:
        """One error code per commit, in order.  Stored before this returns."""
        with self._locked():
            error = self._validate_commit(group_id, generation_id, member_id, group_instance_id,
                                          api_version)
            if error:
                return [error] * len(commits)
            group = self.groups.get(group_id)
            if group is None:  # a standalone consumer's commit creates a "simple" group
                group = self.groups[group_id] = ClassicGroup(group_id)
            member = group.members.get(member_id)  # (then its generation was checked)
            if member is not None:
                self._schedule_heartbeat(group, member)  # a commit proves the member alive
            errors, accepted = self._accept_commits(commits, _now_ms())
            if not accepted:
                return errors
            try:
                base = self.store.append(group_id, _offset_records(group_id, accepted))
            except KafkaError as exc:
                log.warning("group %s: storing committed offsets failed: %s", group_id, exc)
                return [STORE_ERROR if e == NONE else e for e in errors]
            for i, (tp, o) in enumerate(accepted.items()):
                group.put_offset(tp, o, base + i)
            return errors

    def _accept_commits(self, commits: Sequence[PartitionCommit], now: int
                        ) -> tuple[list[int], dict[tuple[str, int], OffsetAndMetadata]]:
        """(error per commit, the offsets to store): metadata too large and unknown partitions
        are refused one by one."""
        limit = self.settings["offset.metadata.max.bytes"]
        errors: list[int] = []
        accepted: dict[tuple[str, int], OffsetAndMetadata] = {}
        for c in commits:
            if metadata_too_large(c.metadata, limit):
                errors.append(OffsetMetadataTooLargeError.code)
            elif not self._partition_exists(c.topic, c.partition):
                errors.append(UnknownTopicOrPartitionError.code)
            else:
                errors.append(NONE)
                # OffsetMetadataManager.expireTimestampMs: an explicit retention time (v2-4)
                # fixes the expiry at commit time.  Java's long sum wraps for a retention near
                # 2^63; capped here, it still means "for ever" and fits the stored int64.
                accepted[(c.topic, c.partition)] = OffsetAndMetadata(
                    c.offset, c.leader_epoch, c.metadata or "",
                    now if c.commit_timestamp_ms == -1 else c.commit_timestamp_ms,
                    -1 if c.retention_time_ms == -1 else min(now + c.retention_time_ms, _INT64_MAX))
        return errors, accepted

    def _validate_commit(self, group_id: str, generation_id: int, member_id: str,
                         group_instance_id: str | None, api_version: int) -> int:
        if not group_id:
            return InvalidGroupIdError.code
        group = self._group(group_id)
        if group is None:
            if generation_id < 0:
                return NONE
            return GroupIdNotFoundError.code if api_version >= 9 else IllegalGenerationError.code
        if generation_id < 0 and group.is_in(GroupState.EMPTY):
            return NONE  # a standalone consumer or an admin
        if generation_id >= 0 or member_id or group_instance_id is not None:
            error = _member_error(group, generation_id, member_id, group_instance_id)
            if error:
                return error
        else:  # no generation and no member id, but the group is not Empty (returned above)
            return UnknownMemberIdError.code
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            return RebalanceInProgressError.code
        return NONE

    def fetch_offsets(self, group_id: str, partitions: Sequence[tuple[str, int]] | None
                      ) -> tuple[int, dict[tuple[str, int], OffsetAndMetadata | None]]:
        """(group error, committed offset per partition -- None where nothing is committed).
        ``partitions=None``: every partition the group has committed.  Offsets pending in an
        open transaction are not seen."""
        error, found, _ = self.fetch_offsets_and_pending(group_id, partitions)
        return error, found

    def fetch_offsets_and_pending(
            self, group_id: str, partitions: Sequence[tuple[str, int]] | None
    ) -> tuple[int, dict[tuple[str, int], OffsetAndMetadata | None], frozenset[tuple[str, int]]]:
        """``fetch_offsets`` plus the partitions among them with an offset pending in an open
        transaction (OffsetFetch's require_stable answers those UNSTABLE_OFFSET_COMMIT)."""
        with self._locked():
            group = self._group(group_id)
            offsets = group.offsets if group is not None else {}
            pending = self.pending_offsets.pending_partitions(group_id)
            if partitions is None:
                found: dict[tuple[str, int], OffsetAndMetadata | None] = dict(
                    sorted(offsets.items()))
            else:
                found = {tp: offsets.get(tp) for tp in partitions}
            return NONE, found, pending & found.keys()

    # -- transactions ---------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition holding the group (AddOffsetsToTxn adds it to
        the transaction; EndTxn's marker for it comes through ``complete_transaction``)."""
        return self.store.partition_for(group_id)

    def commit_transactional_offsets(
            self, group_id: str, producer_id: int, producer_epoch: int, generation_id: int,
            member_id: str, group_instance_id: str | None,
            commits: Sequence[PartitionCommit]) -> list[int]:
        """TxnOffsetCommit after the transaction was verified: one error code per commit, in
        order.  The offsets are written in one transactional batch and stay pending until the
        transaction's marker (Kafka's OffsetMetadataManager.commitTransactionalOffset)."""
        with self._locked():
            error = self._validate_txn_commit(group_id, generation_id, member_id,
                                              group_instance_id)
            if error:
                return [error] * len(commits)
            group = self.groups.get(group_id)
            if group is None:  # generation < 0: a "simple" group, as for OffsetCommit
                group = self.groups[group_id] = ClassicGroup(group_id)
            errors, accepted = self._accept_commits(commits, _now_ms())
            if not accepted:
                return errors
            try:
                base = self.store.append(group_id, _offset_records(group_id, accepted),
                                         producer_id=producer_id, producer_epoch=producer_epoch)
            except (InvalidProducerEpochError, InvalidTxnStateError) as exc:
                log.info("group %s: transactional offsets of producer %d refused: %s",
                         group_id, producer_id, exc)
                return [exc.code if e == NONE else e for e in errors]
            except KafkaError as exc:
                log.warning("group %s: storing transactional offsets failed: %s", group_id, exc)
                return [STORE_ERROR if e == NONE else e for e in errors]
            partition = self.store.partition_for(group_id)
            for i, (tp, o) in enumerate(accepted.items()):
                self.pending_offsets.add(partition, producer_id, group_id, tp,
                                         PendingOffset(o, base + i))
            return errors

    def _validate_txn_commit(self, group_id: str, generation_id: int, member_id: str,
                             group_instance_id: str | None) -> int:
        """Kafka's ClassicGroup.validateOffsetCommit for a transactional commit: the group's
        state is not enforced, and a commit without generation and member (TxnOffsetCommit
        v0-2, or a producer not using group metadata) is accepted even by an active group."""
        if not group_id:
            return InvalidGroupIdError.code
        group = self._group(group_id)
        if group is None:
            return NONE if generation_id < 0 else IllegalGenerationError.code
        if generation_id < 0 and group.is_in(GroupState.EMPTY):
            return NONE
        if generation_id >= 0 or member_id or group_instance_id is not None:
            return _member_error(group, generation_id, member_id, group_instance_id)
        return NONE

    def complete_transaction(self, partition: int, producer_id: int, producer_epoch: int,
                             commit: bool, coordinator_epoch: int) -> None:
        """Write the transaction's COMMIT/ABORT marker into ``__consumer_offsets``-``partition``
        and apply it: the producer's pending offsets there become committed (each unless a
        plain commit was written after it) or are dropped.  Raises KafkaError if the marker
        cannot be written (InvalidProducerEpochError, TransactionCoordinatorFencedError for a
        stale marker); nothing changes then and the caller may retry."""
        with self._locked():
            self.store.append_marker(partition, producer_id, producer_epoch, commit,
                                     coordinator_epoch)
            taken = self.pending_offsets.take(partition, producer_id)
            if not commit:
                if taken:
                    log.info("producer %d: aborted %d transactional offset(s)", producer_id,
                             len(taken))
                return
            for (group_id, topic, part), pending in taken.items():
                group = self.groups.get(group_id)
                if group is None:  # (deleting a group drops its pending offsets first)
                    group = self.groups[group_id] = ClassicGroup(group_id)
                group.commit_pending((topic, part), pending)

    # -- admin ----------------------------------------------------------------------------------

    def list_groups(self, states: Sequence[str] | None = None) -> list[GroupOverview]:
        wanted = {s.lower() for s in states} if states else None
        with self._locked():
            out = []
            for group in self.groups.values():  # a Dead group is removed at once
                if wanted is not None and group.state.value.lower() not in wanted:
                    continue
                out.append(GroupOverview(group.group_id, group.protocol_type or "",
                                         group.state.value))
            return out

    def describe_group(self, group_id: str) -> GroupDescription:
        with self._locked():
            group = self._group(group_id)
            if group is None:
                return GroupDescription(group_id, GroupState.DEAD.value, "", "", [])
            s = group.summary()
            return GroupDescription(group_id, s["state"], s["protocol_type"], s["protocol"],
                                    s["members"])

    def delete_groups(self, group_ids: Sequence[str]) -> list[int]:
        with self._locked():
            return [self._delete_group(group_id) for group_id in group_ids]

    def _delete_group(self, group_id: str) -> int:
        if not group_id:
            return InvalidGroupIdError.code
        group = self._group(group_id)
        if group is None:
            return GroupIdNotFoundError.code
        if not group.is_in(GroupState.EMPTY):
            return NonEmptyGroupError.code
        # Partitions with only a pending offset get a tombstone too (which drops it on replay),
        # as Kafka's OffsetMetadataManager.deleteAllOffsets writes.
        partitions = [*group.offsets, *(tp for tp in sorted(
            self.pending_offsets.pending_partitions(group_id)) if tp not in group.offsets)]
        tombstones: list[tuple[bytes, bytes | None]] = [
            (offset_key(group_id, topic, partition), None) for topic, partition in partitions]
        tombstones.append((group_key(group_id), None))
        try:
            self.store.append(group_id, tombstones)
        except KafkaError:
            return STORE_ERROR
        self.pending_offsets.discard(group_id)
        group.transition_to(GroupState.DEAD)
        del self.groups[group_id]
        log.info("group %s deleted", group_id)
        return NONE

    def delete_offsets(self, group_id: str, partitions: Sequence[tuple[str, int]]
                       ) -> tuple[int, dict[tuple[str, int], int]]:
        """OffsetDelete (Kafka's GroupCoordinator.handleDeleteOffsets): (group error, error per
        partition).  An Empty group loses the offsets; an active consumer group keeps those of
        topics it is subscribed to (GROUP_SUBSCRIBED_TO_TOPIC); any other active group answers
        NON_EMPTY_GROUP.  A group left with neither members nor offsets is deleted."""
        with self._locked():
            if not group_id:
                return InvalidGroupIdError.code, {}
            group = self._group(group_id)
            if group is None:
                return GroupIdNotFoundError.code, {}
            errors: dict[tuple[str, int], int] = {}
            if group.is_in(GroupState.EMPTY):
                eligible = list(partitions)
            elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
                # GroupMetadata.isSubscribedToTopic: unknown subscriptions (no protocol chosen
                # yet, unreadable metadata) count as subscribed to every topic, to be safe.
                topics = subscribed_topics(group)
                eligible = [tp for tp in partitions if topics is not None and tp[0] not in topics]
                errors = {tp: GroupSubscribedToTopicError.code
                          for tp in partitions if topics is None or tp[0] in topics}
            else:
                return NonEmptyGroupError.code, {}
            pending = self.pending_offsets.pending_partitions(group_id)
            removed = [tp for tp in dict.fromkeys(eligible)
                       if tp in group.offsets or tp in pending]
            tombstones: list[tuple[bytes, bytes | None]] = [
                (offset_key(group_id, topic, partition), None) for topic, partition in removed]
            drop_group = (group.is_in(GroupState.EMPTY) and not group.members
                          and set(removed) >= group.offsets.keys() | pending)
            if drop_group:
                tombstones.append((group_key(group_id), None))
            if tombstones:
                try:
                    self.store.append(group_id, tombstones)
                except KafkaError as exc:
                    log.warning("group %s: deleting offsets failed: %s", group_id, exc)
                    return STORE_ERROR, {}
            for tp in removed:
                group.remove_offset(tp)
            self.pending_offsets.discard(group_id, removed)
            if drop_group:  # GroupMetadataManager.cleanupGroupMetadata
                group.transition_to(GroupState.DEAD)
                del self.groups[group_id]
            errors.update({tp: NONE for tp in eligible})
            log.info("group %s: deleted offsets of %s", group_id, removed)
            return NONE, errors

    # -- persistence ----------------------------------------------------------------------------

    def _group_record(self, group: ClassicGroup) -> tuple[bytes, bytes]:
        members = tuple(MemberValue(
            m.member_id, m.group_instance_id, m.client_id, m.client_host,
            m.rebalance_timeout_ms, m.session_timeout_ms, m.metadata_for(group.protocol_name),
            m.assignment) for m in group.members.values())
        value = GroupValue(group.protocol_type or "", group.generation_id, group.protocol_name,
                           group.leader_id, group.state_timestamp_ms, members)
        return group_key(group.group_id), group_value(value)

    def _store_group(self, group: ClassicGroup) -> None:
        self.store.append(group.group_id, [self._group_record(group)])

    def _load(self) -> None:
        """Replay ``__consumer_offsets`` (replay.py): committed offsets, group metadata, and
        the offsets of transactions still open."""
        replay = Replay(self.store.num_partitions)
        for item in self.store.load():
            replay.apply(item)
        self.pending_offsets = replay.pending
        pending_groups = replay.pending.groups()
        for group_id in replay.group_ids():
            group = replay.offsets.get(group_id) or ClassicGroup(group_id)
            value = replay.metadata.get(group_id)
            if value is not None:
                self._restore(group, value)
            elif not group.offsets and group_id not in pending_groups:
                continue
            self.groups[group_id] = group
        if self.groups:
            log.info("loaded %d group(s) from __consumer_offsets", len(self.groups))
        if len(replay.pending):
            log.info("%d transactional offset(s) pending in open transactions",
                     len(replay.pending))
        # No rewrite of the topic here: the log cleaner compacts it (cleanup.policy=compact).

    def _restore(self, group: ClassicGroup, value: GroupValue) -> None:
        group.protocol_type = value.protocol_type or None
        group.generation_id = value.generation
        # When it became Empty, where offset retention counts from (-1: unknown, an old record).
        group.state_timestamp_ms = value.current_state_timestamp
        group.protocol_name = value.protocol
        for m in value.members:
            member = Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                            m.rebalance_timeout_ms, m.session_timeout_ms,
                            value.protocol_type, [(value.protocol or "", m.subscription)],
                            assignment=m.assignment)
            group.add(member)
        group.leader_id = value.leader if value.leader in group.members else \
            next(iter(group.members), None)
        if group.members:
            # Stable again; members that do not heartbeat within their session are dropped.
            group.state = group.previous_state = GroupState.STABLE
            for member in group.members.values():
                self._schedule_heartbeat(group, member)

    def close(self) -> None:
        """Stop the timers and answer parked joins and syncs (clients will retry)."""
        with self._locked():
            self._closed = True
            for group in self.groups.values():
                for member in group.members.values():
                    self._complete_join(member, JoinResult(CoordinatorNotAvailableError.code,
                                                           member.member_id))
                    self._complete_sync(member, SyncResult(CoordinatorNotAvailableError.code))
        self.timer.close()


def _offset_records(group_id: str, offsets: Mapping[tuple[str, int], OffsetAndMetadata]
                    ) -> list[tuple[bytes, bytes | None]]:
    return [(offset_key(group_id, topic, partition),
             offset_value(OffsetValue(o.offset, o.leader_epoch, o.metadata,
                                      o.commit_timestamp_ms, o.expire_timestamp_ms)))
            for (topic, partition), o in offsets.items()]


def _log_exists(logs: LogManager) -> Callable[[str, int], bool]:
    def exists(topic: str, partition: int) -> bool:
        info = logs.topic(topic)
        return info is not None and 0 <= partition < info.partitions
    return exists


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _member_error(group: ClassicGroup, generation_id: int, member_id: str,
                  group_instance_id: str | None) -> int:
    """The error of an offset commit naming a member (ClassicGroup.validateOffsetCommit): an
    unknown or fenced member, or another generation; NONE if it is the group's."""
    try:
        group.validate_member(member_id, group_instance_id)
    except KafkaError as exc:
        return exc.code
    return IllegalGenerationError.code if generation_id != group.generation_id else NONE
