"""Shared by the hostile-connection tests: a samsa broker in a subprocess (so its RSS and
descriptors can be read from /proc) and a healthy confluent-kafka producer that must keep being
served meanwhile."""

from __future__ import annotations

import socket
import uuid

from confluent_kafka import Producer

HOST = "127.0.0.1"


def produce_confirmed(bootstrap: str, n: int = 200) -> None:
    """A confluent-kafka producer writes ``n`` records to a fresh topic; every one is acked."""
    topic = f"healthy-{uuid.uuid4().hex[:8]}"
    failed: list[str] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(str(err))

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                         "message.timeout.ms": 60_000})
    try:
        for i in range(n):
            producer.produce(topic, b"%06d" % i, on_delivery=on_delivery)
            producer.poll(0)
        left = producer.flush(90)
    finally:
        producer.close()
    assert left == 0, f"{left} records of the healthy producer were never acknowledged"
    assert not failed, f"the healthy producer's records failed: {failed[:3]}"


def closed_by_broker(sock: socket.socket, timeout: float = 30.0) -> bool:
    """Wait (up to a generous ``timeout``) for the broker to close ``sock``: True on EOF or a
    reset, False if it is still open then.  Anything the broker sent first is skipped."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False
    return True


def still_open(sock: socket.socket) -> bool:
    """The broker has not closed ``sock`` (nothing to read, no EOF, no reset)."""
    sock.setblocking(False)
    try:
        return bool(sock.recv(1, socket.MSG_PEEK))  # data would also mean open
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)
