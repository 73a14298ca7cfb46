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
from samsa.errors import InvalidRequestError, MismatchedEndpointTypeError
from samsa.protocol import DescribeClusterResponse, FindCoordinatorResponse

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
        cluster_authorized_operations=CLUSTER_OPERATIONS
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
    host = node_host if supported else ""
    port = node_port if supported else -1
    if version < 4:
        return FindCoordinatorResponse(
            throttle_time_ms=0, error_code=error, error_message=message,
            node_id=node.node_id if supported else -1, host=host, port=port)
    return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
        FindCoordinatorResponse.Coordinator(
            key=key, node_id=node.node_id if supported else -1, host=host, port=port,
            error_code=error, error_message=message)
        for key in req.coordinator_keys
    ])
