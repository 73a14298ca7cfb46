"""``samsa topics``: kafka-topics.sh-like output, clear errors and exit codes."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from collections.abc import Callable

import pytest
from click.testing import CliRunner, Result

from samsa.admin import AdminClient
from samsa.broker import Broker
from samsa.cli import main
from tests.support.mock_cluster import MockCluster


@pytest.fixture
def broker(make_broker: Callable[..., Broker]) -> Broker:
    """A broker of each test's own: tests list every topic."""
    return make_broker()


def topics(bootstrap: str, *args: str) -> Result:
    return CliRunner().invoke(main, ["topics", args[0], "--bootstrap-server", bootstrap,
                                     *args[1:]])


def test_create_list_describe_alter_delete(broker: Broker) -> None:
    bs = broker.bootstrap_servers
    result = topics(bs, "create", "--topic", "orders", "--partitions", "3",
                    "--replication-factor", "1", "--config", "retention.ms=60000",
                    "--config", "cleanup.policy=compact")
    assert result.exit_code == 0, result.output
    assert result.output == "Created topic orders.\n"
    assert topics(bs, "create", "-t", "plain").exit_code == 0

    result = topics(bs, "list")
    assert result.exit_code == 0 and result.output == "orders\nplain\n"

    result = topics(bs, "describe", "--topic", "orders")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    with AdminClient(bootstrap_servers=bs) as admin:
        tid = admin.describe_topics(["orders"])["orders"].topic_id_str  # type: ignore[union-attr]
    assert lines[0] == (f"Topic: orders\tTopicId: {tid}\tPartitionCount: 3\t"
                        "ReplicationFactor: 1\tConfigs: cleanup.policy=compact,retention.ms=60000")
    node = broker.node.node_id
    assert lines[1:] == [f"\tTopic: orders\tPartition: {p}\tLeader: {node}\tReplicas: {node}"
                         f"\tIsr: {node}\tDirtyRatio: 0.000" for p in range(3)]

    # Without --topic: every topic, each with its partition lines.
    result = topics(bs, "describe")
    assert [line.split("\t")[0] for line in result.output.splitlines()
            if not line.startswith("\t")] == ["Topic: orders", "Topic: plain"]

    result = topics(bs, "alter", "--topic", "orders", "--partitions", "5")
    assert result.exit_code == 0 and "now has 5 partitions" in result.output
    assert "PartitionCount: 5" in topics(bs, "describe", "-t", "orders").output

    result = topics(bs, "delete", "--topic", "orders", "--topic", "plain")
    assert result.exit_code == 0
    assert result.output == "Deleted topic orders.\nDeleted topic plain.\n"
    assert topics(bs, "list").output == ""


def test_errors_exit_non_zero_with_a_clear_message(broker: Broker) -> None:
    bs = broker.bootstrap_servers
    assert topics(bs, "create", "-t", "taken").exit_code == 0

    result = topics(bs, "create", "-t", "taken")
    assert result.exit_code == 1
    assert "Error: TOPIC_ALREADY_EXISTS" in result.output
    assert "cannot create topic 'taken'" in result.output and "What to do" in result.output

    cases = [
        (("create", "-t", "bad name"), "INVALID_TOPIC_EXCEPTION"),
        (("create", "-t", "x", "--replication-factor", "2"), "INVALID_REPLICATION_FACTOR"),
        (("alter", "-t", "taken", "--partitions", "1"), "can only grow"),
        (("describe", "-t", "ghost"), "cannot describe topic 'ghost'"),
        (("delete", "-t", "ghost"), "cannot delete topic 'ghost'"),
        (("create", "-t", "y", "--config", "no.such.setting=1"), "INVALID_CONFIG"),
    ]
    for args, expected in cases:
        result = topics(bs, *args)
        assert result.exit_code == 1, (args, result.output)
        assert result.output.startswith("Error: ") and expected in result.output, result.output


def test_if_exists_and_if_not_exists(broker: Broker) -> None:
    bs = broker.bootstrap_servers
    assert topics(bs, "create", "-t", "t").exit_code == 0
    result = topics(bs, "create", "-t", "t", "--if-not-exists")
    assert result.exit_code == 0 and result.output == ""
    result = topics(bs, "delete", "-t", "ghost", "--if-exists")
    assert result.exit_code == 0 and result.output == ""


