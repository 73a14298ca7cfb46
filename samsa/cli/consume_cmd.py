"""`samsa consume`: print a topic's records, like kafka-console-consumer.

Without ``--group`` every partition of the topic is assigned (no group, no commits); with it
the consumer subscribes as a member of that group and commits the offsets of the records it
printed.  ``--partition P [--offset O]`` reads one partition.  Each record is one line: its
value, preceded by the key and a separator with ``--print-key``.  Stops after
``--max-messages``, after ``--timeout-ms`` without a record, or on Ctrl-C, then reports the
count on stderr as Kafka's tool does.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, BinaryIO

import click

from samsa.cli import main
from samsa.cli.client_options import client_settings, command_config_option, parse_pairs
from samsa.errors import KafkaError

# --property names that shape the output rather than configure the consumer.
FORMATTER_PROPERTIES = ("print.key", "print.value", "print.partition", "print.offset",
                        "print.timestamp", "key.separator", "line.separator", "null.literal")
COMMIT_INTERVAL_S = 1.0
POLL_SLICE_S = 0.5


def _true(value: str | None) -> bool:
    return value is not None and value.strip().lower() == "true"


def _unescape(text: str) -> bytes:
    """``\\t``/``\\n`` typed on a command line mean the control characters, as in Kafka."""
    return text.encode("utf-8").decode("unicode_escape").encode("latin-1")


def make_formatter(props: dict[str, str], print_key: bool,
                   key_separator: str | None) -> Callable[[Any], bytes]:
    """A function turning one ConsumerRecord into its output line (bytes, newline included)."""
    show_key = print_key or _true(props.get("print.key"))
    show_value = props.get("print.value", "true").strip().lower() != "false"
    show_partition = _true(props.get("print.partition"))
    show_offset = _true(props.get("print.offset"))
    show_timestamp = _true(props.get("print.timestamp"))
    sep = _unescape(key_separator if key_separator is not None
                    else props.get("key.separator", "\\t"))
    end = _unescape(props.get("line.separator", "\\n"))
    null = props.get("null.literal", "null").encode("utf-8")

    def as_bytes(data: Any) -> bytes:
        if data is None:
            return null
        if isinstance(data, bytes | bytearray | memoryview):
            return bytes(data)
        return str(data).encode("utf-8")

    def fmt(record: Any) -> bytes:
        parts: list[bytes] = []
        if show_timestamp:
            kind = "CreateTime" if int(record.timestamp_type) == 0 else "LogAppendTime"
            parts.append(f"{kind}:{record.timestamp}".encode())
        if show_partition:
            parts.append(f"Partition:{record.partition}".encode())
        if show_offset:
            parts.append(f"Offset:{record.offset}".encode())
        if show_key:
            parts.append(as_bytes(record.key))
        if show_value:
            parts.append(as_bytes(record.value))
        return sep.join(parts) + end

    return fmt


def _parse_offset(text: str | None) -> int | str | None:
    if text is None:
        return None
    lowered = text.strip().lower()
    if lowered in ("earliest", "latest"):
        return lowered
    try:
        value = int(lowered)
    except ValueError:
        raise click.BadParameter(f"expected a number, 'earliest' or 'latest', got {text!r}",
                                 param_hint="--offset") from None
    if value < 0:
        raise click.BadParameter(f"must be >= 0, got {value}", param_hint="--offset")
    return value


@main.command("consume")
@click.option("--bootstrap-server", "-b", required=True, help="host:port of a broker (comma-separated list ok).")
@click.option("--topic", "-t", required=True, help="Topic to read.")
@click.option("--group", "-g", default=None, help="Consumer group: subscribe as a member and commit offsets.")
@click.option("--from-beginning", is_flag=True,
              help="Start at the earliest offset when there is no committed one (default: only new records).")
@click.option("--max-messages", type=int, default=None, help="Exit after printing this many records.")
@click.option("--partition", "-p", type=int, default=None, help="Read only this partition (no group).")
@click.option("--offset", "offset_text", default=None,
              help="With --partition: start at this offset, or 'earliest' / 'latest'.")
@click.option("--print-key", is_flag=True, help="Print each record's key before its value.")
@click.option("--key-separator", default=None, help="Between key and value (default: a tab).")
@click.option("--property", "properties", multiple=True, metavar="K=V",
              help="print.key, print.partition, print.offset, print.timestamp, print.value, key.separator, "
                   "line.separator, null.literal; other names are consumer settings.")
@click.option("--consumer-property", "-X", "consumer_properties", multiple=True, metavar="K=V",
              help="A consumer setting, e.g. isolation.level=read_committed.")
@command_config_option("--consumer.config")
@click.option("--timeout-ms", type=int, default=None, help="Exit when no record arrives for this long.")
def consume_cmd(
    bootstrap_server: str,
    topic: str,
    group: str | None,
    from_beginning: bool,
    max_messages: int | None,
    partition: int | None,
    offset_text: str | None,
    print_key: bool,
    key_separator: str | None,
    properties: tuple[str, ...],
    consumer_properties: tuple[str, ...],
    timeout_ms: int | None,
) -> None:
    """Print the records of TOPIC to stdout, one per line."""
    from samsa.consumer import KafkaConsumer

    offset = _parse_offset(offset_text)
    if offset is not None and partition is None:
        raise click.UsageError("--offset needs --partition")
    if offset is not None and from_beginning:
        raise click.UsageError("give --from-beginning or --offset, not both")
    if group is not None and partition is not None:
        raise click.UsageError("--partition reads without a group; drop --group or --partition")
    if max_messages is not None and max_messages <= 0:
        raise click.BadParameter("must be > 0", param_hint="--max-messages")
    if key_separator == "":
        raise click.BadParameter("must not be empty", param_hint="--key-separator")

    props = parse_pairs(properties, "--property")
    config: dict[str, Any] = {k: v for k, v in props.items() if k not in FORMATTER_PROPERTIES}
    config.update(client_settings(consumer_properties, "--consumer-property"))
    config["bootstrap.servers"] = bootstrap_server
    config.setdefault("auto.offset.reset", "earliest" if from_beginning or offset == "earliest" else "latest")
    if group is not None:
        config["group.id"] = group
        config["enable.auto.commit"] = False  # we commit exactly what was printed
    formatter = make_formatter(props, print_key, key_separator)

    try:
        consumer = KafkaConsumer(config)
    except KafkaError as exc:
        raise click.ClickException(str(exc)) from exc
    count = 0
    try:
        count = _run(consumer, topic, group, partition, offset, max_messages, timeout_ms, formatter,
                     sys.stdout.buffer)
    except KafkaError as exc:
        consumer.close(timeout=1, autocommit=False)
        raise click.ClickException(f"{exc} ({count} record(s) printed before the error)") from exc
    click.echo(f"Processed a total of {count} messages", err=True)


def _assign(consumer: Any, topic: str, partition: int | None, offset: int | str | None) -> None:
    from samsa.consumer import TopicPartition

    partitions = consumer.partitions_for(topic)
    if not partitions:
        raise click.ClickException(
            f"topic {topic!r} does not exist; create it first (samsa topics create --topic {topic})")
    if partition is None:
        consumer.assign([TopicPartition(topic, p.partition) for p in partitions])
        return
    if partition not in {p.partition for p in partitions}:
        raise click.ClickException(
            f"topic {topic!r} has no partition {partition}; it has {len(partitions)} (0-{len(partitions) - 1})")
    tp = TopicPartition(topic, partition)
    consumer.assign([tp])
    if isinstance(offset, int):
        consumer.seek(tp, offset)
    elif offset == "earliest":
        consumer.seek_to_beginning([tp])
    elif offset == "latest":
        consumer.seek_to_end([tp])


def _run(consumer: Any, topic: str, group: str | None, partition: int | None, offset: int | str | None,
         max_messages: int | None, timeout_ms: int | None, formatter: Callable[[Any], bytes],
         out: BinaryIO) -> int:
    """Poll and print until a stop condition; returns how many records were printed."""
    from samsa.consumer import OffsetAndMetadata, TopicPartition

    count = 0
    printed: dict[TopicPartition, OffsetAndMetadata] = {}
    last_commit = time.monotonic()
    try:
        if group is None:
            _assign(consumer, topic, partition, offset)
        else:
            consumer.subscribe([topic])
        last_record = time.monotonic()
        while max_messages is None or count < max_messages:
            wait = POLL_SLICE_S
            if timeout_ms is not None:
                left = timeout_ms / 1000.0 - (time.monotonic() - last_record)
                if left <= 0:
                    break
                wait = min(wait, left)
            records = consumer.poll(wait)
            if not records:
                continue
            last_record = time.monotonic()
            for record in records:
                out.write(formatter(record))
                printed[TopicPartition(record.topic, record.partition)] = OffsetAndMetadata(
                    record.offset + 1, "", record.leader_epoch)
                count += 1
                if max_messages is not None and count >= max_messages:
                    break
            out.flush()
            if group is not None and time.monotonic() - last_commit >= COMMIT_INTERVAL_S:
                consumer.commit(dict(printed), asynchronous=True)
                last_commit = time.monotonic()
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:  # `samsa consume ... | head`: the reader left; not an error
        pass
    try:
        if group is not None and printed:
            consumer.commit(dict(printed))
    finally:
        consumer.close(timeout=5, autocommit=False)
    return count
