"""``samsa broker``: run the embedded broker until SIGTERM or SIGINT.

Prints ``listening on HOST:PORT`` (the bound address) on its own line once clients can connect,
and ``advertised as HOST:PORT`` when clients are told another address.  Settings come from
``--config-file`` (Kafka's server.properties format), then ``--config key=value`` (repeatable,
later wins), then ``--host``/``--port``/``--data-dir``.
"""

from __future__ import annotations

import gc
import logging
import signal
import sys
import threading
from types import FrameType
from typing import Any

import click

from samsa.cli import main
from samsa.errors import ConfigError, KafkaError

DEFAULT_PORT = 9092


def _parse_overrides(values: tuple[str, ...]) -> dict[str, str]:
    settings: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not of the form key=value",
                                     param_hint="--config")
        settings[key.strip()] = value.strip()
    return settings


@main.command("broker")
@click.option("--port", type=click.IntRange(0, 65535), default=None,
              help=f"Port to listen on (default {DEFAULT_PORT}, or the one in 'listeners'; "
                   "0 = any free port).")
@click.option("--host", default=None,
              help="Address to listen on (default 127.0.0.1, or the one in 'listeners').")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="Directory for the logs and meta.properties (or set log.dirs).")
@click.option("--config", "-c", "overrides", multiple=True, metavar="KEY=VALUE",
              help="A broker setting with Kafka's name, e.g. -c num.partitions=3 (repeatable).")
@click.option("--config-file", type=click.Path(dir_okay=False), default=None,
              help="A Java properties file of broker settings (server.properties).")
@click.option("--log-level", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"],
                                               case_sensitive=False),
              default="INFO", show_default=True, help="Logging level (to stderr).")
def broker_command(port: int | None, host: str | None, data_dir: str | None,
                   overrides: tuple[str, ...], config_file: str | None, log_level: str) -> None:
    """Run a single-node Kafka-compatible broker until SIGTERM or Ctrl-C."""
    logging.basicConfig(level=log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from samsa.broker.config import BrokerConfig, load_properties
    from samsa.broker.server import Broker

    settings: dict[str, Any] = {}
    try:
        if config_file is not None:
            settings.update(load_properties(config_file))
        settings.update(_parse_overrides(overrides))
        config = BrokerConfig(settings)
        if config["listeners"] is not None:
            # Kafka's tools know only listeners: given in a file or with -c, it wins.
            if port is not None or host is not None:
                click.echo("note: --host/--port are ignored: 'listeners' says where to listen",
                           err=True)
            port = host = None
        elif port is None:
            port = DEFAULT_PORT
        broker = Broker(data_dir, port=port, host=host, config=config)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    except (OSError, KafkaError) as exc:
        raise click.ClickException(f"cannot start the broker: {exc}") from None

    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        try:
            broker.start()
        except OSError as exc:
            broker.close()
            raise click.ClickException(f"cannot start the broker: {exc}") from None
        # Everything built so far (modules, protocol codecs, logs) lives as long as the process:
        # keep it out of the cyclic GC's full collections, which would otherwise walk it every
        # few thousand requests.  Only this standalone process does so; an embedded Broker
        # leaves its host's GC alone.
        gc.freeze()
        # One "listening on HOST:PORT" line per listener, in the order of 'listeners' (scripts
        # that start the broker with --port 0 read the first); the log names each listener.
        advertised = broker.advertised_listeners
        for listener in broker.listeners:
            click.echo(f"listening on {listener.address}")
        for listener in broker.listeners:
            told = advertised[listener.name].address
            if told != listener.address:
                click.echo(f"advertised as {told}")
        sys.stdout.flush()
        while not stop.wait(0.5):
            pass
        logging.getLogger("samsa.broker").info("shutting down")
    finally:
        try:
            broker.close()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
