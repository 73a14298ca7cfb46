"""The broker's ACLs and the decisions made from them (Kafka's StandardAuthorizer).

ACLs are kept in ``<data_dir>/acls.json``, written atomically (Kafka keeps them in its metadata
log as AccessControlEntryRecords) and read on start; a file that does not parse stops the broker
with its path, since serving without the ACLs it held could let in what they denied.

Decisions (StandardAuthorizerData.authorize): a ``super.users`` principal may do everything;
otherwise the ACLs on the resource (literal name, ``*``, or a prefix of it) for the principal or
``User:*`` and the client's host or ``*`` decide: any DENY wins, else any ALLOW grants (ALLOW
READ/WRITE/DELETE/ALTER also grant DESCRIBE, ALLOW ALTER_CONFIGS grants DESCRIBE_CONFIGS, ALL
matches every operation).  With no ACL on the resource at all, ``allow.everyone.if.no.acl.found``
decides (false by default: denied).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from samsa.broker.log.files import atomic_write
from samsa.errors import ConfigError
from samsa.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    pattern_applies,
)

__all__ = ["ACLS_FILE", "AUTHORIZER_CLASS_NAMES", "AclStore", "Authorizer", "authorizer_from_config"]

log = logging.getLogger("samsa.broker.authorizer")

ACLS_FILE = "acls.json"
# authorizer.class.name values that mean "Kafka's ACL authorizer" (KRaft's and ZooKeeper's).
AUTHORIZER_CLASS_NAMES = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                          "kafka.security.authorizer.AclAuthorizer")
_IMPLIES_DESCRIBE = (AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                     AclOperation.ALTER)
# Operations per resource type, for the "authorized operations" bitfields (AclEntry).
SUPPORTED_OPERATIONS: Mapping[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                         AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.ALTER,
                         AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
                         AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION,
                           AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                           AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE,
                                    AclOperation.TWO_PHASE_COMMIT),
}


def _to_json(b: AclBinding) -> dict[str, Any]:
    return {"resource_type": b.resource_type.name, "resource_name": b.resource_name,
            "pattern_type": b.pattern_type.name, "principal": b.principal, "host": b.host,
            "operation": b.operation.name, "permission": b.permission.name}


def _from_json(d: Mapping[str, Any]) -> AclBinding:
    return AclBinding(ResourceType[d["resource_type"]], str(d["resource_name"]),
                      PatternType[d["pattern_type"]], str(d["principal"]), str(d["host"]),
                      AclOperation[d["operation"]], AclPermissionType[d["permission"]])


class AclStore:
    """The ACLs, durable when a change returns."""

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / ACLS_FILE
        self._lock = threading.Lock()
        self._acls: tuple[AclBinding, ...] = ()
        if self._path.exists():
            try:
                stored = json.loads(self._path.read_text())
                self._acls = tuple(_from_json(d) for d in stored["acls"])
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{self._path} is not a valid ACL file ({exc!r}); restore it "
                                 "from a backup, or move it away to start without ACLs") from None

    @property
    def acls(self) -> tuple[AclBinding, ...]:
        return self._acls

    def _write(self, acls: tuple[AclBinding, ...]) -> None:
        atomic_write(self._path, json.dumps({"version": 0, "acls": [_to_json(b) for b in acls]},
                                            indent=1).encode())
        self._acls = acls

    def add(self, bindings: Iterable[AclBinding]) -> None:
        """Adds the bindings not present yet (creating an existing ACL succeeds, once)."""
        with self._lock:
            acls = list(self._acls)
            for binding in bindings:
                if binding not in acls:
                    acls.append(binding)
            if len(acls) != len(self._acls):
                self._write(tuple(acls))

    def remove(self, filters: Iterable[AclBindingFilter]) -> list[list[AclBinding]]:
        """Removes every binding a filter matches; per filter, the bindings it matched."""
        with self._lock:
            matched = [[b for b in self._acls if f.matches(b)] for f in filters]
            gone = {b for group in matched for b in group}
            if gone:
                self._write(tuple(b for b in self._acls if b not in gone))
            return matched

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return [b for b in self._acls if acl_filter.matches(b)]


class Authorizer:
    def __init__(self, store: AclStore, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self.store = store
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_everyone_if_no_acl_found

    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, resource_name: str) -> bool:
        if principal in self.super_users:
            return True
        found_any = False
        allowed = False
        for acl in self.store.acls:
            if acl.resource_type != resource_type or not pattern_applies(
                    acl.pattern_type, acl.resource_name, resource_name):
                continue
            found_any = True
            if acl.principal not in (principal, "User:*") or acl.host not in (host, "*"):
                continue
            if acl.permission is AclPermissionType.DENY:
                if acl.operation in (operation, AclOperation.ALL):
                    return False
            elif _allow_grants(acl.operation, operation):
                allowed = True
        if allowed:
            return True
        return not found_any and self.allow_if_no_acl

    def authorize_any(self, principal: str, host: str, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        """May the principal do ``operation`` on *some* resource of the type (KIP-679's
        authorizeByResourceType, used by idempotent InitProducerId)?"""
        if principal in self.super_users:
            return True
        acls = [a for a in self.store.acls if a.resource_type == resource_type
                and a.principal in (principal, "User:*") and a.host in (host, "*")
                and a.operation in (operation, AclOperation.ALL)]
        denied = [a for a in acls if a.permission is AclPermissionType.DENY]
        if any(a.pattern_type is PatternType.LITERAL and a.resource_name == "*" for a in denied):
            return False
        for allow in (a for a in acls if a.permission is AclPermissionType.ALLOW):
            if allow.pattern_type is PatternType.LITERAL and allow.resource_name == "*":
                return True
            cancelled = any(
                (d.pattern_type is PatternType.LITERAL and d.resource_name == allow.resource_name
                 and allow.pattern_type is PatternType.LITERAL)
                or (d.pattern_type is PatternType.PREFIXED
                    and allow.resource_name.startswith(d.resource_name))
                for d in denied)
            if not cancelled:
                return True
        return False

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType,
                              resource_name: str) -> int:
        """The bitfield of the resource type's operations the principal may do (1 << code)."""
        bits = 0
        for operation in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self.authorize(principal, host, operation, resource_type, resource_name):
                bits |= 1 << operation
        return bits


def _allow_grants(acl_operation: AclOperation, wanted: AclOperation) -> bool:
    if acl_operation is AclOperation.ALL or acl_operation == wanted:
        return True
    if wanted is AclOperation.DESCRIBE:
        return acl_operation in _IMPLIES_DESCRIBE
    return wanted is AclOperation.DESCRIBE_CONFIGS and acl_operation is AclOperation.ALTER_CONFIGS


def authorizer_from_config(config: Mapping[str, Any], data_dir: Path) -> Authorizer | None:
    """The authorizer authorizer.class.name asks for; None when it is empty (every request
    allowed and the ACL APIs answer SECURITY_DISABLED, as Kafka without an authorizer)."""
    name = (config.get("authorizer.class.name") or "").strip()
    if not name:
        return None
    if name not in AUTHORIZER_CLASS_NAMES:
        raise ConfigError("authorizer.class.name",
                          f"{name!r} is not available; use {AUTHORIZER_CLASS_NAMES[0]} "
                          "(Kafka's ACL authorizer) or leave it empty")
    supers = [s.strip() for s in (config.get("super.users") or "").split(";") if s.strip()]
    allow = config.get("allow.everyone.if.no.acl.found", False)
    if isinstance(allow, str):  # a plain dict of strings, as from a properties file
        allow = allow.strip().lower() == "true"
    return Authorizer(AclStore(data_dir), supers, bool(allow))
