"""The ACL decisions (Kafka's StandardAuthorizerData.authorize) and the durable ACL store."""

from __future__ import annotations

from pathlib import Path

import pytest

from samsa.broker.authorizer import ACLS_FILE, AclStore, Authorizer, authorizer_from_config
from samsa.errors import ConfigError
from samsa.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation


def acl(rtype: ResourceType, name: str, op: AclOperation, permission: AclPermissionType = ALLOW,
        principal: str = "User:alice", host: str = "*", pattern: PatternType = LIT) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, permission)


def authorizer(tmp_path: Path, *acls: AclBinding, supers: tuple[str, ...] = (),
               allow_if_none: bool = False) -> Authorizer:
    tmp_path.mkdir(parents=True, exist_ok=True)
    store = AclStore(tmp_path)
    store.add(acls)
    return Authorizer(store, supers, allow_if_none)


def may(a: Authorizer, op: AclOperation, rtype: ResourceType, name: str,
        principal: str = "User:alice", host: str = "10.0.0.1") -> bool:
    return a.authorize(principal, host, op, rtype, name)


def test_no_acl_denies_unless_allow_everyone(tmp_path: Path) -> None:
    assert not may(authorizer(tmp_path), Op.READ, T, "t")
    assert may(authorizer(tmp_path, allow_if_none=True), Op.READ, T, "t")
    # An ACL for someone else on the resource: the default no longer applies.
    a = authorizer(tmp_path, acl(T, "t", Op.READ, principal="User:bob"), allow_if_none=True)
    assert not may(a, Op.READ, T, "t")
    assert may(a, Op.READ, T, "other")


def test_super_users_may_do_everything(tmp_path: Path) -> None:
    a = authorizer(tmp_path, acl(T, "t", Op.ALL, DENY, principal="User:*"),
                   supers=("User:admin", "User:CN=ops,O=x"))
    assert may(a, Op.WRITE, T, "t", principal="User:admin")
    assert may(a, Op.ALTER, C, "kafka-cluster", principal="User:CN=ops,O=x")
    assert not may(a, Op.WRITE, T, "t")


def test_literal_wildcard_and_prefixed_patterns(tmp_path: Path) -> None:
    a = authorizer(tmp_path, acl(T, "orders", Op.READ), acl(T, "logs-", Op.WRITE, pattern=PRE),
                   acl(G, "*", Op.READ))
    assert may(a, Op.READ, T, "orders") and not may(a, Op.READ, T, "orders2")
    assert may(a, Op.WRITE, T, "logs-app") and not may(a, Op.WRITE, T, "log")
    assert may(a, Op.READ, G, "any-group")


def test_deny_wins_over_allow(tmp_path: Path) -> None:
    a = authorizer(tmp_path, acl(T, "*", Op.ALL), acl(T, "secret", Op.READ, DENY, principal="User:*"))
    assert may(a, Op.WRITE, T, "secret")  # DENY READ denies READ only
    assert not may(a, Op.READ, T, "secret")
    assert may(a, Op.READ, T, "public")


def test_implied_describe(tmp_path: Path) -> None:
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert may(authorizer(tmp_path / op.name, acl(T, "t", op)), Op.DESCRIBE, T, "t")
    a = authorizer(tmp_path / "cfg", acl(T, "t", Op.ALTER_CONFIGS))
    assert may(a, Op.DESCRIBE_CONFIGS, T, "t") and not may(a, Op.DESCRIBE, T, "t")
    # A DENY does not imply: DENY READ leaves DESCRIBE to the ALLOWs.
    a = authorizer(tmp_path / "deny", acl(T, "t", Op.DESCRIBE), acl(T, "t", Op.READ, DENY))
    assert may(a, Op.DESCRIBE, T, "t") and not may(a, Op.READ, T, "t")


def test_hosts_match_exactly(tmp_path: Path) -> None:
    a = authorizer(tmp_path, acl(T, "t", Op.READ, host="10.0.0.1"))
    assert may(a, Op.READ, T, "t", host="10.0.0.1")
    assert not may(a, Op.READ, T, "t", host="10.0.0.2")


