"""CreateTopics (key 19), versions 0-7."""

from __future__ import annotations

from collections import Counter
from typing import Any

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.describe_configs import topic_config_entries
from samsa.broker.apis.error_codes import code_for, message_for
from samsa.broker.apis.services import BrokerServices
from samsa.broker.apis.topic_configs import validate_topic_config_values
from samsa.broker.apis.topic_names import refuse_internal, topic_name_problem
from samsa.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    KafkaError,
    PolicyViolationError,
    TopicAlreadyExistsError,
    TopicAuthorizationFailedError,
)
from samsa.protocol import CreateTopicsResponse
from samsa.protocol.schema import ZERO_UUID
from samsa.security.acl import AclOperation, ResourceType

TopicResult = CreateTopicsResponse.CreatableTopicResult
ConfigResult = CreateTopicsResponse.CreatableTopicConfigs

# Kafka's controller refuses a CreateTopics request adding more partitions than this, whole
# (ReplicationControlManager.MAX_PARTITIONS_PER_BATCH), and a CreatePartitions one too (its
# records are capped at MAX_RECORDS_PER_USER_OP, one per partition).
MAX_PARTITIONS_PER_REQUEST = 10_000


def _requested_partitions(services: BrokerServices, topics: Any) -> int:
    """Partitions the request would add, counted as Kafka's validateTotalNumberOfPartitions."""
    total = 0
    for topic in topics:
        if topic.assignments:
            total += len(topic.assignments)
        elif topic.num_partitions == -1:
            total += services.default_partitions
        elif topic.num_partitions > 0:
            total += topic.num_partitions
    return total


def _too_many_partitions(services: BrokerServices, req: Any) -> CreateTopicsResponse | None:
    """The whole request refused, before any work, if it adds more partitions than one request
    may (POLICY_VIOLATION for every topic, as Kafka answers)."""
    total = _requested_partitions(services, req.topics)
    if total <= MAX_PARTITIONS_PER_REQUEST:
        return None
    message = (f"Excessively large number of partitions per request: {total}; one CreateTopics "
               f"request may add at most {MAX_PARTITIONS_PER_REQUEST} (Kafka's controller "
               "limit). Create the topics in several requests; the broker holds at most "
               f"max.broker.partitions={services.logs.max_partitions} in all.")
    names = dict.fromkeys(t.name for t in req.topics)
    return CreateTopicsResponse(throttle_time_ms=0, topics=[
        TopicResult(name=name, topic_id=ZERO_UUID, error_code=PolicyViolationError.code,
                    error_message=message, configs=None) for name in names])


def _plan(services: BrokerServices, topic: Any) -> tuple[int, dict[str, str]]:
    """(partition count, config overrides) for one requested topic, or raise its error."""
    name = topic.name
    problem = topic_name_problem(name)
    if problem is not None:
        raise InvalidTopicError(problem)
    refuse_internal(name, "create")
    if services.topic(name) is not None:
        raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
    node = services.node.node_id
    assignments = topic.assignments
    num_partitions = topic.num_partitions
    replication = topic.replication_factor
    if assignments:
        if num_partitions != -1 or replication != -1:
            raise InvalidRequestError("Both numPartitions or replicationFactor and "
                                      "replicasAssignments were set; use one or the other")
        indexes = sorted(a.partition_index for a in assignments)
        if indexes != list(range(len(assignments))):
            raise InvalidReplicaAssignmentError(
                f"partitions in the assignment must be 0..{len(assignments) - 1}, got {indexes}")
        for a in assignments:
            if list(a.broker_ids) != [node]:
                raise InvalidReplicaAssignmentError(
                    f"partition {a.partition_index} is assigned to brokers {list(a.broker_ids)}"
                    f"; this cluster has the one broker {node}")
        count = len(assignments)
    else:
        count = services.default_partitions if num_partitions == -1 else num_partitions
        if count <= 0:
            raise InvalidPartitionsError("Number of partitions must be larger than 0.")
        if replication == -1:
            replication = int(services.config["default.replication.factor"])
        if replication <= 0:
            raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
        if replication != 1:
            raise InvalidReplicationFactorError(
                f"Replication factor: {replication} larger than available brokers: 1.")
    names = Counter(c.name for c in topic.configs)
    repeated = sorted(n for n, k in names.items() if k > 1)
    if repeated:
        raise InvalidRequestError(f"config(s) {', '.join(repeated)} given more than once")
    configs = validate_topic_config_values(
        {c.name: c.value for c in topic.configs})
    return count, configs


def handle_create_topics(services: BrokerServices, ctx: RequestContext) -> CreateTopicsResponse:
    version = ctx.header.request_api_version
    req = ctx.body
    refused = _too_many_partitions(services, req)
    if refused is not None:
        return refused
    counts = Counter(t.name for t in req.topics)
    repeated = {name for name, k in counts.items() if k > 1}
    answered: set[str] = set()
    results = []
    # CREATE on the cluster, else on each topic (Kafka's ControllerApis.createTopics).
    may_create_all = services.authorized(ctx, AclOperation.CREATE, ResourceType.CLUSTER)
    for topic in req.topics:
        name = topic.name
        if not may_create_all and name not in repeated and not services.authorized(
                ctx, AclOperation.CREATE, ResourceType.TOPIC, name):
            results.append(TopicResult(name=name, topic_id=ZERO_UUID,
                                       error_code=TopicAuthorizationFailedError.code,
                                       error_message="Authorization failed.", configs=None))
            continue
        if name in repeated:
            if name in answered:
                continue  # one result per repeated name
            answered.add(name)
            results.append(TopicResult(
                name=name, topic_id=ZERO_UUID, error_code=InvalidRequestError.code,
                error_message="Create topics request contains multiple entries for topic "
                              f"{name}", configs=None))
            continue
        try:
            count, configs = _plan(services, topic)
            info = services.logs.create_topic(name, count, configs,
                                              validate_only=bool(req.validate_only))
        except KafkaError as exc:
            results.append(TopicResult(name=name, topic_id=ZERO_UUID,
                                       error_code=code_for(exc, f"CreateTopics {name}"),
                                       error_message=message_for(exc), configs=None))
            continue
        result = TopicResult(name=name, topic_id=info.topic_id, error_code=0,
                             error_message=None, num_partitions=info.partitions,
                             replication_factor=1, configs=None)
        if version >= 5 and services.authorized(ctx, AclOperation.DESCRIBE_CONFIGS,
                                                ResourceType.TOPIC, name):
            result.configs = [
                ConfigResult(name=e.name, value=e.value, read_only=e.read_only,
                             config_source=int(e.source), is_sensitive=e.sensitive)
                for e in topic_config_entries(services, configs)
            ]
        results.append(result)
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)
