"""`samsa produce`: send stdin lines to a topic, like kafka-console-producer.

Each line is one record's value; with ``--key-separator S`` (or ``--property parse.key=true``
and ``key.separator=S``) the part before the first S is the key.  Flushes at EOF and exits
non-zero with a message if any record failed.
"""

from __future__ import annotations

import sys
from typing import Any, BinaryIO

import click

from samsa.cli import main
from samsa.cli.client_options import client_settings, command_config_option, parse_pairs
from samsa.errors import KafkaError

READER_PROPERTIES = ("parse.key", "key.separator", "ignore.error")


def split_line(line: bytes, separator: bytes | None) -> tuple[bytes | None, bytes]:
    """(key, value) of one input line; no separator in the line: key None."""
    if separator is None:
        return None, line
    key, sep, value = line.partition(separator)
    if not sep:
        return None, line
    return key, value


def read_lines(stream: BinaryIO) -> Any:
    for raw in stream:
        if raw.endswith(b"\n"):
            raw = raw[:-1]
            if raw.endswith(b"\r"):
                raw = raw[:-1]
        yield raw


@main.command("produce")
@click.option("--bootstrap-server", "-b", required=True, help="host:port of a broker (comma-separated list ok).")
@click.option("--topic", "-t", required=True, help="Topic to send to.")
@click.option("--key-separator", default=None, help="Split each line into key and value at the first SEPARATOR.")
@click.option("--property", "properties", multiple=True, metavar="K=V",
              help="parse.key=true, key.separator=S, ignore.error=true, or a producer setting.")
@click.option("--producer-property", "-X", "producer_properties", multiple=True, metavar="K=V",
              help="A producer setting, e.g. acks=1 or linger.ms=10.")
@command_config_option("--producer.config")
@click.option("--partition", "-p", type=int, default=None, help="Send every record to this partition.")
@click.option("--timeout", type=float, default=60.0, show_default=True,
              help="Seconds to wait at EOF for outstanding records.")
def produce_cmd(
    bootstrap_server: str,
    topic: str,
    key_separator: str | None,
    properties: tuple[str, ...],
    producer_properties: tuple[str, ...],
    partition: int | None,
    timeout: float,
) -> None:
    """Send lines from stdin to TOPIC, one record per line."""
    from samsa.producer.producer import KafkaProducer

    props = parse_pairs(properties, "--property")
    config: dict[str, Any] = {k: v for k, v in props.items() if k not in READER_PROPERTIES}
    config.update(client_settings(producer_properties, "--producer-property"))
    config["bootstrap.servers"] = bootstrap_server
    separator: bytes | None = None
    if key_separator is not None:
        separator = key_separator.encode("utf-8")
    elif props.get("parse.key", "false").lower() == "true":
        separator = props.get("key.separator", "\t").encode("utf-8")
    ignore_error = props.get("ignore.error", "false").lower() == "true"
    if separator == b"":
        raise click.BadParameter("the key separator must not be empty", param_hint="--key-separator")

    failures: list[BaseException] = []

    def on_delivery(_metadata: object, error: BaseException | None) -> None:
        if error is not None:
            failures.append(error)

    sent = 0
    try:
        producer = KafkaProducer(config)
    except KafkaError as exc:
        raise click.ClickException(str(exc)) from exc
    try:
        try:
            for line in read_lines(sys.stdin.buffer):
                key, value = split_line(line, separator)
                producer.send(topic, value, key=key, partition=partition, on_delivery=on_delivery)
                sent += 1
                if failures and not ignore_error:
                    break
            producer.flush(timeout)
        except KafkaError as exc:
            raise click.ClickException(f"{exc} ({sent} record(s) sent before the error)") from exc
    finally:
        producer.close(timeout=0 if failures and not ignore_error else 5)
    if failures:
        raise click.ClickException(
            f"{len(failures)} of {sent} record(s) could not be delivered to {topic}; first error: {failures[0]}"
        )
