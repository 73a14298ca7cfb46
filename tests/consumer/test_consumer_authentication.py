"""The consumer over SASL when sessions expire (KIP-368): its connections re-authenticate in
place and records keep coming; once the broker refuses the credentials, poll() raises
SaslAuthenticationError instead of polling on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from samsa.consumer.consumer import KafkaConsumer
from samsa.errors import SaslAuthenticationError
from samsa.producer.producer import KafkaProducer
from tests.support.sasl_broker import reauthenticating_broker, sasl_settings, set_password


def count_reauthentications(consumer: KafkaConsumer) -> list[int]:
    client: Any = consumer._client
    counted = [0]
    start = client._start_sasl

    def counting(node_id: int, now: float, responses: Any, *, reauthentication: bool) -> bool:
        counted[0] += reauthentication
        return bool(start(node_id, now, responses, reauthentication=reauthentication))

    client._start_sasl = counting
    return counted


def test_connections_re_authenticate_while_records_flow(tmp_path: Path) -> None:
    with reauthenticating_broker(tmp_path, reauth_ms=1000) as broker:
        set_password(broker, "erin", "erin-secret")
        settings = sasl_settings(broker, "erin", "erin-secret")
        with KafkaProducer(settings) as producer, \
                KafkaConsumer(settings, group_id="erin-group", auto_offset_reset="earliest") as consumer:
            consumer.subscribe(["events"])
            reauthentications = count_reauthentications(consumer)
            sent = received = 0
            for _ in range(2000):  # ends once sessions were renewed; the bound guards a hang
                producer.send("events", str(sent).encode())
                sent += 1
                received += len(consumer.poll(0.05))
                if reauthentications[0] >= 4:
                    break
            assert reauthentications[0] >= 4
            producer.flush()
            for _ in range(400):
                if received == sent:
                    break
                received += len(consumer.poll(0.1))
            assert received == sent
            assert consumer._client.authentication_failures == 0


def test_poll_fails_once_the_credentials_are_refused(tmp_path: Path) -> None:
    with reauthenticating_broker(tmp_path) as broker:
        set_password(broker, "frank", "first")
        with KafkaConsumer(sasl_settings(broker, "frank", "first"), group_id="frank-group") as consumer:
            consumer.subscribe(["events"])
            consumer.poll(0.5)
            set_password(broker, "frank", "second")
            with pytest.raises(SaslAuthenticationError, match="user 'frank'"):
                for _ in range(600):  # ends at the first failure; the bound guards a hang
                    consumer.poll(0.1)
            with pytest.raises(SaslAuthenticationError):  # and again: it is not swallowed
                consumer.poll(0.1)
