"""``samsa configs``: describe and change topic and broker settings, like kafka-configs.sh.

::

    samsa configs -b HOST:PORT --entity-type topics --entity-name orders --describe [--all]
    samsa configs -b HOST:PORT --entity-type topics --entity-name orders --alter \\
        --add-config retention.ms=60000,cleanup.policy=[delete,compact] --delete-config segment.ms
    samsa configs -b HOST:PORT --entity-type brokers --entity-default --alter \\
        --add-config log.retention.ms=3600000

Changes go through IncrementalAlterConfigs (only the named settings change).  ``--describe``
prints kafka-configs.sh's layout (ConfigCommand): a header line, then one line per setting
with its sensitivity and synonyms; without ``--all`` only the settings set on that entity
(a topic's overrides, a broker's dynamic values).  Failures print ``Error: ...`` on stderr and
exit with status 1.
"""

from __future__ import annotations

from typing import Any

import click

from samsa.cli import main
from samsa.cli.client_options import command_config_option
from samsa.cli.topics_cmd import _admin

BOOTSTRAP_HELP = "host:port of a broker (a comma-separated list is fine)."


def parse_add_config(text: str) -> dict[str, str]:
    """kafka-configs.sh's ``--add-config``: ``k1=v1,k2=[v2,v3]`` (brackets group a list value
    that contains commas)."""
    out: dict[str, str] = {}
    i, n = 0, len(text)
    while i < n:
        eq = text.find("=", i)
        if eq < 0:
            raise click.BadParameter(f"expected key=value in {text[i:]!r}",
                                     param_hint="--add-config")
        name = text[i:eq].strip()
        j = eq + 1
        if j < n and text[j] == "[":
            close = text.find("]", j)
            if close < 0:
                raise click.BadParameter(f"unclosed '[' in {text!r}", param_hint="--add-config")
            value, i = text[j + 1:close], close + 1
            if i < n and text[i] != ",":
                raise click.BadParameter(f"expected ',' after ']' in {text!r}",
                                         param_hint="--add-config")
        else:
            comma = text.find(",", j)
            end = n if comma < 0 else comma
            value, i = text[j:end], end
        i += 1  # past the separating comma
        if not name:
            raise click.BadParameter(f"empty key in {text!r}", param_hint="--add-config")
        out[name] = value
    return out


def _resources(admin: Any, entity_type: str, names: list[str],
               entity_default: bool) -> list[Any]:
    from samsa.admin import ConfigResource

    if entity_type == "topics":
        return [ConfigResource.topic(n) for n in (names or admin.list_topics())]
    if entity_default:
        return [ConfigResource.broker_default()]
    if names:
        return [ConfigResource.broker(_broker_id(n)) for n in names]
    return [ConfigResource.broker(node.id) for node in admin.describe_cluster().nodes]


