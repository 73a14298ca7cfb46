"""DescribeCluster (key 60) and FindCoordinator (key 10): this node is the whole cluster.

FindCoordinator is advertised (0-6) before the group coordinator exists because librdkafka
<= 2.11.0 enables LZ4 only if FindCoordinator v0 is in the range (librdkafka's rdkafka_feature.c); it answers with
this node for groups and transactions alike.
"""

from __future__ import annotations

import enum

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.metadata import CLUSTER_OPERATIONS, NOT_REQUESTED
from samsa.broker.apis.services import BrokerServices
from samsa.errors import (
    GroupAuthorizationFailedError,
    InvalidRequestError,
    MismatchedEndpointTypeError,
    TransactionalIdAuthorizationFailedError,
)
from samsa.protocol import DescribeClusterResponse, FindCoordinatorResponse
from samsa.security.acl import CLUSTER_NAME, AclOperation, ResourceType

BROKERS_ENDPOINT = 1


class CoordinatorType(enum.IntEnum):
    """FindCoordinator's KeyType (Kafka's ``FindCoordinatorRequest.CoordinatorType``); SHARE
    (2, KIP-932) is not served."""

    GROUP = 0
    TRANSACTION = 1


def handle_describe_cluster(services: BrokerServices,
                            ctx: RequestContext) -> DescribeClusterResponse:
    req = ctx.body
    node = services.node
    if ctx.api_version >= 1 and req.endpoint_type != BROKERS_ENDPOINT:
        return DescribeClusterResponse(
            throttle_time_ms=0, error_code=MismatchedEndpointTypeError.code,
            error_message="this is a broker listener; it has no controller endpoints",
            endpoint_type=req.endpoint_type, cluster_id=services.cluster_id,
            controller_id=-1, brokers=[])
    host, port = node.address(ctx.listener)
    return DescribeClusterResponse(
        throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=BROKERS_ENDPOINT,
        cluster_id=services.cluster_id, controller_id=node.node_id,
        brokers=[DescribeClusterResponse.DescribeClusterBroker(
            broker_id=node.node_id, host=host, port=port, rack=node.rack)],
        cluster_authorized_operations=services.authorized_operations(
            ctx, ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)
        if req.include_cluster_authorized_operations else NOT_REQUESTED,
    )


def handle_find_coordinator(services: BrokerServices,
                            ctx: RequestContext) -> FindCoordinatorResponse:
    version = ctx.api_version
    req = ctx.body
    node = services.node
    key_type = req.key_type if version >= 1 else CoordinatorType.GROUP
    supported = key_type in (CoordinatorType.GROUP, CoordinatorType.TRANSACTION)
    error = 0 if supported else InvalidRequestError.code
    message = None if supported else f"coordinator key type {key_type} is not supported"
    node_host, node_port = node.address(ctx.listener)

    def answer(key: str) -> tuple[int, str | None, int, str, int]:
        """(error, message, node id, host, port) for one key."""
        code, text = error, message
        if supported:
            # DESCRIBE on the group or transactional id (KafkaApis.handleFindCoordinatorRequest).
            resource, denied = ((ResourceType.GROUP, GroupAuthorizationFailedError.code)
                                if key_type == CoordinatorType.GROUP else
                                (ResourceType.TRANSACTIONAL_ID,
                                 TransactionalIdAuthorizationFailedError.code))
            if not services.authorized(ctx, AclOperation.DESCRIBE, resource, key):
                code, text = denied, None
        if code:
            return code, text, -1, "", -1
        return 0, None, node.node_id, node_host, node_port

    if version < 4:
        code, text, node_id, host, port = answer(req.key)
        return FindCoordinatorResponse(throttle_time_ms=0, error_code=code, error_message=text,
                                       node_id=node_id, host=host, port=port)
    coordinators = []
    for key in req.coordinator_keys:
        code, text, node_id, host, port = answer(key)
        coordinators.append(FindCoordinatorResponse.Coordinator(
            key=key, node_id=node_id, host=host, port=port, error_code=code, error_message=text))
    return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)
