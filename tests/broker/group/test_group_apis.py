"""The group APIs through KafkaApis, at every served version, with fake request contexts.

Requests are encoded and decoded at the version under test before the handler sees them, and
responses are encoded and decoded back, so a handler building a message its version cannot
carry fails here.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from samsa.broker.apis import BrokerNode, KafkaApis
from samsa.broker.log import LogManager
from samsa.protocol import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    RequestHeader,
    SyncGroupRequest,
    decode_body,
    decode_response,
    encode_body,
    encode_response_bytes,
)
from tests.broker.fake_request import RequestFromHeader

from .conftest import FAST


@dataclass
class Ctx(RequestFromHeader):
    header: Any
    body: Any
    connection_id: str = "c"
    client_host: str = "127.0.0.1"
    listener: str = "PLAINTEXT"
    principal: str = "User:ANONYMOUS"
    response: Any = None
    done: threading.Event = field(default_factory=threading.Event)

    def respond(self, response: Any) -> None:
        assert not self.done.is_set(), "answered twice"
        version = self.header.request_api_version
        frame = encode_response_bytes(response, version, self.header.correlation_id)
        _, self.response = decode_response(response.api.key, version, frame[4:])
        self.done.set()

    def no_response(self) -> None:
        raise AssertionError("group APIs always answer")

    def close_connection(self, reason: str = "") -> None:
        raise AssertionError(f"connection closed: {reason}")

    def wait(self) -> Any:
        assert self.done.wait(10), "no answer within the test's patience"
        return self.response


class Client:
    def __init__(self, apis: KafkaApis) -> None:
        self.apis = apis
        self.correlation = 0

    def send(self, request: Any, version: int, client_id: str = "cli") -> Ctx:
        self.correlation += 1
        body = decode_body(type(request), version, encode_body(request, version))
        ctx = Ctx(RequestHeader(request_api_key=request.api.key, request_api_version=version,
                                correlation_id=self.correlation, client_id=client_id), body)
        self.apis.handle(ctx)
        return ctx

    def call(self, request: Any, version: int) -> Any:
        return self.send(request, version).wait()


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    logs = LogManager(tmp_path / "data")
    apis = KafkaApis(logs, node=BrokerNode(node_id=1, port=19092),
                     config={**FAST, "num.partitions": 3})
    logs.create_topic("t", 3)
    yield Client(apis)
    apis.close()
    logs.close()


def protocols() -> list[Any]:
    return [JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01")]


def join(client: Client, version: int, group: str, member_id: str = "",
         instance_id: str | None = None) -> Ctx:
    return client.send(JoinGroupRequest(
        group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
        member_id=member_id, group_instance_id=instance_id, protocol_type="consumer",
        protocols=protocols()), version)


@pytest.mark.parametrize("version", range(10))
def test_join_sync_heartbeat_leave_at_every_version(client: Client, version: int) -> None:
    group = f"g{version}"
    first = join(client, version, group).wait()
    if version >= 4:
        assert first.error_code == 79 and first.member_id.startswith("cli-")
        first = join(client, version, group, first.member_id).wait()
    assert first.error_code == 0
    member_id = first.member_id
    assert (first.generation_id, first.leader, first.protocol_name) == (1, member_id, "range")
    assert [(m.member_id, bytes(m.metadata)) for m in first.members] == [(member_id,
                                                                          b"\x00\x01")]
    if version >= 7:
        assert first.protocol_type == "consumer"
    sync_version = min(version, 5)
    synced = client.call(SyncGroupRequest(
        group_id=group, generation_id=1, member_id=member_id,
        protocol_type="consumer" if sync_version >= 5 else None,
        protocol_name="range" if sync_version >= 5 else None,
        assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
            member_id=member_id, assignment=b"asg")]), sync_version)
    assert synced.error_code == 0 and bytes(synced.assignment) == b"asg"
    if sync_version >= 5:
        assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")
    hb_version = min(version, 4)
    hb = client.call(HeartbeatRequest(group_id=group, generation_id=1, member_id=member_id),
                     hb_version)
    assert hb.error_code == 0
    assert client.call(HeartbeatRequest(group_id=group, generation_id=9, member_id=member_id),
                       hb_version).error_code == 22
    leave_version = min(version, 5)
    if leave_version < 3:
        left = client.call(LeaveGroupRequest(group_id=group, member_id=member_id), leave_version)
        assert left.error_code == 0
        again = client.call(LeaveGroupRequest(group_id=group, member_id=member_id),
                            leave_version)
        assert again.error_code == 25
    else:
        left = client.call(LeaveGroupRequest(group_id=group, members=[
            LeaveGroupRequest.MemberIdentity(member_id=member_id),
            LeaveGroupRequest.MemberIdentity(member_id="stranger")]), leave_version)
        assert left.error_code == 0
        assert [(m.member_id, m.error_code) for m in left.members] == [(member_id, 0),
                                                                      ("stranger", 25)]


def test_parked_join_is_answered_from_another_thread(client: Client) -> None:
    first = join(client, 5, "p").wait()
    a = join(client, 5, "p", first.member_id).wait()
    client.call(SyncGroupRequest(group_id="p", generation_id=1, member_id=a.member_id,
                                 assignments=[]), 3)
    pending = join(client, 5, "p").wait()
    b = join(client, 5, "p", pending.member_id)
    assert not b.done.is_set()  # parked: no handler thread holds it
    assert client.call(HeartbeatRequest(group_id="p", generation_id=1, member_id=a.member_id),
                       3).error_code == 27
    a2 = join(client, 5, "p", a.member_id).wait()
    b2 = b.wait()
    assert a2.generation_id == b2.generation_id == 2
    assert len(a2.members) == 2 and b2.members == []


def test_static_member_ids_are_echoed(client: Client) -> None:
    a = join(client, 5, "s", instance_id="inst-1").wait()
    assert a.error_code == 0 and a.member_id.startswith("inst-1-")
    assert [m.group_instance_id for m in a.members] == ["inst-1"]


def commit_request(group: str, offset: int, *, generation: int = -1, member_id: str = "",
                   metadata: str | None = "m", epoch: int = -1) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name="t", partitions=[
            OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=offset, committed_leader_epoch=epoch,
                committed_metadata=metadata)])])


@pytest.mark.parametrize("version", range(2, 10))
def test_offset_commit_versions(client: Client, version: int) -> None:
    group = f"c{version}"
    response = client.call(commit_request(group, 10 + version,
                                          epoch=3 if version >= 6 else -1), version)
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions])
            for t in response.topics] == [("t", [(0, 0)])]
    fetched = client.call(OffsetFetchRequest(group_id=group, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1])]), 5)
    parts = fetched.topics[0].partitions
    assert [(p.partition_index, p.committed_offset, p.metadata, p.error_code) for p in parts] \
        == [(0, 10 + version, "m", 0), (1, -1, "", 0)]
    assert parts[0].committed_leader_epoch == (3 if version >= 6 else -1)


def test_offset_commit_errors(client: Client) -> None:
    big = client.call(commit_request("e", 1, metadata="x" * 5000), 8)
    assert big.topics[0].partitions[0].error_code == 12
    member = client.call(commit_request("e2", 1, generation=3, member_id="m"), 8)
    assert member.topics[0].partitions[0].error_code == 22
    assert client.call(commit_request("e2", 1, generation=3, member_id="m"), 9) \
        .topics[0].partitions[0].error_code == 69


@pytest.mark.parametrize("version", range(1, 10))
def test_offset_fetch_versions(client: Client, version: int) -> None:
    client.call(commit_request("f", 5, epoch=2), 8)
    if version >= 8:
        response = client.call(OffsetFetchRequest(groups=[
            OffsetFetchRequest.OffsetFetchRequestGroup(group_id="f", topics=None),
            OffsetFetchRequest.OffsetFetchRequestGroup(group_id="none", topics=[
                OffsetFetchRequest.OffsetFetchRequestTopics(name="t", partition_indexes=[2])]),
        ]), version)
        f, none = response.groups
        assert (f.group_id, f.error_code) == ("f", 0)
        p = f.topics[0].partitions[0]
        assert (f.topics[0].name, p.partition_index, p.committed_offset,
                p.committed_leader_epoch) == ("t", 0, 5, 2)
        assert none.topics[0].partitions[0].committed_offset == -1
        return
    topics = None if version >= 2 else [
        OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0])]
    response = client.call(OffsetFetchRequest(group_id="f", topics=topics), version)
    p = response.topics[0].partitions[0]
    assert (p.partition_index, p.committed_offset, p.error_code) == (0, 5, 0)
    assert p.committed_leader_epoch == (2 if version >= 5 else -1)


@pytest.mark.parametrize("version", range(6))
def test_describe_and_list_groups(client: Client, version: int) -> None:
    first = join(client, 4, "d").wait()
    a = join(client, 4, "d", first.member_id).wait()
    client.call(SyncGroupRequest(group_id="d", generation_id=1, member_id=a.member_id,
                                 assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
                                     member_id=a.member_id, assignment=b"x")]), 3)
    client.call(commit_request("simple", 1), 8)
    described = client.call(DescribeGroupsRequest(
        groups=["d", "unknown"], include_authorized_operations=version >= 3), version)
    d, unknown = described.groups
    assert (d.error_code, d.group_id, d.group_state, d.protocol_type, d.protocol_data) == \
        (0, "d", "Stable", "consumer", "range")
    m = d.members[0]
    assert (m.member_id, m.client_id, m.client_host, bytes(m.member_metadata),
            bytes(m.member_assignment)) == (a.member_id, "cli", "/127.0.0.1", b"\x00\x01", b"x")
    if version >= 3:
        assert d.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)
    assert (unknown.group_state, unknown.members) == ("Dead", [])
    listed = client.call(ListGroupsRequest(states_filter=["stable"] if version >= 4 else []),
                         version)
    got = {(g.group_id, g.protocol_type) for g in listed.groups}
    if version >= 4:
        assert got == {("d", "consumer")}
        assert listed.groups[0].group_state == "Stable"
    else:
        assert got == {("d", "consumer"), ("simple", "")}
    if version >= 5:
        assert listed.groups[0].group_type == "classic"
        none = client.call(ListGroupsRequest(types_filter=["consumer"]), 5)
        assert none.groups == []


@pytest.mark.parametrize("version", range(3))
def test_delete_groups(client: Client, version: int) -> None:
    first = join(client, 4, "busy").wait()
    join(client, 4, "busy", first.member_id).wait()
    client.call(commit_request("old", 1), 8)
    response = client.call(DeleteGroupsRequest(groups_names=["busy", "old", "nope"]), version)
    assert [(r.group_id, r.error_code) for r in response.results] == \
        [("busy", 68), ("old", 0), ("nope", 69)]
    fetched = client.call(OffsetFetchRequest(group_id="old", topics=None), 5)
    assert fetched.topics == []


def test_consumer_offsets_is_listed_as_internal(client: Client) -> None:
    client.call(commit_request("x", 1), 8)
    meta = client.call(MetadataRequest(topics=None), 9)
    internal = {t.name: t.is_internal for t in meta.topics}
    assert internal == {"t": False, "__consumer_offsets": True}