def _broker_id(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise click.BadParameter(f"a broker is named by its id, got {text!r}",
                                 param_hint="--entity-name") from None


def _title(resource: Any) -> str:
    if resource.type.name == "TOPIC":
        return f"topic {resource.name}"
    return f"broker {resource.name}" if resource.name else "brokers in the cluster"


def _own_source(resource: Any) -> str:
    """The source of the settings set on this entity itself (kafka-configs.sh's filter)."""
    if resource.type.name == "TOPIC":
        return "DYNAMIC_TOPIC_CONFIG"
    return "DYNAMIC_BROKER_CONFIG" if resource.name else "DYNAMIC_DEFAULT_BROKER_CONFIG"


def _line(entry: Any) -> str:
    synonyms = ", ".join(f"{s.source.name}:{s.name}={s.value}" for s in entry.synonyms)
    return f"  {entry.name}={entry.value} sensitive={str(entry.sensitive).lower()} " \
           f"synonyms={{{synonyms}}}"


def _describe(admin: Any, resources: list[Any], show_all: bool) -> None:
    described = admin.describe_configs(resources=resources, include_synonyms=True)
    for resource in resources:
        entries = described[resource]
        if show_all:
            header = f"All configs for {_title(resource)} are:"
        elif resource.type.name == "BROKER" and not resource.name:
            header = "Default configs for brokers in the cluster are:"
        else:
            header = f"Dynamic configs for {_title(resource)} are:"
        click.echo(header)
        for name, entry in sorted(entries.items()):
            if show_all or entry.source.name == _own_source(resource):
                click.echo(_line(entry))


@main.command("configs")
@click.option("--bootstrap-server", "-b", required=True, help=BOOTSTRAP_HELP)
@click.option("--entity-type", required=True, type=click.Choice(["topics", "brokers"]),
              help="What to describe or alter.")
@click.option("--entity-name", "entity_names", multiple=True,
              help="Topic name or broker id (default: every topic / broker).")
@click.option("--entity-default", is_flag=True,
              help="The cluster-wide default of dynamic broker settings (brokers only).")
@click.option("--describe", "describe", is_flag=True, help="Show the settings.")
@click.option("--all", "show_all", is_flag=True,
              help="With --describe: every setting, not only those set on the entity.")
@click.option("--alter", is_flag=True, help="Change settings (--add-config/--delete-config).")
@click.option("--add-config", "add_configs", multiple=True, metavar="K=V,K2=[A,B]",
              help="Settings to set, comma-separated; [] groups a list value.")
@click.option("--delete-config", "delete_configs", multiple=True, metavar="K,K2",
              help="Settings to remove (back to their defaults), comma-separated.")
@click.option("--admin-property", "-X", "admin_properties", multiple=True, metavar="K=V",
              help="An admin client setting, e.g. request.timeout.ms=5000.")
@command_config_option()
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=30.0,
              show_default=True, help="Seconds to wait for the cluster.")
def configs_cmd(bootstrap_server: str, entity_type: str, entity_names: tuple[str, ...],
                entity_default: bool, describe: bool, show_all: bool, alter: bool,
                add_configs: tuple[str, ...], delete_configs: tuple[str, ...],
                admin_properties: tuple[str, ...], timeout: float) -> None:
    """Describe or alter topic and broker settings (like kafka-configs.sh)."""
    if describe == alter:
        raise click.UsageError("give exactly one of --describe and --alter")
    if entity_default and (entity_type != "brokers" or entity_names):
        raise click.UsageError("--entity-default is for --entity-type brokers, without "
                               "--entity-name")
    if alter and not (entity_names or entity_default):
        raise click.UsageError("--alter needs --entity-name or --entity-default")
    if alter and not (add_configs or delete_configs):
        raise click.UsageError("--alter needs --add-config or --delete-config")
    if describe and (add_configs or delete_configs):
        raise click.UsageError("--add-config/--delete-config go with --alter")
    with _admin(bootstrap_server, admin_properties, timeout) as admin:
        resources = _resources(admin, entity_type, list(entity_names), entity_default)
        if describe:
            _describe(admin, resources, show_all)
            return
        _alter(admin, resources, add_configs, delete_configs)


def _alter(admin: Any, resources: list[Any], add_configs: tuple[str, ...],
           delete_configs: tuple[str, ...]) -> None:
    from samsa.admin import AlterConfigOp

    added: dict[str, str] = {}
    for text in add_configs:
        added.update(parse_add_config(text))
    deleted = [n.strip() for text in delete_configs for n in text.split(",") if n.strip()]
    both = set(added) & set(deleted)
    if both:
        raise click.UsageError(f"both added and deleted: {', '.join(sorted(both))}")
    ops = [AlterConfigOp.set(k, v) for k, v in added.items()] + \
        [AlterConfigOp.delete(n) for n in deleted]
    admin.incremental_alter_configs({r: ops for r in resources})
    for r in resources:
        if r.type.name == "BROKER" and not r.name:
            click.echo("Completed updating default config for brokers in the cluster.")
        else:
            click.echo(f"Completed updating config for {_title(r)}.")
