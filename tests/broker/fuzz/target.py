"""The broker under fuzzing: a ``samsa broker`` subprocess (tests/broker/conftest.py's
BrokerProcess), and what the fuzzer watches in it.

* ``uncaught``: lines of its log that show an exception nobody handled as the protocol says --
  a traceback (KafkaApis answers a handler's unexpected exception UNKNOWN_SERVER_ERROR and logs
  it with its traceback; request_channel.handler_failed logs one before closing; a network or
  acceptor thread logs one before it dies), or a request decoder failing with something other
  than ProtocolDecodeError (the network layer's "cannot decode" fallback);
* ``resources``: its RSS (/proc/<pid>/status VmRSS) and its descriptors (/proc/<pid>/fd), split
  into sockets, files, and files already deleted (held open after their segment or topic went);
* ``Sender``: sends inputs on fresh connections and reads until the broker closes them; a
  connection that gets no answer yet (a Fetch parked for its max wait, a JoinGroup waiting for
  the rebalance) is kept, polled on later sends, and closed by us after ``park_s``.
"""

from __future__ import annotations

import os
import re
import selectors
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.broker.conftest import HOST, BrokerProcess
from tests.broker.fuzz.mutations import Input

_RECORD_START = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
UNCAUGHT_MARKERS = ("Traceback", "cannot decode API key", "network thread", "acceptor failed")


@dataclass(frozen=True)
class Resources:
    rss_kb: int
    sockets: int
    files: int
    deleted: tuple[str, ...]
    other: int

    @property
    def fds(self) -> int:
        return self.sockets + self.files + len(self.deleted) + self.other


def resources(pid: int) -> Resources:
    """RSS and descriptors of process ``pid`` (Linux /proc)."""
    rss_kb = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss_kb = int(line.split()[1])
    sockets = files = other = 0
    deleted: list[str] = []
    fd_dir = f"/proc/{pid}/fd"
    for name in os.listdir(fd_dir):
        try:
            target = os.readlink(f"{fd_dir}/{name}")
        except FileNotFoundError:
            continue  # closed while we listed
        if target.startswith("socket:"):
            sockets += 1
        elif target.endswith(" (deleted)"):
            deleted.append(target)
        elif target.startswith("/"):
            files += 1
        else:
            other += 1  # pipes, anon inodes (epoll, eventfd)
    return Resources(rss_kb, sockets, files, tuple(sorted(deleted)), other)


_TCP_STATES = {1: "ESTABLISHED", 2: "SYN_SENT", 3: "SYN_RECV", 4: "FIN_WAIT1", 5: "FIN_WAIT2",
               6: "TIME_WAIT", 7: "CLOSE", 8: "CLOSE_WAIT", 9: "LAST_ACK", 10: "LISTEN",
               11: "CLOSING"}


def tcp_states(port: int) -> dict[str, int]:
    """How many TCP sockets with local port ``port`` (the broker's side) are in each state;
    CLOSE_WAIT: the client has closed, the broker has not yet."""
    counts: dict[str, int] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port:
                state = _TCP_STATES.get(int(fields[3], 16), fields[3])
                counts[state] = counts.get(state, 0) + 1
    return counts


def _records(log: str) -> list[str]:
    """Log records: a line that starts with a timestamp, and the lines after it that do not."""
    records: list[str] = []
    for line in log.splitlines():
        if _RECORD_START.match(line) or not records:
            records.append(line)
        else:
            records[-1] += "\n" + line
    return records


