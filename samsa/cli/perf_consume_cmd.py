"""`samsa perf consume`: read N records as fast as possible, like kafka-consumer-perf-test.

Without ``--group`` every partition of the topic is assigned from the beginning; with it the
consumer subscribes (auto.offset.reset=earliest) and the report's startup time includes the
group join.  A progress line every ``--reporting-interval`` seconds; the final report gives
records/s and MB/s over the whole run and over the fetch phase (after the first record), the
time to the first record, and the average / maximum time a poll() that returned records
waited (a cheap stand-in for fetch latency: with prefetch it is the time the consumer waited
for data, not the broker's round trip).
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

import click

from samsa.cli.client_options import client_settings, command_config_option
from samsa.cli.perf_cmd import perf
from samsa.errors import KafkaError

MB = 1024 * 1024


class ConsumeStats:
    """Counts and windows for progress lines and the final report."""

    def __init__(self, out: TextIO, interval: float) -> None:
        self.out = out
        self.interval = interval
        self.start = time.monotonic()
        self.first_record: float | None = None
        self.records = 0
        self.bytes = 0
        self.polls_with_data = 0
        self.poll_wait_total = 0.0
        self.poll_wait_max = 0.0
        self.window_start = self.start
        self.window_records = 0
        self.window_bytes = 0

    def add(self, records: int, nbytes: int, waited: float, now: float) -> None:
        if self.first_record is None:
            self.first_record = now - waited
        self.records += records
        self.bytes += nbytes
        self.polls_with_data += 1
        self.poll_wait_total += waited
        self.poll_wait_max = max(self.poll_wait_max, waited)
        self.window_records += records
        self.window_bytes += nbytes
        if now - self.window_start >= self.interval:
            elapsed = now - self.window_start
            print(f"{self.window_records} records consumed, {self.window_records / elapsed:.1f} records/sec "
                  f"({self.window_bytes / MB / elapsed:.2f} MB/sec), {self.records} in total.",
                  file=self.out, flush=True)
            self.window_start = now
            self.window_records = 0
            self.window_bytes = 0

    def report(self, end: float) -> dict[str, float]:
        elapsed = max(end - self.start, 1e-9)
        first = self.first_record if self.first_record is not None else end
        fetch_elapsed = max(end - first, 1e-9)
        return {
            "records": self.records,
            "mb": self.bytes / MB,
            "seconds": elapsed,
            "records_per_sec": self.records / elapsed,
            "mb_per_sec": self.bytes / MB / elapsed,
            "startup_ms": (first - self.start) * 1000.0,
            "fetch_seconds": fetch_elapsed,
            "fetch_records_per_sec": self.records / fetch_elapsed,
            "fetch_mb_per_sec": self.bytes / MB / fetch_elapsed,
            "avg_poll_wait_ms": (self.poll_wait_total / self.polls_with_data * 1000.0
                                 if self.polls_with_data else 0.0),
            "max_poll_wait_ms": self.poll_wait_max * 1000.0,
        }


@perf.command("consume")
@click.option("--bootstrap-server", "-b", required=True, help="host:port of a broker.")
@click.option("--topic", "-t", required=True)
@click.option("--messages", "-n", type=int, required=True, help="How many records to read.")
@click.option("--group", "-g", default=None, help="Consume as a member of this group (subscribe).")
@click.option("--consumer-property", "-X", "consumer_properties", multiple=True, metavar="K=V",
              help="A consumer setting, e.g. fetch.max.bytes=10485760 or max.poll.records=2000.")
@command_config_option("--consumer.config")
@click.option("--timeout", type=float, default=10.0, show_default=True,
              help="Give up after this many seconds without a record.")
@click.option("--reporting-interval", type=float, default=5.0, show_default=True,
              help="Seconds between progress lines.")
@click.option("--json", "as_json", is_flag=True, help="Print the final report as JSON.")
def perf_consume(bootstrap_server: str, topic: str, messages: int, group: str | None,
                 consumer_properties: tuple[str, ...], timeout: float, reporting_interval: float,
                 as_json: bool) -> None:
    """Read MESSAGES records of TOPIC and report throughput."""
    from samsa.consumer import KafkaConsumer, TopicPartition

    if messages <= 0:
        raise click.BadParameter("must be > 0", param_hint="--messages")
    config: dict[str, Any] = client_settings(consumer_properties, "--consumer-property")
    config["bootstrap.servers"] = bootstrap_server
    config.setdefault("auto.offset.reset", "earliest")
    if group is not None:
        config["group.id"] = group
    try:
        consumer = KafkaConsumer(config)
    except KafkaError as exc:
        raise click.ClickException(str(exc)) from exc
    stats = ConsumeStats(sys.stderr if as_json else sys.stdout, reporting_interval)
    interrupted = False
    try:
        if group is None:
            partitions = consumer.partitions_for(topic)
            if not partitions:
                raise click.ClickException(f"topic {topic!r} does not exist")
            consumer.assign([TopicPartition(topic, p.partition) for p in partitions])
        else:
            consumer.subscribe([topic])
        last_record = time.monotonic()
        monotonic = time.monotonic
        poll = consumer.poll
        while stats.records < messages:
            before = monotonic()
            batch = poll(0.5)
            now = monotonic()
            if not batch:
                if now - last_record > timeout:
                    raise click.ClickException(
                        f"no record for {timeout:g} s after {stats.records} of {messages}; "
                        f"does {topic!r} hold {messages} records? (--timeout to wait longer)")
                continue
            last_record = now
            count = 0
            nbytes = 0
            for _tp, recs in batch.items():  # noqa: PERF102 (ConsumerRecords has no values())
                count += len(recs)
                for r in recs:
                    nbytes += max(r.serialized_value_size, 0) + max(r.serialized_key_size, 0)
            stats.add(count, nbytes, now - before, now)
    except KafkaError as exc:
        raise click.ClickException(f"{exc} (after {stats.records} records)") from exc
    except KeyboardInterrupt:
        interrupted = True
    finally:
        end = time.monotonic()
        consumer.close(timeout=5)
    result = stats.report(end)
    if as_json:
        import json

        click.echo(json.dumps(result))
    else:
        click.echo(
            f"{result['records']} records consumed ({result['mb']:.2f} MB) in {result['seconds']:.2f} s: "
            f"{result['records_per_sec']:.1f} records/sec ({result['mb_per_sec']:.2f} MB/sec); "
            f"first record after {result['startup_ms']:.0f} ms, then {result['fetch_records_per_sec']:.1f} "
            f"records/sec ({result['fetch_mb_per_sec']:.2f} MB/sec); poll wait {result['avg_poll_wait_ms']:.2f} ms "
            f"avg, {result['max_poll_wait_ms']:.1f} ms max."
        )
    if interrupted:
        raise click.exceptions.Exit(130)
