"""``samsa acls``: add, list and remove the broker's ACLs, as Kafka's kafka-acls.sh (AclCommand).

::

    samsa acls add -b HOST:PORT --allow-principal User:alice --operation READ --topic orders
    samsa acls add -b HOST:PORT --deny-principal User:bob --deny-host 10.0.0.1 \\
        --operation WRITE --topic ord --resource-pattern-type prefixed
    samsa acls list -b HOST:PORT [--topic orders] [--principal User:alice]
    samsa acls remove -b HOST:PORT --topic orders [--allow-principal User:alice ...] [--force]

As in AclCommand:

* Resources: ``--topic``, ``--group``, ``--transactional-id`` (each repeatable) and
  ``--cluster``; an ACL is added to (or removed from) each one given.
* ``--resource-pattern-type`` is ``literal`` by default for every action.  ``add`` takes
  ``literal`` or ``prefixed``; ``list`` and ``remove`` also take ``any`` (any pattern type, the
  exact name) and ``match`` (every ACL that applies to the named resource: literal, ``*`` and
  prefixes; use it with care with ``remove``).
* ``add`` makes one ACL per principal, host and operation; hosts default to ``*`` and the
  operation to ``ALL``.  Each operation must be one the resource type has.
* ``list`` without a resource lists every ACL; ``--principal`` (repeatable) keeps one
  principal's ACLs.
* ``remove`` needs a resource.  Without principals it removes every ACL of the resource;
  with them only the ACLs they name (hosts ``*`` and operation ``ALL`` by default).  It asks
  before removing unless ``--force`` is given.

Output is AclCommand's: ``Current ACLs for resource `ResourcePattern(resourceType=TOPIC,
name=orders, patternType=LITERAL)`:`` and then one tab-indented line per ACL,
``(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)``.  Failures print
``Error: ...`` on stderr and exit with status 1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import click

from samsa.cli import main
from samsa.cli.topics_cmd import _admin, _common
from samsa.errors import ClusterAuthorizationFailedError, KafkaError, SecurityDisabledError
from samsa.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

# The operations each resource type has (AclCommand's ResourceTypeToValidOperations).
_VALID_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                         AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.ALTER,
                         AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                         AclOperation.ALL),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
                         AclOperation.ALL),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION,
                           AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                           AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE, AclOperation.ALL),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE,
                                    AclOperation.TWO_PHASE_COMMIT, AclOperation.ALL),
}
_OPERATIONS = [op for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY)]
_NO_AUTHORIZER = ("the broker has no authorizer: set authorizer.class.name="
                  "org.apache.kafka.metadata.authorizer.StandardAuthorizer in its configuration "
                  "to use ACLs")


class _OperationType(click.ParamType):
    """An ACL operation as kafka-acls.sh takes it: ``READ``, ``Read``, ``ClusterAction``,
    ``cluster_action``, ``cluster-action``."""

    name = "operation"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> AclOperation:
        if isinstance(value, AclOperation):
            return value
        key = str(value).replace("_", "").replace("-", "").lower()
        for op in _OPERATIONS:
            if op.name.replace("_", "").lower() == key:
                return op
        self.fail(f"{value!r} is not an ACL operation; use one of "
                  f"{', '.join(op.name for op in _OPERATIONS)}", param, ctx)


class _PrincipalType(click.ParamType):
    """``Type:name``, as Kafka's SecurityUtils.parseKafkaPrincipal wants it."""

    name = "principal"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> str:
        kind, sep, name = str(value).partition(":")
        if not sep or not kind or not name:
            self.fail(f"{value!r} is not a principal; write Type:name, e.g. User:alice",
                      param, ctx)
        return str(value)


_PRINCIPAL = _PrincipalType()


