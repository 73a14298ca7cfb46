"""The producer when a connection fails to authenticate: send() raises the error while no
connection authenticates, and records accepted before the failure fail with it instead of
waiting out delivery.timeout.ms on reconnects that fail the same way."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from samsa.errors import SaslAuthenticationError
from samsa.producer.producer import KafkaProducer
from tests.support.sasl_broker import reauthenticating_broker, sasl_settings, set_password


def test_queued_records_fail_once_re_authentication_is_refused(tmp_path: Path) -> None:
    with reauthenticating_broker(tmp_path) as broker:
        set_password(broker, "carol", "first-secret")
        with KafkaProducer(sasl_settings(broker, "carol", "first-secret"), linger_ms=20) as producer:
            assert producer.send("orders", b"before").get(30).offset == 0
            # The password changes: the next re-authentication (KIP-368, within 85-95% of the
            # broker's 1.5 s session) is refused, and so is every new connection.
            set_password(broker, "carol", "second-secret")
            failure = None
            for _ in range(600):  # ends at the first failure; the bound only guards a hang
                future = producer.send("orders", b"after")
                try:
                    future.get(30)
                except SaslAuthenticationError as e:
                    failure = e
                    break
            assert failure is not None
            assert "SCRAM-SHA-256, user 'carol'" in str(failure)
            assert "secret" not in str(failure)
            # While no connection authenticates, send() fails at once too.
            with pytest.raises(SaslAuthenticationError):
                producer.send("orders", b"later").get(30)
            assert producer.metrics() is not None


def test_a_producer_recovers_when_a_connection_authenticates_again(tmp_path: Path) -> None:
    with reauthenticating_broker(tmp_path) as broker:
        set_password(broker, "dave", "right")
        with KafkaProducer(sasl_settings(broker, "dave", "right")) as producer:
            set_password(broker, "dave", "changed")
            with pytest.raises(SaslAuthenticationError):
                for _ in range(600):
                    producer.send("payments", b"x").get(30)
            set_password(broker, "dave", "right")
            # The Sender's reconnects go on with backoff; once one authenticates (and fetches
            # metadata) send() works again.  Until then it fails at once.
            for _ in range(600):
                try:
                    assert producer.send("payments", b"y").get(30).offset >= 0
                    break
                except SaslAuthenticationError:
                    time.sleep(0.05)
            else:
                pytest.fail("the producer never authenticated again")
