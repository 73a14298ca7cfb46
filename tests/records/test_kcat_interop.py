"""Batches written by librdkafka (kcat) with every codec decode in samsa with valid CRCs.

A tiny test-only server speaks just enough protocol (via samsa.protocol) for ``kcat -P``:
ApiVersions advertising the versions librdkafka 2.0.2 checks before it enables v2 batches and
compression (Produce 0-7 incl. v0, Fetch 0-10, FindCoordinator 0 for lz4: librdkafka's rdkafka_feature.c),
Metadata naming itself as the leader of one partition, and Produce answered with success while
the raw record bytes are kept for the test to decode.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
from typing import Any

import pytest

from samsa.protocol import (
    ApiVersionsResponse,
    MetadataResponse,
    ProduceResponse,
    decode_request,
    encode_response_bytes,
)
from samsa.records import Compression, RecordBatch, TimestampType, iter_batches

TOPIC = "t"
NODE_ID = 1

# (api key, min, max) advertised; only ApiVersions, Metadata and Produce are served.
ADVERTISED = [
    (0, 0, 7),  # Produce: must include v0 (compression), v3 (MsgVer2), v7 (zstd)
    (1, 0, 10),  # Fetch: v4 (MsgVer2) and v10 (zstd) are feature checks only
    (3, 0, 4),  # Metadata
    (10, 0, 0),  # FindCoordinator v0 enables the LZ4 feature
    (18, 0, 3),  # ApiVersions
]


class CaptureBroker:
    """Accepts connections on 127.0.0.1, answers the three APIs, keeps produced record bytes."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.records: list[bytes] = []
        self.errors: list[Exception] = []
        self._lock = threading.Lock()
        self._next_offset = 0
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []
        self._closed = False
        accept = threading.Thread(target=self._accept_loop, daemon=True)
        accept.start()
        self._threads.append(accept)

    def close(self) -> None:
        self._closed = True
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() on Linux
        except OSError:
            pass
        self._listener.close()
        for conn in list(self._conns):
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()
        for thread in self._threads:
            thread.join(timeout=5)

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self._conns.append(conn)
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            thread.start()
            self._threads.append(thread)

    @staticmethod
    def _read_exact(conn: socket.socket, n: int) -> bytes | None:
        chunks = bytearray()
        while len(chunks) < n:
            chunk = conn.recv(n - len(chunks))
            if not chunk:
                return None
            chunks += chunk
        return bytes(chunks)

    def _serve(self, conn: socket.socket) -> None:
        try:
            while True:
                size = self._read_exact(conn, 4)
                if size is None:
                    return
                payload = self._read_exact(conn, int.from_bytes(size, "big", signed=True))
                if payload is None:
                    return
                header, body = decode_request(payload)
                version = header.request_api_version
                response = self._respond(header.request_api_key, version, body)
                if response is not None:
                    conn.sendall(encode_response_bytes(response, version, header.correlation_id))
        except OSError:
            return
        except Exception as exc:  # noqa: BLE001 - surfaced by the test, not lost in a thread
            self.errors.append(exc)
        finally:
            conn.close()

    def _respond(self, key: int, version: int, body: Any) -> Any:
        if key == 18:
            return ApiVersionsResponse(
                error_code=0,
                api_keys=[
                    ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                    for k, lo, hi in ADVERTISED
                ],
            )
        if key == 3:
            partition = MetadataResponse.MetadataResponsePartition(
                error_code=0, partition_index=0, leader_id=NODE_ID, replica_nodes=[NODE_ID], isr_nodes=[NODE_ID]
            )
            return MetadataResponse(
                brokers=[MetadataResponse.MetadataResponseBroker(node_id=NODE_ID, host="127.0.0.1", port=self.port)],
                cluster_id="samsa-test",
                controller_id=NODE_ID,
                topics=[MetadataResponse.MetadataResponseTopic(error_code=0, name=TOPIC, partitions=[partition])],
            )
        if key == 0:
            topics = []
            for topic in body.topic_data:
                partitions = []
                for data in topic.partition_data:
                    records = bytes(data.records or b"")
                    with self._lock:
                        self.records.append(records)
                        base = self._next_offset
                        self._next_offset += sum(b.records_count for b in iter_batches(records, check_crcs=False))
                    partitions.append(
                        ProduceResponse.PartitionProduceResponse(index=data.index, error_code=0, base_offset=base)
                    )
                topics.append(ProduceResponse.TopicProduceResponse(name=topic.name, partition_responses=partitions))
            return None if body.acks == 0 else ProduceResponse(responses=topics)
        raise AssertionError(f"the test broker does not serve API key {key} v{version}")


@pytest.fixture
def broker() -> Any:
    server = CaptureBroker()
    yield server
    server.close()


def kcat() -> str:
    path = shutil.which("kcat")
    assert path is not None, "kcat (librdkafka) is required for this test; install the kcat package"
    return path


CODECS = {"gzip": Compression.GZIP, "snappy": Compression.SNAPPY, "lz4": Compression.LZ4, "zstd": Compression.ZSTD}


@pytest.mark.parametrize("codec_name", list(CODECS))
def test_kcat_batches_decode_in_samsa(broker: CaptureBroker, codec_name: str) -> None:
    keys = [f"key-{i}" for i in range(300)]
    values = [f"value {i} " + "lorem ipsum dolor " * (i % 9) for i in range(300)]
    stdin = "".join(f"{k}:{v}\n" for k, v in zip(keys, values))
    proc = subprocess.run(
        [
            kcat(), "-P", "-b", f"127.0.0.1:{broker.port}", "-t", TOPIC, "-p", "0",
            "-z", codec_name, "-K", ":", "-H", "trace=abc", "-H", "empty=",
            "-X", "broker.address.family=v4", "-X", "message.timeout.ms=20000",
            "-X", "linger.ms=50",
        ],
        input=stdin.encode(),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert not broker.errors, broker.errors
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert broker.records, "kcat produced nothing"

    batches: list[RecordBatch] = []
    for blob in broker.records:
        for batch in iter_batches(blob):  # CRC-32C checked here
            assert isinstance(batch, RecordBatch)
            batches.append(batch)
    assert batches
    for batch in batches:
        assert batch.is_valid()
        assert batch.compression is CODECS[codec_name], f"librdkafka sent {batch.compression.name}"
        assert batch.timestamp_type is TimestampType.CREATE_TIME
    records = [r for batch in batches for r in batch]
    assert [r.key.decode() for r in records if r.key is not None] == keys
    assert [r.value.decode() for r in records if r.value is not None] == values
    assert {tuple(r.headers) for r in records} == {(("trace", b"abc"), ("empty", b""))}
    assert all(r.timestamp > 1_600_000_000_000 for r in records)