def test_validate_only(broker: Broker) -> None:
    bs = broker.bootstrap_servers
    result = topics(bs, "create", "-t", "checked", "--partitions", "2", "--validate-only")
    assert result.exit_code == 0 and result.output == "Topic checked is valid.\n"
    assert topics(bs, "list").output == ""


def test_usage_errors() -> None:
    result = topics("127.0.0.1:9", "create", "-t", "t", "--config", "novalue")
    assert result.exit_code == 2 and "expected key=value" in result.output
    result = CliRunner().invoke(main, ["topics", "create", "-t", "t"])
    assert result.exit_code == 2 and "--bootstrap-server" in result.output
    result = topics("127.0.0.1:9", "list", "-X", "no.such.setting=1")
    assert result.exit_code == 1 and "unknown admin client setting" in result.output


def test_unreachable_broker() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = topics(f"127.0.0.1:{port}", "list", "--timeout", "0.3")
    assert result.exit_code == 1
    assert "Timed out" in result.output and "check that a broker is running" in result.output


def test_against_librdkafkas_mock_cluster() -> None:
    with MockCluster(3) as cluster:
        cluster.create_topic("replicated", 2, replication_factor=3)
        bs = cluster.bootstrap_servers
        assert topics(bs, "list").output == "replicated\n"
        result = topics(bs, "describe", "-t", "replicated")
        assert result.exit_code == 0, result.output
        header, *partitions = result.output.splitlines()
        # The mock has no DescribeConfigs: the Configs column stays empty.
        assert re.fullmatch(r"Topic: replicated\tTopicId: [\w-]{22}\tPartitionCount: 2\t"
                            r"ReplicationFactor: 3\tConfigs: ", header), header
        for p, line in enumerate(partitions):
            assert re.fullmatch(rf"\tTopic: replicated\tPartition: {p}\tLeader: [123]\t"
                                r"Replicas: \d,\d,\d\tIsr: \d,\d,\d", line), line
        result = topics(bs, "create", "-t", "new")
        assert result.exit_code == 1
        assert "creating topics is not supported by this broker" in result.output


def test_real_subprocess(broker: Broker) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "samsa.cli", "topics", *args, "--bootstrap-server",
             broker.bootstrap_servers], check=False, capture_output=True, text=True,
            timeout=60)

    created = run("create", "--topic", "sub", "--partitions", "2")
    assert created.returncode == 0, created.stderr
    assert created.stdout == "Created topic sub.\n"
    described = run("describe", "--topic", "sub")
    assert described.returncode == 0, described.stderr
    assert described.stdout.startswith("Topic: sub\tTopicId: ")
    assert "PartitionCount: 2" in described.stdout
    again = run("create", "--topic", "sub")
    assert again.returncode == 1
    assert again.stdout == ""
    assert again.stderr.startswith("Error: TOPIC_ALREADY_EXISTS")


def test_describe_shows_the_dirty_ratio_of_a_compacted_topic(broker: Broker) -> None:
    from samsa import KafkaProducer

    bs = broker.bootstrap_servers
    # A ratio the cleaner never reaches keeps it from cleaning while we look.
    assert topics(bs, "create", "-t", "changelog", "--config", "cleanup.policy=compact",
                  "--config", "segment.bytes=1024",
                  "--config", "min.cleanable.dirty.ratio=0.99").exit_code == 0
    with KafkaProducer({"bootstrap.servers": bs, "linger.ms": 0}) as producer:
        for i in range(40):  # one key: every segment but the last holds only superseded values
            producer.send("changelog", key=b"k", value=b"v%03d" % i + b"." * 100).get(10)
    result = topics(bs, "describe", "--topic", "changelog")
    assert result.exit_code == 0, result.output
    partition_line = result.output.splitlines()[1]
    ratio = float(partition_line.rsplit("DirtyRatio: ", 1)[1])
    assert 0.5 < ratio <= 1.0
    # Not a Kafka config: a client listing the topic's configs does not get it.
    with AdminClient(bootstrap_servers=bs) as admin:
        configs = admin.describe_configs(["changelog"])
    assert not any(name.startswith("samsa.") for entries in configs.values()
                   for name in entries)  # type: ignore[union-attr]
