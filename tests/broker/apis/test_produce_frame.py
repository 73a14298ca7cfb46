"""KafkaApis.answer_frame (produce_frame.py) answers the usual Produce request from its frame
with the very bytes the generic route (decode, RequestContext, KafkaApis.handle) sends, leaves
the same log behind, and declines every other request without touching anything."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.broker.apis import BrokerNode, KafkaApis
from samsa.broker.authorizer import AUTHORIZER_CLASS_NAMES
from samsa.broker.log import LogManager
from samsa.broker.request_channel import RequestContext
from samsa.protocol import (
    ProduceRequest,
    decode_request_body,
    decode_request_header,
    encode_request,
)
from tests.broker.apis.conftest import batch

TopicData = ProduceRequest.TopicProduceData
PartitionData = ProduceRequest.PartitionProduceData
NOW_NS = 1_700_000_000_123_000_000


class Sink:
    """The network layer's side of a RequestContext: keeps what would be sent."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.closed = ""

    def send_response(self, conn: Any, chunks: list[Any]) -> None:
        self.sent.append(b"".join(bytes(c) for c in chunks))

    def finish_request(self, conn: Any) -> None:
        self.sent.append(b"")

    def close_connection(self, conn: Any, reason: str) -> None:
        self.closed = reason


class Broker:
    def __init__(self, directory: Path, config: dict[str, Any]) -> None:
        self.logs = LogManager(directory)
        self.apis = KafkaApis(self.logs, node=BrokerNode(node_id=1, port=19092), config=config)

    def close(self) -> None:
        self.apis.close()
        self.logs.close()

    def log_bytes(self, topic: str, partition: int) -> bytes:
        log = self.logs.get_log(topic, partition)
        return b"".join(s.log_path.read_bytes() for s in log.segments)


@pytest.fixture
def brokers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Broker, Broker]]:
    """Two brokers with the same topics: one answers from frames, the other as usual."""
    monkeypatch.setattr(time, "time_ns", lambda: NOW_NS)  # the same append time in both
    pair = (Broker(tmp_path / "fast", {}), Broker(tmp_path / "usual", {}))
    for broker in pair:
        broker.logs.create_topic("t", 2)
        broker.logs.create_topic("lat", 1, {"message.timestamp.type": "LogAppendTime"})
        broker.logs.create_topic("old", 1, {"message.timestamp.before.max.ms": "1000"})
        broker.logs.create_topic("synced", 1, {"flush.messages": "1"})
    yield pair
    for broker in pair:
        broker.close()


def frame_of(request: ProduceRequest, version: int, correlation_id: int = 7) -> bytes:
    return encode_request(request, version, correlation_id, "frame-test")[4:]


def request(topic: str = "t", partition: int = 0, records: bytes | None = None, *,
            acks: int = 1, transactional_id: str | None = None) -> ProduceRequest:
    return ProduceRequest(transactional_id=transactional_id, acks=acks, timeout_ms=30_000,
                          topic_data=[TopicData(name=topic, partition_data=[
                              PartitionData(index=partition,
                                            records=batch(b"v1", b"v2") if records is None
                                            else records)])])


def fast(broker: Broker, frame: bytes) -> bytes | None:
    chunks = broker.apis.answer_frame(memoryview(bytearray(frame)))
    return None if chunks is None else b"".join(bytes(c) for c in chunks)


def usual(broker: Broker, frame: bytes) -> bytes:
    payload = memoryview(bytearray(frame))
    header, pos = decode_request_header(payload)
    sink = Sink()
    ctx = RequestContext(header, decode_request_body(header, payload, pos), "c", "127.0.0.1",
                         "PLAINTEXT", 0.0, len(frame), sink, None)
    broker.apis.handle(ctx)
    [sent] = sink.sent
    return sent


def corrupt(records: bytes) -> bytes:
    damaged = bytearray(records)
    damaged[-1] ^= 0xFF  # a record byte: the CRC no longer matches
    return bytes(damaged)


ANSWERED = {
    "plain": request(),
    "acks all": request(acks=-1),
    "second partition": request(partition=1),
    "log append time": request("lat"),
    "corrupt batch": request(records=corrupt(batch(b"x"))),
    "records too old": request("old", records=batch(b"x", timestamp=1000)),
    "idempotent": request(records=batch(b"x", producer_id=5, producer_epoch=0,
                                        base_sequence=0)),
}


