"""How the Sender backs off between InitProducerId attempts (Java's Sender/TransactionManager with
retry.backoff.ms, KIP-580): after a lost connection, after CLUSTER_AUTHORIZATION_FAILED, and that a
granted producer id starts the doubling afresh. Unit tests with the fakes of test_sender.py."""

from __future__ import annotations

from types import SimpleNamespace

from samsa.errors import ClusterAuthorizationFailedError
from samsa.net.clock import MockClock
from samsa.producer.sender import Sender

from .test_sender import LEADER, _sender, _TransactionManager

CLUSTER_AUTHORIZATION_FAILED = 31


class _IdTransactionManager(_TransactionManager):
    """Takes the producer id it is given; ``needs_producer_id`` may be set again (a reset)."""

    def __init__(self) -> None:
        super().__init__(needs_producer_id=True)
        self.granted: list[tuple[int, int]] = []

    def handle_init_producer_id(self, producer_id: int, epoch: int) -> None:
        self.granted.append((producer_id, epoch))
        self.needs_producer_id = False


def _asking_sender(clock: MockClock) -> Sender:
    sender = _sender(clock, _IdTransactionManager(), retry_backoff_ms=100, retry_backoff_max_ms=1000)
    sender.client.least_loaded = LEADER
    return sender


def _answer_last(sender: Sender, **response: object) -> None:
    request = sender.client.sent[-1]
    assert request.callback is not None
    request.callback(SimpleNamespace(**{"disconnected": False, "error": None, "body": None, **response}))


def _failed(body_error_code: int | None = None) -> dict[str, object]:
    if body_error_code is None:
        return {"disconnected": True}
    return {"body": SimpleNamespace(error_code=body_error_code)}


def _asked_again_exactly_after(sender: Sender, clock: MockClock, gap: int) -> None:
    """InitProducerId is not sent before ``gap`` ms from now, and is sent at ``gap`` ms."""
    sent = len(sender.client.sent)
    start = clock.milliseconds()
    clock.set_ms(start + gap - 1)
    sender.run_once()
    assert len(sender.client.sent) == sent, f"asked again before {gap} ms"
    clock.set_ms(start + gap)
    sender.run_once()
    assert len(sender.client.sent) == sent + 1, f"not asked again after {gap} ms"


def test_init_producer_id_is_asked_again_after_the_backoff_when_the_connection_drops() -> None:
    # A lost connection is not the broker's answer: wait retry.backoff.ms and ask again.
    clock = MockClock(now_ms=10_000)
    sender = _asking_sender(clock)
    sender.run_once()
    assert len(sender.client.sent) == 1
    clock.advance(5)
    _answer_last(sender, **_failed())
    _asked_again_exactly_after(sender, clock, 100)


def test_cluster_authorization_failure_fails_waiting_records_and_asks_again_after_the_backoff() -> None:
    # Java's Sender.shouldHandleAuthorizationError: what waits for the id fails with the error,
    # and the producer asks again later (an operator may grant IDEMPOTENT_WRITE meanwhile).
    clock = MockClock(now_ms=10_000)
    sender = _asking_sender(clock)
    sender.run_once()
    clock.advance(5)
    _answer_last(sender, **_failed(CLUSTER_AUTHORIZATION_FAILED))
    [aborted] = sender.accumulator.aborted
    assert isinstance(aborted, ClusterAuthorizationFailedError)
    assert sender.fatal_error is None
    _asked_again_exactly_after(sender, clock, 100)


def test_a_granted_producer_id_starts_the_next_backoff_afresh() -> None:
    # The doubling counts failures in a row: once an id is granted, the next failed
    # InitProducerId (after a reset) waits retry.backoff.ms again, not twice it.
    clock = MockClock(now_ms=10_000)
    sender = _asking_sender(clock)
    tm = sender.transaction_manager
    sender.run_once()
    _answer_last(sender, **_failed())
    _asked_again_exactly_after(sender, clock, 100)
    _answer_last(sender, body=SimpleNamespace(error_code=0, producer_id=42, producer_epoch=0))
    assert tm.granted == [(42, 0)]
    tm.needs_producer_id = True  # e.g. the epoch ran out: a fresh id is needed
    sender.run_once()
    _answer_last(sender, **_failed())
    _asked_again_exactly_after(sender, clock, 100)


def test_the_first_init_producer_id_goes_out_at_once_even_at_time_zero() -> None:
    # No attempt before means no backoff: a clock that reads 0 (MockClock's default) must not
    # hold the first InitProducerId back.
    clock = MockClock()
    sender = _asking_sender(clock)
    sender.run_once()
    assert len(sender.client.sent) == 1
