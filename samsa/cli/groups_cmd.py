"""``samsa groups``: list, describe and delete consumer groups, like kafka-consumer-groups.sh.

``describe`` prints, per group, a state line (GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE
#MEMBERS), then one row per partition the group is assigned or has committed: GROUP TOPIC
PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID ("-" where there is
no commit or no owner).  Failures print ``Error: ...`` and exit with status 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from samsa.cli import main
from samsa.cli.topics_cmd import _admin, _common
from samsa.errors import KafkaError

PARTITION_HEADER = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                    "CONSUMER-ID", "HOST", "CLIENT-ID")
STATE_HEADER = ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")


def format_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns padded to their widest cell, two spaces apart, as Kafka's tools print them."""
    cells = [[str(c) for c in header]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                     for row in cells)


@main.group("groups")
def groups_group() -> None:
    """List, describe and delete consumer groups."""


@groups_group.command("list")
@_common
@click.option("--state", "show_state", is_flag=True, help="Also print each group's state.")
def list_cmd(bootstrap_server: str, admin_properties: tuple[str, ...], timeout: float,
             show_state: bool) -> None:
    """List group ids, one per line."""
    with _admin(bootstrap_server, admin_properties, timeout) as admin:
        listings = admin.list_groups()
    if show_state:
        click.echo(format_table(("GROUP", "STATE"), [(g.group_id, g.state or "-") for g in listings]))
        return
    for g in listings:
        click.echo(g.group_id)


@groups_group.command("describe")
@_common
@click.option("--group", "-g", "groups", multiple=True, help="Group to describe (repeatable).")
@click.option("--all-groups", is_flag=True, help="Describe every group.")
def describe_cmd(bootstrap_server: str, admin_properties: tuple[str, ...], timeout: float,
                 groups: tuple[str, ...], all_groups: bool) -> None:
    """Show each group's state, members and per-partition offsets and lag."""
    if not groups and not all_groups:
        raise click.UsageError("give --group G (repeatable) or --all-groups")
    blocks: list[str] = []
    with _admin(bootstrap_server, admin_properties, timeout) as admin:
        names = [g.group_id for g in admin.list_groups()] if all_groups else list(groups)
        descriptions = admin.describe_groups(names)
        committed = {name: admin.list_group_offsets(name) for name in names}
    missing = [n for n in names if descriptions[n].state == "Dead"]
    if missing:
        raise click.ClickException(
            "; ".join(f"Consumer group '{n}' does not exist." for n in missing))
    end_offsets = _log_end_offsets(bootstrap_server, admin_properties, timeout,
                                   {tp for offsets in committed.values() for tp in offsets}
                                   | {tp for d in descriptions.values() for tp in _owners(d)})
    for name in names:
        blocks.append(_describe_group(descriptions[name], committed[name], end_offsets))
    click.echo("\n\n".join(blocks))


def _owners(description: Any) -> dict[Any, Any]:
    """{TopicPartition: the member that owns it} from the members' consumer assignments."""
    from samsa.consumer.protocol import decode_assignment

    owners: dict[Any, Any] = {}
    if description.protocol_type != "consumer":
        return owners
    for member in description.members:
        if not member.assignment:
            continue
        for tp in decode_assignment(member.assignment).partitions:
            owners[tp] = member
    return owners


def _log_end_offsets(bootstrap_server: str, admin_properties: tuple[str, ...], timeout: float,
                     partitions: set[Any]) -> dict[Any, int]:
    """ListOffsets(latest) through a group-less consumer (the admin client has no list_offsets)."""
    if not partitions:
        return {}
    from samsa.cli.client_options import client_settings
    from samsa.consumer import KafkaConsumer
    from samsa.net.client_config import COMMON_CLIENT_SETTINGS

    config = client_settings(admin_properties, "--admin-property")
    # The admin settings a consumer has too: those every client shares.
    common = {entry.name for entry in COMMON_CLIENT_SETTINGS}
    config = {k: v for k, v in config.items() if k.replace("_", ".") in common}
    config.update({"bootstrap.servers": bootstrap_server,
                   "default.api.timeout.ms": int(timeout * 1000)})
    try:
        with KafkaConsumer(config) as consumer:
            return consumer.end_offsets(sorted(partitions))
    except KafkaError as e:
        raise click.ClickException(f"reading log end offsets: {e}") from None


def _describe_group(description: Any, committed: dict[Any, int], end_offsets: dict[Any, int]) -> str:
    name = description.group_id
    coordinator = description.coordinator
    state = format_table(STATE_HEADER, [(
        name, f"{coordinator.host}:{coordinator.port} ({coordinator.id})",
        description.protocol or "-", description.state, len(description.members))])
    owners = _owners(description)
    rows = []
    for tp in sorted(set(committed) | set(owners)):
        current = committed.get(tp)
        end = end_offsets.get(tp, -1)
        lag = "-" if current is None or end < 0 else max(end - current, 0)
        owner = owners.get(tp)
        rows.append((name, tp.topic, tp.partition, "-" if current is None else current,
                     "-" if end < 0 else end, lag,
                     owner.member_id if owner else "-", owner.host if owner else "-",
                     owner.client_id if owner else "-"))
    parts = [state]
    if not description.members:
        parts.append(f"\nConsumer group '{name}' has no active members.")
    if rows:
        parts.append("\n" + format_table(PARTITION_HEADER, rows))
    return "\n".join(parts)


@groups_group.command("delete")
@_common
@click.option("--group", "-g", "groups", multiple=True, required=True,
              help="Group to delete (repeatable); it must have no active members.")
def delete_cmd(bootstrap_server: str, admin_properties: tuple[str, ...], timeout: float,
               groups: tuple[str, ...]) -> None:
    """Delete empty groups and their committed offsets."""
    with _admin(bootstrap_server, admin_properties, timeout) as admin:
        results = admin.delete_groups(groups, raise_errors=False)
    failed = {n: e for n, e in results.items() if e is not None}
    done = [n for n, e in results.items() if e is None]
    if done:
        click.echo("Deletion of requested consumer groups (" + ", ".join(f"'{n}'" for n in done)
                   + ") was successful.")
    if failed:
        raise click.ClickException("Deletion of some consumer groups failed:\n" + "\n".join(
            f"* Group '{n}' could not be deleted due to: {e}" for n, e in failed.items()))