@pytest.mark.parametrize("version", [3, 5, 7, 8, 9, 11, 12])
@pytest.mark.parametrize("case", list(ANSWERED))
def test_answers_as_the_generic_route_does(brokers: tuple[Broker, Broker], case: str,
                                           version: int) -> None:
    frame_broker, usual_broker = brokers
    for correlation_id in (1, 2):  # twice: the second idempotent batch is a duplicate
        frame = frame_of(ANSWERED[case], version, correlation_id)
        answer = fast(frame_broker, frame)
        assert answer is not None, "the usual shape must be answered from the frame"
        assert answer == usual(usual_broker, frame)
    topic = ANSWERED[case].topic_data[0]
    index = topic.partition_data[0].index
    assert frame_broker.log_bytes(topic.name, index) == usual_broker.log_bytes(topic.name, index)


def null_records() -> ProduceRequest:
    return ProduceRequest(transactional_id=None, acks=1, timeout_ms=1, topic_data=[
        TopicData(name="t", partition_data=[PartitionData(index=0, records=None)])])


DECLINED = {
    "acks 0": request(acks=0),
    "acks 2": request(acks=2),
    "transactional id": request(transactional_id="tx"),
    "unknown topic": request("nope"),
    "unknown partition": request(partition=9),
    "internal topic": request("__consumer_offsets"),
    "fsync per append": request("synced"),
    "null records": null_records(),
    "two partitions": ProduceRequest(transactional_id=None, acks=1, timeout_ms=1, topic_data=[
        TopicData(name="t", partition_data=[PartitionData(index=0, records=batch(b"a")),
                                            PartitionData(index=1, records=batch(b"b"))])]),
    "two topics": ProduceRequest(transactional_id=None, acks=1, timeout_ms=1, topic_data=[
        TopicData(name="t", partition_data=[PartitionData(index=0, records=batch(b"a"))]),
        TopicData(name="lat", partition_data=[PartitionData(index=0, records=batch(b"b"))])]),
}


@pytest.mark.parametrize("version", [3, 8, 9, 12])
@pytest.mark.parametrize("case", list(DECLINED))
def test_other_requests_are_declined_untouched(brokers: tuple[Broker, Broker], case: str,
                                               version: int) -> None:
    frame_broker, _ = brokers
    before = {(t, p): frame_broker.log_bytes(t, p) for t, p in (("t", 0), ("t", 1), ("lat", 0),
                                                                 ("synced", 0))}
    assert fast(frame_broker, frame_of(DECLINED[case], version)) is None
    assert before == {key: frame_broker.log_bytes(*key) for key in before}


@pytest.mark.parametrize("version", [0, 2])
def test_versions_before_3_are_declined(brokers: tuple[Broker, Broker], version: int) -> None:
    assert fast(brokers[0], frame_of(request(), version)) is None
    assert brokers[0].log_bytes("t", 0) == b""


@pytest.mark.parametrize("version", [3, 9])
def test_truncated_frames_are_declined(brokers: tuple[Broker, Broker], version: int) -> None:
    frame = frame_of(request(), version)
    for cut in [*range(60), *range(len(frame) - 40, len(frame))]:
        assert fast(brokers[0], frame[:cut]) is None
    assert brokers[0].log_bytes("t", 0) == b""


def test_request_headers_the_generic_decoder_refuses_or_reads_otherwise_are_declined(
        brokers: tuple[Broker, Broker]) -> None:
    frame = frame_of(request(), 9)
    _, body = decode_request_header(memoryview(bytearray(frame)))
    # Client id "frame-test" (10 bytes at 10..20), then the header's tagged fields (one zero).
    assert frame[8:10] == b"\x00\x0a" and body == 21 and frame[20] == 0
    not_utf8 = frame[:10] + b"\xff" * 10 + frame[20:]
    tagged = frame[:20] + bytes([1, 5, 1, 0x42]) + frame[21:]  # one unknown header tag
    for other in (not_utf8, tagged):
        assert fast(brokers[0], other) is None
    assert brokers[0].log_bytes("t", 0) == b""
    assert fast(brokers[0], frame) is not None


def test_tagged_fields_are_declined(brokers: tuple[Broker, Broker]) -> None:
    frame = frame_of(request(), 9)
    assert frame[-1] == 0  # the request's empty tagged fields
    tagged = frame[:-1] + bytes([1, 5, 1, 0x42])  # one unknown tag: id 5, one byte
    assert fast(brokers[0], tagged) is None
    assert fast(brokers[0], frame) is not None  # the same request without it


def test_declined_with_an_authorizer(tmp_path: Path) -> None:
    broker = Broker(tmp_path, {"authorizer.class.name": AUTHORIZER_CLASS_NAMES[0],
                               "super.users": "User:ANONYMOUS"})
    try:
        broker.logs.create_topic("t", 1)
        assert broker.apis.services.authorizer is not None
        assert fast(broker, frame_of(request(), 9)) is None
    finally:
        broker.close()
