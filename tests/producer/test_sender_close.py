"""The Sender thread's loop and graceful close (Java's Sender.run): an unexpected error in one
iteration does not stop the thread, and close sends what is queued and waits for the answers to
requests in flight before closing the network client. Unit tests with the fakes of test_sender.py,
calling ``run()`` in the test thread."""

from __future__ import annotations

from types import SimpleNamespace

from samsa.net.clock import MockClock
from samsa.net.request import ClientRequest

from .test_sender import _answer, _batch, _Client, _sender


class _AnsweringClient(_Client):
    """Answers every Produce request on the next poll; ``requests_in_flight`` other requests
    (metadata, InitProducerId) are answered by the first poll too. Records what was still in
    flight when it was closed."""

    def __init__(self, requests_in_flight: int = 0) -> None:
        super().__init__()
        self.requests_in_flight = requests_in_flight
        self.unanswered: list[ClientRequest] = []
        self.in_flight_at_close: int | None = None

    def send(self, request: ClientRequest, now: int) -> None:
        super().send(request, now)
        self.unanswered.append(request)

    def in_flight_request_count(self) -> int:
        return self.requests_in_flight + len(self.unanswered)

    def poll(self, timeout: int, now: int) -> None:
        self.requests_in_flight = 0
        answering, self.unanswered = self.unanswered, []
        for request in answering:
            _answer(request)

    def close(self) -> None:
        self.in_flight_at_close = self.in_flight_request_count()


def test_an_unexpected_error_in_one_iteration_does_not_stop_the_sender() -> None:
    # The Sender thread completes every future: one failing iteration is logged and the loop
    # goes on (here the second iteration asks it to close).
    sender = _sender(MockClock(now_ms=10_000))
    calls = 0

    def ready(view: object, now: int) -> SimpleNamespace:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("a bug in one iteration")
        sender.initiate_close()
        return SimpleNamespace(ready_nodes=set(), unknown_leader_topics=set(), next_ready_check_delay_ms=100)

    sender.accumulator.ready = ready
    sender.run()
    assert calls == 2
    assert not sender.is_running


def test_close_waits_for_requests_in_flight_before_closing_the_client() -> None:
    # No batch is queued or in flight, but another request (metadata, InitProducerId) is:
    # a graceful close polls until it is answered.
    sender = _sender(MockClock(now_ms=10_000))
    client = sender.client = _AnsweringClient(requests_in_flight=1)
    sender.initiate_close()
    sender.run()
    assert client.in_flight_at_close == 0


def test_close_sends_what_is_still_queued_and_completes_it() -> None:
    clock = MockClock(now_ms=10_000)
    sender = _sender(clock)
    client = sender.client = _AnsweringClient()
    accumulator = sender.accumulator
    accumulator.has_undrained = lambda: bool(accumulator.to_drain)
    batch, futures = _batch(clock, records=2)
    accumulator.to_drain = [batch]
    sender.initiate_close()
    sender.run()
    assert [request.destination for request in client.sent] == [1]
    assert [future.get(timeout=0).offset for future in futures] == [7, 8]
    assert client.in_flight_at_close == 0
