"""ACLs enforced on real clients (confluent-kafka) over SASL: a user without ACLs is refused
produce, consume, group join and topic creation with Kafka's error codes; after create_acls it
may do exactly what was granted; prefixed and deny ACLs; ACLs and SCRAM users survive a
restart.  The admin is a super user (super.users)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from samsa.broker import Broker
from tests.support.broker import start_broker
from tests.support.secure_broker import add_scram_users, sasl_config

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def _config() -> dict[str, Any]:
    return {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "authorizer.class.name": AUTHORIZER,
            "super.users": "User:admin", **sasl_config()}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    add_scram_users(tmp_path / "data")
    return tmp_path / "data"


@pytest.fixture
def secured(data: Path) -> Iterator[Broker]:
    with start_broker(data, _config()) as broker:
        yield broker


def _auth(user: str, password: str, mechanism: str = "PLAIN") -> dict[str, Any]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password}


ALICE = _auth("alice", "alice-secret")
ADMIN = _auth("admin", "admin-secret")


def _admin(broker: Broker, auth: dict[str, Any] = ADMIN) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers, **auth})


def _create_topic(broker: Broker, name: str, auth: dict[str, Any] = ADMIN) -> None:
    admin = _admin(broker, auth)  # kept alive until the futures resolve
    for future in admin.create_topics([NewTopic(name, 1)]).values():
        future.result(10)


def _produce(broker: Broker, topic: str, auth: dict[str, Any]) -> Any:
    """The delivery error of one record (None when it was stored)."""
    results: list[Any] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers,
                         "message.timeout.ms": 5000, **auth})
    producer.produce(topic, b"v", on_delivery=lambda err, msg: results.append(err))
    producer.flush(15)
    return results[0]


def _consume(broker: Broker, topic: str, group: str, auth: dict[str, Any]) -> Any:
    """The first message or error a group consumer sees."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                         "auto.offset.reset": "earliest", **auth})
    consumer.subscribe([topic])
    try:
        for _ in range(30):
            message = consumer.poll(1.0)
            if message is not None:
                return message
        return None
    finally:
        consumer.close()


def _grant(broker: Broker, *bindings: AclBinding) -> None:
    admin = _admin(broker)
    for future in admin.create_acls(list(bindings)).values():
        future.result(10)


def _acl(rtype: ResourceType, name: str, op: AclOperation,
         permission: AclPermissionType = AclPermissionType.ALLOW,
         pattern: ResourcePatternType = ResourcePatternType.LITERAL,
         principal: str = "User:alice") -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", op, permission)


