"""Consumer-group admin: values (GroupListing, GroupDescription, MemberDescription) and the
FindCoordinator / ListGroups / DescribeGroups / DeleteGroups / OffsetFetch requests and
response readers the AdminClient uses for them.  No I/O here, as in messages.py.

Member metadata and assignment stay the raw bytes the broker returned (ConsumerProtocol for
protocol type "consumer"); samsa.consumer.protocol decodes them, above this layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from samsa.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    KafkaError,
    NotCoordinatorError,
    for_code,
)
from samsa.net import Node, TopicPartition
from samsa.protocol import APIS, ApiKey, Message

__all__ = ["GroupDescription", "GroupListing", "MemberDescription"]

FIND_COORDINATOR_MAX = 3  # v4+ batches keys; one key at a time is enough here
OFFSET_FETCH_RANGE = (2, 7)  # v2: topics=null means "all"; v8 changes the layout

FindCoordinatorRequest: Any = APIS[ApiKey.FIND_COORDINATOR].request_class
ListGroupsRequest: Any = APIS[ApiKey.LIST_GROUPS].request_class
DescribeGroupsRequest: Any = APIS[ApiKey.DESCRIBE_GROUPS].request_class
DeleteGroupsRequest: Any = APIS[ApiKey.DELETE_GROUPS].request_class
OffsetFetchRequest: Any = APIS[ApiKey.OFFSET_FETCH].request_class

# The coordinator moved or is still loading: find it again and retry.
COORDINATOR_ERRORS = (CoordinatorLoadInProgressError, CoordinatorNotAvailableError,
                      NotCoordinatorError)


class GroupListing(NamedTuple):
    group_id: str
    protocol_type: str  # "consumer" for consumer groups; "" for offsets-only groups
    state: str | None  # None when the broker is older than ListGroups v4


class MemberDescription(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    metadata: bytes
    assignment: bytes


class GroupDescription(NamedTuple):
    group_id: str
    state: str  # Empty, Stable, PreparingRebalance, CompletingRebalance or Dead (no such group)
    protocol_type: str
    protocol: str  # the chosen assignor for consumer groups
    members: tuple[MemberDescription, ...]
    coordinator: Node


def group_error(code: int, group_id: str, doing: str) -> KafkaError:
    return for_code(code)(f"{doing} group {group_id!r}: {for_code(code).message}")


def find_coordinator_request(version: int, group_id: str) -> Message:
    return FindCoordinatorRequest(key=group_id, key_type=0)


def parse_find_coordinator(body: Any, group_id: str) -> Node | KafkaError:
    if body.error_code:
        return group_error(body.error_code, group_id, "finding the coordinator of")
    return Node(body.node_id, body.host, body.port)


def list_groups_request(version: int) -> Message:
    return ListGroupsRequest(states_filter=[], types_filter=[])


def parse_list_groups(version: int, body: Any) -> list[GroupListing]:
    if body.error_code:
        raise for_code(body.error_code)("listing groups")
    return [GroupListing(g.group_id, g.protocol_type, g.group_state if version >= 4 else None)
            for g in body.groups]


def describe_groups_request(version: int, group_ids: Sequence[str]) -> Message:
    return DescribeGroupsRequest(groups=list(group_ids), include_authorized_operations=False)


def parse_describe_groups(body: Any, coordinator: Node) -> dict[str, GroupDescription | KafkaError]:
    out: dict[str, GroupDescription | KafkaError] = {}
    for g in body.groups:
        if g.error_code:
            out[g.group_id] = group_error(g.error_code, g.group_id, "describing")
            continue
        members = tuple(MemberDescription(m.member_id, getattr(m, "group_instance_id", None),
                                          m.client_id, m.client_host, bytes(m.member_metadata or b""),
                                          bytes(m.member_assignment or b""))
                        for m in g.members)
        out[g.group_id] = GroupDescription(g.group_id, g.group_state, g.protocol_type,
                                           g.protocol_data, members, coordinator)
    return out


def delete_groups_request(version: int, group_ids: Sequence[str]) -> Message:
    return DeleteGroupsRequest(groups_names=list(group_ids))


def parse_delete_groups(body: Any) -> dict[str, None | KafkaError]:
    return {r.group_id: (group_error(r.error_code, r.group_id, "deleting") if r.error_code else None)
            for r in body.results}


def offset_fetch_request(version: int, group_id: str) -> Message:
    return OffsetFetchRequest(group_id=group_id, topics=None)


def parse_offset_fetch(body: Any, group_id: str) -> dict[TopicPartition, int]:
    """Committed offset per partition; partitions without a commit are left out."""
    if getattr(body, "error_code", 0):
        raise group_error(body.error_code, group_id, "fetching the committed offsets of")
    out: dict[TopicPartition, int] = {}
    for t in body.topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            if p.error_code:
                raise for_code(p.error_code)(f"fetching the committed offset of {tp} for group {group_id!r}")
            if p.committed_offset >= 0:
                out[tp] = p.committed_offset
    return out