def _resources(f: Callable[..., Any]) -> Callable[..., Any]:
    """The resource and pattern options every action takes."""
    f = click.option("--resource-pattern-type", "pattern", default="literal", show_default=True,
                     type=click.Choice(["literal", "prefixed", "match", "any"],
                                       case_sensitive=False),
                     help="literal or prefixed names; list and remove also take any (any "
                          "pattern type with the exact name) and match (every ACL that "
                          "applies to the resource).")(f)
    f = click.option("--transactional-id", "transactional_ids", multiple=True, metavar="ID",
                     help="A transactional id (repeatable).")(f)
    f = click.option("--cluster", is_flag=True, help="The cluster resource.")(f)
    f = click.option("--group", "groups", multiple=True, metavar="NAME",
                     help="A consumer group (repeatable; * for every group).")(f)
    return click.option("--topic", "topics", multiple=True, metavar="NAME",
                        help="A topic (repeatable; * for every topic).")(f)


def _entries(f: Callable[..., Any]) -> Callable[..., Any]:
    """Who, from where, may or may not do what."""
    f = click.option("--operation", "operations", multiple=True, type=_OperationType(),
                     help="An operation, e.g. READ, WRITE, DESCRIBE, ALL (repeatable; default "
                          "ALL).")(f)
    f = click.option("--deny-host", "deny_hosts", multiple=True, metavar="HOST",
                     help="A host the deny ACLs are for (repeatable; default *).")(f)
    f = click.option("--allow-host", "allow_hosts", multiple=True, metavar="HOST",
                     help="A host the allow ACLs are for (repeatable; default *).")(f)
    f = click.option("--deny-principal", "deny_principals", multiple=True, type=_PRINCIPAL,
                     help="A principal denied, e.g. User:bob (repeatable).")(f)
    return click.option("--allow-principal", "allow_principals", multiple=True, type=_PRINCIPAL,
                        help="A principal allowed, e.g. User:alice (repeatable).")(f)


@main.group("acls")
def acls_group() -> None:
    """Add, list and remove the broker's ACLs (as kafka-acls.sh)."""


def _patterns(topics: Iterable[str], groups: Iterable[str], cluster: bool,
              transactional_ids: Iterable[str]) -> list[tuple[ResourceType, str]]:
    out = [(ResourceType.TOPIC, t) for t in topics] + [(ResourceType.GROUP, g) for g in groups]
    if cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return out + [(ResourceType.TRANSACTIONAL_ID, t) for t in transactional_ids]


def _entry_specs(allow_principals: tuple[str, ...], deny_principals: tuple[str, ...],
                 allow_hosts: tuple[str, ...], deny_hosts: tuple[str, ...],
                 operations: tuple[AclOperation, ...],
                 ) -> list[tuple[str, str, AclOperation, AclPermissionType]]:
    """(principal, host, operation, permission) for every combination AclCommand makes."""
    if allow_hosts and not allow_principals:
        raise click.UsageError("--allow-host needs --allow-principal")
    if deny_hosts and not deny_principals:
        raise click.UsageError("--deny-host needs --deny-principal")
    ops = list(dict.fromkeys(operations)) or [AclOperation.ALL]
    out: list[tuple[str, str, AclOperation, AclPermissionType]] = []
    for principals, hosts, permission in ((allow_principals, allow_hosts, AclPermissionType.ALLOW),
                                          (deny_principals, deny_hosts, AclPermissionType.DENY)):
        for principal in dict.fromkeys(principals):
            for host in dict.fromkeys(hosts or ("*",)):
                out.extend((principal, host, op, permission) for op in ops)
    return out


def _check_operations(resources: list[tuple[ResourceType, str]],
                      operations: Iterable[AclOperation]) -> None:
    for rtype, _ in resources:
        valid = _VALID_OPERATIONS[rtype]
        bad = [op.name for op in operations if op not in valid]
        if bad:
            raise click.UsageError(
                f"ResourceType {rtype.name} only supports operations "
                f"{', '.join(op.name for op in valid)} (not {', '.join(bad)})")


