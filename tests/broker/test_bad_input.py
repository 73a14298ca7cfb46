"""Bad input on the wire: the broker answers with the right error or closes only the offending
connection, stays up, and a well-behaved confluent-kafka producer and consumer running the whole
time are not disturbed.

Cases: random bytes, truncated frames, size prefixes over socket.request.max.bytes (100 MiB) or
negative, unknown API keys and versions, invalid topic names (Metadata and CreateTopics), a
Produce with a bad CRC (CORRUPT_MESSAGE), and batches claiming more records than they hold.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from samsa.broker import Broker
from samsa.protocol import (
    ApiKey,
    ApiVersionsRequest,
    ApiVersionsResponse,
    CreateTopicsRequest,
    MetadataRequest,
    decode_response,
    encode_request,
)
from samsa.records import Compression, RecordBatchBuilder, rewrite_crc

STEADY_TOPIC = "steady"
INVALID_TOPIC_EXCEPTION = 17
CORRUPT_MESSAGE = 2
INVALID_RECORD = 87
UNSUPPORTED_VERSION = 35
MAX_REQUEST = 104_857_600
_COUNT_OFFSET = 57           # records count in the v2 batch header
_LAST_OFFSET_DELTA_OFFSET = 23


class SteadyTraffic:
    """A confluent-kafka producer (acks=all, idempotent) and an assigned consumer on one
    partition, both running on their own threads for the whole module."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Consumer, Producer, TopicPartition

        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 1})
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "steady",
                                  "enable.auto.commit": False, "check.crcs": True})
        self.consumer.assign([TopicPartition(STEADY_TOPIC, 0, 0)])
        self.sent = 0
        self.acked = 0
        self.received: list[bytes | None] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._produce, daemon=True),
                         threading.Thread(target=self._consume, daemon=True)]
        for t in self._threads:
            t.start()

    def _on_delivery(self, err: Any, msg: Any) -> None:
        with self._lock:
            if err is not None:
                self.errors.append(f"delivery of {msg.value()!r}: {err}")
            else:
                self.acked += 1

    def _produce(self) -> None:
        try:
            while not self._stop.is_set():
                self.producer.produce(STEADY_TOPIC, b"steady-%d" % self.sent, partition=0,
                                      on_delivery=self._on_delivery)
                self.sent += 1
                self.producer.poll(0.002)
            self.producer.flush(30)
        except Exception as exc:  # noqa: BLE001 -- assert_unaffected fails on it
            with self._lock:
                self.errors.append(f"produce: {exc!r}")

    def _consume(self) -> None:
        try:
            while not self._stop.is_set():
                for msg in self.consumer.consume(1000, 0.1):
                    if msg.error() is not None:
                        with self._lock:
                            self.errors.append(f"consume: {msg.error()}")
                    else:
                        self.received.append(msg.value())
            self.consumer.close()
        except Exception as exc:  # noqa: BLE001 -- assert_unaffected fails on it
            with self._lock:
                self.errors.append(f"consume: {exc!r}")

    def assert_unaffected(self, timeout: float = 30.0) -> None:
        """Everything sent so far gets acknowledged and read back in order, without errors."""
        target = self.sent + 1
        deadline = time.monotonic() + timeout
        while (self.acked < target or len(self.received) < target) and not self.errors:
            assert time.monotonic() < deadline, (
                f"steady traffic stalled: sent {self.sent}, acked {self.acked}, "
                f"received {len(self.received)}")
            time.sleep(0.02)
        assert not self.errors, self.errors[:5]
        n = len(self.received)
        assert self.received == [b"steady-%d" % i for i in range(n)]

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)


@pytest.fixture(scope="module")
def steady(broker: Broker) -> Iterator[SteadyTraffic]:
    traffic = SteadyTraffic(broker.bootstrap_servers)
    traffic.assert_unaffected()
    yield traffic
    traffic.stop()
    assert not traffic.errors, traffic.errors[:5]


@pytest.fixture
def check_alive(broker: Broker, steady: SteadyTraffic) -> Iterator[None]:
    """After the test: a new connection gets ApiVersions answered, steady traffic flowed on."""
    yield
    client = _connect(broker)
    try:
        body = _call(client, ApiVersionsRequest(), 0)
        assert body.error_code == 0
    finally:
        client.close()
    steady.assert_unaffected()


def _connect(broker: Broker) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", broker.port), timeout=15)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    data = bytearray()
    while len(data) < n:
        try:
            chunk = sock.recv(n - len(data))
        except (ConnectionResetError, BrokenPipeError):
            return None
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _read_frame(sock: socket.socket) -> bytes | None:
    head = _read_exact(sock, 4)
    if head is None:
        return None
    return _read_exact(sock, struct.unpack(">i", head)[0])