class FuzzTarget:
    """A started BrokerProcess plus a cursor into its stderr."""

    def __init__(self, process: BrokerProcess) -> None:
        self.process = process
        assert process.proc is not None
        self.pid = process.proc.pid
        self._log_pos = 0

    @property
    def port(self) -> int:
        return self.process.port

    def alive(self) -> bool:
        return self.process.is_running()

    def resources(self) -> Resources:
        return resources(self.pid)

    def new_log(self) -> str:
        """What the broker logged since the last call."""
        with self.process.stderr_path.open("rb") as f:
            f.seek(self._log_pos)
            data = f.read()
        self._log_pos += len(data)
        return data.decode(errors="replace")

    @staticmethod
    def uncaught(log: str) -> list[str]:
        """The log records (a line and its traceback) that show an uncaught exception."""
        return [r for r in _records(log) if any(m in r for m in UNCAUGHT_MARKERS)]

    def dump_stacks(self) -> str:
        """Every thread's stack, as the broker's faulthandler writes them on SIGABRT (the
        fixture starts it with PYTHONFAULTHANDLER=1); the broker is gone afterwards."""
        assert self.process.proc is not None
        before = self.process.stderr_path.stat().st_size
        self.process.proc.send_signal(signal.SIGABRT)
        try:
            self.process.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.process.proc.kill()
            self.process.proc.wait(10)
        with self.process.stderr_path.open("rb") as f:
            f.seek(before)
            return f.read().decode(errors="replace")[-20000:]

    def partitions(self) -> int:
        return sum(1 for p in self.process.data_dir.iterdir() if p.is_dir() and "-" in p.name)


@dataclass
class SendStats:
    inputs: int = 0
    answered: int = 0  # the broker wrote something back before closing
    closed: int = 0  # closed without a word (a refused frame)
    refused_send: int = 0  # the broker closed while we were still sending
    parked: int = 0  # no EOF within the first wait: polled later
    abandoned: int = 0  # still open after park_s: closed by us
    open_now: int = field(default=0)


class Sender:
    """Sends each input on its own connection, then half-closes it and waits for EOF."""

    def __init__(self, port: int, *, wait_s: float = 0.5, park_s: float = 30.0,
                 max_parked: int = 200) -> None:
        self.port = port
        self.wait_s = wait_s
        self.park_s = park_s
        self.max_parked = max_parked
        self.stats = SendStats()
        self._selector = selectors.DefaultSelector()
        self._parked: dict[socket.socket, tuple[float, bytearray]] = {}

    def send(self, inputs: list[Input]) -> None:
        new: dict[socket.socket, bytearray] = {}
        for item in inputs:
            self.stats.inputs += 1
            sock = socket.create_connection((HOST, self.port), timeout=10)
            try:
                sock.sendall(item.data)
                sock.shutdown(socket.SHUT_WR)
            except OSError:
                self.stats.refused_send += 1
                sock.close()
                continue
            sock.setblocking(False)
            new[sock] = bytearray()
            self._selector.register(sock, selectors.EVENT_READ)
        deadline = time.monotonic() + self.wait_s
        while new and time.monotonic() < deadline:
            self._poll(new, max(deadline - time.monotonic(), 0.0))
        now = time.monotonic()
        for sock, received in new.items():
            self.stats.parked += 1
            self._parked[sock] = (now, received)
        self._poll(self._parked_view(), 0.0)
        self._expire(now)
        self.stats.open_now = len(self._parked)

    def _parked_view(self) -> dict[socket.socket, bytearray]:
        return {sock: received for sock, (_, received) in self._parked.items()}

    def _poll(self, waiting: dict[socket.socket, bytearray], timeout: float) -> None:
        for key, _ in self._selector.select(timeout):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            if sock not in waiting and sock not in self._parked:
                continue
            try:
                chunk = sock.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            received = waiting[sock] if sock in waiting else self._parked[sock][1]
            if chunk:
                received += chunk
                continue
            if received:
                self.stats.answered += 1
            else:
                self.stats.closed += 1
            self._close(sock)
            waiting.pop(sock, None)
            self._parked.pop(sock, None)

    def _expire(self, now: float) -> None:
        old = [s for s, (t, _) in self._parked.items() if now - t > self.park_s]
        if len(self._parked) - len(old) > self.max_parked:
            by_age = sorted(self._parked, key=lambda s: self._parked[s][0])
            old = by_age[:len(self._parked) - self.max_parked]
        for sock in old:
            self.stats.abandoned += 1
            self._parked.pop(sock)
            self._close(sock)

    def _close(self, sock: socket.socket) -> None:
        self._selector.unregister(sock)
        sock.close()

    def close(self) -> None:
        for sock in list(self._parked):
            self.stats.abandoned += 1
            self._close(sock)
        self._parked.clear()
        self.stats.open_now = 0
        self._selector.close()
