"""AdminClient group calls (list/describe/delete groups, committed offsets) against the samsa broker."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from samsa.admin import AdminClient, NewTopic
from samsa.broker import Broker
from samsa.consumer import KafkaConsumer, TopicPartition
from samsa.consumer.protocol import decode_assignment
from samsa.errors import GroupIdNotFoundError, NonEmptyGroupError
from samsa.producer.producer import KafkaProducer


@pytest.fixture
def broker(make_broker: Callable[..., Broker]) -> Broker:
    return make_broker({"group.initial.rebalance.delay.ms": 0})


def test_list_describe_offsets_delete(broker: Broker) -> None:
    bs = broker.bootstrap_servers
    with AdminClient({"bootstrap.servers": bs, "retry.backoff.ms": 10}) as admin:
        assert admin.list_groups() == []
        admin.create_topics([NewTopic("t", num_partitions=2)])
        with KafkaProducer({"bootstrap.servers": bs}) as producer:
            for i in range(4):
                producer.send("t", b"x", partition=i % 2)
        consumer = KafkaConsumer({"bootstrap.servers": bs, "group.id": "g1", "client.id": "me",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
        try:
            consumer.subscribe(["t"])
            seen = 0
            while seen < 4:
                seen += len(consumer.poll(0.5))
            consumer.commit()

            [listing] = admin.list_groups()
            assert (listing.group_id, listing.protocol_type, listing.state) == ("g1", "consumer", "Stable")
            d = admin.describe_groups(["g1"])["g1"]
            assert not isinstance(d, Exception)
            assert d.state == "Stable" and d.protocol_type == "consumer"
            [member] = d.members
            assert member.client_id == "me"
            assert sorted(decode_assignment(member.assignment).partitions) == [
                TopicPartition("t", 0), TopicPartition("t", 1)]
            assert admin.list_group_offsets("g1") == {TopicPartition("t", 0): 2, TopicPartition("t", 1): 2}
            with pytest.raises(NonEmptyGroupError, match="g1"):
                admin.delete_groups(["g1"])
        finally:
            consumer.close()

        assert admin.describe_groups(["g1"])["g1"].state == "Empty"  # type: ignore[union-attr]
        assert admin.delete_groups(["g1"]) == {"g1": None}
        assert admin.list_groups() == []
        assert admin.list_group_offsets("g1") == {}
        missing = admin.describe_groups(["nope"])["nope"]
        assert not isinstance(missing, Exception) and missing.state == "Dead" and missing.members == ()
        result = admin.delete_groups(["nope"], raise_errors=False)
        assert isinstance(result["nope"], GroupIdNotFoundError)