def _pattern_str(rtype: ResourceType, name: str | None, pattern: PatternType) -> str:
    kind = "ResourcePattern" if pattern in (PatternType.LITERAL, PatternType.PREFIXED) \
        else "ResourcePatternFilter"
    return f"{kind}(resourceType={rtype.name}, name={name}, patternType={pattern.name})"


def _entry_str(b: AclBinding) -> str:
    return (f"(principal={b.principal}, host={b.host}, operation={b.operation.name}, "
            f"permissionType={b.permission.name})")


def _echo_groups(title: str, bindings: Iterable[AclBinding]) -> None:
    """AclCommand's listing: a header per resource pattern, a tab-indented line per ACL."""
    grouped: dict[tuple[ResourceType, str, PatternType], list[AclBinding]] = {}
    for b in bindings:
        grouped.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(b)
    for (rtype, name, pattern), group in grouped.items():
        click.echo(f"{title} `{_pattern_str(rtype, name, pattern)}`:")
        for b in group:
            click.echo(f"\t{_entry_str(b)}")
        click.echo("")


@contextmanager
def _acl_errors(action: str, needs: str) -> Iterator[None]:
    """The broker's refusals as errors that say what to change."""
    try:
        yield
    except SecurityDisabledError:
        raise click.ClickException(_NO_AUTHORIZER) from None
    except ClusterAuthorizationFailedError as e:
        raise click.ClickException(
            f"not allowed to {action}: the principal needs {needs} on the cluster (an ACL with "
            f"--cluster) or to be one of the broker's super.users ({e})") from None


@acls_group.command("add")
@_common
@_resources
@_entries
def add_cmd(bootstrap_server: str, admin_properties: tuple[str, ...], timeout: float,
            topics: tuple[str, ...], groups: tuple[str, ...], cluster: bool,
            transactional_ids: tuple[str, ...], pattern: str, allow_principals: tuple[str, ...],
            deny_principals: tuple[str, ...], allow_hosts: tuple[str, ...],
            deny_hosts: tuple[str, ...], operations: tuple[AclOperation, ...]) -> None:
    """Add ACLs to resources, then list the resources' ACLs."""
    pattern_type = PatternType[pattern.upper()]
    if pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise click.UsageError(f"A '--resource-pattern-type' value of '{pattern.lower()}' is "
                               "not valid when adding acls; use literal or prefixed")
    resources = _patterns(topics, groups, cluster, transactional_ids)
    if not resources:
        raise click.UsageError("name a resource: --topic, --group, --cluster or "
                               "--transactional-id")
    if not allow_principals and not deny_principals:
        raise click.UsageError("name who the ACLs are for: --allow-principal or "
                               "--deny-principal")
    specs = _entry_specs(allow_principals, deny_principals, allow_hosts, deny_hosts, operations)
    _check_operations(resources, (op for _, _, op, _ in specs))
    bindings = [AclBinding(rtype, name, pattern_type, principal, host, op, permission)
                for rtype, name in resources for principal, host, op, permission in specs]
    with _admin(bootstrap_server, admin_properties, timeout) as admin, \
            _acl_errors("add ACLs", "ALTER"):
        _echo_groups("Adding ACLs for resource", bindings)
        results = admin.create_acls(bindings, raise_errors=False)
        failed = {b: e for b, e in results.items() if isinstance(e, KafkaError)}
        for b, e in failed.items():
            if isinstance(e, (SecurityDisabledError, ClusterAuthorizationFailedError)):
                raise e
            click.echo(f"Error adding ACL {_entry_str(b)} for "
                       f"`{_pattern_str(b.resource_type, b.resource_name, b.pattern_type)}`: {e}",
                       err=True)
        try:
            current = [b for rtype, name in resources
                       for b in admin.describe_acls(AclBindingFilter(rtype, name, pattern_type))]
        except ClusterAuthorizationFailedError as e:
            # Added, but not visible to us: an ACL on the cluster now decides who may DESCRIBE.
            click.echo(f"Cannot list the current ACLs: the principal needs DESCRIBE on the "
                       f"cluster ({e})", err=True)
        else:
            _echo_groups("Current ACLs for resource", current)
    if failed:
        raise click.ClickException(f"{len(failed)} of {len(results)} ACLs were not added")


