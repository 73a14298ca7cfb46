"""Client settings on the command line: ``--command-config FILE`` (a Java properties file, as
Kafka's tools take it; ``--producer.config``/``--consumer.config`` too) with ``-X`` overriding it,
here carrying SASL_SSL settings to the samsa broker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from samsa.broker import Broker
from samsa.cli import main
from samsa.cli.client_options import parse_pairs
from tests.support.broker import start_broker
from tests.support.certs import TlsFiles, make_tls_files
from tests.support.secure_broker import add_scram_users, sasl_config, tls_config


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory,
                  tls_files: TlsFiles) -> Iterator[Broker]:
    data = tmp_path_factory.mktemp("cli-sasl")
    add_scram_users(data)
    config = {"listeners": "SASL_SSL://127.0.0.1:0", **tls_config(tls_files),
              **sasl_config("SASL_SSL")}
    with start_broker(data, config) as broker:
        yield broker


@pytest.fixture
def client_properties(tmp_path: Path, tls_files: TlsFiles) -> Path:
    path = tmp_path / "client.properties"
    path.write_text("# as for kafka-topics.sh --command-config\n"
                    "security.protocol=SASL_SSL\n"
                    "sasl.mechanism=SCRAM-SHA-512\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
                    'required username="bob" password="bob-secret";\n'
                    f"ssl.truststore.type=PEM\nssl.truststore.location={tls_files.ca}\n")
    return path


def run(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(main, list(args), input=stdin)


def test_admin_produce_and_consume_commands_read_the_file(
        secure_broker: Broker, client_properties: Path) -> None:
    bs = secure_broker.bootstrap_servers
    created = run("topics", "create", "-b", bs, "--topic", "cli-secure", "--partitions", "1",
                  "--command-config", str(client_properties))
    assert created.exit_code == 0, created.output
    produced = run("produce", "-b", bs, "-t", "cli-secure", "--producer.config",
                   str(client_properties), stdin="one\ntwo\n")
    assert produced.exit_code == 0, produced.output
    consumed = run("consume", "-b", bs, "-t", "cli-secure", "--from-beginning",
                   "--max-messages", "2", "--consumer.config", str(client_properties))
    assert consumed.exit_code == 0, consumed.output
    assert consumed.stdout.splitlines()[:2] == ["one", "two"]


def test_x_settings_override_the_file(secure_broker: Broker, client_properties: Path) -> None:
    listed = run("topics", "list", "-b", secure_broker.bootstrap_servers, "--command-config",
                 str(client_properties), "-X", "sasl.jaas.config="
                 "org.apache.kafka.common.security.scram.ScramLoginModule required "
                 'username="bob" password="wrong";', "--timeout", "10")
    assert listed.exit_code != 0
    assert "SCRAM-SHA-512" in listed.output and "bob" in listed.output
    assert "wrong" not in listed.output


def test_without_the_file_the_broker_is_out_of_reach(secure_broker: Broker) -> None:
    listed = run("topics", "list", "-b", secure_broker.bootstrap_servers, "--timeout", "3")
    assert listed.exit_code != 0


def test_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    result = run("topics", "list", "-b", "127.0.0.1:1", "--command-config",
                 str(tmp_path / "nope.properties"))
    assert result.exit_code == 2 and "nope.properties" in result.output


def test_parse_pairs_rejects_malformed_items() -> None:
    assert parse_pairs(("a=1", "b==2"), "-X") == {"a": "1", "b": "=2"}
    with pytest.raises(Exception, match="expected key=value"):
        parse_pairs(("novalue",), "-X")
