"""``samsa groups`` against an embedded samsa broker with a live samsa consumer group."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest
from click.testing import CliRunner, Result

from samsa.admin import AdminClient, NewTopic
from samsa.broker import Broker
from samsa.cli import main
from samsa.cli.groups_cmd import format_table
from samsa.consumer import KafkaConsumer, TopicPartition
from samsa.producer.producer import KafkaProducer


@pytest.fixture
def broker(make_broker: Callable[..., Broker]) -> Broker:
    """A broker of each test's own (tests list every group) with topic "orders" filled."""
    b = make_broker({"group.initial.rebalance.delay.ms": 0})
    with AdminClient({"bootstrap.servers": b.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic("orders", num_partitions=2)])
    with KafkaProducer({"bootstrap.servers": b.bootstrap_servers}) as producer:
        for i in range(10):
            producer.send("orders", b"x", partition=i % 2)
    return b


def groups(broker: Broker, *args: str) -> Result:
    return CliRunner().invoke(main, ["groups", args[0], "--bootstrap-server",
                                     broker.bootstrap_servers, *args[1:]])


def rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.splitlines() if line.strip()]


def test_format_table() -> None:
    assert format_table(("A", "BB"), [("xyz", 1)]) == "A    BB\nxyz  1"


def test_list_describe_delete(broker: Broker) -> None:
    assert groups(broker, "list").output == ""
    consumer = KafkaConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "billing",
                              "client.id": "biller", "auto.offset.reset": "earliest",
                              "enable.auto.commit": False})
    try:
        consumer.subscribe(["orders"])
        seen = 0
        while seen < 10:
            seen += len(consumer.poll(0.5))
        consumer.commit({TopicPartition("orders", 0): 5, TopicPartition("orders", 1): 2})

        result = groups(broker, "list")
        assert result.exit_code == 0, result.output
        assert result.output == "billing\n"
        assert rows(groups(broker, "list", "--state").output) == [["GROUP", "STATE"], ["billing", "Stable"]]

        result = groups(broker, "describe", "--group", "billing")
        assert result.exit_code == 0, result.output
        table = rows(result.output)
        assert table[0] == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
        assert table[1][0] == "billing" and table[1][-3:] == ["range", "Stable", "1"]
        assert table[2] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                            "CONSUMER-ID", "HOST", "CLIENT-ID"]
        member = consumer.group_metadata().member_id
        assert table[3][:7] == ["billing", "orders", "0", "5", "5", "0", member]
        assert table[4][:7] == ["billing", "orders", "1", "2", "5", "3", member]
        assert table[3][-1] == table[4][-1] == "biller"

        result = groups(broker, "delete", "--group", "billing")
        assert result.exit_code == 1
        assert "Group 'billing' could not be deleted due to: NON_EMPTY_GROUP" in result.output
    finally:
        consumer.close(autocommit=False)

    result = groups(broker, "describe", "--all-groups")
    assert result.exit_code == 0, result.output
    assert "Consumer group 'billing' has no active members." in result.output
    assert ["billing", "orders", "1", "2", "5", "3", "-", "-", "-"] in rows(result.output)

    result = groups(broker, "delete", "-g", "billing")
    assert result.exit_code == 0, result.output
    assert result.output == "Deletion of requested consumer groups ('billing') was successful.\n"
    result = groups(broker, "describe", "-g", "billing")
    assert result.exit_code == 1 and "Consumer group 'billing' does not exist." in result.output
    result = groups(broker, "describe")
    assert result.exit_code == 2 and "--all-groups" in result.output


def test_unreachable_broker_is_a_clear_error() -> None:
    result = CliRunner().invoke(main, ["groups", "list", "-b", "127.0.0.1:1", "--timeout", "0.5"])
    assert result.exit_code == 1 and "Error:" in result.output


def test_real_subprocess(broker: Broker) -> None:
    proc = subprocess.run([sys.executable, "-m", "samsa.cli", "groups", "delete", "-b",
                           broker.bootstrap_servers, "-g", "ghost"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1
    assert "Group 'ghost' could not be deleted due to: GROUP_ID_NOT_FOUND" in proc.stderr
