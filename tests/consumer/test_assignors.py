"""Assignors pinned with known vectors, and ConsumerProtocol bytes round trips."""

from __future__ import annotations

from samsa.consumer.assignors import (
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
)
from samsa.consumer.protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from samsa.net.cluster import TopicPartition as TP


def test_range_vector() -> None:
    # 2 topics x 3 partitions, 2 members: the first member gets the extra partition per topic.
    subs = {"c0": Subscription(["t0", "t1"]), "c1": Subscription(["t0", "t1"])}
    got = RangeAssignor().assign({"t0": 3, "t1": 3}, subs)
    assert got == {"c0": [TP("t0", 0), TP("t0", 1), TP("t1", 0), TP("t1", 1)],
                   "c1": [TP("t0", 2), TP("t1", 2)]}


def test_roundrobin_vector_skips_unsubscribed() -> None:
    subs = {"a": Subscription(["t0"]), "b": Subscription(["t0", "t1"]),
            "c": Subscription(["t0", "t1"])}
    got = RoundRobinAssignor().assign({"t0": 3, "t1": 2}, subs)
    assert got == {"a": [TP("t0", 0)], "b": [TP("t0", 1), TP("t1", 0)],
                   "c": [TP("t0", 2), TP("t1", 1)]}


def test_cooperative_sticky_revokes_before_moving() -> None:
    owned = [TP("t", p) for p in range(4)]
    subs = {"a": Subscription(["t"], owned_partitions=owned, generation_id=1),
            "b": Subscription(["t"])}
    first = CooperativeStickyAssignor().assign({"t": 4}, subs)
    assert len(first["a"]) == 2 and first["b"] == []  # two partitions held back
    subs = {"a": Subscription(["t"], owned_partitions=first["a"], generation_id=2),
            "b": Subscription(["t"], generation_id=2)}
    second = CooperativeStickyAssignor().assign({"t": 4}, subs)
    assert second["a"] == first["a"] and len(second["b"]) == 2
    assert set(second["a"]) | set(second["b"]) == set(owned)


def test_protocol_round_trip() -> None:
    sub = Subscription(["a", "b"], b"u", [TP("a", 1), TP("b", 0)], 7, "r1")
    assert decode_subscription(encode_subscription(sub)) == sub
    v0 = Subscription(["a"], None, version=0)
    assert encode_subscription(v0) == b"\x00\x00\x00\x00\x00\x01\x00\x01a\xff\xff\xff\xff"
    a = Assignment([TP("a", 0), TP("a", 2)], None)
    assert decode_assignment(encode_assignment(a)) == a
    assert decode_assignment(b"") == Assignment([])
