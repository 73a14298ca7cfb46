"""FileSlice over real files and sockets: short reads, short sendfile writes, and a file cut
under a slice already handed out (DeleteRecords/retention race, a disk that lost data)."""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

import pytest

from samsa.broker.log.file_slice import FileHandle, FileSlice
from samsa.broker.network.connection import Outgoing

# A kernel seq_file: each read returns at most about a page, whatever size is asked for.
SHORT_READ_FILE = "/proc/kallsyms"


def _slice_of(path: Path, position: int, size: int) -> FileSlice:
    return FileSlice(FileHandle(os.open(path, os.O_RDONLY), str(path)), position, size)


def test_read_goes_on_after_a_short_read() -> None:
    with open(SHORT_READ_FILE, "rb") as f:
        whole = f.read()
    fd = os.open(SHORT_READ_FILE, os.O_RDONLY)
    assert len(os.pread(fd, len(whole), 0)) < len(whole) // 2, "expected short reads from the kernel"
    piece = FileSlice(FileHandle(fd, SHORT_READ_FILE), 100, len(whole) - 200)
    assert piece.read() == whole[100:-100]


def test_read_of_a_file_cut_under_the_slice_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(range(256)) * 40)
    piece = _slice_of(path, 1000, 8000)
    os.truncate(path, 5000)
    with pytest.raises(OSError, match=r"00000000000000000000\.log: expected 8000 bytes at 1000, "
                                      r"file ended after 4000"):
        piece.read()


def _pair() -> tuple[socket.socket, socket.socket]:
    sender, receiver = socket.socketpair()
    sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    receiver.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sender.setblocking(False)
    return sender, receiver


def test_sendfile_short_writes_resume_where_they_stopped(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    data = os.urandom(300_000)
    path.write_bytes(b"x" * 123 + data)
    outgoing = Outgoing([b"head", _slice_of(path, 123, len(data)), b"tail"])
    expected = b"head" + data + b"tail"
    sender, receiver = _pair()
    received = bytearray()
    partial_writes = 0
    with sender, receiver:
        while not outgoing.write_to(sender):
            partial_writes += 1
            received += receiver.recv(1 << 20)
        sender.shutdown(socket.SHUT_WR)
        while chunk := receiver.recv(1 << 20):
            received += chunk
    assert partial_writes > 1  # the socket took the slice in several sendfile calls
    assert bytes(received) == expected


def test_sendfile_of_a_file_cut_under_the_slice_fails_loudly(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(os.urandom(50_000))
    outgoing = Outgoing([_slice_of(path, 0, 50_000)])
    os.truncate(path, 20_000)
    sender, receiver = _pair()
    receiver.setblocking(False)
    with sender, receiver, pytest.raises(OSError) as info:
        for _ in range(1000):  # bounded: a slice that never ends must not spin forever
            if outgoing.write_to(sender):
                break
            try:
                receiver.recv(1 << 20)
            except BlockingIOError:
                pass
    assert info.value.errno == errno.EIO
    assert "ended 30000 bytes early" in str(info.value)


def test_head_is_the_first_bytes_of_the_same_file(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(range(100)))
    piece = _slice_of(path, 10, 50)
    first = piece.head(5)
    assert (first.position, len(first), first.fileno(), first.read()) == (10, 5, piece.fileno(), bytes(range(10, 15)))
    assert len(piece.head(500)) == 50  # never past the slice


def test_descriptor_zero_is_a_file_like_any_other(tmp_path: Path) -> None:
    # A broker started with stdin closed gets descriptor 0 for a log file: it must be used and
    # closed like any other, not taken for "already closed".
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"abc")
    saved = os.dup(0)
    try:
        os.close(0)
        fd = os.open(path, os.O_RDONLY)
        assert fd == 0
        handle = FileHandle(fd, str(path))
        piece = FileSlice(handle, 0, 3)
        assert (piece.fileno(), piece.read()) == (0, b"abc")
        handle.close()
        with pytest.raises(OSError):
            os.fstat(0)  # really closed
        with pytest.raises(ValueError, match="was closed"):
            piece.fileno()
    finally:
        os.dup2(saved, 0)
        os.close(saved)
