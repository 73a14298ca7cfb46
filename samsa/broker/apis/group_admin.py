"""DescribeGroups (key 15, v0-5), ListGroups (key 16, v0-5), DeleteGroups (key 42, v0-2)."""

from __future__ import annotations

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.metadata import NOT_REQUESTED
from samsa.broker.apis.services import BrokerServices
from samsa.errors import GroupAuthorizationFailedError
from samsa.protocol import (
    DeleteGroupsResponse,
    DescribeGroupsResponse,
    ListGroupsResponse,
)
from samsa.security.acl import AclOperation, ResourceType

# Without an authorizer every group operation is allowed: READ, DELETE, DESCRIBE (AclOperation
# codes as bits).
GROUP_OPERATIONS = sum(1 << op for op in (3, 6, 8))
CLASSIC = "classic"


def handle_describe_groups(services: BrokerServices,
                           ctx: RequestContext) -> DescribeGroupsResponse:
    version = ctx.header.request_api_version
    req = ctx.body
    with_ops = version >= 3 and bool(req.include_authorized_operations)
    described = []
    for group_id in req.groups:
        if not services.authorized(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described.append(DescribeGroupsResponse.DescribedGroup(
                error_code=GroupAuthorizationFailedError.code, group_id=group_id,
                group_state="", protocol_type="", protocol_data="", members=[],
                authorized_operations=NOT_REQUESTED))
            continue
        d = services.groups.describe_group(group_id)
        described.append(DescribeGroupsResponse.DescribedGroup(
            error_code=0, group_id=d.group_id, group_state=d.state,
            protocol_type=d.protocol_type, protocol_data=d.protocol,
            members=[DescribeGroupsResponse.DescribedGroupMember(
                member_id=member_id, group_instance_id=instance_id if version >= 4 else None,
                client_id=client_id, client_host=client_host, member_metadata=metadata,
                member_assignment=assignment)
                for member_id, instance_id, client_id, client_host, metadata, assignment
                in d.members],
            authorized_operations=services.authorized_operations(
                ctx, ResourceType.GROUP, group_id, GROUP_OPERATIONS)
            if with_ops else NOT_REQUESTED))
    return DescribeGroupsResponse(throttle_time_ms=0, groups=described)


def handle_list_groups(services: BrokerServices, ctx: RequestContext) -> ListGroupsResponse:
    version = ctx.header.request_api_version
    req = ctx.body
    states = req.states_filter if version >= 4 else []
    types = [t.lower() for t in req.types_filter] if version >= 5 else []
    groups = [] if types and CLASSIC not in types else services.groups.list_groups(states)
    # DESCRIBE on the cluster lists every group; otherwise those the principal may describe.
    if not services.authorized(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER):
        groups = [g for g in groups if services.authorized(
            ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id)]
    return ListGroupsResponse(throttle_time_ms=0, error_code=0, groups=[
        ListGroupsResponse.ListedGroup(
            group_id=g.group_id, protocol_type=g.protocol_type,
            group_state=g.state if version >= 4 else "",
            group_type=CLASSIC if version >= 5 else "")
        for g in groups])


def handle_delete_groups(services: BrokerServices, ctx: RequestContext) -> DeleteGroupsResponse:
    names = list(ctx.body.groups_names)
    allowed = [n for n in names
               if services.authorized(ctx, AclOperation.DELETE, ResourceType.GROUP, n)]
    codes = iter(services.groups.delete_groups(allowed))
    denied = GroupAuthorizationFailedError.code
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        DeleteGroupsResponse.DeletableGroupResult(
            group_id=name, error_code=next(codes) if name in allowed else denied)
        for name in names])
