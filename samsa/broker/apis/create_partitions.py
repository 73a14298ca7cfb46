"""CreatePartitions (key 37), versions 0-3: grow a topic (never shrink it)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.create_topics import MAX_PARTITIONS_PER_REQUEST
from samsa.broker.apis.error_codes import code_for, message_for
from samsa.broker.apis.services import BrokerServices
from samsa.broker.apis.topic_names import refuse_internal
from samsa.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidRequestError,
    KafkaError,
    PolicyViolationError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from samsa.protocol import CreatePartitionsResponse
from samsa.security.acl import AclOperation, ResourceType

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


def _grow(services: BrokerServices, topic: Any, validate_only: bool) -> None:
    name = topic.name
    count = topic.count
    refuse_internal(name, "add partitions to")
    info = services.topic(name)
    if info is None:
        raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
    if count < info.partitions:
        raise InvalidPartitionsError(f"Topic currently has {info.partitions} partitions, which is "
                                     f"higher than the requested {count}.")
    if count == info.partitions:
        raise InvalidPartitionsError(f"Topic already has {info.partitions} partitions.")
    assignments = topic.assignments
    if assignments is not None:
        added = count - info.partitions
        if len(assignments) != added:
            raise InvalidReplicaAssignmentError(
                f"{len(assignments)} assignment(s) given for {added} new partition(s)")
        node = services.node.node_id
        for a in assignments:
            if list(a.broker_ids) != [node]:
                raise InvalidReplicaAssignmentError(
                    f"new partitions can only be assigned to broker {node}, not "
                    f"{list(a.broker_ids)}")
    services.logs.add_partitions(name, count, validate_only=validate_only)


def _added_partitions(services: BrokerServices, topics: Any) -> int:
    added = 0
    for topic in topics:
        info = services.topic(topic.name)
        if info is not None and topic.count > info.partitions:
            added += topic.count - info.partitions
    return added


def handle_create_partitions(services: BrokerServices,
                             ctx: RequestContext) -> CreatePartitionsResponse:
    req = ctx.body
    added = _added_partitions(services, req.topics)
    if added > MAX_PARTITIONS_PER_REQUEST:
        # Kafka's controller fails such a request whole ("Unable to perform excessively large
        # batch operation.", EventHandlerExceptionInfo), before any work.
        message = (f"Unable to perform excessively large batch operation: {added} new "
                   f"partitions; one CreatePartitions request may add at most "
                   f"{MAX_PARTITIONS_PER_REQUEST}. Grow the topics in several requests.")
        return CreatePartitionsResponse(throttle_time_ms=0, results=[
            Result(name=name, error_code=PolicyViolationError.code, error_message=message)
            for name in dict.fromkeys(t.name for t in req.topics)])
    counts = Counter(t.name for t in req.topics)
    results: list[Result] = []
    answered: set[str] = set()
    for topic in req.topics:
        name = topic.name
        if counts[name] > 1:
            if name not in answered:
                answered.add(name)
                results.append(Result(name=name, error_code=InvalidRequestError.code,
                                      error_message="Duplicate topic in request."))
            continue
        if not services.authorized(ctx, AclOperation.ALTER, ResourceType.TOPIC, name):
            results.append(Result(name=name, error_code=TopicAuthorizationFailedError.code,
                                  error_message=None))
            continue
        try:
            _grow(services, topic, bool(req.validate_only))
        except KafkaError as exc:
            results.append(Result(name=name, error_code=code_for(exc, f"CreatePartitions {name}"),
                                  error_message=message_for(exc)))
            continue
        results.append(Result(name=name, error_code=0, error_message=None))
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)
