"""Topic name rules (Kafka's ``Topic.validate``) and the internal topics."""

from __future__ import annotations

import re

from samsa.errors import InvalidRequestError, InvalidTopicError

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")

GROUP_METADATA_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC})


def topic_name_problem(name: str | None) -> str | None:
    """Why ``name`` is not a legal topic name, or None when it is."""
    if name is None or name == "":
        return "the topic name is empty"
    if name in (".", ".."):
        return f"topic name {name!r} is not allowed"
    if len(name) > MAX_NAME_LENGTH:
        return f"topic name is {len(name)} characters long; the limit is {MAX_NAME_LENGTH}"
    if not _LEGAL.fullmatch(name):
        return (f"topic name {name!r} is illegal: use only ASCII letters, digits, '.', '_' "
                f"and '-'")
    return None


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPICS


def refuse_internal(name: str, action: str) -> None:
    """Raise if a client asks to ``action`` ("create", "delete", "add partitions to", "alter
    the configs of") an internal topic.

    The broker's coordinators own these topics: they create them with the partition count and
    compacted config their placement depends on (offsets.topic.num.partitions), and a client
    that created, grew, deleted or reconfigured one would break every group's commits.  Kafka
    protects them against produce and DeleteRecords (ReplicaManager) and its controller refuses
    to create its own metadata topic (ControllerApis.createTopics: INVALID_REQUEST); samsa has
    no second broker whose admin tools need more, so it refuses every change, with or without an
    authorizer.
    """
    if name in INTERNAL_TOPICS:
        raise InvalidRequestError(
            f"cannot {action} internal topic {name}: the broker manages it itself")


def refuse_internal_data(name: str, action: str) -> None:
    """Raise INVALID_TOPIC_EXCEPTION for produce/DeleteRecords on an internal topic, as Kafka's
    ReplicaManager does ("Cannot append to internal topic ...")."""
    if name in INTERNAL_TOPICS:
        raise InvalidTopicError(f"Cannot {action} internal topic {name}")
