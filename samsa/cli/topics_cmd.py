"""``samsa topics``: create, list, describe, alter and delete topics, like kafka-topics.sh.

``describe`` prints kafka-topics.sh's layout: one tab-separated line per topic (Topic, TopicId,
PartitionCount, ReplicationFactor, Configs = the settings that differ from the defaults), then
one indented line per partition (Topic, Partition, Leader, Replicas, Isr, and for a compacted
topic on a samsa broker the log cleaner's DirtyRatio).  Failures print
``Error: ...`` on stderr and exit with status 1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click

from samsa.cli import main
from samsa.cli.client_options import client_settings, command_config_option, parse_pairs
from samsa.errors import (
    KafkaError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

BOOTSTRAP_HELP = "host:port of a broker (a comma-separated list is fine)."


def _common(f: Callable[..., Any]) -> Callable[..., Any]:
    """Options every subcommand takes: where the cluster is, admin settings, time limit."""
    f = click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=30.0,
                     show_default=True, help="Seconds to wait for the cluster.")(f)
    f = click.option("--admin-property", "-X", "admin_properties", multiple=True,
                     metavar="K=V", help="An admin client setting, e.g. request.timeout.ms=5000.")(f)
    f = command_config_option()(f)
    return click.option("--bootstrap-server", "-b", required=True, help=BOOTSTRAP_HELP)(f)


@contextmanager
def _admin(bootstrap_server: str, admin_properties: tuple[str, ...],
           timeout: float) -> Iterator[Any]:
    """An AdminClient whose time limit is ``timeout``; Kafka errors become ``Error: ...``."""
    from samsa.admin import AdminClient
    from samsa.net.client_config import REQUEST_TIMEOUT_MS

    config = client_settings(admin_properties, "--admin-property")
    config["bootstrap.servers"] = bootstrap_server
    timeout_ms = int(timeout * 1000)
    config.setdefault("default.api.timeout.ms", timeout_ms)
    config.setdefault("request.timeout.ms", min(timeout_ms, REQUEST_TIMEOUT_MS.default))
    try:
        with AdminClient(config) as admin:
            yield admin
    except KafkaError as e:
        raise click.ClickException(str(e)) from None


@main.group("topics")
def topics_group() -> None:
    """Create, list, describe, alter and delete topics."""


@topics_group.command("create")
@_common
@click.option("--topic", "-t", required=True, help="Name of the topic to create.")
@click.option("--partitions", type=int, default=-1,
              help="Number of partitions (default: the broker's num.partitions).")
@click.option("--replication-factor", type=int, default=-1,
              help="Replicas per partition (default: the broker's default.replication.factor).")
@click.option("--config", "configs", multiple=True, metavar="K=V",
              help="A topic setting, e.g. retention.ms=60000 (repeatable).")
@click.option("--if-not-exists", is_flag=True, help="Succeed quietly if the topic exists.")
@click.option("--validate-only", is_flag=True, help="Only ask the broker to check the request.")
def create_cmd(bootstrap_server: str, admin_properties: tuple[str, ...], timeout: float,
               topic: str, partitions: int, replication_factor: int, configs: tuple[str, ...],
               if_not_exists: bool, validate_only: bool) -> None:
    """Create a topic."""
    from samsa.admin import NewTopic

    new = NewTopic(topic, partitions, replication_factor, parse_pairs(configs, "--config"))
    with _admin(bootstrap_server, admin_properties, timeout) as admin:
        try:
            admin.create_topics([new], validate_only=validate_only)
        except TopicAlreadyExistsError:
            if not if_not_exists:
                raise
            return
    click.echo(f"Topic {topic} is valid." if validate_only else f"Created topic {topic}.")


@topics_group.command("list")
@_common
@click.option("--exclude-internal", is_flag=True, help="Leave out internal topics.")
def list_cmd(bootstrap_server: str, admin_properties: tuple[str, ...], timeout: float,
             exclude_internal: bool) -> None:
    """List topic names, one per line."""
    with _admin(bootstrap_server, admin_properties, timeout) as admin:
        names = admin.list_topics(include_internal=not exclude_internal)
    for name in names:
        click.echo(name)


@topics_group.command("describe")
@_common
@click.option("--topic", "-t", "topics", multiple=True,
              help="Topic to describe (repeatable; default: all).")
@click.option("--exclude-internal", is_flag=True, help="Leave out internal topics.")
def describe_cmd(bootstrap_server: str, admin_properties: tuple[str, ...], timeout: float,
                 topics: tuple[str, ...], exclude_internal: bool) -> None:
    """Describe topics: partitions, leaders, replicas, ISR and non-default settings."""
    from samsa.errors import UnsupportedVersionError

    with _admin(bootstrap_server, admin_properties, timeout) as admin:
        names = list(topics) or admin.list_topics(include_internal=not exclude_internal)
        if not names:
            return
        descriptions = admin.describe_topics(names)
        try:
            configs = admin.describe_configs(names)
        except UnsupportedVersionError:
            configs = {}  # a broker without DescribeConfigs (librdkafka's mock)
        dirty = _dirty_ratios(admin, configs)
        for name in names:
            click.echo(_describe_lines(descriptions[name], configs, dirty.get(name, {})))


def _dirty_ratios(admin: Any, configs: dict[Any, Any]) -> dict[str, dict[int, str]]:
    """The cleaner's dirty ratio per partition of each compacted topic, from a samsa broker
    (CLEANER_DIRTY_RATIO_CONFIG); nothing from a Kafka broker, which does not answer it."""
    from samsa.protocol.config_types import CLEANER_DIRTY_RATIO_CONFIG

    compacted = [resource for resource, entries in configs.items()
                 if isinstance(entries, dict) and "cleanup.policy" in entries
                 and "compact" in (entries["cleanup.policy"].value or "")]
    if not compacted:
        return {}
    answers = admin.describe_configs(resources=compacted, keys=[CLEANER_DIRTY_RATIO_CONFIG],
                                     raise_errors=False)
    ratios: dict[str, dict[int, str]] = {}
    for resource, entries in answers.items():
        entry = entries.get(CLEANER_DIRTY_RATIO_CONFIG) if isinstance(entries, dict) else None
        if entry is None or not entry.value:
            continue
        pairs = (item.split(":", 1) for item in entry.value.split(","))
        ratios[resource.name] = {int(partition): ratio for partition, ratio in pairs}
    return ratios


def _describe_lines(description: Any, configs: dict[Any, Any],
                    dirty: dict[int, str] | None = None) -> str:
    from samsa.admin import ConfigResource

    dirty = dirty or {}
    entries = configs.get(ConfigResource.topic(description.name), {})
    overrides = ",".join(f"{k}={'<sensitive>' if e.sensitive else e.value}"
                         for k, e in sorted(entries.items()) if not e.is_default)
    header = (f"Topic: {description.name}\tTopicId: {description.topic_id_str}\t"
              f"PartitionCount: {len(description.partitions)}\t"
              f"ReplicationFactor: {description.replication_factor}\tConfigs: {overrides}")
    lines = [header]
    for p in description.partitions:
        leader = "none" if p.leader is None else p.leader
        lines.append(f"\tTopic: {description.name}\tPartition: {p.partition}\tLeader: {leader}"
                     f"\tReplicas: {','.join(map(str, p.replicas))}"
                     f"\tIsr: {','.join(map(str, p.isr))}"
                     + (f"\tDirtyRatio: {dirty[p.partition]}" if p.partition in dirty else ""))
    return "\n".join(lines)


@topics_group.command("alter")
@_common
@click.option("--topic", "-t", required=True, help="Topic to alter.")
@click.option("--partitions", type=click.IntRange(min=1), required=True,
              help="New total number of partitions (can only grow).")
def alter_cmd(bootstrap_server: str, admin_properties: tuple[str, ...], timeout: float,
              topic: str, partitions: int) -> None:
    """Add partitions to a topic."""
    with _admin(bootstrap_server, admin_properties, timeout) as admin:
        admin.create_partitions({topic: partitions})
    click.echo(f"Topic {topic} now has {partitions} partitions.")


@topics_group.command("delete")
@_common
@click.option("--topic", "-t", "topics", multiple=True, required=True,
              help="Topic to delete (repeatable).")
@click.option("--if-exists", is_flag=True, help="Succeed quietly if a topic does not exist.")
def delete_cmd(bootstrap_server: str, admin_properties: tuple[str, ...], timeout: float,
               topics: tuple[str, ...], if_exists: bool) -> None:
    """Delete topics."""
    with _admin(bootstrap_server, admin_properties, timeout) as admin:
        results = admin.delete_topics(topics, raise_errors=False)
        for name, outcome in results.items():
            if isinstance(outcome, UnknownTopicOrPartitionError) and if_exists:
                continue
            if isinstance(outcome, KafkaError):
                raise outcome
            click.echo(f"Deleted topic {name}.")
