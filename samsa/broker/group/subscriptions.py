"""Which topics a classic consumer group is subscribed to, read from its members' metadata.

The metadata is the consumer protocol's Subscription (ConsumerProtocolSubscription.json): an
int16 version, then the topic names as an int32-counted array of int16-length strings in every
version; the rest (user data, owned partitions, ...) is not needed here.  As Kafka's
GroupMetadata.computeSubscribedTopics: only for protocol type "consumer" with a selected
protocol, and unknown (None) if any member's metadata cannot be read.
"""

from __future__ import annotations

import struct

from samsa.broker.group.group import ClassicGroup

CONSUMER_PROTOCOL_TYPE = "consumer"


def _topics(metadata: bytes) -> list[str]:
    view = memoryview(metadata)
    (count,) = struct.unpack_from(">i", view, 2)  # after the int16 version
    pos, topics = 6, []
    for _ in range(count):
        (size,) = struct.unpack_from(">h", view, pos)
        pos += 2
        if size < 0 or pos + size > len(view):
            raise ValueError("truncated topic name")
        topics.append(bytes(view[pos:pos + size]).decode())
        pos += size
    return topics


def subscribed_topics(group: ClassicGroup) -> set[str] | None:
    if group.protocol_type != CONSUMER_PROTOCOL_TYPE or group.protocol_name is None:
        return None
    topics: set[str] = set()
    for member in group.members.values():
        try:
            topics.update(_topics(member.metadata_for(group.protocol_name)))
        except (struct.error, ValueError, UnicodeDecodeError):
            return None
    return topics