def _call(sock: socket.socket, request: Any, version: int, correlation_id: int = 7) -> Any:
    sock.sendall(encode_request(request, version, correlation_id, "bad-input-test"))
    frame = _read_frame(sock)
    assert frame is not None, f"the broker closed the connection on {type(request).__name__}"
    got, body = decode_response(request.api.key, version, frame)
    assert got == correlation_id
    return body


def _send_and_expect_close(broker: Broker, data: bytes, *, half_close: bool = False) -> None:
    """Send ``data``; the broker must close the connection without answering."""
    sock = _connect(broker)
    try:
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            return  # closed while we were still sending: that is the expected outcome
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        assert _read_frame(sock) is None, "the broker answered a malformed request"
    finally:
        sock.close()


def _header(api_key: int, version: int, correlation_id: int = 1) -> bytes:
    client_id = b"bad"
    return struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


# --- garbage and broken frames -----------------------------------------------------------------------


@pytest.mark.usefixtures("check_alive")
@pytest.mark.parametrize("seed", range(8))
def test_random_bytes(broker: Broker, seed: int) -> None:
    rng = random.Random(seed)
    garbage = rng.randbytes(rng.randint(1, 4096))
    if seed % 2:
        # A well-sized frame of garbage, so the bytes reach the request decoder.
        garbage = _frame(garbage)
    sock = _connect(broker)
    try:
        sock.sendall(garbage)
        sock.shutdown(socket.SHUT_WR)
        # Whatever the bytes happened to mean, the broker ends the connection (it may answer
        # first if they parse as a request); it must not hang or die.
        while _read_frame(sock) is not None:
            pass
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        sock.close()


@pytest.mark.usefixtures("check_alive")
def test_truncated_frames(broker: Broker) -> None:
    metadata = encode_request(MetadataRequest(topics=None), 4, 1, "bad-input-test")
    # The size prefix promises more than arrives, then the client goes away.
    _send_and_expect_close(broker, metadata[:-5], half_close=True)
    _send_and_expect_close(broker, b"\x00\x00", half_close=True)
    _send_and_expect_close(broker, struct.pack(">i", 100) + b"x" * 50, half_close=True)
    # A frame whose size is consistent but whose body stops mid-field.
    body = metadata[4:]
    for cut in (3, 9, len(body) - 3):
        _send_and_expect_close(broker, _frame(body[:cut]))
    # A request header with a client id longer than the frame.
    _send_and_expect_close(broker, _frame(struct.pack(">hhih", 3, 4, 1, 500) + b"abc"))


@pytest.mark.usefixtures("check_alive")
@pytest.mark.parametrize("size", [MAX_REQUEST + 1, 2**31 - 1, -1, -(2**31)])
def test_oversized_or_negative_size_prefix(broker: Broker, size: int) -> None:
    _send_and_expect_close(broker, struct.pack(">i", size) + _header(ApiKey.API_VERSIONS, 0))


@pytest.mark.usefixtures("check_alive")
def test_oversized_request_does_not_block_other_connections(broker: Broker) -> None:
    # Another connection keeps working while one announces a request over the limit.
    hog = _connect(broker)
    try:
        hog.sendall(struct.pack(">i", MAX_REQUEST + 1) + b"\x00" * 65536)
        other = _connect(broker)
        try:
            assert _call(other, ApiVersionsRequest(), 0).error_code == 0
        finally:
            other.close()
        assert _read_frame(hog) is None
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        hog.close()


# --- unknown APIs and versions ------------------------------------------------------------------------


@pytest.mark.usefixtures("check_alive")
# Fetch v0 and Produce v2 are served (Kafka 3.9's ranges); Fetch 18 / Produce 13 are not.
@pytest.mark.parametrize(("api_key", "version"), [(9999, 0), (-1, 0), (74, 0), (3, 99), (1, 18),
                                                  (0, 13), (32767, 32767)])
def test_unknown_api_key_or_version_closes_the_connection(broker: Broker, api_key: int,
                                                         version: int) -> None:
    _send_and_expect_close(broker, _frame(_header(api_key, version) + b"\x00" * 16))


@pytest.mark.usefixtures("check_alive")
def test_api_versions_of_an_unknown_version_answers_in_v0(broker: Broker) -> None:
    sock = _connect(broker)
    try:
        # A flexible-looking v99 request: the broker must answer in the v0 layout with error 35
        # and the versions it supports (KIP-511), and keep the connection open.
        sock.sendall(_frame(_header(ApiKey.API_VERSIONS, 99, correlation_id=42) + b"\x00" * 8))
        frame = _read_frame(sock)
        assert frame is not None
        correlation_id, body = decode_response(ApiKey.API_VERSIONS, 0, frame)
        assert correlation_id == 42 and body.error_code == UNSUPPORTED_VERSION
        keys = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        assert keys[ApiKey.API_VERSIONS][1] >= 3
        assert isinstance(body, ApiVersionsResponse)
        assert _call(sock, ApiVersionsRequest(), 0).error_code == 0
    finally:
        sock.close()


