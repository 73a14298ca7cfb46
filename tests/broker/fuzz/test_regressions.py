"""Inputs the fuzzer (or a person) found to hurt the broker, replayed one by one.

Each ``corpus/<name>.bin`` is what one connection sent, as the fuzzer writes it to its findings
directory; ``corpus/<name>.txt`` says what it is.  Replayed on a broker subprocess, each must be
answered or refused (the connection ends), and afterwards the broker is alive, has logged no
uncaught exception and still serves a healthy round trip.  Inputs that hit a bug not fixed yet
are listed in open_bugs.py and expected to fail (strictly: fixing the bug turns the test red
until the entry goes).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from samsa.protocol import ApiVersionsRequest, DeleteTopicsRequest, FetchRequest, encode_request
from samsa.records import RecordBatchBuilder
from tests.broker.conftest import HOST, BrokerProcess, RawClient
from tests.broker.fuzz.conftest import FUZZ_BROKER_CONFIG, start_fuzz_target
from tests.broker.fuzz.healthy import HealthyClient
from tests.broker.fuzz.open_bugs import OPEN_BUGS
from tests.broker.fuzz.target import FuzzTarget

CORPUS = Path(__file__).parent / "corpus"
# Short, so that a connection the broker keeps for a parked request shows within REPLAY_WAIT_S.
IDLE_MS = 1000
REPLAY_WAIT_S = 10.0


def _cases() -> list[object]:
    cases: list[object] = []
    for path in sorted(CORPUS.glob("*.bin")):
        bug = OPEN_BUGS.get(path.stem)
        marks = [pytest.mark.xfail(strict=True, reason=bug.reason)] if bug else []
        cases.append(pytest.param(path, id=path.stem, marks=marks))
    return cases


@pytest.fixture
def regression_target(broker_process: Callable[..., BrokerProcess],
                      monkeypatch: pytest.MonkeyPatch) -> Iterator[FuzzTarget]:
    yield from start_fuzz_target(broker_process, monkeypatch,
                                 {**FUZZ_BROKER_CONFIG, "connections.max.idle.ms": IDLE_MS})


def replay(port: int, data: bytes) -> bytes:
    """Send ``data`` on a new connection, half-close, read until the broker closes (it answers
    or refuses; a request it parks ends, answered or not, after connections.max.idle.ms)."""
    received = bytearray()
    with socket.create_connection((HOST, port), timeout=REPLAY_WAIT_S) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            while chunk := sock.recv(65536):
                received += chunk
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused while we were still sending
        except TimeoutError:
            raise AssertionError(
                f"the broker neither answered nor closed the connection in {REPLAY_WAIT_S} s "
                f"(connections.max.idle.ms={IDLE_MS})") from None
    return bytes(received)


def test_corpus_files_are_described() -> None:
    for path in CORPUS.glob("*.bin"):
        assert path.with_suffix(".txt").is_file(), f"{path.name} has no .txt saying what it is"


@pytest.mark.parametrize("path", _cases())
def test_replay(regression_target: FuzzTarget, path: Path) -> None:
    fuzz_target = regression_target
    fuzz_target.new_log()
    replay(fuzz_target.port, path.read_bytes())
    assert fuzz_target.alive(), f"the broker died on {path.name}"
    uncaught = fuzz_target.uncaught(fuzz_target.new_log())
    assert not uncaught, f"{path.name}: the broker logged {uncaught}"
    healthy = HealthyClient(fuzz_target.port, timeout_s=30)
    client = RawClient(fuzz_target.port, 30)
    try:
        assert client.create_topic("fuzz-healthy", 1) in (0, 36)
        healthy.round_trip(client)
    finally:
        client.close()


# Not an input one connection replays: a race the fuzzer found between connections.  Deleting
# the topic closed the segment's descriptor under the FileSlice being sent: the network thread
# died and every connection later given to it hung.  Segments now drop their descriptor and
# the last slice closes it; a write that fails anyway closes only its connection.
@pytest.mark.parametrize("version", [12, 3])  # records sent by sendfile; down-converted
def test_delete_topic_while_its_records_are_sent(regression_target: FuzzTarget,
                                                 version: int) -> None:
    """A Fetch whose response is still being sent (the client reads slowly) when its topic is
    deleted: the rest of the response may fail, the broker must not."""
    target = regression_target
    client = RawClient(target.port, 30)
    assert client.create_topic("doomed", 1) == 0
    for _ in range(80):  # about 8 MB, far more than the socket buffers hold
        builder = RecordBatchBuilder()
        for _ in range(100):
            builder.append(None, None, b"x" * 1000)
        assert client.produce("doomed", 0, builder.build(), version=9).error_code == 0
    target.new_log()
    slow = socket.socket()
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.settimeout(30)
    slow.connect((HOST, target.port))
    with slow:
        slow.sendall(encode_request(FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=50 << 20,
                                                 topics=[FetchRequest.FetchTopic(
                                                     topic="doomed", partitions=[
                                                         FetchRequest.FetchPartition(
                                                             partition=0, fetch_offset=0,
                                                             partition_max_bytes=50 << 20)])]),
                                    version, 1, "slow-reader"))
        assert slow.recv(1000), "no response started"
        deleted = client.call(DeleteTopicsRequest(topic_names=["doomed"], timeout_ms=5000), 4)
        assert deleted.responses[0].error_code == 0
        try:
            while slow.recv(1 << 20):
                pass
        except (ConnectionResetError, TimeoutError):
            pass
    client.close()
    uncaught = target.uncaught(target.new_log())
    assert not uncaught, "\n".join(uncaught)[-3000:]
    for _ in range(6):  # every network thread still serves new connections
        fresh = RawClient(target.port, 30)
        try:
            assert fresh.call(ApiVersionsRequest(), 0).error_code == 0
        finally:
            fresh.close()
