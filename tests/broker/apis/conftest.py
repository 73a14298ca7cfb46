"""Drive KafkaApis directly: fake request contexts over a real LogManager in a tmp dir.

Every request goes through the codec (encoded then decoded at the version under test) and
every response is encoded and decoded back, so a handler that builds a message the codec
cannot write at that version fails here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from samsa.broker.apis import BrokerNode, KafkaApis
from samsa.broker.log import LogManager
from samsa.protocol import (
    ApiKey,
    RequestHeader,
    decode_body,
    decode_response,
    encode_body,
    encode_response_bytes,
)
from samsa.records.builder import RecordBatchBuilder
from tests.broker.fake_request import RequestFromHeader


@dataclass
class FakeContext(RequestFromHeader):
    header: Any
    body: Any
    connection_id: str = "127.0.0.1:1-127.0.0.1:2-0"
    client_host: str = "127.0.0.1"
    listener: str = "PLAINTEXT"
    principal: str = "User:ANONYMOUS"
    outcome: str | None = None  # "respond" | "no_response" | "close"
    response: Any = None
    done: threading.Event = field(default_factory=threading.Event)
    close_reason: str = ""

    def _finish(self, outcome: str) -> None:
        assert self.outcome is None, f"request answered twice ({self.outcome}, then {outcome})"
        self.outcome = outcome
        self.done.set()

    def respond(self, response: Any) -> None:
        version = self.header.request_api_version
        if response.api.key == ApiKey.API_VERSIONS and version > 4:
            version = 0  # the v0 layout carries UNSUPPORTED_VERSION
        frame = encode_response_bytes(response, version, self.header.correlation_id)
        correlation_id, decoded = decode_response(response.api.key, version, frame[4:])
        assert correlation_id == self.header.correlation_id
        self.response = decoded
        self._finish("respond")

    def respond_frame(self, chunks: list[Any]) -> None:
        frame = b"".join(chunks)
        correlation_id, decoded = decode_response(self.header.request_api_key,
                                                  self.header.request_api_version, frame[4:])
        assert correlation_id == self.header.correlation_id
        self.response = decoded
        self._finish("respond")

    def no_response(self) -> None:
        self._finish("no_response")

    def close_connection(self, reason: str = "") -> None:
        self.close_reason = reason
        self._finish("close")

    def wait(self, timeout: float = 10.0) -> Any:
        assert self.done.wait(timeout), "no answer within the test's patience"
        return self.response


class Client:
    """Sends requests to a KafkaApis the way the network layer would."""

    def __init__(self, apis: KafkaApis) -> None:
        self.apis = apis
        self._correlation = 0

    def send(self, request: Any, version: int, *, client_id: str | None = "test",
             raw_version: int | None = None) -> FakeContext:
        self._correlation += 1
        api = request.api
        body = decode_body(type(request), version, encode_body(request, version))
        header = RequestHeader(request_api_key=api.key,
                               request_api_version=version if raw_version is None
                               else raw_version,
                               correlation_id=self._correlation, client_id=client_id)
        ctx = FakeContext(header=header, body=body)
        self.apis.handle(ctx)
        return ctx

    def call(self, request: Any, version: int) -> Any:
        ctx = self.send(request, version)
        assert ctx.outcome == "respond", f"expected a response, got {ctx.outcome}"
        return ctx.response


@pytest.fixture
def log_manager(tmp_path: Any) -> Iterator[LogManager]:
    manager = LogManager(tmp_path / "data")
    yield manager
    manager.close()


@pytest.fixture
def apis(log_manager: LogManager) -> Iterator[KafkaApis]:
    apis = KafkaApis(log_manager, node=BrokerNode(node_id=1, host="127.0.0.1", port=19092),
                     config={"num.partitions": 2})
    yield apis
    apis.close()


@pytest.fixture
def client(apis: KafkaApis) -> Client:
    return Client(apis)


@pytest.fixture
def make_client(log_manager: LogManager) -> Iterator[Any]:
    """A Client over another KafkaApis (same logs) built with the given broker config."""
    made: list[KafkaApis] = []

    def make(config: dict[str, Any]) -> Client:
        apis = KafkaApis(log_manager, node=BrokerNode(node_id=1, port=19092), config=config)
        made.append(apis)
        return Client(apis)

    yield make
    for apis in made:
        apis.close()


@pytest.fixture
def make_batch() -> Any:
    return batch


def batch(*values: bytes, producer_id: int = -1, producer_epoch: int = -1,
          base_sequence: int = -1, timestamp: int | None = None,
          transactional: bool = False) -> bytes:
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=producer_epoch,
                                 base_sequence=base_sequence, is_transactional=transactional,
                                 batch_size_limit=1 << 30)
    ts = int(time.time() * 1000) if timestamp is None else timestamp
    for i, value in enumerate(values):
        builder.append(ts, f"k{i}".encode(), value)
    return builder.build()
