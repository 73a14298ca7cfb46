"""Selector: connects, sends, receives, disconnects, wakeup, mute, LRU idle close."""

from __future__ import annotations

import selectors
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest

from samsa.errors import IllegalStateError
from samsa.net.channel import NetworkSend
from samsa.net.selector import IdleConnectionClosed, Selector


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class EchoServer:
    """Echoes every byte back; accepts any number of connections."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            threading.Thread(target=self._echo, args=(c,), daemon=True).start()

    def _echo(self, c: socket.socket) -> None:
        try:
            while data := c.recv(65536):
                c.sendall(data)
        except OSError:
            pass

    def close(self) -> None:
        self.sock.close()
        for c in self.conns:
            c.close()


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    yield server
    server.close()


@pytest.fixture
def selector() -> Iterator[Selector]:
    s = Selector()
    yield s
    s.close()


def poll_until(selector: Selector, cond, rounds: int = 200) -> None:
    """Poll until ``cond()`` (called once per round, after the poll) holds."""
    for _ in range(rounds):
        selector.poll(50)
        if cond():
            return
    raise AssertionError("condition not reached")


def connect(selector: Selector, node: int, port: int) -> None:
    selector.connect(node, ("127.0.0.1", port))
    connected: list[int] = []

    def done() -> bool:
        connected.extend(selector.connected)
        return node in connected
    poll_until(selector, done)


def test_connect_send_receive(selector, echo):
    connect(selector, 1, echo.port)
    assert selector.is_channel_ready(1)
    sends = [NetworkSend(1, frame(b"ping %d" % i)) for i in range(10)]
    for s in sends:
        selector.send(s)
    got: list[bytes] = []
    completed: list[NetworkSend] = []

    def done() -> bool:
        completed.extend(selector.completed_sends)
        got.extend(bytes(r.payload) for r in selector.completed_receives)
        return len(got) == 10
    poll_until(selector, done)
    assert got == [b"ping %d" % i for i in range(10)]
    assert completed == sends


def test_send_before_connect_finishes_is_queued(selector, echo):
    selector.connect(1, ("127.0.0.1", echo.port))
    selector.send(NetworkSend(1, frame(b"early")))
    got: list[bytes] = []

    def done() -> bool:
        got.extend(bytes(r.payload) for r in selector.completed_receives)
        return bool(got)
    poll_until(selector, done)
    assert got == [b"early"]


def test_refused_connect_is_reported_as_disconnected(selector):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nobody listens here now
    try:
        selector.connect(5, ("127.0.0.1", port))
    except ConnectionRefusedError:
        return  # refused synchronously: also fine
    seen: dict = {}

    def done() -> bool:
        seen.update(selector.disconnected)
        return 5 in seen
    poll_until(selector, done)
    assert isinstance(seen[5], OSError)
    assert selector.channel(5) is None


def test_remote_close_is_reported(selector, echo):
    connect(selector, 1, echo.port)
    while not echo.conns:  # the server thread may not have accepted yet
        time.sleep(0.005)
    for c in echo.conns:
        c.shutdown(socket.SHUT_RDWR)
    seen: dict = {}

    def done() -> bool:
        seen.update(selector.disconnected)
        return 1 in seen
    poll_until(selector, done)
    assert not selector.is_channel_ready(1)


def test_send_to_unknown_node_fails(selector):
    with pytest.raises(IllegalStateError, match="no connection to node 9"):
        selector.send(NetworkSend(9, frame(b"x")))


def test_duplicate_connect_fails(selector, echo):
    selector.connect(1, ("127.0.0.1", echo.port))
    with pytest.raises(IllegalStateError):
        selector.connect(1, ("127.0.0.1", echo.port))


def test_wakeup_from_another_thread_interrupts_poll(monkeypatch):
    # Each poll's select() result is recorded, to tell a return caused by the wakeup (the
    # wakeup socket ready) from one at the end of the poll timeout (nothing ready).
    selects: list[list[object]] = []

    class RecordingSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
        def select(self, timeout=None):
            ready = super().select(timeout)
            selects.append([key.data for key, _ in ready])
            return ready

    monkeypatch.setattr(selectors, "DefaultSelector", RecordingSelector)
    selector = Selector()

    def wake_once_blocked() -> None:
        while not selector._blocking:  # the poll's epoll wait has begun (or is about to)
            time.sleep(0.001)
        selector.wakeup()

    try:
        # Twice: a second wakeup after the first was consumed must work too.  The poll timeout
        # is bounded, so a broken wakeup fails here in seconds instead of hanging.
        for _ in range(2):
            t = threading.Thread(target=wake_once_blocked)
            t.start()
            selector.poll(5_000)
            t.join()
            assert selects[-1] == [None], "poll returned without seeing the wakeup"
    finally:
        selector.close()


def test_a_wakeup_before_poll_makes_it_return_at_once_without_the_socket(monkeypatch):
    # wakeup() while no poll waits sets a flag instead of writing to the socket pair (a
    # system call on each side); the next poll sees it and does not wait.  Only that poll.
    timeouts: list[float | None] = []
    selects: list[list[object]] = []

    class RecordingSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
        def select(self, timeout=None):
            timeouts.append(timeout)
            ready = super().select(timeout)
            selects.append([key.data for key, _ in ready])
            return ready

    monkeypatch.setattr(selectors, "DefaultSelector", RecordingSelector)
    selector = Selector()
    try:
        selector.wakeup()
        selector.wakeup()
        selector.poll(60_000)
        assert timeouts == [0] and selects == [[]]
        selector.poll(10)
        assert timeouts == [0, 0.01]
    finally:
        selector.close()


def test_mute_stops_reading_until_unmute(selector, echo):
    connect(selector, 1, echo.port)
    selector.mute(1)
    selector.send(NetworkSend(1, frame(b"held")))
    for _ in range(5):
        selector.poll(20)
        assert not selector.completed_receives
    selector.unmute(1)
    got: list[bytes] = []

    def done() -> bool:
        got.extend(bytes(r.payload) for r in selector.completed_receives)
        return bool(got)
    poll_until(selector, done)
    assert got == [b"held"]


def test_idle_connections_are_closed_oldest_first(echo):
    now = [1000.0]
    selector = Selector(connections_max_idle_ms=100, clock=lambda: now[0])
    try:
        connect(selector, 1, echo.port)
        connect(selector, 2, echo.port)
        now[0] += 50
        selector.send(NetworkSend(2, frame(b"keep me")))  # node 2 becomes active again
        got: list[bytes] = []

        def done() -> bool:
            got.extend(bytes(r.payload) for r in selector.completed_receives)
            return bool(got)
        poll_until(selector, done)
        now[0] += 60  # node 1 idle 110 ms, node 2 about 60 ms
        closed: dict = {}
        for _ in range(3):
            selector.poll(0)
            closed.update(selector.disconnected)
        assert list(closed) == [1]
        assert isinstance(closed[1], IdleConnectionClosed)
        assert selector.is_channel_ready(2)
    finally:
        selector.close()
