"""Client-side partition assignors: range, roundrobin, cooperative-sticky.

Each takes ``partitions_per_topic`` (topic -> partition count) and ``subscriptions``
(member id -> Subscription) and returns member id -> list of TopicPartition.  Members are
ordered as Java's ``MemberInfo``: static members (group.instance.id) first, by instance id,
then dynamic members by member id -- so a restarted static member, which comes back with a
new member id, takes the same place and the same partitions.
"""

from __future__ import annotations

from collections.abc import Mapping

from samsa.consumer.protocol import Subscription
from samsa.net.cluster import TopicPartition

__all__ = ["ASSIGNORS", "CooperativeStickyAssignor", "RangeAssignor", "RoundRobinAssignor"]


def _member_order(subscriptions: Mapping[str, Subscription]) -> list[str]:
    def key(member: str) -> tuple[int, str, str]:
        instance = subscriptions[member].group_instance_id
        return (0, instance, member) if instance is not None else (1, "", member)
    return sorted(subscriptions, key=key)


class RangeAssignor:
    name = "range"
    cooperative = False

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        out: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        members = _member_order(subscriptions)
        for topic in sorted(partitions_per_topic):
            consumers = [m for m in members if topic in subscriptions[m].topics]
            if not consumers:
                continue
            n = partitions_per_topic[topic]
            q, r = divmod(n, len(consumers))
            for i, m in enumerate(consumers):
                start = i * q + min(i, r)
                length = q + (1 if i < r else 0)
                out[m] += [TopicPartition(topic, p) for p in range(start, start + length)]
        return out


class RoundRobinAssignor:
    name = "roundrobin"
    cooperative = False

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        out: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        members = _member_order(subscriptions)
        if not members:
            return out
        i = 0
        for topic in sorted(partitions_per_topic):
            for p in range(partitions_per_topic[topic]):
                # Next member in the circle that subscribes to this topic.
                for _ in range(len(members)):
                    m = members[i % len(members)]
                    i += 1
                    if topic in subscriptions[m].topics:
                        out[m].append(TopicPartition(topic, p))
                        break
        return out


class CooperativeStickyAssignor:
    """Balanced, keeps owned partitions; a partition changing owner is first left out.

    The revoking member then rejoins (KIP-429) and the follow-up rebalance hands the freed
    partition to its new owner.
    """

    name = "cooperative-sticky"
    cooperative = True

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        members = _member_order(subscriptions)
        out: dict[str, list[TopicPartition]] = {m: [] for m in members}
        if not members:
            return out
        all_parts = [TopicPartition(t, p) for t in sorted(partitions_per_topic)
                     for p in range(partitions_per_topic[t])]
        valid = set(all_parts)
        # Highest generation wins a partition claimed twice (stale owner after a zombie).
        owner: dict[TopicPartition, str] = {}
        best_gen: dict[TopicPartition, int] = {}
        for m in members:
            sub = subscriptions[m]
            for tp in sub.owned_partitions:
                if tp in valid and tp.topic in sub.topics and sub.generation_id >= best_gen.get(tp, -2):
                    owner[tp] = m
                    best_gen[tp] = sub.generation_id
        # Target: balanced counts; members keep what they own up to their quota.
        eligible = {tp: [m for m in members if tp.topic in subscriptions[m].topics]
                    for tp in all_parts}
        total = sum(1 for tp in all_parts if eligible[tp])
        quota_base, extra = divmod(total, len(members))
        quota = {m: quota_base + (1 if i < extra else 0) for i, m in enumerate(members)}
        target: dict[str, list[TopicPartition]] = {m: [] for m in members}
        unassigned: list[TopicPartition] = []
        for tp in all_parts:
            held = owner.get(tp)
            if held is not None and len(target[held]) < quota[held]:
                target[held].append(tp)
            elif eligible[tp]:
                unassigned.append(tp)
        for tp in unassigned:
            candidates = [m for m in eligible[tp]]
            m = min(candidates, key=lambda c: (len(target[c]) - quota[c], len(target[c]), c))
            target[m].append(tp)
        # Revoke first: a partition moving away from a live owner is held back this round.
        for m, parts in target.items():
            out[m] = [tp for tp in parts if owner.get(tp, m) == m]
        return out


ASSIGNORS = {a.name: a for a in (RangeAssignor, RoundRobinAssignor, CooperativeStickyAssignor)}
