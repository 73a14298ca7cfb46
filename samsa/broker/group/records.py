"""The records the group coordinator keeps in ``__consumer_offsets`` (Kafka's OffsetCommitKey/Value and GroupMetadataKey/Value).

The layouts are Kafka's (``OffsetCommitKey``/``OffsetCommitValue``, ``GroupMetadataKey``/
``GroupMetadataValue`` in Kafka's group-coordinator message definitions), declared here as data
and encoded by the protocol codec, so Kafka's own tools could read the topic:

* key   = int16 key version + struct: version 0/1 an offset commit ``{group, topic,
  partition}``, version 2 group metadata ``{group}``;
* value = int16 value version + struct, or null (a tombstone: the key was deleted).

We write OffsetCommitValue v3 (with the leader epoch) and GroupMetadataValue v3 (with static
member ids and the state timestamp); reading accepts every version Kafka has written (0-4).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from samsa.protocol.codec import decode_struct, encode_struct
from samsa.protocol.message import declare_struct
from samsa.protocol.schema import F, StructSchema, VersionRange

_OFFSET_KEY_DECLS = [
    F("group", "string", "0-1"),
    F("topic", "string", "0-1"),
    F("partition", "int32", "0-1"),
]
_OFFSET_VALUE_DECLS = [
    F("offset", "int64", "0+"),
    F("leader_epoch", "int32", "3+", default=-1, ignorable=True),
    F("metadata", "string", "0+"),
    F("commit_timestamp", "int64", "0+"),
    F("expire_timestamp", "int64", "1", default=-1, ignorable=True),
]
_GROUP_KEY_DECLS = [F("group", "string", "2")]
_GROUP_VALUE_DECLS = [
    F("protocol_type", "string", "0+"),
    F("generation", "int32", "0+"),
    F("protocol", "string", "0+", nullable="0+"),
    F("leader", "string", "0+", nullable="0+"),
    F("current_state_timestamp", "int64", "2+", default=-1, ignorable=True),
    F("members", "[]MemberMetadata", "0+", fields=[
        F("member_id", "string", "0+"),
        F("group_instance_id", "string", "3+", nullable="3+", default=None, ignorable=True),
        F("client_id", "string", "0+"),
        F("client_host", "string", "0+"),
        F("rebalance_timeout", "int32", "1+", default=-1, ignorable=True),
        F("session_timeout", "int32", "0+"),
        F("subscription", "bytes", "0+"),
        F("assignment", "bytes", "0+"),
    ]),
]

_VALUE_FLEXIBLE = VersionRange.parse("4+")
OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3
_INT16 = struct.Struct(">h")


OFFSET_KEY = declare_struct("OffsetCommitKey", _OFFSET_KEY_DECLS)
OFFSET_VALUE = declare_struct("OffsetCommitValue", _OFFSET_VALUE_DECLS)
GROUP_KEY = declare_struct("GroupMetadataKey", _GROUP_KEY_DECLS)
GROUP_VALUE = declare_struct("GroupMetadataValue", _GROUP_VALUE_DECLS)
_MEMBERS = next(f for f in GROUP_VALUE.fields if f.name == "members").item
assert isinstance(_MEMBERS, StructSchema)
MemberMetadata: Any = _MEMBERS.cls


def _encode(schema: StructSchema, version: int, flexible: bool, **fields: Any) -> bytes:
    buf = bytearray(_INT16.pack(version))
    encode_struct(schema.cls(**fields), version, flexible, buf)
    return bytes(buf)


# -- keys ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return _encode(OFFSET_KEY, OFFSET_KEY_VERSION, False, group=group, topic=topic,
                   partition=partition)


def group_key(group: str) -> bytes:
    return _encode(GROUP_KEY, GROUP_KEY_VERSION, False, group=group)


def decode_key(data: bytes) -> OffsetKey | GroupKey | None:
    """The key, or None for a key version this broker does not know (Kafka's newer group
    types); such records are skipped."""
    (version,) = _INT16.unpack_from(data)
    if version in (0, 1):
        key, _ = decode_struct(OFFSET_KEY, version, False, data, 2)
        return OffsetKey(key.group, key.topic, key.partition)
    if version == 2:
        key, _ = decode_struct(GROUP_KEY, version, False, data, 2)
        return GroupKey(key.group)
    return None


# -- values -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1  # only in value version 1


def offset_value(value: OffsetValue) -> bytes:
    if value.expire_timestamp >= 0:
        # An explicit expire timestamp (OffsetCommit v2-4's retention time) needs version 1,
        # the only one with the field, as Kafka writes it (GroupCoordinatorRecordHelpers).
        return _encode(OFFSET_VALUE, 1, False, offset=value.offset, metadata=value.metadata,
                       commit_timestamp=value.commit_timestamp,
                       expire_timestamp=value.expire_timestamp)
    return _encode(OFFSET_VALUE, OFFSET_VALUE_VERSION, False, offset=value.offset,
                   leader_epoch=value.leader_epoch, metadata=value.metadata,
                   commit_timestamp=value.commit_timestamp)


def decode_offset_value(data: bytes) -> OffsetValue:
    (version,) = _INT16.unpack_from(data)
    v, _ = decode_struct(OFFSET_VALUE, version, version in _VALUE_FLEXIBLE, data, 2)
    return OffsetValue(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                       v.expire_timestamp)


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberValue, ...]


def group_value(value: GroupValue) -> bytes:
    members = [MemberMetadata(
        member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
        client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms,
        session_timeout=m.session_timeout_ms, subscription=m.subscription,
        assignment=m.assignment) for m in value.members]
    return _encode(GROUP_VALUE, GROUP_VALUE_VERSION, False, protocol_type=value.protocol_type,
                   generation=value.generation, protocol=value.protocol, leader=value.leader,
                   current_state_timestamp=value.current_state_timestamp, members=members)


def decode_group_value(data: bytes) -> GroupValue:
    (version,) = _INT16.unpack_from(data)
    v, _ = decode_struct(GROUP_VALUE, version, version in _VALUE_FLEXIBLE, data, 2)
    members = tuple(MemberValue(
        m.member_id, m.group_instance_id, m.client_id, m.client_host,
        m.rebalance_timeout if m.rebalance_timeout >= 0 else m.session_timeout,
        m.session_timeout, bytes(m.subscription), bytes(m.assignment)) for m in v.members)
    return GroupValue(v.protocol_type, v.generation, v.protocol, v.leader,
                      v.current_state_timestamp, members)