# --- invalid topic names ---------------------------------------------------------------------------------


BAD_NAMES = ["bad topic", "..", ".", "a" * 250, "slash/name", "uml\u00e4ut", "", "tab\tname"]


@pytest.mark.usefixtures("check_alive")
@pytest.mark.parametrize("version", [1, 4, 9, 12])
def test_metadata_with_invalid_topic_names(broker: Broker, version: int) -> None:
    sock = _connect(broker)
    try:
        request = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in BAD_NAMES],
            allow_auto_topic_creation=True)
        body = _call(sock, request, version)
        errors = {t.name: t.error_code for t in body.topics}
        assert errors == dict.fromkeys(BAD_NAMES, INVALID_TOPIC_EXCEPTION)
        # The connection is still usable, and none of them were created.
        assert _call(sock, ApiVersionsRequest(), 0).error_code == 0
    finally:
        sock.close()
    created = {p.name.rsplit("-", 1)[0] for p in broker.data_dir.iterdir() if p.is_dir()}
    assert not created & set(BAD_NAMES)


@pytest.mark.usefixtures("check_alive")
@pytest.mark.parametrize("version", [2, 4, 5, 7])
def test_create_topics_with_invalid_names(broker: Broker, version: int) -> None:
    names = [n for n in BAD_NAMES if n]  # CreateTopics names are non-null strings; "" included
    names.append("")
    sock = _connect(broker)
    try:
        request = CreateTopicsRequest(timeout_ms=5000, topics=[
            CreateTopicsRequest.CreatableTopic(name=n, num_partitions=1, replication_factor=1,
                                               assignments=[], configs=[]) for n in names])
        body = _call(sock, request, version)
        errors = {t.name: t.error_code for t in body.topics}
        assert errors == dict.fromkeys(names, INVALID_TOPIC_EXCEPTION)
    finally:
        sock.close()


# --- bad record batches ------------------------------------------------------------------------------


def _records(count: int, compression: Compression = Compression.NONE) -> bytearray:
    builder = RecordBatchBuilder(compression=compression)
    for i in range(count):
        builder.append(int(time.time() * 1000), b"key", b"value-%d" % i)
    return bytearray(builder.build())


@pytest.fixture
def produce(broker: Broker, raw_client: Callable[[int], Any]
            ) -> Callable[[bytes | bytearray], Any]:
    client = raw_client(broker.port)
    assert client.create_topic("bad-batches", 1) in (0, 36)  # 36: TOPIC_ALREADY_EXISTS

    def send(records: bytes | bytearray) -> Any:
        before = client.list_offset("bad-batches", 0)
        part = client.produce("bad-batches", 0, bytes(records), acks=-1, version=8)
        if part.error_code:
            assert client.list_offset("bad-batches", 0) == before, "a rejected batch was stored"
        return part

    return send


@pytest.mark.usefixtures("check_alive")
def test_produce_with_bad_crc_is_corrupt_message(produce: Callable[[bytes | bytearray], Any]) -> None:
    batch = _records(3)
    batch[-1] ^= 0xFF  # last byte of the last record: covered by the CRC
    assert produce(batch).error_code == CORRUPT_MESSAGE
    good = produce(_records(3))
    assert good.error_code == 0


# Kafka's LogValidator walks every record of a produced batch, so header fields that agree with
# each other but not with the records inside are rejected (INVALID_RECORD / CORRUPT_MESSAGE).
@pytest.mark.usefixtures("check_alive")
@pytest.mark.parametrize("compression", [Compression.NONE, Compression.GZIP, Compression.LZ4])
@pytest.mark.parametrize("consistent_delta", [False, True])
def test_batch_claiming_more_records_than_it_holds(produce: Callable[[bytes | bytearray], Any],
                                                   compression: Compression,
                                                   consistent_delta: bool) -> None:
    batch = _records(3, compression)
    struct.pack_into(">i", batch, _COUNT_OFFSET, 5)
    if consistent_delta:
        # Header fields agree with each other (count 5, last offset delta 4): only the record
        # data shows the batch is short.
        struct.pack_into(">i", batch, _LAST_OFFSET_DELTA_OFFSET, 4)
    rewrite_crc(batch, 0)  # a valid CRC: the lie is in the content, not in transit damage
    assert produce(batch).error_code in (CORRUPT_MESSAGE, INVALID_RECORD)


@pytest.mark.usefixtures("check_alive")
def test_batch_with_bytes_after_its_records(produce: Callable[[bytes | bytearray], Any]) -> None:
    batch = _records(3)
    batch += b"\x00\x00"  # two more bytes inside the batch than its records account for
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    rewrite_crc(batch, 0)
    assert produce(batch).error_code in (CORRUPT_MESSAGE, INVALID_RECORD)
