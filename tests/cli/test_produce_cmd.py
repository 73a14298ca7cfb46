"""`samsa produce` against librdkafka's mock cluster, read back with confluent-kafka."""

from __future__ import annotations

from click.testing import CliRunner

from samsa.cli import main
from samsa.cli.client_options import parse_pairs
from samsa.cli.produce_cmd import split_line
from samsa.producer.partitioner import partition_for_key
from tests.producer.test_producer_mock import read_back
from tests.support.mock_cluster import MockCluster


def test_split_line() -> None:
    assert split_line(b"k:v:w", b":") == (b"k", b"v:w")
    assert split_line(b"novalue", b":") == (None, b"novalue")
    assert split_line(b"a:b", None) == (None, b"a:b")


def test_parse_pairs_rejects_malformed_items() -> None:
    assert parse_pairs(("a=1", "b==2"), "--property") == {"a": "1", "b": "=2"}
    runner = CliRunner()
    result = runner.invoke(main, ["produce", "-b", "127.0.0.1:1", "-t", "t", "--property", "oops"])
    assert result.exit_code != 0
    assert "expected key=value" in result.output


def test_produce_lines_with_keys() -> None:
    with MockCluster(1, topics={"lines": 4}) as cluster:
        lines = [f"key{i % 5}:value {i}" for i in range(200)] + ["no separator here"]
        result = CliRunner().invoke(
            main,
            ["produce", "--bootstrap-server", cluster.bootstrap_servers, "--topic", "lines",
             "--key-separator", ":", "--producer-property", "linger.ms=1"],
            input="\n".join(lines) + "\n",
        )
        assert result.exit_code == 0, result.output
        records = read_back(cluster.bootstrap_servers, "lines", 4, len(lines))
    got = {(k, v) for items in records.values() for k, v in items}
    assert (b"key3:value 3".split(b":")[0], b"value 3") in got
    assert (None, b"no separator here") in got
    assert sum(len(v) for v in records.values()) == len(lines)
    for partition, items in records.items():
        for key, _ in items:
            if key is not None:
                assert partition == partition_for_key(key, 4)


def test_produce_parse_key_property_style() -> None:
    with MockCluster(1, topics={"props": 1}) as cluster:
        result = CliRunner().invoke(
            main,
            ["produce", "-b", cluster.bootstrap_servers, "-t", "props",
             "--property", "parse.key=true", "--property", "key.separator=|"],
            input="a|1\nb|2\n",
        )
        assert result.exit_code == 0, result.output
        records = read_back(cluster.bootstrap_servers, "props", 1, 2)
    assert records[0] == [(b"a", b"1"), (b"b", b"2")]


def test_produce_fails_clearly_when_the_broker_is_unreachable() -> None:
    result = CliRunner().invoke(
        main,
        ["produce", "-b", "127.0.0.1:1", "-t", "t", "-X", "max.block.ms=300"],
        input="x\n",
    )
    assert result.exit_code != 0
    assert "not present in metadata after 300 ms" in result.output


def test_produce_rejects_bad_producer_settings() -> None:
    result = CliRunner().invoke(
        main, ["produce", "-b", "127.0.0.1:1", "-t", "t", "-X", "acks=maybe"], input="x\n"
    )
    assert result.exit_code != 0
    assert "acks" in result.output
