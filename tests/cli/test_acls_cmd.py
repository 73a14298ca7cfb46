"""``samsa acls``: kafka-acls.sh's options and listing against the samsa broker with Kafka's
StandardAuthorizer, and errors that say what to change."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from click.testing import CliRunner, Result

from samsa.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    PatternType,
    ResourceType,
)
from samsa.broker import Broker
from samsa.cli import main

ACL_BROKER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "allow.everyone.if.no.acl.found": "true"}
ORDERS = "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:"
ORD_PREFIX = "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=ord, patternType=PREFIXED)`:"
ALICE_READ = "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
ALICE_WRITE = "\t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)"
BOB_DENIED = "\t(principal=User:bob, host=10.0.0.1, operation=WRITE, permissionType=DENY)"


@pytest.fixture
def broker(make_broker: Callable[..., Broker]) -> Broker:
    return make_broker(ACL_BROKER)


def acls(broker: Broker, *args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(main, ["acls", args[0], "--bootstrap-server", broker.bootstrap_servers, *args[1:]],
                              input=stdin)


def stored(broker: Broker) -> set[AclBinding]:
    with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        return set(admin.describe_acls())


def test_add_list_and_remove(broker: Broker) -> None:
    added = acls(broker, "add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "write",
                 "--topic", "orders")
    assert added.exit_code == 0, added.output
    assert added.output.splitlines() == [
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:",
        ALICE_READ, ALICE_WRITE, "", ORDERS, ALICE_READ, ALICE_WRITE, ""]
    added = acls(broker, "add", "--deny-principal", "User:bob", "--deny-host", "10.0.0.1", "--operation", "WRITE",
                 "--topic", "ord", "--resource-pattern-type", "PREFIXED")
    assert added.exit_code == 0, added.output
    alice_group = acls(broker, "add", "--allow-principal", "User:alice", "--group", "billing")  # operation ALL
    assert alice_group.exit_code == 0, alice_group.output

    listed = acls(broker, "list")
    assert listed.exit_code == 0, listed.output
    assert listed.output.splitlines() == [
        ORDERS, ALICE_READ, ALICE_WRITE, "", ORD_PREFIX, BOB_DENIED, "",
        "Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=billing, patternType=LITERAL)`:",
        "\t(principal=User:alice, host=*, operation=ALL, permissionType=ALLOW)", ""]
    # A resource: LITERAL by default, MATCH for everything that applies to it.
    assert acls(broker, "list", "--topic", "orders").output.splitlines() == [ORDERS, ALICE_READ, ALICE_WRITE, ""]
    assert acls(broker, "list", "--topic", "orders", "--resource-pattern-type", "match").output.splitlines() == [
        ORDERS, ALICE_READ, ALICE_WRITE, "", ORD_PREFIX, BOB_DENIED, ""]
    assert acls(broker, "list", "--principal", "User:bob").output.splitlines() == [ORD_PREFIX, BOB_DENIED, ""]

    # Removing one principal's ACLs: only those named (operation ALL by default, so name it).
    removed = acls(broker, "remove", "--topic", "orders", "--allow-principal", "User:alice", "--operation", "READ",
                   "--force")
    assert removed.exit_code == 0, removed.output
    assert removed.output.splitlines() == [
        "Removed ACLs from resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:",
        ALICE_READ, ""]
    # Everything of a resource, after a yes.
    declined = acls(broker, "remove", "--group", "billing", stdin="n\n")
    assert declined.exit_code == 1 and "Error: nothing removed" in declined.output
    removed = acls(broker, "remove", "--group", "billing", stdin="y\n")
    assert removed.exit_code == 0, removed.output
    assert "Are you sure you want to delete all ACLs for resource filter `ResourcePattern(resourceType=GROUP, " \
           "name=billing, patternType=LITERAL)`? [y/N]: y" in removed.output
    assert "\t(principal=User:alice, host=*, operation=ALL, permissionType=ALLOW)" in removed.output
    assert stored(broker) == {
        AclBinding(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*", AclOperation.WRITE,
                   AclPermissionType.ALLOW),
        AclBinding(ResourceType.TOPIC, "ord", PatternType.PREFIXED, "User:bob", "10.0.0.1", AclOperation.WRITE,
                   AclPermissionType.DENY)}
    nothing = acls(broker, "remove", "--group", "billing", "--force")
    assert nothing.exit_code == 0 and nothing.output == "No ACLs matched; nothing was removed.\n"


def test_cluster_and_transactional_id_acls(make_broker: Callable[..., Broker]) -> None:
    broker = make_broker({**ACL_BROKER, "super.users": "User:ANONYMOUS"})
    added = acls(broker, "add", "--allow-principal", "User:app", "--operation", "IdempotentWrite", "--cluster",
                 "--operation", "CLUSTER_ACTION")
    assert added.exit_code == 0, added.output
    txn = acls(broker, "add", "--allow-principal", "User:app", "--operation", "write", "--transactional-id", "tx-1")
    assert txn.exit_code == 0, txn.output
    assert acls(broker, "list", "--cluster").output.splitlines() == [
        "Current ACLs for resource `ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL)`:",
        "\t(principal=User:app, host=*, operation=IDEMPOTENT_WRITE, permissionType=ALLOW)",
        "\t(principal=User:app, host=*, operation=CLUSTER_ACTION, permissionType=ALLOW)", ""]
    assert acls(broker, "list", "--transactional-id", "tx-1").output.splitlines() == [
        "Current ACLs for resource `ResourcePattern(resourceType=TRANSACTIONAL_ID, name=tx-1, patternType=LITERAL)`:",
        "\t(principal=User:app, host=*, operation=WRITE, permissionType=ALLOW)", ""]


def test_an_acl_on_the_cluster_takes_acl_management_away_from_anonymous(broker: Broker) -> None:
    # allow.everyone.if.no.acl.found let anonymous manage ACLs while no ACL named the cluster.
    added = acls(broker, "add", "--allow-principal", "User:admin", "--operation", "ALTER", "--cluster")
    assert added.exit_code == 0, added.output
    assert "Cannot list the current ACLs: the principal needs DESCRIBE on the cluster" in added.output
    denied = acls(broker, "list")
    assert denied.exit_code == 1
    assert "Error: not allowed to list ACLs: the principal needs DESCRIBE on the cluster (an ACL with --cluster) " \
           "or to be one of the broker's super.users (CLUSTER_AUTHORIZATION_FAILED (error code 31)" in denied.output
    denied = acls(broker, "remove", "--cluster", "--force")
    assert denied.exit_code == 1 and "Error: not allowed to remove ACLs: the principal needs ALTER" in denied.output


def test_bad_options_are_refused_before_anything_is_sent(broker: Broker) -> None:
    def refused(*args: str) -> str:
        result = acls(broker, *args)
        assert result.exit_code == 2, result.output
        return result.output

    assert "A '--resource-pattern-type' value of 'match' is not valid when adding acls" in refused(
        "add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match")
    assert "ResourceType GROUP only supports operations READ, DESCRIBE, DELETE, ALL (not WRITE)" in refused(
        "add", "--allow-principal", "User:a", "--group", "g", "--operation", "WRITE")
    assert "'alice' is not a principal; write Type:name, e.g. User:alice" in refused(
        "add", "--allow-principal", "alice", "--topic", "t")
    assert "'Fly' is not an ACL operation; use one of ALL, READ, WRITE" in refused(
        "add", "--allow-principal", "User:a", "--topic", "t", "--operation", "Fly")
    assert "name who the ACLs are for" in refused("add", "--topic", "t")
    assert "name a resource" in refused("add", "--allow-principal", "User:a")
    assert "name a resource" in refused("remove", "--force")
    assert "--allow-host needs --allow-principal" in refused("add", "--allow-host", "1.2.3.4", "--topic", "t",
                                                             "--deny-principal", "User:a")
    assert stored(broker) == set()


def test_an_invalid_acl_is_reported_and_the_others_added(broker: Broker) -> None:
    result = acls(broker, "add", "--allow-principal", "User:a", "--topic", "", "--topic", "t", "--operation", "READ")
    assert result.exit_code == 1
    assert re.search("Invalid empty resource name|Resource name should not be empty", result.output)
    assert "Error: 1 of 2 ACLs were not added" in result.output
    assert {b.resource_name for b in stored(broker)} == {"t"}


def test_without_an_authorizer_the_error_says_how_to_get_one(make_broker: Callable[..., Broker]) -> None:
    broker = make_broker()
    for args in (("list",), ("add", "--allow-principal", "User:a", "--topic", "t"), ("remove", "--topic", "t",
                                                                                      "--force")):
        result = acls(broker, *args)
        assert result.exit_code == 1, result.output
        assert result.output.endswith(
            "Error: the broker has no authorizer: set authorizer.class.name=org.apache.kafka.metadata.authorizer."
            "StandardAuthorizer in its configuration to use ACLs\n"), result.output
