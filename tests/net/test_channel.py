"""KafkaChannel framing and partial I/O, over a socketpair."""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from samsa.net.channel import _MAX_IOV, READ_CHUNK, InvalidReceiveError, KafkaChannel, NetworkSend


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    a.setblocking(False)
    yield a, b
    a.close()
    b.close()


def channel_for(sock: socket.socket, max_size: int = 1 << 30) -> KafkaChannel:
    ch = KafkaChannel(7, sock, "pair", max_size)
    ch.finish_connect()
    return ch


def read_all(ch: KafkaChannel, count: int) -> list[bytes]:
    out: list = []
    while len(out) < count:
        ch.read(out)
    return [bytes(r.payload) for r in out]


def test_frames_split_at_every_byte(pair):
    a, b = pair
    ch = channel_for(a)
    payloads = [b"", b"x", b"hello world", bytes(range(256)) * 3]
    data = b"".join(frame(p) for p in payloads)
    out: list = []
    for i in range(len(data)):
        b.sendall(data[i:i + 1])
        ch.read(out)
    assert [bytes(r.payload) for r in out] == payloads
    assert all(r.source == 7 for r in out)
    assert not ch.has_partial_receive


def test_many_frames_in_one_read(pair):
    a, b = pair
    ch = channel_for(a)
    payloads = [struct.pack(">i", i) * (i % 5) for i in range(500)]
    b.sendall(b"".join(frame(p) for p in payloads))
    assert read_all(ch, len(payloads)) == payloads


def test_frame_larger_than_a_read_chunk(pair):
    a, b = pair
    ch = channel_for(a)
    big = bytes(range(251)) * (3 * READ_CHUNK // 251)
    data = frame(big) + frame(b"after")
    t = threading.Thread(target=b.sendall, args=(data,))
    t.start()
    got = read_all(ch, 2)
    t.join()
    assert got == [big, b"after"]


def test_negative_or_oversized_frame_is_rejected(pair):
    a, b = pair
    ch = channel_for(a, max_size=100)
    b.sendall(struct.pack(">i", 101))
    with pytest.raises(InvalidReceiveError, match="invalid frame size 101"):
        ch.read([])
    a2, b2 = socket.socketpair()
    a2.setblocking(False)
    try:
        ch2 = channel_for(a2)
        b2.sendall(struct.pack(">i", -5))
        with pytest.raises(InvalidReceiveError):
            ch2.read([])
    finally:
        a2.close()
        b2.close()


def test_end_of_stream_raises_after_delivering_complete_frames(pair):
    a, b = pair
    ch = channel_for(a)
    b.sendall(frame(b"last words") + b"\0\0")
    b.close()
    out: list = []
    with pytest.raises(ConnectionResetError):
        while True:
            ch.read(out)
    assert [bytes(r.payload) for r in out] == [b"last words"]


def test_partial_writes_keep_order_and_report_completion(pair):
    a, b = pair
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    ch = channel_for(a)
    sends = [NetworkSend(7, frame(bytes([i]) * 300_000)) for i in range(4)]
    sends.append(NetworkSend(7, frame(b"tail")))
    assert not ch.write_now(sends[0])  # far larger than the socket buffer
    for s in sends[1:]:
        ch.sends.append(s)
    expected = b"".join(s.data for s in sends)
    completed = _write_until_received(ch, b, expected)
    # Completed strictly in order, each once, and the head's partial offset was honoured.
    assert completed == sends
    assert all(s.completed for s in sends)
    assert not ch.has_send


def _write_until_received(ch, peer, expected: bytes) -> list[NetworkSend]:
    """Write the channel's queued sends while ``peer`` reads; the sends completed, in order,
    once ``expected`` (asserted to be every byte) arrived."""
    received = bytearray()
    completed: list[NetworkSend] = []
    while len(received) < len(expected):
        ch.write(completed)
        received += peer.recv(1 << 20)
    assert bytes(received) == expected
    return completed


def test_gather_sends_survive_partial_writes_in_order(pair):
    # Sends whose data is a list of buffers (a Produce request and its record batches) mixed
    # with plain ones, through a small socket buffer: every byte once, in order, each send
    # completed once its last byte went out.
    a, b = pair
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    ch = channel_for(a)
    pieces = [bytes([i]) * 70_000 for i in range(3)]
    gather = NetworkSend(7, [frame(b"head"), memoryview(pieces[0]), pieces[1], bytearray(pieces[2])])
    plain = NetworkSend(7, frame(b"plain"))
    # More buffers than one sendmsg call may take (IOV_MAX).
    many = NetworkSend(7, [frame(b"")] + [b"%d" % (i % 10) for i in range(_MAX_IOV * 2 + 3)])
    sends = [gather, plain, many]
    assert gather.size == 8 + 210_000
    assert not ch.write_now(gather)
    ch.sends.extend(sends[1:])
    expected = b"".join(b"".join(s.data) if isinstance(s.data, list) else s.data for s in sends)
    assert _write_until_received(ch, b, expected) == sends
    assert not ch.has_send
