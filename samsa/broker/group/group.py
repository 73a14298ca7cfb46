"""One classic consumer group: its state, members and committed offsets (Kafka's ClassicGroup).

Plain bookkeeping with no locking, timers or I/O: the GroupCoordinator holds its lock while it
calls into a group, and decides what to schedule and persist.
"""

from __future__ import annotations

import enum
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from samsa.broker.group.offsets import OffsetAndMetadata
from samsa.broker.group.txn_offsets import PendingOffset
from samsa.errors import FencedInstanceIdError, UnknownMemberIdError

Protocols = list[tuple[str, bytes]]


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# Which states each state may be entered from (Kafka's ClassicGroupState).
_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({
        GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset({
        GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE,
        GroupState.EMPTY, GroupState.DEAD}),
}


@dataclass(slots=True)
class JoinResult:
    """What a JoinGroup answers (the handler turns it into the versioned response)."""

    error_code: int
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    # (member_id, group_instance_id, metadata) -- for the leader only.
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass(slots=True)
class SyncResult:
    error_code: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]


@dataclass(slots=True, eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    join_callback: JoinCallback | None = None
    sync_callback: SyncCallback | None = None
    # A member that joined but never completed a rebalance is not kept alive by a parked join.
    is_new: bool = False

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_callback is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_callback is not None

    def has_satisfied_heartbeat(self) -> bool:
        """A parked join or sync counts as a heartbeat, except for brand-new members."""
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def matches(self, protocols: Sequence[tuple[str, bytes]]) -> bool:
        return list(protocols) == list(self.protocols)

    def vote(self, candidates: set[str]) -> str:
        """This member's first preferred protocol among the candidates."""
        return next(name for name, _ in self.protocols if name in candidates)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class ClassicGroup:
    """A group's in-memory state.  ``members`` keeps join order, so the first member is the
    natural leader."""

    def __init__(self, group_id: str, state: GroupState = GroupState.EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.previous_state = state
        self.state_timestamp_ms = _now_ms()
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.pending_members: set[str] = set()  # v4+ ids handed out, not yet joined with
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_sync: set[str] = set()
        self.new_member_added = False
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        # Where each committed offset's record is in __consumer_offsets: a transaction's offset
        # replaces it only if written later (OffsetMetadataManager.replayEndTransactionMarker).
        self.record_offsets: dict[tuple[str, int], int] = {}

    # -- state ----------------------------------------------------------------------------------

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, state: GroupState) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise RuntimeError(f"group {self.group_id}: invalid transition from "
                               f"{self.state.value} to {state.value}")
        self.previous_state = self.state
        self.state = state
        self.state_timestamp_ms = _now_ms()

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # -- committed offsets ----------------------------------------------------------------------

    def put_offset(self, tp: tuple[str, int], offset: OffsetAndMetadata,
                   record_offset: int) -> None:
        self.offsets[tp] = offset
        self.record_offsets[tp] = record_offset

    def remove_offset(self, tp: tuple[str, int]) -> None:
        self.offsets.pop(tp, None)
        self.record_offsets.pop(tp, None)

    def commit_pending(self, tp: tuple[str, int], pending: PendingOffset) -> bool:
        """A transaction's offset becomes the committed one unless a record written after it
        (a plain commit) already is; True if it did."""
        if pending.record_offset <= self.record_offsets.get(tp, -1):
            return False
        self.put_offset(tp, pending.offset, pending.record_offset)
        return True

    # -- members --------------------------------------------------------------------------------

    @staticmethod
    def new_member_id(client_id: str, group_instance_id: str | None) -> str:
        prefix = group_instance_id if group_instance_id is not None else client_id
        return f"{prefix}-{uuid.uuid4()}"

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        if group_instance_id is None:
            return None
        return self.static_members.get(group_instance_id)

    def add(self, member: Member, callback: JoinCallback | None = None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        self.pending_members.discard(member.member_id)
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        member.join_callback = callback

    def remove(self, member_id: str) -> Member | None:
        self.pending_members.discard(member_id)
        self.pending_sync.discard(member_id)
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and \
                self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, group_instance_id: str, old_id: str, new_id: str) -> Member:
        """Give a static member a new member id; the old id is fenced from now on."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[group_instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def validate_member(self, member_id: str, group_instance_id: str | None) -> None:
        """UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID unless this is a current member."""
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                raise UnknownMemberIdError(
                    f"group {self.group_id} has no static member {group_instance_id!r}")
            if existing != member_id:
                raise FencedInstanceIdError(
                    f"group {self.group_id}: static member {group_instance_id!r} now has member "
                    f"id {existing}; {member_id} was fenced by a newer instance")
        if member_id not in self.members:
            raise UnknownMemberIdError(f"{member_id!r} is not a member of group {self.group_id}")

    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        return (len(self.members) == self.awaiting_join_count()
                and not self.pending_members)

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols ------------------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        members = list(self.members.values())
        if not members:
            return set()
        common = set(members[0].protocol_names())
        for m in members[1:]:
            common &= set(m.protocol_names())
        return common

    def supports_protocols(self, protocol_type: str, names: Sequence[str]) -> bool:
        """Could a member with these protocols join?  An empty group takes any non-empty set;
        otherwise the type must match and one protocol must be supported by every member."""
        if self.state == GroupState.EMPTY or not self.members:
            return bool(protocol_type) and bool(names)
        if self.protocol_type != protocol_type:
            return False
        return bool(self.candidate_protocols() & set(names))

    def select_protocol(self) -> str:
        """Each member votes for its most preferred common protocol; most votes wins (ties go
        to the protocol that reached the count first, in join order)."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda name: votes[name])

    def elect_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did; False if nobody did."""
        current = self.members.get(self.leader_id) if self.leader_id is not None else None
        if current is not None and current.is_awaiting_join:
            return True
        for member in self.members.values():
            if member.is_awaiting_join:
                self.leader_id = member.member_id
                return True
        return not self.members

    def init_next_generation(self) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.leader_id = None
            self.transition_to(GroupState.EMPTY)
        self.pending_sync.clear()

    def join_members(self) -> list[tuple[str, str | None, bytes]]:
        """The member list the leader receives, with each member's metadata for the chosen
        protocol."""
        return [(m.member_id, m.group_instance_id, m.metadata_for(self.protocol_name))
                for m in self.members.values()]

    def current_join_result(self, member_id: str, *, with_members: bool) -> JoinResult:
        return JoinResult(
            error_code=0, member_id=member_id, generation_id=self.generation_id,
            protocol_type=self.protocol_type, protocol_name=self.protocol_name,
            leader=self.leader_id or "",
            members=self.join_members() if with_members else [])

    # -- descriptions ---------------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        """DescribeGroups' view: metadata and assignments only once the group is Stable."""
        stable = self.state == GroupState.STABLE
        return {
            "state": self.state.value,
            "protocol_type": self.protocol_type or "",
            "protocol": (self.protocol_name or "") if stable else "",
            "members": [
                (m.member_id, m.group_instance_id, m.client_id, m.client_host,
                 m.metadata_for(self.protocol_name) if stable else b"",
                 m.assignment if stable else b"")
                for m in self.members.values()
            ],
        }
