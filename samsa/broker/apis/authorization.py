"""ACL checks that refuse a whole request, made before its handler runs (Kafka's KafkaApis checks,
table in the module below); checks per topic, group or resource live in the handlers.

Each entry gives the error code for a request its principal may not make (0: allowed); the
request is then answered with that code in every error field, as Kafka's
``getErrorResponse`` answers: GROUP_AUTHORIZATION_FAILED for the group calls,
CLUSTER_AUTHORIZATION_FAILED for cluster-wide ones, TRANSACTIONAL_ID_AUTHORIZATION_FAILED for a
transactional InitProducerId.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from samsa.broker.apis.services import BrokerServices
from samsa.broker.request_channel import RequestContext
from samsa.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from samsa.protocol import ApiKey
from samsa.protocol.config_types import ConfigResourceType
from samsa.security.acl import CLUSTER_NAME, AclOperation, ResourceType

__all__ = ["REQUEST_CHECKS", "config_resource_denied"]

Check = Callable[[BrokerServices, RequestContext], int]
_GROUP = GroupAuthorizationFailedError.code
_CLUSTER = ClusterAuthorizationFailedError.code


def _group(operation: AclOperation) -> Check:
    def check(services: BrokerServices, ctx: RequestContext) -> int:
        allowed = services.authorized(ctx, operation, ResourceType.GROUP, ctx.body.group_id)
        return 0 if allowed else _GROUP
    return check


def _cluster(operation: AclOperation) -> Check:
    def check(services: BrokerServices, ctx: RequestContext) -> int:
        return 0 if services.authorized(ctx, operation, ResourceType.CLUSTER) else _CLUSTER
    return check


def _offset_fetch(services: BrokerServices, ctx: RequestContext) -> int:
    groups = ([g.group_id for g in ctx.body.groups] if ctx.api_version >= 8
              else [ctx.body.group_id])
    if all(services.authorized(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g)
           for g in groups):
        return 0
    return _GROUP


def _txn_offset_commit(services: BrokerServices, ctx: RequestContext) -> int:
    # WRITE on the transactional id first, then READ on the group (READ per topic in the
    # handler), as KafkaApis.handleTxnOffsetCommitRequest.
    if not services.authorized(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                               ctx.body.transactional_id):
        return TransactionalIdAuthorizationFailedError.code
    return _group(AclOperation.READ)(services, ctx)


def _add_partitions_to_txn(services: BrokerServices, ctx: RequestContext) -> int:
    # v4+ come from brokers verifying a transaction: CLUSTER_ACTION (v0-3 are checked per
    # transactional id and topic in the handler).
    if ctx.api_version < 4 or services.authorized(ctx, AclOperation.CLUSTER_ACTION,
                                                  ResourceType.CLUSTER):
        return 0
    return _CLUSTER


def _init_producer_id(services: BrokerServices, ctx: RequestContext) -> int:
    transactional_id = ctx.body.transactional_id
    if transactional_id is not None:
        allowed = services.authorized(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                      transactional_id)
        return 0 if allowed else TransactionalIdAuthorizationFailedError.code
    # Idempotence: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (KIP-679).
    authorizer = services.authorizer
    if authorizer is None or services.authorized(ctx, AclOperation.IDEMPOTENT_WRITE,
                                                 ResourceType.CLUSTER):
        return 0
    if authorizer.authorize_any(ctx.principal, ctx.client_host, AclOperation.WRITE,
                                ResourceType.TOPIC):
        return 0
    return _CLUSTER


REQUEST_CHECKS: Mapping[int, Check] = {int(key): check for key, check in {
    ApiKey.JOIN_GROUP: _group(AclOperation.READ),
    ApiKey.HEARTBEAT: _group(AclOperation.READ),
    ApiKey.LEAVE_GROUP: _group(AclOperation.READ),
    ApiKey.SYNC_GROUP: _group(AclOperation.READ),
    ApiKey.OFFSET_COMMIT: _group(AclOperation.READ),  # then READ per topic, in the handler
    ApiKey.OFFSET_FETCH: _offset_fetch,  # then DESCRIBE per topic, in the handler
    ApiKey.OFFSET_DELETE: _group(AclOperation.DELETE),  # then READ per topic
    ApiKey.TXN_OFFSET_COMMIT: _txn_offset_commit,
    ApiKey.INIT_PRODUCER_ID: _init_producer_id,
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
    ApiKey.DESCRIBE_LOG_DIRS: _cluster(AclOperation.DESCRIBE),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: _cluster(AclOperation.DESCRIBE),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _cluster(AclOperation.ALTER),
}.items()}


# Config resources (ConfigResource.Type) -> the ACL resource checked and the error when denied
# (Kafka's ConfigHelper / AuthHelper): brokers and their loggers are the cluster.
_CONFIG_RESOURCES: Mapping[int, tuple[ResourceType, int]] = {
    int(ConfigResourceType.TOPIC): (ResourceType.TOPIC, TopicAuthorizationFailedError.code),
    int(ConfigResourceType.BROKER): (ResourceType.CLUSTER, _CLUSTER),
    int(ConfigResourceType.BROKER_LOGGER): (ResourceType.CLUSTER, _CLUSTER),
    int(ConfigResourceType.GROUP): (ResourceType.GROUP, _GROUP),
}


def config_resource_denied(services: BrokerServices, ctx: RequestContext,
                           operation: AclOperation, config_type: int, name: str) -> int:
    """The error code if the principal may not ``operation`` (DESCRIBE_CONFIGS or
    ALTER_CONFIGS) the config resource, else 0 (unknown types are the handler's to refuse)."""
    checked = _CONFIG_RESOURCES.get(config_type)
    if checked is None or services.authorizer is None:
        return 0
    resource_type, denied = checked
    acl_name = CLUSTER_NAME if resource_type is ResourceType.CLUSTER else name
    return 0 if services.authorized(ctx, operation, resource_type, acl_name) else denied
