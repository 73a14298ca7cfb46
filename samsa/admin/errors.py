"""Per-topic admin errors: the broker's error code as samsa's exception class, with a message
that names the topic, says what went wrong and what to do about it."""

from __future__ import annotations

from samsa.errors import (
    BrokerResponseError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    KafkaError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    TopicAlreadyExistsError,
    TopicAuthorizationFailedError,
    TopicDeletionDisabledError,
    UnknownTopicOrPartitionError,
    for_code,
)

__all__ = ["topic_error"]

# (error class, operation or None for any) -> what the user can do about it.
_HINTS: dict[tuple[type[BrokerResponseError], str | None], str] = {
    (TopicAlreadyExistsError, None):
        "choose another name, or delete the existing topic first",
    (InvalidTopicError, None):
        "a topic name is 1-249 characters from ASCII letters, digits, '.', '_' and '-', and "
        "is not '.' or '..'",
    (InvalidReplicationFactorError, None):
        "use a replication factor between 1 and the number of brokers, or -1 for the "
        "broker's default.replication.factor",
    (InvalidPartitionsError, "create"):
        "use at least 1 partition, or -1 for the broker's num.partitions",
    (InvalidPartitionsError, "add partitions to"):
        "a topic's partition count can only grow: give a total larger than the current "
        "count (describe_topics shows it)",
    (InvalidReplicaAssignmentError, None):
        "assign every partition to existing broker ids, the same number of replicas each",
    (InvalidConfigError, None):
        "check the config names and values (describe_configs lists a topic's settings)",
    (UnknownTopicOrPartitionError, None):
        "the topic or partition does not exist; list the existing topics with "
        "list_topics() or 'samsa topics list'",
    (TopicDeletionDisabledError, None):
        "the broker has delete.topic.enable=false; enable it to delete topics",
    (TopicAuthorizationFailedError, None):
        "the client's principal lacks permission for this operation on the topic",
    (PolicyViolationError, None):
        "the broker's create/alter policy refused the request; see its message",
    (OffsetOutOfRangeError, "delete records of"):
        "the offset is beyond the partition's high watermark; use -1 to delete everything "
        "up to the high watermark",
}


def _hint(cls: type[BrokerResponseError], operation: str) -> str | None:
    return _HINTS.get((cls, operation)) or _HINTS.get((cls, None))


def topic_error(code: int, broker_message: str | None, topic: str, operation: str,
                what: str = "topic") -> KafkaError:
    """The exception for a per-topic error: ``operation`` is a verb phrase such as "create"
    or "add partitions to"; ``topic`` is the topic's (or partition's) name.  The instance
    carries ``topic`` for callers that handle several."""
    cls = for_code(code)
    text = (broker_message or cls.message).strip().rstrip(".")
    message = f"cannot {operation} {what} {topic!r}: {text}."
    hint = _hint(cls, operation)
    if hint:
        message += f" What to do: {hint}."
    error = cls(message)
    error.topic = topic  # type: ignore[attr-defined]
    return error