def test_any_topic_write_allows_idempotence(tmp_path: Path) -> None:
    """KIP-679: InitProducerId without IDEMPOTENT_WRITE passes with WRITE on some topic."""
    a = authorizer(tmp_path / "a", acl(T, "t", Op.WRITE))
    assert a.authorize_any("User:alice", "h", Op.WRITE, T)
    assert not a.authorize_any("User:bob", "h", Op.WRITE, T)
    cancelled = authorizer(tmp_path / "b", acl(T, "logs-a", Op.WRITE),
                           acl(T, "logs-", Op.WRITE, DENY, pattern=PRE))
    assert not cancelled.authorize_any("User:alice", "h", Op.WRITE, T)
    wildcard_deny = authorizer(tmp_path / "c", acl(T, "t", Op.WRITE), acl(T, "*", Op.WRITE, DENY))
    assert not wildcard_deny.authorize_any("User:alice", "h", Op.WRITE, T)


def test_authorized_operations_bits(tmp_path: Path) -> None:
    a = authorizer(tmp_path, acl(T, "t", Op.READ))
    bits = a.authorized_operations("User:alice", "h", T, "t")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE)


def test_store_is_durable_and_filters_match_as_kafkas(tmp_path: Path) -> None:
    store = AclStore(tmp_path)
    bindings = [acl(T, "orders", Op.READ), acl(T, "ord", Op.WRITE, pattern=PRE),
                acl(T, "*", Op.DESCRIBE), acl(G, "g", Op.READ)]
    store.add(bindings + bindings[:1])  # creating an existing ACL adds nothing
    assert AclStore(tmp_path).acls == tuple(bindings)
    match = AclBindingFilter(T, "orders", PatternType.MATCH)
    assert store.describe(match) == bindings[:3]
    assert store.describe(AclBindingFilter(T, "orders", PatternType.ANY)) == bindings[:1]
    assert store.describe(AclBindingFilter(ResourceType.ANY, None, PatternType.PREFIXED)) == \
        [bindings[1]]
    assert store.remove([AclBindingFilter(G), AclBindingFilter(principal="User:nobody")]) == \
        [[bindings[3]], []]
    assert AclStore(tmp_path).acls == tuple(bindings[:3])


def test_a_corrupt_acl_file_stops_the_broker_with_its_path(tmp_path: Path) -> None:
    (tmp_path / ACLS_FILE).write_text("{not json")
    with pytest.raises(ValueError, match=str(tmp_path / ACLS_FILE)):
        AclStore(tmp_path)


def test_validation_as_kafka() -> None:
    assert acl(T, "t", Op.READ).validation_error() is None
    assert "kafka-cluster" in (acl(C, "c", Op.ALTER).validation_error() or "")
    assert "colon" in (acl(T, "t", Op.READ, principal="alice").validation_error() or "")
    assert acl(T, "t", Op.ANY).validation_error() == "Invalid operation ANY"
    assert acl(T, "t", Op.READ, pattern=PatternType.MATCH).validation_error() == \
        "Invalid patternType MATCH"
    assert acl(T, "", Op.READ).validation_error() == "Invalid empty resource name"
    assert AclBindingFilter(operation=Op.UNKNOWN).unknown_field() == "Unknown entryFilter."


def test_authorizer_class_names(tmp_path: Path) -> None:
    assert authorizer_from_config({}, tmp_path) is None
    a = authorizer_from_config({
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin;User:CN=x,O=y", "allow.everyone.if.no.acl.found": True},
        tmp_path)
    assert a is not None and a.super_users == {"User:admin", "User:CN=x,O=y"} and a.allow_if_no_acl
    strings = authorizer_from_config({"authorizer.class.name": "kafka.security.authorizer."
                                      "AclAuthorizer", "allow.everyone.if.no.acl.found": "false"},
                                     tmp_path)
    assert strings is not None and not strings.allow_if_no_acl
    with pytest.raises(ConfigError) as info:
        authorizer_from_config({"authorizer.class.name": "com.example.Custom"}, tmp_path)
    assert info.value.setting == "authorizer.class.name"