@acls_group.command("list")
@_common
@_resources
@click.option("--principal", "principals", multiple=True, type=_PRINCIPAL,
              help="Only this principal's ACLs (repeatable).")
def list_cmd(bootstrap_server: str, admin_properties: tuple[str, ...], timeout: float,
             topics: tuple[str, ...], groups: tuple[str, ...], cluster: bool,
             transactional_ids: tuple[str, ...], pattern: str,
             principals: tuple[str, ...]) -> None:
    """List ACLs: of the resources given (all without one), of the principals given."""
    pattern_type = PatternType[pattern.upper()]
    resources = _patterns(topics, groups, cluster, transactional_ids)
    resource_filters: list[tuple[ResourceType, str | None, PatternType]] = \
        [(rtype, name, pattern_type) for rtype, name in resources] or \
        [(ResourceType.ANY, None, PatternType.ANY)]
    filters = [AclBindingFilter(rtype, name, ptype, principal)
               for rtype, name, ptype in resource_filters
               for principal in (dict.fromkeys(principals) or [None])]
    with _admin(bootstrap_server, admin_properties, timeout) as admin, \
            _acl_errors("list ACLs", "DESCRIBE"):
        found = list(dict.fromkeys(b for f in filters for b in admin.describe_acls(f)))
    _echo_groups("Current ACLs for resource", found)


@acls_group.command("remove")
@_common
@_resources
@_entries
@click.option("--force", is_flag=True, help="Remove without asking.")
def remove_cmd(bootstrap_server: str, admin_properties: tuple[str, ...], timeout: float,
               topics: tuple[str, ...], groups: tuple[str, ...], cluster: bool,
               transactional_ids: tuple[str, ...], pattern: str,
               allow_principals: tuple[str, ...], deny_principals: tuple[str, ...],
               allow_hosts: tuple[str, ...], deny_hosts: tuple[str, ...],
               operations: tuple[AclOperation, ...], force: bool) -> None:
    """Remove ACLs of resources: all of them, or those of the principals given."""
    pattern_type = PatternType[pattern.upper()]
    resources = _patterns(topics, groups, cluster, transactional_ids)
    if not resources:
        raise click.UsageError("name a resource: --topic, --group, --cluster or "
                               "--transactional-id")
    specs = _entry_specs(allow_principals, deny_principals, allow_hosts, deny_hosts, operations)
    filters = [AclBindingFilter(rtype, name, pattern_type, principal, host, op, permission)
               for rtype, name in resources
               for principal, host, op, permission in specs] if specs else \
        [AclBindingFilter(rtype, name, pattern_type) for rtype, name in resources]
    what = (f"remove the ACLs of {', '.join(dict.fromkeys(allow_principals + deny_principals))} "
            "from" if specs else "delete all ACLs for")
    for rtype, name in resources:
        if not force and not click.confirm(
                f"Are you sure you want to {what} resource filter "
                f"`{_pattern_str(rtype, name, pattern_type)}`?"):
            raise click.ClickException("nothing removed")
    with _admin(bootstrap_server, admin_properties, timeout) as admin, \
            _acl_errors("remove ACLs", "ALTER"):
        results = admin.delete_acls(filters)
    removed = list(dict.fromkeys(b for deleted in results.values()
                                 if not isinstance(deleted, KafkaError) for b in deleted))
    if not removed:
        click.echo("No ACLs matched; nothing was removed.")
        return
    _echo_groups("Removed ACLs from resource", removed)
