"""Client settings on the command line, as Kafka's tools take them: a Java properties file
(``--command-config``, also spelled ``--producer.config`` / ``--consumer.config`` as in
kafka-console-producer/consumer) overridden by ``-X key=value`` settings.  Security settings
(security.protocol, sasl.*, ssl.*) usually come this way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from samsa.errors import ConfigError

__all__ = ["client_settings", "command_config_option", "parse_pairs"]


def parse_pairs(items: tuple[str, ...], option: str) -> dict[str, str]:
    """``k=v`` strings -> dict; a malformed one is a usage error naming the option."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(f"expected key=value, got {item!r}", param_hint=option)
        out[name.strip()] = value
    return out


_META_KEY = "samsa.command_config"


def _remember(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    ctx.meta[_META_KEY] = value


def command_config_option(*aliases: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--command-config FILE`` (plus ``aliases``, e.g. ``--producer.config``); the command
    reads it through :func:`client_settings`."""
    return click.option(
        "--command-config", *aliases, type=click.Path(exists=True, dir_okay=False),
        default=None, metavar="FILE", expose_value=False, callback=_remember,
        help="A Java properties file of client settings (security.protocol, sasl.*, ssl.* ...);"
             " -X settings override it.")


def client_settings(properties: tuple[str, ...], option: str) -> dict[str, Any]:
    """The --command-config file's settings, then the -X ones (``properties``) over them."""
    from samsa.properties import load_properties

    context = click.get_current_context(silent=True)
    command_config = context.meta.get(_META_KEY) if context is not None else None
    settings: dict[str, Any] = {}
    if command_config is not None:
        try:
            settings.update(load_properties(command_config, "--command-config"))
        except ConfigError as exc:
            raise click.BadParameter(str(exc), param_hint="--command-config") from None
    settings.update(parse_pairs(properties, option))
    return settings
