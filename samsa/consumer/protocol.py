"""ConsumerProtocol bytes carried inside JoinGroup/SyncGroup (protocol type "consumer").

Subscription (v0-3): int16 version, [string] topics, nullable bytes user_data,
v1+ owned partitions [(string topic, [int32])], v2+ int32 generation_id, v3+ nullable
string rack_id.  Assignment (v0-3): int16 version, [(string topic, [int32])], nullable bytes
user_data.  Newer versions are read with the v3 layout and their extra bytes ignored.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from samsa.net.cluster import TopicPartition

__all__ = ["Assignment", "Subscription", "decode_assignment", "decode_subscription",
           "encode_assignment", "encode_subscription"]

_H, _I = struct.Struct(">h"), struct.Struct(">i")
SUBSCRIPTION_VERSION = 3
ASSIGNMENT_VERSION = 3


@dataclass
class Subscription:
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation_id: int = -1
    rack_id: str | None = None
    version: int = SUBSCRIPTION_VERSION
    # Not in the bytes: the leader fills it from JoinGroup's member list (assignors order
    # static members by it).
    group_instance_id: str | None = None


@dataclass
class Assignment:
    partitions: list[TopicPartition]
    user_data: bytes | None = None
    version: int = ASSIGNMENT_VERSION


def _w_str(out: bytearray, s: str | None) -> None:
    if s is None:
        out += _H.pack(-1)
    else:
        b = s.encode()
        out += _H.pack(len(b)) + b


def _w_bytes(out: bytearray, b: bytes | None) -> None:
    if b is None:
        out += _I.pack(-1)
    else:
        out += _I.pack(len(b)) + b


def _w_partitions(out: bytearray, parts: list[TopicPartition]) -> None:
    by_topic: dict[str, list[int]] = {}
    for tp in parts:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out += _I.pack(len(by_topic))
    for topic, ps in by_topic.items():
        _w_str(out, topic)
        out += _I.pack(len(ps))
        for p in ps:
            out += _I.pack(p)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def int16(self) -> int:
        v = _H.unpack_from(self.data, self.pos)[0]
        self.pos += 2
        return int(v)

    def int32(self) -> int:
        v = _I.unpack_from(self.data, self.pos)[0]
        self.pos += 4
        return int(v)

    def string(self) -> str | None:
        n = self.int16()
        if n < 0:
            return None
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def bytes_(self) -> bytes | None:
        n = self.int32()
        if n < 0:
            return None
        b = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return b

    def partitions(self) -> list[TopicPartition]:
        out = []
        for _ in range(self.int32()):
            topic = self.string() or ""
            out += [TopicPartition(topic, self.int32()) for _ in range(self.int32())]
        return out

    @property
    def remaining(self) -> int:
        return len(self.data) - self.pos


def encode_subscription(sub: Subscription) -> bytes:
    v = sub.version
    out = bytearray(_H.pack(v))
    out += _I.pack(len(sub.topics))
    for t in sub.topics:
        _w_str(out, t)
    _w_bytes(out, sub.user_data)
    if v >= 1:
        _w_partitions(out, sub.owned_partitions)
    if v >= 2:
        out += _I.pack(sub.generation_id)
    if v >= 3:
        _w_str(out, sub.rack_id)
    return bytes(out)


def decode_subscription(data: bytes) -> Subscription:
    r = _Reader(data)
    v = r.int16()
    topics = [r.string() or "" for _ in range(r.int32())]
    sub = Subscription(topics, r.bytes_(), version=v)
    if v >= 1 and r.remaining:
        sub.owned_partitions = r.partitions()
    if v >= 2 and r.remaining:
        sub.generation_id = r.int32()
    if v >= 3 and r.remaining:
        sub.rack_id = r.string()
    return sub


def encode_assignment(a: Assignment) -> bytes:
    out = bytearray(_H.pack(a.version))
    _w_partitions(out, a.partitions)
    _w_bytes(out, a.user_data)
    return bytes(out)


def decode_assignment(data: bytes | None) -> Assignment:
    if not data:
        return Assignment([])
    r = _Reader(data)
    v = r.int16()
    parts = r.partitions()
    user = r.bytes_() if r.remaining >= 4 else None
    return Assignment(parts, user, version=v)
