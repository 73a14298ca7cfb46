"""``samsa users``: SCRAM users through the CLI, kafka-configs.sh's describe line, a hidden
password prompt, and errors as ``Error: ...``."""

from __future__ import annotations

from collections.abc import Callable

from click.testing import CliRunner, Result

from samsa.broker import Broker
from samsa.broker.scram_credentials import ScramCredentialStore
from samsa.cli import main
from samsa.security.scram import SCRAM_SHA_256, ScramClient, ScramServer


def users(broker: Broker, *args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(main, ["users", args[0], "--bootstrap-server", broker.bootstrap_servers, *args[1:]],
                              input=stdin)


def test_add_list_and_delete(make_broker: Callable[..., Broker]) -> None:
    broker = make_broker()
    added = users(broker, "add", "--user", "alice", "--mechanism", "scram-sha-256", "--iterations", "8192",
                  stdin="alice-secret\nalice-secret\n")  # asked twice, not echoed
    assert added.exit_code == 0, added.output
    assert "alice-secret" not in added.output
    assert added.output.endswith("Set the SCRAM-SHA-256 credential of user alice.\n")
    assert users(broker, "add", "-u", "bob", "--mechanism", "SCRAM-SHA-512", "--password", "b").exit_code == 0
    listed = users(broker, "list")
    assert listed.exit_code == 0, listed.output
    assert listed.output.splitlines() == [
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192",
        "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=4096",
    ]
    store = ScramCredentialStore(broker.data_dir)
    server = ScramServer(SCRAM_SHA_256, lambda name: store.get(name, SCRAM_SHA_256))
    client = ScramClient(SCRAM_SHA_256, "alice", "alice-secret")
    client.verify_server_final(server.server_final(client.final_message(server.server_first(client.first_message()))))

    deleted = users(broker, "delete", "-u", "bob", "--mechanism", "SCRAM-SHA-512")
    assert deleted.output == "Deleted the SCRAM-SHA-512 credential of user bob.\n"
    gone = users(broker, "list", "--user", "bob")
    assert gone.exit_code == 1
    assert "Error: RESOURCE_NOT_FOUND (error code 91): Attempt to describe a user credential that does not exist: bob" in (
        gone.output)


def test_bad_input_is_refused_with_what_is_allowed(make_broker: Callable[..., Broker]) -> None:
    broker = make_broker()
    few = users(broker, "add", "-u", "a", "--mechanism", "SCRAM-SHA-256", "--iterations", "100", "--password", "x")
    assert few.exit_code == 2 and "100 is not in the range 4096<=x<=16384" in few.output
    sha1 = users(broker, "add", "-u", "a", "--mechanism", "SCRAM-SHA-1", "--password", "x")
    assert sha1.exit_code == 2 and "'scram-sha-1' is not one of 'scram-sha-256', 'scram-sha-512'" in sha1.output.lower()
    missing = users(broker, "delete", "-u", "nobody", "--mechanism", "SCRAM-SHA-256")
    assert missing.exit_code == 1
    assert "Attempt to delete a user credential that does not exist" in missing.output
