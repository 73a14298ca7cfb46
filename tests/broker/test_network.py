"""The network layer (SocketServer, Acceptor, Processors, RequestChannel) and the handler pool
wired to it as server.py wires them, against raw sockets and a small test dispatcher (no log,
no real handlers)."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from samsa.broker.handler_pool import RequestHandlerPool
from samsa.broker.network import SocketServer
from samsa.broker.request_channel import RequestContext
from samsa.protocol import (
    ApiKey,
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchRequest,
    FetchResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
    decode_request_body,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)
from tests.broker.conftest import RawClient

# --- a dispatcher standing in for KafkaApis ---------------------------------------------------


class FakeSlice:
    """What the log hands out for zero-copy sends: fileno(), position, size, len(), read()."""

    def __init__(self, fd: int, position: int, size: int, data: bytes | None = None) -> None:
        self.fd, self.position, self.size = fd, position, size
        self._data = data
        self.reads = 0

    def fileno(self) -> int:
        return self.fd

    def __len__(self) -> int:
        return self.size

    def read(self) -> bytes:
        self.reads += 1
        if self._data is not None:
            return self._data
        return os.pread(self.fd, self.size, self.position)


class TestApis:
    """ApiVersions answers (UNSUPPORTED_VERSION and ``api_versions_range`` beyond it, as
    KafkaApis does); Metadata echoes topic names, with behaviours chosen by name:
    ``delay`` answers later from another thread, ``boom`` raises, ``silent`` sends nothing,
    ``close`` closes the connection, ``park`` waits for a later ``release`` (from any
    connection) to answer it.  Produce answers with the records' total size.  Fetch answers with
    ``fetch_slice``."""

    __test__ = False

    def __init__(self) -> None:
        self.fetch_slice: Any = None
        self.api_versions_range = (0, 4)
        self.handled = 0
        self.lock = threading.Lock()
        self.parked: list[tuple[RequestContext, Any]] = []

    def handle(self, ctx: RequestContext) -> None:
        with self.lock:
            self.handled += 1
        key = ctx.api_key
        low, high = self.api_versions_range
        if key == ApiKey.API_VERSIONS and not low <= ctx.api_version <= high:
            ctx.respond(ApiVersionsResponse(error_code=35, api_keys=[
                ApiVersionsResponse.ApiVersion(api_key=key, min_version=low, max_version=high)]))
        elif key == ApiKey.API_VERSIONS:
            ctx.respond(ApiVersionsResponse(error_code=0, api_keys=[
                ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, lo, hi in ((ApiKey.PRODUCE, 0, 12), (ApiKey.FETCH, 4, 12),
                                      (ApiKey.METADATA, 0, 12), (ApiKey.API_VERSIONS, 0, 4))]))
        elif key == ApiKey.METADATA:
            names = [t.name for t in ctx.body.topics or []]
            response = MetadataResponse(brokers=[], topics=[
                MetadataResponse.MetadataResponseTopic(error_code=0, name=n, partitions=[])
                for n in names])
            if "boom" in names:
                raise RuntimeError("handler bug")
            if "silent" in names:
                ctx.no_response()
            elif "close" in names:
                ctx.close_connection()
            elif "delay" in names:
                threading.Timer(0.01, ctx.respond, (response,)).start()
            elif "park" in names:
                with self.lock:
                    self.parked.append((ctx, response))
            elif "release" in names:
                with self.lock:
                    parked, self.parked = self.parked, []
                for waiting, answer in parked:
                    waiting.respond(answer)
                ctx.respond(response)
            else:
                ctx.respond(response)
        elif key == ApiKey.PRODUCE:
            total = sum(len(p.records or b"") for t in ctx.body.topic_data
                        for p in t.partition_data)
            ctx.respond(ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(
                name="t", partition_responses=[ProduceResponse.PartitionProduceResponse(
                    index=0, error_code=0, base_offset=total)])]))
        elif key == ApiKey.FETCH:
            ctx.respond(FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
                topic="t", partitions=[FetchResponse.PartitionData(
                    partition_index=0, error_code=0, high_watermark=1,
                    records=self.fetch_slice)])]))
        else:
            ctx.close_connection()


# How requests reach the handler: always through the handler threads (Kafka's way), always run
# by the network thread when the queue is empty (inline dispatch), or every other one.
INLINE_MODES: dict[str, Callable[[RequestContext], bool] | None] = {
    "queued": None,
    "inline": lambda ctx: True,
    "mixed": lambda ctx: ctx.correlation_id % 2 == 0,
}


@pytest.fixture(params=list(INLINE_MODES))
def start_server(request: pytest.FixtureRequest
                 ) -> Iterator[Callable[..., tuple[SocketServer, TestApis]]]:
    servers: list[tuple[SocketServer, RequestHandlerPool]] = []

    def start(num_io_threads: int = 2, **kwargs: Any) -> tuple[SocketServer, TestApis]:
        apis = TestApis()
        kwargs.setdefault("inline", INLINE_MODES[request.param])
        kwargs.setdefault("num_network_threads", 2)
        server = SocketServer(apis.handle, "127.0.0.1", 0, **kwargs)
        pool = RequestHandlerPool(server.request_channel, apis.handle, num_io_threads)
        pool.start()
        server.start()
        servers.append((server, pool))
        return server, apis

    yield start
    for server, pool in servers:
        server.stop()
        pool.shutdown()


@pytest.fixture
def server(start_server: Callable[..., tuple[SocketServer, TestApis]]) -> SocketServer:
    return start_server()[0]


# --- a raw client ---------------------------------------------------------------------------------


class Client(RawClient):
    """A RawClient whose correlation ids the test may choose, reading responses apart from
    the requests (for pipelining and ordering checks)."""

    def __init__(self, port: int) -> None:
        super().__init__(port, timeout=10)

    def send(self, request: Any, version: int, correlation_id: int | None = None) -> int:
        if correlation_id is None:
            self.correlation_id += 1
            correlation_id = self.correlation_id
        self.sock.sendall(encode_request(request, version, correlation_id, "test-client"))
        return correlation_id

    def receive(self, api_key: int, version: int) -> tuple[int, Any]:
        frame = self.read_frame()
        assert frame is not None, "the broker closed the connection"
        return decode_response(api_key, version, frame)

    def assert_closed(self) -> None:
        """The broker closed this connection (EOF or reset), without answering."""
        assert self.is_closed_by_peer()


def metadata(*names: str) -> MetadataRequest:
    return MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in names])


def echo_names(body: Any) -> list[str]:
    return [t.name for t in body.topics]


# --- ApiVersions ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_every_version(server: SocketServer, version: int) -> None:
    client = Client(server.port)
    body = client.call(ApiVersionsRequest(client_software_name="samsa-test",
                                          client_software_version="1.0"), version)
    assert body.error_code == 0
    assert (ApiKey.API_VERSIONS, 0, 4) in [(k.api_key, k.min_version, k.max_version)
                                           for k in body.api_keys]


def test_api_versions_unknown_version_is_answered_in_v0_layout(server: SocketServer) -> None:
    client = Client(server.port)
    frame = bytearray(encode_request(ApiVersionsRequest(client_software_name="x",
                                                        client_software_version="1"), 3, 42, "c"))
    struct.pack_into(">h", frame, 6, 99)  # request_api_version
    client.sock.sendall(frame)
    correlation_id, body = client.receive(ApiKey.API_VERSIONS, 0)
    assert correlation_id == 42
    assert body.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version)
            for k in body.api_keys] == [(ApiKey.API_VERSIONS, 0, 4)]
    # The connection stays usable: the client retries with a version we know.
    assert client.call(ApiVersionsRequest(), 0).error_code == 0


def test_api_versions_error_range_comes_from_the_handler(
        start_server: Callable[..., tuple[SocketServer, TestApis]]) -> None:
    server, apis = start_server()
    apis.api_versions_range = (0, 3)
    client = Client(server.port)
    frame = bytearray(encode_request(ApiVersionsRequest(), 0, 5, "c"))
    struct.pack_into(">h", frame, 6, 7)
    client.sock.sendall(frame)
    _, body = client.receive(ApiKey.API_VERSIONS, 0)
    assert [(k.api_key, k.min_version, k.max_version)
            for k in body.api_keys] == [(ApiKey.API_VERSIONS, 0, 3)]


# --- framing ----------------------------------------------------------------------------------------


def test_request_sent_byte_by_byte(server: SocketServer) -> None:
    client = Client(server.port)
    frame = encode_request(metadata("a", "b"), 1, 7, "slow-client")
    for i in range(len(frame)):
        client.sock.send(frame[i:i + 1])
        time.sleep(0.001)  # let each byte arrive in its own segment
    correlation_id, body = client.receive(ApiKey.METADATA, 1)
    assert correlation_id == 7
    assert echo_names(body) == ["a", "b"]


def test_pipelined_requests_are_answered_in_request_order(server: SocketServer) -> None:
    client = Client(server.port)
    expected = []
    frames = []
    for i in range(60):
        # Every fifth request is answered late, from a timer thread; order must still hold.
        name = "delay" if i % 5 == 0 else f"t{i}"
        frames.append(encode_request(metadata(name), 1, 1000 + i, "pipeline"))
        expected.append((1000 + i, name))
    client.sock.sendall(b"".join(frames))
    got = []
    for _ in frames:
        correlation_id, body = client.receive(ApiKey.METADATA, 1)
        got.append((correlation_id, echo_names(body)[0]))
    assert got == expected


def test_pipelined_requests_with_strict_muting(
        start_server: Callable[..., tuple[SocketServer, TestApis]]) -> None:
    # max_pending_frames=0 is Kafka's behaviour: stop reading while a request is in handling.
    server, _ = start_server(max_pending_frames=0)
    client = Client(server.port)
    frames = [encode_request(metadata("delay" if i % 3 == 0 else f"t{i}"), 4, i, "c")
              for i in range(30)]
    client.sock.sendall(b"".join(frames))
    assert [client.receive(ApiKey.METADATA, 4)[0] for _ in frames] == list(range(30))


def test_large_request_is_received_whole(server: SocketServer) -> None:
    # Much larger than the read buffer: received into its own buffer, decoded in place.
    records = os.urandom(3 * 1024 * 1024)
    request = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=records)])])
    client = Client(server.port)
    for version in (3, 9):
        body = client.call(request, version)
        assert body.responses[0].partition_responses[0].base_offset == len(records)


def test_small_and_large_requests_interleaved_in_one_write(server: SocketServer) -> None:
    big = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=b"x" * 200_000)])])
    frames = [encode_request(metadata("m1"), 1, 1, "c"), encode_request(big, 7, 2, "c"),
              encode_request(metadata("m3"), 1, 3, "c")]
    client = Client(server.port)
    client.sock.sendall(b"".join(frames))
    assert echo_names(client.receive(ApiKey.METADATA, 1)[1]) == ["m1"]
    produced = client.receive(ApiKey.PRODUCE, 7)[1]
    assert produced.responses[0].partition_responses[0].base_offset == 200_000
    assert echo_names(client.receive(ApiKey.METADATA, 1)[1]) == ["m3"]


# --- bad input closes only the offending connection --------------------------------------------------


def test_oversized_size_prefix_closes_only_that_connection(server: SocketServer) -> None:
    good = Client(server.port)
    assert echo_names(good.call(metadata("before"), 1)) == ["before"]
    bad = Client(server.port)
    bad.sock.sendall(struct.pack(">i", 104_857_600 + 1) + b"\0" * 100)
    bad.assert_closed()
    assert echo_names(good.call(metadata("after"), 1)) == ["after"]


def test_limit_is_socket_request_max_bytes(
        start_server: Callable[..., tuple[SocketServer, TestApis]]) -> None:
    server, _ = start_server(max_request_bytes=1000)
    ok = Client(server.port)
    assert echo_names(ok.call(metadata("x" * 100), 1)) == ["x" * 100]
    too_big = Client(server.port)
    too_big.send(metadata("y" * 1200), 1)
    too_big.assert_closed()
    negative = Client(server.port)
    negative.sock.sendall(struct.pack(">i", -5))
    negative.assert_closed()


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _header(key: int, version: int, correlation_id: int = 1, client_id: bytes = b"c") -> bytes:
    return struct.pack(">hhih", key, version, correlation_id, len(client_id)) + client_id


BAD_REQUESTS = {
    "random bytes": _frame(bytes(range(7, 250, 3))),
    "shorter than a header": _frame(b"\x00\x03\x00"),
    "empty frame": _frame(b""),
    "client id past the end": _frame(struct.pack(">hhih", 3, 1, 1, 500) + b"abc"),
    "unknown api key": _frame(_header(9999, 0) + b"\0" * 8),
    "unknown version": _frame(_header(3, 99) + b"\0\0\0\0"),
    "truncated body": _frame(_header(3, 1) + b"\x00\x00\x00\x05\x00\x03ab"),
    "bad string length": _frame(_header(3, 1) + b"\x00\x00\x00\x01\x7f\xff"),
}


@pytest.mark.parametrize("name", sorted(BAD_REQUESTS))
def test_malformed_request_closes_that_connection_only(server: SocketServer, name: str) -> None:
    good = Client(server.port)
    bad = Client(server.port)
    bad.sock.sendall(BAD_REQUESTS[name])
    bad.assert_closed()
    assert echo_names(good.call(metadata(name), 1)) == [name]
    assert Client(server.port).call(ApiVersionsRequest(), 0).error_code == 0


def test_requests_before_a_bad_one_are_answered(server: SocketServer) -> None:
    client = Client(server.port)
    client.sock.sendall(encode_request(metadata("first"), 1, 1, "c")
                        + BAD_REQUESTS["unknown api key"])
    assert echo_names(client.receive(ApiKey.METADATA, 1)[1]) == ["first"]
    client.assert_closed()


def test_truncated_frame_then_disconnect_leaves_the_broker_serving(server: SocketServer) -> None:
    frame = encode_request(metadata("never"), 1, 1, "c")
    for cut in (2, 4, 9, len(frame) - 1):
        client = Client(server.port)
        client.sock.sendall(frame[:cut])
        client.close()
    assert echo_names(Client(server.port).call(metadata("still"), 1)) == ["still"]


# --- handler outcomes -----------------------------------------------------------------------------------


def test_handler_exception_closes_the_connection_and_the_thread_survives(
        start_server: Callable[..., tuple[SocketServer, TestApis]]) -> None:
    server, apis = start_server(num_io_threads=1)
    for _ in range(3):
        client = Client(server.port)
        client.send(metadata("boom"), 1)
        client.assert_closed()
    assert echo_names(Client(server.port).call(metadata("fine"), 1)) == ["fine"]
    assert apis.handled == 4


def _slow_reader(server: SocketServer) -> tuple[Client, Any]:
    """A client with small socket buffers on both ends (the server's only processor), so that
    responses it does not read soon fill them; and the server side of its connection."""
    client = Client.__new__(Client)
    client.sock = socket.socket()
    client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    client.sock.settimeout(10)
    client.sock.connect(("127.0.0.1", server.port))
    client.correlation_id = 0
    processor = server.processors[0]
    while not processor._connections:
        time.sleep(0.001)
    (conn,) = processor._connections
    conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    return client, conn


def _held_burst(start_server: Callable[..., tuple[SocketServer, TestApis]],
                request: pytest.FixtureRequest, names: list[str]
                ) -> tuple[SocketServer, TestApis, Client, Any]:
    """A one-processor server and a slow reader (_slow_reader) that has sent a Metadata request
    per name in one write, correlation ids 0, 1, ...  Inline dispatch only: responses are held
    only when the network thread answers."""
    if request.node.callspec.params["start_server"] != "inline":
        pytest.skip("responses are held only when the network thread answers")
    server, apis = start_server(num_network_threads=1)
    client, conn = _slow_reader(server)
    client.sock.sendall(b"".join(encode_request(metadata(name), 1, i, "a")
                                 for i, name in enumerate(names)))
    return server, apis, client, conn


def test_held_responses_the_socket_does_not_take_go_out_first_in_order(
        start_server: Callable[..., tuple[SocketServer, TestApis]],
        request: pytest.FixtureRequest) -> None:
    # A burst answered inline ends with a request that parks: the held responses are written
    # then (_push), but the client is not reading and the buffers are small, so most of them
    # wait in ``outgoing``.  The parked request's response, sent while they wait, goes after
    # them, and the connection takes requests again once all are out.  (Inline dispatch only:
    # otherwise the first response the client does not read stops the burst before the park.)
    names = [f"{i}-".ljust(3000, "x") for i in range(10)] + ["park"]
    server, apis, a, conn = _held_burst(start_server, request, names)
    while True:
        with apis.lock:
            if apis.parked:
                break
        time.sleep(0.001)
    with conn.lock:
        assert conn.outgoing is not None and conn.outgoing_answered
        assert not conn.corked
    b = Client(server.port)
    assert echo_names(b.call(metadata("release"), 1)) == ["release"]
    got = [a.receive(ApiKey.METADATA, 1) for _ in names]
    assert [(cid, echo_names(body)) for cid, body in got] == [
        (i, [name]) for i, name in enumerate(names)]
    a.send(metadata("after"), 1)
    assert echo_names(a.receive(ApiKey.METADATA, 1)[1]) == ["after"]
    with conn.lock:
        assert conn.outgoing is None and not conn.corked


def test_held_responses_still_go_out_when_the_client_closes_its_side(
        start_server: Callable[..., tuple[SocketServer, TestApis]],
        request: pytest.FixtureRequest) -> None:
    # As above, with a burst that ends with a request answered by no response: the connection
    # is idle with held responses still to write when the client shuts down its side; they are
    # all written, then the connection is closed.
    names = [f"{i}-".ljust(3000, "x") for i in range(10)]
    _, _, a, conn = _held_burst(start_server, request, [*names, "silent"])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with conn.lock:
            if conn.outgoing is not None and not conn.busy:
                break
        time.sleep(0.001)
    with conn.lock:
        assert conn.outgoing is not None and conn.outgoing_answered and not conn.busy
    a.sock.shutdown(socket.SHUT_WR)
    time.sleep(0.05)  # the network thread sees the end of the requests first
    got = [a.receive(ApiKey.METADATA, 1) for _ in names]
    assert [(cid, echo_names(body)) for cid, body in got] == [
        (i, [name]) for i, name in enumerate(names)]
    a.assert_closed()


def test_request_answered_by_another_connections_request_moves_on(
        start_server: Callable[..., tuple[SocketServer, TestApis]]) -> None:
    # One network thread: with inline dispatch, B's request answers A's parked one on the
    # network thread, which must then start A's next pipelined request too.
    server, apis = start_server(num_network_threads=1)
    a, b = Client(server.port), Client(server.port)
    a.sock.sendall(b"".join(encode_request(metadata(name), 1, i, "a")
                            for i, name in enumerate(["park", "x", "y"])))
    while True:
        with apis.lock:
            if apis.parked:
                break
        time.sleep(0.001)
    assert echo_names(b.call(metadata("release"), 1)) == ["release"]
    got = [a.receive(ApiKey.METADATA, 1) for _ in range(3)]
    assert [(cid, echo_names(body)) for cid, body in got] == [(0, ["park"]), (1, ["x"]),
                                                               (2, ["y"])]


def test_responses_held_for_a_burst_are_sent_when_the_next_request_parks(
        start_server: Callable[..., tuple[SocketServer, TestApis]]) -> None:
    # Inline dispatch sends a response with MSG_MORE when the next pipelined request is already
    # read; when that next request parks instead of answering, the held response must be pushed
    # out at once (not left to the kernel's cork timer): no connection stays corked.
    server, apis = start_server(num_network_threads=1)
    a = Client(server.port)
    a.sock.sendall(b"".join(encode_request(metadata(name), 1, i, "a")
                            for i, name in enumerate(["x", "y", "park"])))
    got = [a.receive(ApiKey.METADATA, 1) for _ in range(2)]
    assert [(cid, echo_names(body)) for cid, body in got] == [(0, ["x"]), (1, ["y"])]
    while True:
        with apis.lock:
            if apis.parked:
                break
        time.sleep(0.001)
    processor = server.processors[0]
    assert [conn.corked for conn in processor._connections] == [False]
    b = Client(server.port)
    assert echo_names(b.call(metadata("release"), 1)) == ["release"]
    assert echo_names(a.receive(ApiKey.METADATA, 1)[1]) == ["park"]


def answer_raw(payload: Any) -> list[Any] | None:
    """An ``answer`` hook (KafkaApis.answer_frame's place): Metadata for ``raw`` is answered
    with the topic ``from-frame``, for ``rawboom`` it raises; anything else is declined."""
    header, pos = decode_request_header(payload)
    if header.request_api_key != ApiKey.METADATA:
        return None
    names = echo_names(decode_request_body(header, payload, pos))
    if names == ["rawboom"]:
        raise RuntimeError("answer bug")
    if names != ["raw"]:
        return None
    return encode_response(MetadataResponse(brokers=[], topics=[
        MetadataResponse.MetadataResponseTopic(error_code=0, name="from-frame", partitions=[])]),
        header.request_api_version, header.correlation_id)


def test_requests_answered_from_their_frame_keep_their_order(
        request: pytest.FixtureRequest,
        start_server: Callable[..., tuple[SocketServer, TestApis]]) -> None:
    server, apis = start_server(num_network_threads=1, answer=answer_raw)
    client = Client(server.port)
    names = ["raw", "x", "raw", "raw", "y"]
    client.sock.sendall(b"".join(encode_request(metadata(name), 1, i, "a")
                                 for i, name in enumerate(names)))
    got = [client.receive(ApiKey.METADATA, 1) for _ in names]
    assert [cid for cid, _ in got] == list(range(len(names)))
    answered = [echo_names(body) for _, body in got]
    for name, answer in zip(names, answered, strict=True):
        assert answer == [name] or (name == "raw" and answer == ["from-frame"])
    mode = request.node.callspec.params["start_server"]
    if mode == "queued":  # no inline dispatch: the hook is never offered a request
        assert ["from-frame"] not in answered
    elif mode == "inline":
        assert answered[0] == ["from-frame"] and apis.handled < len(names)
    assert apis.handled == sum(answer != ["from-frame"] for answer in answered)


def test_an_answer_hook_that_raises_closes_the_connection_only(
        request: pytest.FixtureRequest,
        start_server: Callable[..., tuple[SocketServer, TestApis]]) -> None:
    if request.node.callspec.params["start_server"] == "queued":
        pytest.skip("the hook is offered requests only with inline dispatch")
    server, _ = start_server(num_network_threads=1, answer=answer_raw)
    client = Client(server.port)
    client.send(metadata("rawboom"), 1)
    client.assert_closed()
    assert echo_names(Client(server.port).call(metadata("raw"), 1)) == ["from-frame"]


def test_no_response_moves_on_to_the_next_request(server: SocketServer) -> None:
    client = Client(server.port)
    client.send(metadata("silent"), 1)
    assert echo_names(client.call(metadata("next"), 1)) == ["next"]


def test_handler_may_close_the_connection(server: SocketServer) -> None:
    client = Client(server.port)
    client.send(metadata("close"), 1)
    client.assert_closed()


def test_the_network_layer_imports_neither_the_handler_pool_nor_the_handlers() -> None:
    # Dependencies point down: server.py wires the handlers to the network layer.
    code = ("import sys, samsa.broker.network; "
            "print(sorted(m for m in sys.modules if m.startswith(('samsa.broker.handler_pool', "
            "'samsa.broker.apis', 'samsa.broker.server'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_handlers_get_the_network_layers_request_context() -> None:
    from samsa.broker.apis import context

    assert context.RequestContext is RequestContext


def test_a_context_completes_once() -> None:
    calls: list[str] = []

    class Sink:
        def send_response(self, conn: Any, chunks: list[Any]) -> None:
            calls.append("respond")

        def finish_request(self, conn: Any) -> None:
            calls.append("none")

        def close_connection(self, conn: Any, reason: str) -> None:
            calls.append("close")

    from samsa.protocol import RequestHeader
    header = RequestHeader(request_api_key=ApiKey.METADATA, request_api_version=1, correlation_id=9,
                           client_id="c")
    ctx = RequestContext(header, metadata(), "conn", "127.0.0.1", "PLAINTEXT", 0.0, 10, Sink(),
                         None)
    assert not ctx.completed
    ctx.respond(MetadataResponse(brokers=[], topics=[]))
    assert ctx.completed
    with pytest.raises(RuntimeError):
        ctx.no_response()
    with pytest.raises(RuntimeError):
        ctx.close_connection()
    assert calls == ["respond"]
    assert (ctx.api_key, ctx.api_version, ctx.correlation_id, ctx.client_id) == (3, 1, 9, "c")


# --- responses from files (zero copy) --------------------------------------------------------------------


def _fetch_records(client: Client, version: int = 11) -> bytes:
    request = FetchRequest(max_wait_ms=0, min_bytes=1, topics=[FetchRequest.FetchTopic(
        topic="t", partitions=[FetchRequest.FetchPartition(partition=0, fetch_offset=0,
                                                           partition_max_bytes=1 << 30)])])
    body = client.call(request, version)
    return bytes(body.responses[0].partitions[0].records)


def test_file_slice_is_sent_with_sendfile(
        start_server: Callable[..., tuple[SocketServer, TestApis]], tmp_path: Any) -> None:
    server, apis = start_server()
    data = os.urandom(5 * 1024 * 1024 + 123)  # larger than a socket buffer: partial writes
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"head" + data + b"tail")
    fd = os.open(path, os.O_RDONLY)
    try:
        apis.fetch_slice = FakeSlice(fd, 4, len(data))
        client = Client(server.port)
        assert _fetch_records(client) == data
        assert _fetch_records(client, version=12) == data  # flexible version
        assert apis.fetch_slice.reads == 0  # never copied through user space
    finally:
        os.close(fd)


def test_file_slice_falls_back_to_read_when_sendfile_cannot_be_used(
        start_server: Callable[..., tuple[SocketServer, TestApis]]) -> None:
    server, apis = start_server()
    data = os.urandom(100_000)
    read_end, write_end = os.pipe()  # sendfile cannot seek in a pipe: EINVAL/ESPIPE
    try:
        apis.fetch_slice = FakeSlice(read_end, 0, len(data), data=data)
        assert _fetch_records(Client(server.port)) == data
        assert apis.fetch_slice.reads == 1
    finally:
        os.close(read_end)
        os.close(write_end)


# --- connections ------------------------------------------------------------------------------------------


def test_idle_connections_are_closed(
        start_server: Callable[..., tuple[SocketServer, TestApis]]) -> None:
    server, _ = start_server(connections_max_idle_ms=50)
    idle = Client(server.port)
    idle.assert_closed()  # blocks until the broker gives up on it
    used = Client(server.port)
    assert echo_names(used.call(metadata("x"), 1)) == ["x"]
    used.assert_closed()


def test_many_clients_across_processors(
        start_server: Callable[..., tuple[SocketServer, TestApis]]) -> None:
    server, _ = start_server(num_network_threads=3, num_io_threads=4)
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            client = Client(server.port)
            for i in range(20):
                assert echo_names(client.call(metadata(f"c{n}-{i}"), 4)) == [f"c{n}-{i}"]
            client.close()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors


def test_client_half_close_still_gets_its_answers(server: SocketServer) -> None:
    client = Client(server.port)
    frames = [encode_request(metadata("delay" if i == 0 else f"h{i}"), 1, i, "c")
              for i in range(5)]
    client.sock.sendall(b"".join(frames))
    client.sock.shutdown(socket.SHUT_WR)
    assert [client.receive(ApiKey.METADATA, 1)[0] for _ in frames] == list(range(5))
    client.assert_closed()


def test_stop_closes_connections_and_port(
        start_server: Callable[..., tuple[SocketServer, TestApis]]) -> None:
    server, _ = start_server()
    client = Client(server.port)
    assert echo_names(client.call(metadata("x"), 1)) == ["x"]
    server.stop()
    client.assert_closed()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=5)
    server.stop()  # twice is fine


def test_port_zero_binds_an_ephemeral_port() -> None:
    server = SocketServer(lambda ctx: None, "127.0.0.1", 0)
    with pytest.raises(RuntimeError):
        _ = server.port
    port = server.bind()
    assert port > 0 and server.port == port
    server.stop()


def test_full_request_queue_applies_backpressure_without_deadlock(
        start_server: Callable[..., tuple[SocketServer, TestApis]]) -> None:
    server, _ = start_server(queued_max_requests=1, num_io_threads=2, num_network_threads=2)
    clients = [Client(server.port) for _ in range(8)]
    for n, client in enumerate(clients):
        client.sock.sendall(b"".join(
            encode_request(metadata("delay" if i == 10 else f"q{n}-{i}"), 1, i, "c")
            for i in range(40)))
    for client in clients:
        assert [client.receive(ApiKey.METADATA, 1)[0] for _ in range(40)] == list(range(40))
