"""KafkaConsumer.group_metadata(): the member identity a transactional producer sends with
send_offsets_to_transaction (Java's KafkaConsumer.groupMetadata, KIP-447)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from samsa.broker import Broker
from samsa.consumer import ConsumerGroupMetadata, KafkaConsumer
from samsa.errors import InvalidGroupIdError


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {"group.initial.rebalance.delay.ms": 0, "num.partitions": 2}


def conf(broker: Broker, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap_servers, "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 200, **extra}


def test_group_metadata_is_a_frozen_value_with_java_defaults() -> None:
    meta = ConsumerGroupMetadata("g")
    assert (meta.group_id, meta.generation_id, meta.member_id, meta.group_instance_id) \
        == ("g", -1, "", None)
    assert meta == ConsumerGroupMetadata("g", -1, "", None) and hash(meta) == hash(ConsumerGroupMetadata("g"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        meta.generation_id = 3  # type: ignore[misc]
    with pytest.raises(TypeError, match="group_id must be a str"):
        ConsumerGroupMetadata(None)  # type: ignore[arg-type]


def test_group_metadata_follows_the_membership(broker: Broker) -> None:
    with KafkaConsumer(conf(broker, **{"group.id": "gm-members", "group.instance.id": "gm-1"})) as c:
        # Not joined yet: the group id and instance id alone.
        assert c.group_metadata() == ConsumerGroupMetadata("gm-members", -1, "", "gm-1")
        c.subscribe(["gm-topic"])
        for _ in range(200):
            c.poll(0.05)
            if c.assignment():
                break
        meta = c.group_metadata()
        assert isinstance(meta, ConsumerGroupMetadata)
        assert meta.group_id == "gm-members" and meta.group_instance_id == "gm-1"
        assert meta.generation_id >= 1 and meta.member_id != ""


def test_group_metadata_needs_a_group_id(broker: Broker) -> None:
    with KafkaConsumer(conf(broker)) as c, \
            pytest.raises(InvalidGroupIdError, match="set group.id"):
        c.group_metadata()
