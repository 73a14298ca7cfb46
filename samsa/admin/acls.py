"""ACLs through the admin API (Java's Admin.createAcls, describeAcls and deleteAcls): the
requests built from bindings and filters, and the answers read back into them.

The values themselves (AclBinding, AclBindingFilter and the enums with Kafka's codes) live in
samsa/security/acl.py, shared with the broker.  Version 0 of the three APIs has no pattern type
(everything is LITERAL); ``min_version`` says when a request needs version 1.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any, TypeVar

from samsa.errors import InvalidRequestError, KafkaError, UnknownServerError, for_code
from samsa.protocol import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest
from samsa.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

__all__ = [
    "create_request",
    "delete_request",
    "describe_request",
    "indefinite_field",
    "min_version",
    "parse_create",
    "parse_delete",
    "parse_describe",
    "unknown_filter_error",
]

E = TypeVar("E", bound=enum.IntEnum)


def _code(kind: type[E], code: int) -> E:
    """A wire code as the enum; codes this version does not know read as UNKNOWN (Java's
    fromCode)."""
    try:
        return kind(code)
    except ValueError:
        return kind(0)


def indefinite_field(binding: AclBinding) -> str | None:
    """Why ``binding`` cannot be created, when a field is UNKNOWN, ANY or MATCH (Java's
    AclBindingFilter.findIndefiniteField, which Admin.createAcls checks before sending); None
    when it is definite.  The broker checks the rest (names, principals)."""
    if binding.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Resource type is {binding.resource_type.name}."
    if binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Resource pattern type is {binding.pattern_type.name}."
    if binding.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Operation is {binding.operation.name}."
    if binding.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"Permission type is {binding.permission.name}."
    return None


def unknown_filter_error(acl_filter: AclBindingFilter) -> KafkaError | None:
    """InvalidRequestError for a filter with an UNKNOWN field (Java's describeAcls refuses it
    before sending); None otherwise."""
    problem = acl_filter.unknown_field()
    if problem is None:
        return None
    return InvalidRequestError(f"the AclBindingFilter must not contain UNKNOWN elements "
                               f"({problem}): {acl_filter}")


def min_version(pattern_types: Iterable[PatternType]) -> int:
    """1 when a pattern type other than LITERAL (or ANY, which version 0 reads as LITERAL, as
    Java's DescribeAclsRequest does) is asked for: version 0 knows only literal names."""
    return 1 if any(p not in (PatternType.LITERAL, PatternType.ANY) for p in pattern_types) else 0


def create_request(version: int, bindings: Iterable[AclBinding]) -> CreateAclsRequest:
    R = CreateAclsRequest
    return R(creations=[R.AclCreation(
        resource_type=int(b.resource_type), resource_name=b.resource_name,
        resource_pattern_type=int(b.pattern_type), principal=b.principal, host=b.host,
        operation=int(b.operation), permission_type=int(b.permission)) for b in bindings])


def parse_create(response: Any, bindings: list[AclBinding]) -> dict[AclBinding, None | KafkaError]:
    """None per created binding, or the broker's error for it (results come in request order)."""
    results = list(response.results)
    if len(results) != len(bindings):
        raise UnknownServerError(f"the broker answered {len(results)} results for "
                                 f"{len(bindings)} ACL creations")
    return {b: (for_code(r.error_code)(r.error_message) if r.error_code else None)
            for b, r in zip(bindings, results, strict=True)}


def _pattern_filter(version: int, pattern_type: PatternType) -> PatternType:
    # Version 0 has no pattern type; ANY and LITERAL both read as LITERAL there.
    return PatternType.LITERAL if version == 0 else pattern_type


def describe_request(version: int, acl_filter: AclBindingFilter) -> DescribeAclsRequest:
    f = acl_filter
    return DescribeAclsRequest(
        resource_type_filter=int(f.resource_type), resource_name_filter=f.resource_name,
        pattern_type_filter=int(_pattern_filter(version, f.pattern_type)),
        principal_filter=f.principal, host_filter=f.host, operation=int(f.operation),
        permission_type=int(f.permission))


def parse_describe(response: Any) -> list[AclBinding]:
    """The bindings described, in the broker's order; a top-level error is raised."""
    if response.error_code:
        raise for_code(response.error_code)(response.error_message)
    return [AclBinding(_code(ResourceType, r.resource_type), r.resource_name,
                       _code(PatternType, r.pattern_type), a.principal, a.host,
                       _code(AclOperation, a.operation), _code(AclPermissionType, a.permission_type))
            for r in response.resources for a in r.acls]


def delete_request(version: int, filters: Iterable[AclBindingFilter]) -> DeleteAclsRequest:
    R = DeleteAclsRequest
    return R(filters=[R.DeleteAclsFilter(
        resource_type_filter=int(f.resource_type), resource_name_filter=f.resource_name,
        pattern_type_filter=int(_pattern_filter(version, f.pattern_type)),
        principal_filter=f.principal, host_filter=f.host, operation=int(f.operation),
        permission_type=int(f.permission)) for f in filters])


def parse_delete(response: Any, filters: list[AclBindingFilter],
                 ) -> dict[AclBindingFilter, list[AclBinding] | KafkaError]:
    """Per filter (in request order) the bindings it deleted, or its error.  A matching ACL
    with an error of its own (Java's FilterResult.exception) fails its filter with that error,
    which names the binding."""
    results = list(response.filter_results)
    if len(results) != len(filters):
        raise UnknownServerError(f"the broker answered {len(results)} results for "
                                 f"{len(filters)} ACL deletion filters")
    out: dict[AclBindingFilter, list[AclBinding] | KafkaError] = {}
    for f, r in zip(filters, results, strict=True):
        if r.error_code:
            out[f] = for_code(r.error_code)(r.error_message)
            continue
        deleted: list[AclBinding] = []
        failed: KafkaError | None = None
        for a in r.matching_acls:
            binding = AclBinding(_code(ResourceType, a.resource_type), a.resource_name,
                                 _code(PatternType, a.pattern_type), a.principal, a.host,
                                 _code(AclOperation, a.operation),
                                 _code(AclPermissionType, a.permission_type))
            if a.error_code and failed is None:
                detail = f"{a.error_message}: {binding}" if a.error_message else str(binding)
                failed = for_code(a.error_code)(f"deleting ACL {detail}")
            elif not a.error_code:
                deleted.append(binding)
        out[f] = deleted if failed is None else failed
    return out
