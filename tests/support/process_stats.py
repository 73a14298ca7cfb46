"""What a (broker) process holds, read from /proc: resident memory and accepted TCP sockets."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

_LISTEN = "0A"  # /proc/net/tcp state of a listening socket


def rss_bytes(pid: int) -> int:
    """VmRSS of ``pid``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(f"{fd_dir}/{fd}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def tcp_sockets(port: int) -> list[dict[str, str]]:
    """Every TCP socket (IPv4 and IPv6) whose local port is ``port``: inode, state (hex as the
    kernel writes it), rx_queue (bytes received and not yet read)."""
    rows = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) != port:
                continue
            rows.append({"inode": fields[9], "state": fields[3],
                         "rx_queue": fields[4].split(":")[1]})
    return rows


def accepted_sockets(pid: int, port: int) -> list[dict[str, str]]:
    """The connections ``pid`` accepted on ``port`` and still holds (its descriptors), one per
    inode: /proc/net/tcp is read in pieces while sockets come and go, so a socket may be listed
    twice."""
    mine = _socket_inodes(pid)
    unique = {row["inode"]: row for row in tcp_sockets(port)
              if row["state"] != _LISTEN and row["inode"] in mine}
    return list(unique.values())


def wait_for(condition: Callable[[], bool], what: str, deadline_s: float = 30.0) -> None:
    """Poll until ``condition()``; a generous deadline only guards against a hang."""
    end = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting ({deadline_s:.0f} s) for: {what}")
        time.sleep(0.05)


def reset_peak_rss(pid: int) -> None:
    """Start ``pid``'s VmHWM (peak resident memory) afresh from its current RSS
    (``5`` to /proc/<pid>/clear_refs, Linux 4.0+)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def peak_rss_bytes(pid: int) -> int:
    """VmHWM of ``pid``: its peak resident memory since it started or reset_peak_rss."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for process {pid}")
