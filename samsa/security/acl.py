"""Kafka's ACL model (org.apache.kafka.common.acl and .resource): resource types, pattern types,
operations, permissions, bindings and binding filters, with Kafka's wire codes.

An ACL binding says: ``principal`` from ``host`` is ALLOWed or DENYed ``operation`` on the
resources ``(resource_type, resource_name, pattern_type)`` names, where a LITERAL pattern names
one resource (``*`` = every resource of the type) and a PREFIXED pattern every resource whose
name starts with it.  Filters select bindings for DescribeAcls/DeleteAcls: ANY and None match
everything, MATCH selects every binding that would apply to the named resource.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = [
    "CLUSTER_NAME",
    "WILDCARD",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "PatternType",
    "ResourceType",
    "pattern_applies",
]

CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource (Kafka's Resource.CLUSTER_NAME)
WILDCARD = "*"  # a LITERAL name, principal (User:*) or host matching all


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def _enum_name(value: enum.IntEnum) -> str:
    return value.name


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str  # "User:alice", "User:*"
    host: str  # "*" or an IP address
    operation: AclOperation
    permission: AclPermissionType

    def validation_error(self) -> str | None:
        """Why Kafka refuses to create this binding, or None: the checks of AclApis
        (cluster name, empty name), then AclControlManager.validateNewAcl, with their texts."""
        if self.resource_type is ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        if not self.resource_name:
            return "Invalid empty resource name"
        if self.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            return f"Invalid resourceType {_enum_name(self.resource_type)}"
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            return f"Invalid patternType {_enum_name(self.pattern_type)}"
        if self.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
            return f"Invalid operation {_enum_name(self.operation)}"
        if self.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            return f"Invalid permissionType {_enum_name(self.permission)}"
        if ":" not in self.principal:
            return f"Could not parse principal from `{self.principal}` (no colon is present " \
                   "separating the principal type from the principal name)"
        return None

    def __str__(self) -> str:
        return (f"(pattern=ResourcePattern(resourceType={self.resource_type.name}, "
                f"name={self.resource_name}, patternType={self.pattern_type.name}), "
                f"entry=(principal={self.principal}, host={self.host}, "
                f"operation={self.operation.name}, permissionType={self.permission.name}))")


def pattern_applies(pattern_type: PatternType, pattern_name: str, resource_name: str) -> bool:
    """Does a stored pattern cover the (literal) resource name?"""
    if pattern_type is PatternType.LITERAL:
        return pattern_name == resource_name or pattern_name == WILDCARD
    if pattern_type is PatternType.PREFIXED:
        return resource_name.startswith(pattern_name)
    return False


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Selects bindings (Kafka's AclBindingFilter): None and ANY match everything."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def unknown_field(self) -> str | None:
        """Kafka's refusal of a filter with an UNKNOWN part (AclControlManager.validateFilter),
        or None."""
        if self.resource_type == 0 or self.pattern_type == 0:
            return "Unknown patternFilter."
        if self.operation == 0 or self.permission == 0:
            return "Unknown entryFilter."
        return None

    def matches(self, binding: AclBinding) -> bool:
        if self.resource_type is not ResourceType.ANY and self.resource_type != binding.resource_type:
            return False
        if not self._pattern_matches(binding):
            return False
        if self.principal is not None and self.principal != binding.principal:
            return False
        if self.host is not None and self.host != binding.host:
            return False
        if self.operation is not AclOperation.ANY and self.operation != binding.operation:
            return False
        return self.permission is AclPermissionType.ANY or self.permission == binding.permission

    def _pattern_matches(self, binding: AclBinding) -> bool:
        # ResourcePatternFilter.matches: ANY = any pattern type with the exact name; MATCH =
        # every binding that applies to the named resource.
        if self.pattern_type is PatternType.MATCH:
            if self.resource_name is None:
                return True
            return pattern_applies(binding.pattern_type, binding.resource_name, self.resource_name)
        if self.pattern_type is not PatternType.ANY and self.pattern_type != binding.pattern_type:
            return False
        return self.resource_name is None or self.resource_name == binding.resource_name
