"""`samsa perf produce` against librdkafka's mock cluster."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from samsa.cli import main
from samsa.cli.perf_cmd import Stats, Throttler
from tests.support.mock_cluster import MockCluster


def test_perf_produce_reports_throughput_and_percentiles() -> None:
    with MockCluster(1, topics={"perf": 2}) as cluster:
        result = CliRunner().invoke(
            main,
            ["perf", "produce", "--bootstrap-server", cluster.bootstrap_servers, "--topic", "perf",
             "--num-records", "5000", "--record-size", "100", "-X", "linger.ms=1"],
        )
    assert result.exit_code == 0, result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("5000 records sent, ")
    for part in ("records/sec", "MB/sec", "ms avg latency", "ms max latency", "50th", "95th", "99th", "99.9th"):
        assert part in last


def test_perf_produce_json_and_throughput_limit() -> None:
    with MockCluster(1, topics={"perf": 1}) as cluster:
        result = CliRunner().invoke(
            main,
            ["perf", "produce", "-b", cluster.bootstrap_servers, "-t", "perf", "-n", "300",
             "-s", "10", "--throughput", "1000", "--json"],
        )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["records"] == 300 and report["errors"] == 0
    assert report["p50_ms"] <= report["p99_ms"] <= report["max_latency_ms"]
    assert report["seconds"] >= 0.25  # 300 records at 1000/s cannot take less than ~0.3 s


def test_stats_percentiles() -> None:
    import io

    stats = Stats(100, 10, io.StringIO())
    for ms in range(1, 101):
        stats.latencies.append(float(ms))
        stats.count += 1
    report = stats.report()
    assert report["p50_ms"] == 51.0 and report["p99_ms"] == 100.0


class FakeTime:
    """A clock that only moves when the throttler sleeps, and a record of the sleeps."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_throttler_unlimited_does_not_sleep() -> None:
    fake = FakeTime()
    throttler = Throttler(-1, clock=fake.clock, sleep=fake.sleep)
    for sent in (1, 1000, 10**9):  # a billion records at no time at all
        throttler.throttle(sent)
    assert fake.sleeps == []


def test_throttler_sleeps_until_the_target_rate_allows_the_next_record() -> None:
    fake = FakeTime()
    throttler = Throttler(1000, clock=fake.clock, sleep=fake.sleep)
    throttler.throttle(500)  # 500 records at t=0: 0.5 s ahead of 1000 records/s
    assert fake.sleeps == [pytest.approx(0.5)]
    fake.now += 1.0  # the sender fell behind: 500 more records are due by now
    throttler.throttle(1000)
    assert fake.sleeps == [pytest.approx(0.5)]
