"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), as Kafka's AclApis serves them.

Without an authorizer they answer SECURITY_DISABLED.  DescribeAcls needs DESCRIBE on the
cluster, CreateAcls and DeleteAcls ALTER; each creation is validated as Kafka's
AclControlManager.validateNewAcl does (INVALID_REQUEST naming the problem), and DescribeAcls
groups the matching ACLs by resource pattern.
"""

from __future__ import annotations

import logging
from typing import Any

from samsa.broker.apis.services import BrokerServices
from samsa.broker.request_channel import RequestContext
from samsa.errors import (
    ClusterAuthorizationFailedError,
    InvalidRequestError,
    SecurityDisabledError,
)
from samsa.protocol import CreateAclsResponse, DeleteAclsResponse, DescribeAclsResponse
from samsa.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

__all__ = ["handle_create_acls", "handle_delete_acls", "handle_describe_acls"]

log = logging.getLogger(__name__)

_NO_AUTHORIZER = "No Authorizer is configured."


def _enum(kind: Any, code: int) -> Any:
    try:
        return kind(code)
    except ValueError:
        return kind(0)  # UNKNOWN: refused by the validation below


def _filter(f: Any, version: int) -> AclBindingFilter:
    return AclBindingFilter(
        _enum(ResourceType, f.resource_type_filter), f.resource_name_filter,
        _enum(PatternType, f.pattern_type_filter if version >= 1 else PatternType.LITERAL),
        f.principal_filter, f.host_filter, _enum(AclOperation, f.operation),
        _enum(AclPermissionType, f.permission_type))


def _refusal(services: BrokerServices, ctx: RequestContext) -> tuple[int, str | None] | None:
    """(error code, message) when the ACLs may not be changed here: no authorizer, or no ALTER
    on the cluster."""
    if services.authorizer is None:
        return SecurityDisabledError.code, _NO_AUTHORIZER
    if not services.authorized(ctx, AclOperation.ALTER, ResourceType.CLUSTER):
        return ClusterAuthorizationFailedError.code, None
    return None


def handle_describe_acls(services: BrokerServices, ctx: RequestContext) -> DescribeAclsResponse:
    authorizer = services.authorizer
    if authorizer is None:
        return DescribeAclsResponse(throttle_time_ms=0, error_code=SecurityDisabledError.code,
                                    error_message=_NO_AUTHORIZER, resources=[])
    if not services.authorized(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER):
        return DescribeAclsResponse(throttle_time_ms=0,
                                    error_code=ClusterAuthorizationFailedError.code,
                                    error_message=None, resources=[])
    acl_filter = _filter(ctx.body, ctx.api_version)
    unknown = acl_filter.unknown_field()
    if unknown is not None:
        return DescribeAclsResponse(throttle_time_ms=0, error_code=InvalidRequestError.code,
                                    error_message=unknown,
                                    resources=[])
    groups: dict[tuple[int, str, int], list[AclBinding]] = {}
    for binding in authorizer.store.describe(acl_filter):
        key = (int(binding.resource_type), binding.resource_name, int(binding.pattern_type))
        groups.setdefault(key, []).append(binding)
    R = DescribeAclsResponse
    return R(throttle_time_ms=0, error_code=0, error_message=None, resources=[
        R.DescribeAclsResource(
            resource_type=rtype, resource_name=name, pattern_type=ptype,
            acls=[R.AclDescription(principal=b.principal, host=b.host,
                                   operation=int(b.operation), permission_type=int(b.permission))
                  for b in bindings])
        for (rtype, name, ptype), bindings in groups.items()])


def handle_create_acls(services: BrokerServices, ctx: RequestContext) -> CreateAclsResponse:
    R = CreateAclsResponse
    creations = ctx.body.creations
    refused = _refusal(services, ctx)
    if refused is not None:
        return R(throttle_time_ms=0, results=[
            R.AclCreationResult(error_code=refused[0], error_message=refused[1])
            for _ in creations])
    authorizer = services.authorizer
    assert authorizer is not None
    results = []
    valid: list[AclBinding] = []
    for c in creations:
        binding = AclBinding(
            _enum(ResourceType, c.resource_type), c.resource_name,
            _enum(PatternType, c.resource_pattern_type if ctx.api_version >= 1
                  else PatternType.LITERAL),
            c.principal, c.host, _enum(AclOperation, c.operation),
            _enum(AclPermissionType, c.permission_type))
        problem = binding.validation_error()
        if problem is None:
            valid.append(binding)
            results.append(R.AclCreationResult(error_code=0, error_message=None))
        else:
            results.append(R.AclCreationResult(error_code=InvalidRequestError.code,
                                               error_message=problem))
    if valid:
        authorizer.store.add(valid)
        for binding in valid:
            log.info("%s from %s added ACL %s", ctx.principal, ctx.client_host, binding)
    return R(throttle_time_ms=0, results=results)


def handle_delete_acls(services: BrokerServices, ctx: RequestContext) -> DeleteAclsResponse:
    R = DeleteAclsResponse
    filters = ctx.body.filters
    refused = _refusal(services, ctx)
    if refused is not None:
        return R(throttle_time_ms=0, filter_results=[
            R.DeleteAclsFilterResult(error_code=refused[0], error_message=refused[1],
                                     matching_acls=[])
            for _ in filters])
    authorizer = services.authorizer
    assert authorizer is not None
    parsed = [_filter(f, ctx.api_version) for f in filters]
    usable = [f for f in parsed if f.unknown_field() is None]
    removed = iter(authorizer.store.remove(usable))
    results = []
    for acl_filter in parsed:
        unknown = acl_filter.unknown_field()
        if unknown is not None:
            results.append(R.DeleteAclsFilterResult(
                error_code=InvalidRequestError.code,
                error_message=unknown, matching_acls=[]))
            continue
        matched = next(removed)
        for binding in matched:
            log.info("%s from %s removed ACL %s", ctx.principal, ctx.client_host, binding)
        results.append(R.DeleteAclsFilterResult(error_code=0, error_message=None, matching_acls=[
            R.DeleteAclsMatchingAcl(
                error_code=0, error_message=None, resource_type=int(b.resource_type),
                resource_name=b.resource_name, pattern_type=int(b.pattern_type),
                principal=b.principal, host=b.host, operation=int(b.operation),
                permission_type=int(b.permission))
            for b in matched]))
    return R(throttle_time_ms=0, filter_results=results)