def test_a_user_without_acls_is_refused_with_kafkas_codes(secured: Broker) -> None:
    topic = f"acl-{uuid.uuid4().hex[:6]}"
    _create_topic(secured, topic)
    assert _produce(secured, topic, ALICE).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    message = _consume(secured, topic, "g-alice", ALICE)
    assert message is not None and message.error() is not None
    assert message.error().code() in (KafkaError.GROUP_AUTHORIZATION_FAILED,
                                      KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaException) as info:
        _create_topic(secured, f"{topic}-new", ALICE)
    assert info.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Metadata hides the topics she may not describe.
    alice_admin = _admin(secured, ALICE)
    listed = alice_admin.list_topics(timeout=10).topics
    assert topic not in listed
    # ACL management is the cluster's ALTER: refused.
    with pytest.raises(KafkaException) as info:
        for future in alice_admin.create_acls(
                [_acl(ResourceType.TOPIC, topic, AclOperation.READ)]).values():
            future.result(10)
    assert info.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_after_create_acls_exactly_what_was_granted(secured: Broker) -> None:
    topic = f"acl-{uuid.uuid4().hex[:6]}"
    _create_topic(secured, topic)
    _grant(secured, _acl(ResourceType.TOPIC, topic, AclOperation.WRITE))
    assert _produce(secured, topic, ALICE) is None
    # Writing was granted, reading was not: the group join is refused.
    message = _consume(secured, topic, "g-alice", ALICE)
    assert message is not None and message.error() is not None
    _grant(secured, _acl(ResourceType.TOPIC, topic, AclOperation.READ),
           _acl(ResourceType.GROUP, "g-alice", AclOperation.READ))
    message = _consume(secured, topic, "g-alice", ALICE)
    assert message is not None and message.error() is None and message.value() == b"v"
    # Another group stays closed, and so does another topic.
    other = _consume(secured, topic, "g-other", ALICE)
    assert other is not None and other.error() is not None
    assert _produce(secured, f"{topic}-2", ALICE).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_prefixed_and_deny_acls(secured: Broker) -> None:
    _grant(secured,
           _acl(ResourceType.TOPIC, "team-", AclOperation.ALL,
                pattern=ResourcePatternType.PREFIXED),
           _acl(ResourceType.TOPIC, "team-secret", AclOperation.WRITE, AclPermissionType.DENY),
           _acl(ResourceType.BROKER, "kafka-cluster", AclOperation.IDEMPOTENT_WRITE))
    _create_topic(secured, "team-a", ALICE)  # CREATE via the prefixed ALL
    assert _produce(secured, "team-a", ALICE) is None
    _create_topic(secured, "team-secret", ALICE)
    assert _produce(secured, "team-secret", ALICE).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException):
        _create_topic(secured, "other-a", ALICE)
    admin = _admin(secured)
    described = admin.describe_acls(AclBindingFilter(
        ResourceType.TOPIC, "team-x", ResourcePatternType.MATCH, None, None, AclOperation.ANY,
        AclPermissionType.ANY)).result(10)
    assert {(b.name, b.resource_pattern_type) for b in described} == {
        ("team-", ResourcePatternType.PREFIXED)}
    deleted = admin.delete_acls([AclBindingFilter(
        ResourceType.TOPIC, "team-secret", ResourcePatternType.LITERAL, None, None,
        AclOperation.ANY, AclPermissionType.ANY)])
    assert [len(f.result(10)) for f in deleted.values()] == [1]
    assert _produce(secured, "team-secret", ALICE) is None


def test_acls_and_scram_users_survive_a_restart(data: Path) -> None:
    bob = _auth("bob", "bob-secret", "SCRAM-SHA-512")
    with start_broker(data, _config()) as broker:
        _create_topic(broker, "kept")
        _grant(broker, _acl(ResourceType.TOPIC, "kept", AclOperation.WRITE, principal="User:bob"),
               _acl(ResourceType.BROKER, "kafka-cluster", AclOperation.IDEMPOTENT_WRITE,
                    principal="User:bob"))
        assert _produce(broker, "kept", bob) is None
    with start_broker(data, _config()) as broker:
        assert _produce(broker, "kept", bob) is None
        assert _produce(broker, "kept", ALICE).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        admin = _admin(broker)
        acls = admin.describe_acls(AclBindingFilter(
            ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
            AclPermissionType.ANY)).result(10)
        assert len(acls) == 2


def test_offsets_need_read_on_the_group_and_the_topic(secured: Broker) -> None:
    topic = f"acl-{uuid.uuid4().hex[:6]}"
    _create_topic(secured, topic)
    # DESCRIBE lets FindCoordinator answer; the commit itself needs READ on the group.
    _grant(secured, _acl(ResourceType.TOPIC, topic, AclOperation.READ),
           _acl(ResourceType.GROUP, "g-commit", AclOperation.DESCRIBE))
    consumer = Consumer({"bootstrap.servers": secured.bootstrap_servers, "group.id": "g-commit",
                         **ALICE})
    try:
        with pytest.raises(KafkaException) as info:
            consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
        assert info.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        consumer.close()


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(tmp_path: Path) -> None:
    # kafka-python raises the broker's error; librdkafka's describe_acls reads this answer
    # as an empty list (it does not look at the top-level error code).
    from kafka import KafkaAdminClient
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KpResourceType
    from kafka.errors import SecurityDisabledError

    with start_broker(tmp_path, {}) as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        try:
            with pytest.raises(SecurityDisabledError):
                admin.describe_acls(ACLFilter(
                    principal=None, host="*", operation=ACLOperation.ANY,
                    permission_type=ACLPermissionType.ANY,
                    resource_pattern=ResourcePatternFilter(KpResourceType.ANY, None,
                                                           ACLResourcePatternType.ANY)))
        finally:
            admin.close()
