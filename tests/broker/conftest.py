"""Fixtures for testing the broker against real peers.

* ``broker`` (tests/conftest.py): auto-created topics get 4 partitions here.
* ``broker_process``: a factory for ``samsa broker`` subprocesses (``BrokerProcess``) that a
  test can SIGKILL and restart on the same data dir and port -- for crash tests, where an
  in-process broker cannot die uncleanly.
* ``raw_client``: a factory for ``RawClient``, a blocking socket speaking the Kafka protocol
  through samsa.protocol, for requests no real client would send.
"""

from __future__ import annotations

import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from samsa.protocol import (
    CreateTopicsRequest,
    ListOffsetsRequest,
    ProduceRequest,
    decode_response,
    encode_request,
)

HOST = "127.0.0.1"


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {"num.partitions": 4}


# --- a raw protocol client --------------------------------------------------------------------


class RawClient:
    """One blocking connection; ``call`` sends a request and decodes its response."""

    def __init__(self, port: int, timeout: float = 15.0) -> None:
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation_id = 0

    def send(self, request: Any, version: int) -> int:
        self.correlation_id += 1
        self.sock.sendall(encode_request(request, version, self.correlation_id, "raw-test"))
        return self.correlation_id

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _read_exact(self, n: int) -> bytes | None:
        data = bytearray()
        while len(data) < n:
            try:
                chunk = self.sock.recv(n - len(data))
            except (ConnectionResetError, BrokenPipeError):
                return None
            if not chunk:
                return None
            data += chunk
        return bytes(data)

    def read_frame(self) -> bytes | None:
        """The next response frame without its size prefix; None if the broker closed."""
        head = self._read_exact(4)
        if head is None:
            return None
        return self._read_exact(struct.unpack(">i", head)[0])

    def call(self, request: Any, version: int) -> Any:
        correlation_id = self.send(request, version)
        frame = self.read_frame()
        assert frame is not None, f"the broker closed the connection instead of answering " \
                                  f"{type(request).__name__} v{version}"
        got, body = decode_response(request.api.key, version, frame)
        assert got == correlation_id
        return body

    def is_closed_by_peer(self) -> bool:
        """True once the broker has closed this connection (EOF or reset) without a reply."""
        return self.read_frame() is None

    # Requests the tests need often.

    def create_topic(self, name: str, partitions: int, configs: Mapping[str, str] | None = None
                     ) -> int:
        topic = CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=1, assignments=[],
            configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                     for k, v in (configs or {}).items()])
        response = self.call(CreateTopicsRequest(topics=[topic], timeout_ms=5000), 4)
        return int(response.topics[0].error_code)

    def produce(self, topic: str, partition: int, records: bytes, *, acks: int = -1,
                version: int = 7) -> Any:
        """One partition's ProduceResponse part (error_code, base_offset ...)."""
        request = ProduceRequest(acks=acks, timeout_ms=10000, topic_data=[
            ProduceRequest.TopicProduceData(name=topic, partition_data=[
                ProduceRequest.PartitionProduceData(index=partition, records=records)])])
        response = self.call(request, version)
        return response.responses[0].partition_responses[0]

    def list_offset(self, topic: str, partition: int, timestamp: int = -1) -> int:
        """The latest (-1) or earliest (-2) offset of a partition."""
        request = ListOffsetsRequest(replica_id=-1, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
                ListOffsetsRequest.ListOffsetsPartition(partition_index=partition,
                                                        timestamp=timestamp)])])
        part = self.call(request, 2).topics[0].partitions[0]
        assert part.error_code == 0, f"ListOffsets {topic}-{partition}: error {part.error_code}"
        return int(part.offset)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw_client() -> Iterator[Callable[[int], RawClient]]:
    clients: list[RawClient] = []

    def connect(port: int) -> RawClient:
        client = RawClient(port)
        clients.append(client)
        return client

    yield connect
    for client in clients:
        client.close()


# --- a broker in a subprocess -------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class BrokerProcess:
    """``samsa broker`` in a child process.  ``start`` waits for ``listening on HOST:PORT``;
    the first start picks a free port and every restart reuses it, so clients reconnect."""

    def __init__(self, data_dir: Path, config: Mapping[str, Any] | None = None,
                 port: int | None = None,
                 preexec_fn: Callable[[], None] | None = None) -> None:
        self.data_dir = data_dir
        self.config = dict(config or {})
        self.preexec_fn = preexec_fn  # runs in the child before exec (e.g. resource.setrlimit)
        self.port = port if port is not None else free_port()
        self.proc: subprocess.Popen[str] | None = None
        self.starts = 0

    @property
    def bootstrap_servers(self) -> str:
        return f"{HOST}:{self.port}"

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.starts += 1
        args = [sys.executable, "-m", "samsa.cli", "broker", "--host", HOST,
                "--port", str(self.port), "--data-dir", str(self.data_dir),
                "--log-level", "WARNING"]
        for key, value in self.config.items():
            args += ["--config", f"{key}={value}"]
        stderr_path = self.data_dir.parent / f"broker-{self.data_dir.name}-{self.starts}.err"
        stderr = stderr_path.open("w")
        # The broker may be restarted before the old port leaves TIME_WAIT: it sets
        # SO_REUSEADDR, but retry a few times in case the port is still held.
        deadline = time.monotonic() + timeout
        while True:
            # preexec_fn is only ever a resource.setrlimit call here: no lock a thread of
            # the parent could hold at fork time.
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=stderr, text=True,
                                         preexec_fn=self.preexec_fn)  # noqa: PLW1509
            assert self.proc.stdout is not None
            line = self.proc.stdout.readline()
            if line.startswith("listening on "):
                assert line.strip().endswith(f":{self.port}"), line
                break
            self.proc.wait(10)
            if time.monotonic() > deadline:
                stderr.close()
                raise RuntimeError(f"samsa broker did not start: {line!r}; see {stderr.name}")
            time.sleep(0.2)
        stderr.close()
        self.stderr_path = Path(stderr.name)
        return self

    def kill(self) -> None:
        """SIGKILL: no clean shutdown, no final flush or checkpoint."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> int:
        """SIGTERM and wait: a clean shutdown.  Returns the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(30)
        finally:
            if self.proc.stdout is not None:
                self.proc.stdout.close()

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stderr_text(self) -> str:
        return self.stderr_path.read_text()


@pytest.fixture
def broker_process(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    started: list[BrokerProcess] = []

    def make(config: Mapping[str, Any] | None = None, name: str = "data",
             preexec_fn: Callable[[], None] | None = None) -> BrokerProcess:
        process = BrokerProcess(tmp_path / name, config, preexec_fn=preexec_fn)
        started.append(process)
        return process

    yield make
    for process in started:
        if process.proc is not None and process.proc.poll() is None:
            process.proc.kill()
            process.proc.wait(10)
        if process.proc is not None and process.proc.stdout is not None:
            process.proc.stdout.close()


# --- reading what the broker stored ---------------------------------------------------------------


def stored_batches(data_dir: Path, topic: str, partition: int) -> list[Any]:
    """Every v2 batch of a partition as the broker wrote it to its segment files (CRC-checked)."""
    from samsa.records import iter_batches

    batches: list[Any] = []
    for path in sorted((data_dir / f"{topic}-{partition}").glob("*.log")):
        batches.extend(iter_batches(path.read_bytes(), check_crcs=True))
    return batches


@pytest.fixture
def read_stored() -> Callable[[Path, str, int], list[Any]]:
    return stored_batches
