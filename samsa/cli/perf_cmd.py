"""`samsa perf`: load tests, like kafka-producer-perf-test.

``samsa perf produce`` sends N records of S bytes as fast as possible (or at ``--throughput``
records/s), prints a progress line every 5 seconds and ends with a report: records/s, MB/s,
average and maximum latency, and the 50th, 95th, 99th and 99.9th latency percentiles.
Latency is measured per record from send() to its acknowledgement, as Kafka's tool does.
"""

from __future__ import annotations

import array
import functools
import os
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

import click

from samsa.cli import main
from samsa.cli.client_options import client_settings, command_config_option
from samsa.errors import KafkaError

REPORT_INTERVAL_S = 5.0


@main.group("perf")
def perf() -> None:
    """Load tests for producers and consumers."""


class Stats:
    """Per-record latencies and windowed progress (Kafka's perf-test Stats, simplified)."""

    def __init__(self, num_records: int, record_size: int, out: TextIO) -> None:
        self.record_size = record_size
        self.out = out
        self.start = time.monotonic()
        self.latencies = array.array("d")
        self.count = 0
        self.errors = 0
        self.first_error: BaseException | None = None
        self.max_latency = 0.0
        self.total_latency = 0.0
        self.window_start = self.start
        self.window_count = 0
        self.window_total_latency = 0.0
        self.window_max_latency = 0.0

    def complete(self, sent_at: float, _metadata: object, error: BaseException | None) -> None:
        """The send callback: runs on the producer's I/O thread."""
        now = time.monotonic()
        if error is not None:
            self.errors += 1
            if self.first_error is None:
                self.first_error = error
            return
        latency = (now - sent_at) * 1000.0
        self.latencies.append(latency)
        self.count += 1
        self.total_latency += latency
        self.max_latency = max(self.max_latency, latency)
        self.window_count += 1
        self.window_total_latency += latency
        self.window_max_latency = max(self.window_max_latency, latency)
        if now - self.window_start >= REPORT_INTERVAL_S:
            self.print_window(now)

    def print_window(self, now: float) -> None:
        elapsed = max(now - self.window_start, 1e-9)
        rate = self.window_count / elapsed
        mb = rate * self.record_size / (1024 * 1024)
        avg = self.window_total_latency / self.window_count if self.window_count else 0.0
        print(
            f"{self.window_count} records sent, {rate:.1f} records/sec ({mb:.2f} MB/sec), "
            f"{avg:.1f} ms avg latency, {self.window_max_latency:.1f} ms max latency.",
            file=self.out, flush=True,
        )
        self.window_start = now
        self.window_count = 0
        self.window_total_latency = 0.0
        self.window_max_latency = 0.0

    def report(self) -> dict[str, float]:
        elapsed = max(time.monotonic() - self.start, 1e-9)
        ordered = sorted(self.latencies)

        def pct(p: float) -> float:
            if not ordered:
                return 0.0
            return ordered[min(len(ordered) - 1, int(p * len(ordered)))]

        rate = self.count / elapsed
        return {
            "records": self.count,
            "errors": self.errors,
            "seconds": elapsed,
            "records_per_sec": rate,
            "mb_per_sec": rate * self.record_size / (1024 * 1024),
            "avg_latency_ms": self.total_latency / self.count if self.count else 0.0,
            "max_latency_ms": self.max_latency,
            "p50_ms": pct(0.5),
            "p95_ms": pct(0.95),
            "p99_ms": pct(0.99),
            "p999_ms": pct(0.999),
        }


class Throttler:
    """Keeps the send rate at or below ``target`` records/s (negative: unlimited).  ``clock``
    and ``sleep`` are injectable for tests."""

    def __init__(self, target: float, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], object] = time.sleep) -> None:
        self.target = target
        self.clock, self.sleep = clock, sleep
        self.start = clock()

    def throttle(self, sent: int) -> None:
        if self.target <= 0:
            return
        ahead = sent / self.target - (self.clock() - self.start)
        if ahead > 0.001:
            self.sleep(ahead)


def make_payload(record_size: int) -> bytes:
    """Random-looking but compressible-like-real-data payload, as the perf tool's default."""
    letters = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return bytes(letters[b % 26] for b in os.urandom(record_size))


@perf.command("produce")
@click.option("--bootstrap-server", "-b", required=True, help="host:port of a broker.")
@click.option("--topic", "-t", required=True)
@click.option("--num-records", "-n", type=int, required=True, help="How many records to send.")
@click.option("--record-size", "-s", type=int, default=100, show_default=True, help="Value size in bytes.")
@click.option("--throughput", type=float, default=-1, show_default=True,
              help="Maximum records/s (-1: as fast as possible).")
@click.option("--producer-property", "-X", "producer_properties", multiple=True, metavar="K=V",
              help="A producer setting, e.g. acks=1, linger.ms=10, compression.type=lz4.")
@command_config_option("--producer.config")
@click.option("--json", "as_json", is_flag=True, help="Print the final report as JSON.")
def perf_produce(
    bootstrap_server: str,
    topic: str,
    num_records: int,
    record_size: int,
    throughput: float,
    producer_properties: tuple[str, ...],
    as_json: bool,
) -> None:
    """Send NUM_RECORDS records of RECORD_SIZE bytes to TOPIC and report throughput and latency."""
    from samsa.producer.producer import KafkaProducer

    if num_records <= 0 or record_size < 0:
        raise click.BadParameter("--num-records must be > 0 and --record-size >= 0")
    config: dict[str, Any] = client_settings(producer_properties, "--producer-property")
    config["bootstrap.servers"] = bootstrap_server
    payload = make_payload(record_size)
    try:
        producer = KafkaProducer(config)
    except KafkaError as exc:
        raise click.ClickException(str(exc)) from exc
    stats = Stats(num_records, record_size, sys.stderr if as_json else sys.stdout)
    throttler = Throttler(throughput)
    complete = stats.complete
    send = producer.send
    monotonic = time.monotonic
    try:
        for i in range(num_records):
            send(topic, payload, on_delivery=functools.partial(complete, monotonic()))
            if throughput > 0:
                throttler.throttle(i + 1)
        producer.flush()
    except KafkaError as exc:
        producer.close(timeout=0)
        raise click.ClickException(f"{exc} (after {stats.count} acknowledged records)") from exc
    producer.close()
    result = stats.report()
    if as_json:
        import json

        click.echo(json.dumps(result))
    else:
        click.echo(
            f"{result['records']} records sent, {result['records_per_sec']:.1f} records/sec "
            f"({result['mb_per_sec']:.2f} MB/sec), {result['avg_latency_ms']:.2f} ms avg latency, "
            f"{result['max_latency_ms']:.2f} ms max latency, {result['p50_ms']:.0f} ms 50th, "
            f"{result['p95_ms']:.0f} ms 95th, {result['p99_ms']:.0f} ms 99th, {result['p999_ms']:.0f} ms 99.9th."
        )
    if stats.errors:
        raise click.ClickException(f"{stats.errors} record(s) failed; first error: {stats.first_error}")
