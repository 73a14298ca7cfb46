"""`samsa perf consume` against an embedded samsa broker filled by samsa's producer."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from click.testing import CliRunner, Result

from samsa.admin import AdminClient, NewTopic
from samsa.broker import Broker
from samsa.cli import main

RECORDS = 2000
SIZE = 100


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {"group.initial.rebalance.delay.ms": 0}


@pytest.fixture(scope="module")
def broker(broker: Broker) -> Broker:
    """The module's broker with topic "load" filled."""
    from samsa.producer.producer import KafkaProducer

    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic("load", num_partitions=2)])
    with KafkaProducer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
        for i in range(RECORDS):
            producer.send("load", b"v" * SIZE, partition=i % 2)
    return broker


def perf(broker: Broker, *args: str) -> Result:
    return CliRunner().invoke(main, ["perf", "consume", "-b", broker.bootstrap_servers,
                                     "-t", "load", *args])


def test_assign_with_progress_lines(broker: Broker) -> None:
    result = perf(broker, "--messages", str(RECORDS), "--reporting-interval", "0",
                  "-X", "max.poll.records=500")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert any(line.endswith(f"{RECORDS} in total.") for line in lines)
    assert lines[-1].startswith(f"{RECORDS} records consumed (0.19 MB) in ")
    assert "records/sec" in lines[-1] and "poll wait" in lines[-1]


def test_group_json_report(broker: Broker) -> None:
    result = perf(broker, "--messages", "1500", "--group", "perf", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["records"] >= 1500
    assert report["mb"] == pytest.approx(report["records"] * SIZE / 1024 / 1024)
    assert report["records_per_sec"] > 0 and report["fetch_records_per_sec"] >= report["records_per_sec"]


def test_too_few_records_times_out_clearly(broker: Broker) -> None:
    result = perf(broker, "--messages", str(RECORDS + 1), "--timeout", "0.3")
    assert result.exit_code == 1
    assert f"no record for 0.3 s after {RECORDS} of {RECORDS + 1}" in result.output
    result = perf(broker, "--messages", "0")
    assert result.exit_code == 2


def test_real_subprocess(broker: Broker) -> None:
    proc = subprocess.run([sys.executable, "-m", "samsa.cli", "perf", "consume", "-b",
                           broker.bootstrap_servers, "-t", "load", "-n", "100", "--json"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["records"] >= 100
