"""DeleteTopics (key 20), versions 0-6 (v6: by name or by topic id)."""

from __future__ import annotations

import uuid
from collections import Counter

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.error_codes import code_for, message_for
from samsa.broker.apis.services import BrokerServices, as_bool
from samsa.broker.apis.topic_names import refuse_internal
from samsa.errors import (
    InvalidRequestError,
    KafkaError,
    TopicAuthorizationFailedError,
    TopicDeletionDisabledError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from samsa.protocol import DeleteTopicsResponse
from samsa.protocol.schema import ZERO_UUID
from samsa.security.acl import AclOperation, ResourceType

Result = DeleteTopicsResponse.DeletableTopicResult


def delete_topic(services: BrokerServices, name: str) -> uuid.UUID:
    """Delete the topic and wake the fetches parked on it (they answer with an error)."""
    refuse_internal(name, "delete")
    info = services.topic(name)
    if info is None:
        raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
    services.logs.delete_topic(name)
    for partition in range(info.partitions):
        services.fetch_purgatory.check_and_complete((name, partition))
    return info.topic_id


def handle_delete_topics(services: BrokerServices, ctx: RequestContext) -> DeleteTopicsResponse:
    version = ctx.header.request_api_version
    req = ctx.body
    if version >= 6:
        wanted: list[tuple[str | None, uuid.UUID]] = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in req.topic_names]
    counts = Counter(name if name is not None else topic_id for name, topic_id in wanted)
    enabled = as_bool(services.config.get("delete.topic.enable", True))
    results: list[Result] = []
    # DELETE on the cluster, else DELETE on each topic (Kafka's ControllerApis.deleteTopics).
    may_delete_all = services.authorized(ctx, AclOperation.DELETE, ResourceType.CLUSTER)
    for name, topic_id in wanted:
        key = name if name is not None else topic_id
        if counts[key] > 1:
            results.append(Result(name=name, topic_id=topic_id,
                                  error_code=InvalidRequestError.code,
                                  error_message="topic listed more than once in the request"))
            continue
        if name is None or (topic_id != ZERO_UUID and version >= 6 and not name):
            info = services.logs.topic_by_id(topic_id)
            if info is None:
                results.append(Result(name=None, topic_id=topic_id,
                                      error_code=UnknownTopicIdError.code,
                                      error_message=f"no topic has id {topic_id}"))
                continue
            name = info.name
        if not may_delete_all and not services.authorized(ctx, AclOperation.DELETE,
                                                          ResourceType.TOPIC, name):
            results.append(Result(name=name, topic_id=topic_id,
                                  error_code=TopicAuthorizationFailedError.code,
                                  error_message="Authorization failed."))
            continue
        if not enabled:
            results.append(Result(name=name, topic_id=topic_id,
                                  error_code=TopicDeletionDisabledError.code,
                                  error_message="topic deletion is disabled "
                                                "(delete.topic.enable=false)"))
            continue
        try:
            deleted_id = delete_topic(services, name)
        except KafkaError as exc:
            results.append(Result(name=name, topic_id=topic_id,
                                  error_code=code_for(exc, f"DeleteTopics {name}"),
                                  error_message=message_for(exc)))
            continue
        results.append(Result(name=name, topic_id=deleted_id, error_code=0, error_message=None))
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)
