"""`samsa consume` against an embedded samsa broker filled by samsa's producer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from samsa.admin import AdminClient, NewTopic
from samsa.broker import Broker
from samsa.cli import main
from samsa.cli.consume_cmd import make_formatter
from samsa.consumer import ConsumerRecord
from samsa.producer.producer import KafkaProducer
from samsa.records import TimestampType

PARTITIONS = 3
PER_PARTITION = 10


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {"group.initial.rebalance.delay.ms": 0}


@pytest.fixture(scope="module")
def broker(broker: Broker) -> Broker:
    """The module's broker with topics "lines" (filled) and "empty"."""
    bootstrap = broker.bootstrap_servers
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic("lines", num_partitions=PARTITIONS), NewTopic("empty", 1)])
    producer = KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            producer.send("lines", f"v{p}-{i}".encode(), key=f"k{p}-{i}".encode(), partition=p)
    producer.send("lines", None, key=b"tombstone", partition=0)
    producer.flush()
    producer.close()
    return broker


def consume(broker: Broker, *args: str) -> Result:
    return CliRunner().invoke(main, ["consume", "--bootstrap-server", broker.bootstrap_servers,
                                     *args])


def out_lines(result: Result) -> list[str]:
    return [line for line in result.stdout.splitlines() if line]


def test_formatter_fields() -> None:
    record = ConsumerRecord("t", 2, 7, 1000, TimestampType.CREATE_TIME, b"k", None, [], 1, -1, None)
    fmt = make_formatter({"print.partition": "true", "print.offset": "true",
                          "print.timestamp": "true"}, True, "|")
    assert fmt(record) == b"CreateTime:1000|Partition:2|Offset:7|k|null\n"
    assert make_formatter({}, False, None)(record._replace(value=b"x")) == b"x\n"


def test_assign_all_partitions_from_beginning_with_keys(broker: Broker) -> None:
    result = consume(broker, "--topic", "lines", "--from-beginning", "--print-key",
                     "--key-separator", ":", "--max-messages", str(PARTITIONS * PER_PARTITION + 1))
    assert result.exit_code == 0, result.output
    got = set(out_lines(result))
    want = {f"k{p}-{i}:v{p}-{i}" for p in range(PARTITIONS) for i in range(PER_PARTITION)}
    assert got == want | {"tombstone:null"}
    assert f"Processed a total of {len(want) + 1} messages" in result.stderr


def test_one_partition_from_an_offset(broker: Broker) -> None:
    result = consume(broker, "-t", "lines", "--partition", "1", "--offset", "7",
                     "--property", "print.offset=true", "--timeout-ms", "1000")
    assert result.exit_code == 0, result.output
    assert out_lines(result) == ["Offset:7\tv1-7", "Offset:8\tv1-8", "Offset:9\tv1-9"]


def test_timeout_ends_a_quiet_topic(broker: Broker) -> None:
    result = consume(broker, "-t", "empty", "--timeout-ms", "300")
    assert result.exit_code == 0, result.output
    assert out_lines(result) == []
    assert "Processed a total of 0 messages" in result.stderr


def test_group_commits_what_it_printed(broker: Broker) -> None:
    args = ("-t", "lines", "--group", "readers", "--from-beginning", "--property", "print.partition=true")
    first = consume(broker, *args, "--max-messages", "12")
    assert first.exit_code == 0, first.output
    second = consume(broker, *args, "--timeout-ms", "1500")
    assert second.exit_code == 0, second.output
    both = out_lines(first) + out_lines(second)
    assert len(out_lines(first)) == 12
    # No record twice, none missing: the second run started where the first one's commit ended.
    assert sorted(both) == sorted(
        [f"Partition:{p}\tv{p}-{i}" for p in range(PARTITIONS) for i in range(PER_PARTITION)]
        + ["Partition:0\tnull"])


def test_usage_and_broker_errors(broker: Broker) -> None:
    result = consume(broker, "-t", "lines", "--offset", "3")
    assert result.exit_code == 2 and "--offset needs --partition" in result.output
    result = consume(broker, "-t", "lines", "--partition", "0", "--group", "g")
    assert result.exit_code == 2 and "without a group" in result.output
    result = consume(broker, "-t", "lines", "--partition", "0", "--offset", "soon")
    assert result.exit_code == 2 and "'earliest' or 'latest'" in result.output
    result = consume(broker, "-t", "nosuchtopic", "-X", "allow.auto.create.topics=false")
    assert result.exit_code == 1 and "topic 'nosuchtopic' does not exist" in result.output
    result = consume(broker, "-t", "lines", "--partition", "9")
    assert result.exit_code == 1 and "has no partition 9" in result.output
    result = consume(broker, "-t", "lines", "-X", "fetch.min.bytes=-5")
    assert result.exit_code == 1 and "fetch.min.bytes" in result.output
    result = CliRunner().invoke(main, ["consume", "-b", "127.0.0.1:1", "-t", "lines",
                                       "-X", "default.api.timeout.ms=300"])
    assert result.exit_code == 1 and "Error:" in result.output


def test_real_subprocess(broker: Broker, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "samsa.cli", "consume", "-b", broker.bootstrap_servers, "-t", "lines",
         "--partition", "2", "--offset", "earliest", "--max-messages", "3"],
        capture_output=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [b"v2-0", b"v2-1", b"v2-2"]
    assert b"Processed a total of 3 messages" in proc.stderr
