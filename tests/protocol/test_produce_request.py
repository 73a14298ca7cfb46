"""The ProduceRequest fast encoder (samsa.protocol.produce_request) against the generic one.

For every version it serves (v3-v12) the frame's bytes equal the generic encoder's, large records
values are sent by reference as the generic path sends them, and requests it does not expect go
the generic way (same frame, or the same error).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from samsa.protocol import ProduceRequest, decode_request, encode_request, encode_request_buffers
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.frames import _encode_request
from samsa.protocol.produce_request import produce_request_buffers
from samsa.protocol.types import GATHER_MIN, GatherChunks

from .strategies import body_strategy

P = ProduceRequest
API = P.api
assert API is not None
VERSIONS = list(range(3, API.max_version + 1))
SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _generic(request: Any, version: int, correlation_id: int, client_id: str | None) -> list[Any]:
    """encode_request_buffers without the fast path."""
    buf = _encode_request(GatherChunks, request, version, correlation_id, client_id)
    buf[0:4] = (len(buf) - 4 + sum(len(v) for _, v in buf.externals)).to_bytes(4, "big")
    return buf.chunks()


def _joined(buffers: list[Any]) -> bytes:
    return b"".join(bytes(b) for b in buffers)


def _outcome(encode: Any, *args: Any) -> Any:
    try:
        return _joined(encode(*args))
    except Exception as e:  # noqa: BLE001 -- compared below
        return type(e), str(e)


def _request(topics: list[tuple[str, list[tuple[int, Any]]]], txn: str | None = None,
             acks: int = 1, timeout_ms: int = 30000) -> Any:
    return P(transactional_id=txn, acks=acks, timeout_ms=timeout_ms, topic_data=[
        P.TopicProduceData(name=name, partition_data=[
            P.PartitionProduceData(index=i, records=r) for i, r in parts])
        for name, parts in topics])


_RECORDS = st.sampled_from([b"", b"x" * 10, b"y" * 126, b"z" * (GATHER_MIN - 1), b"w" * GATHER_MIN,
                            b"v" * 20000])
_TOPICS = st.lists(st.tuples(st.text(max_size=140),
                             st.lists(st.tuples(st.integers(-(2**31), 2**31 - 1), _RECORDS), max_size=4)),
                   max_size=3)


@pytest.mark.parametrize("version", VERSIONS)
@SETTINGS
@given(topics=_TOPICS, txn=st.none() | st.text(max_size=140), acks=st.sampled_from([-1, 0, 1]),
       timeout=st.integers(0, 2**31 - 1), correlation_id=st.integers(0, 2**31 - 1),
       client_id=st.none() | st.text(max_size=20))
def test_frames_equal_the_generic_encoders(version: int, topics: Any, txn: Any, acks: int, timeout: int,
                                           correlation_id: int, client_id: Any) -> None:
    request = _request(topics, txn, acks, timeout)
    fast = produce_request_buffers(request, version, correlation_id, client_id)
    assert fast is not None
    generic = _generic(request, version, correlation_id, client_id)
    assert _joined(fast) == _joined(generic) == encode_request(request, version, correlation_id, client_id)
    # Large records values are the caller's objects, as in the generic frame.
    big = [p.records for t in request.topic_data for p in t.partition_data if len(p.records) >= GATHER_MIN]
    assert [b for b in fast if any(b is r for r in big)] == big
    header, body = decode_request(_joined(fast)[4:])
    assert header.correlation_id == correlation_id and body == request


@pytest.mark.parametrize("version", VERSIONS)
@SETTINGS
@given(data=st.data())
def test_any_request_encodes_as_the_generic_encoder_does(version: int, data: Any) -> None:
    request = data.draw(body_strategy(ApiKey.PRODUCE, "request", version))
    assert _outcome(encode_request_buffers, request, version, 7, "c") == _outcome(_generic, request, version, 7, "c")


@pytest.mark.parametrize("version", VERSIONS)
def test_unexpected_requests_go_the_generic_way(version: int) -> None:
    tagged = _request([("t", [(0, b"x" * 2000)])])
    tagged.unknown_tags = {5: b"abc"}
    tagged_topic = _request([("t", [(0, b"x" * 2000)])])
    tagged_topic.topic_data[0].unknown_tags = {1: b""}
    cases = [
        _request([("t", [(0, None)])]),  # null records
        _request([(None, [(0, b"x")])]),  # type: ignore[list-item]  # null name: an error
        _request([("t", [(2**31, b"x")])]),  # index out of range: an error
        _request([("t", [(0, b"x")])], acks=2**15),
    ]
    if version >= 9:
        cases += [tagged, tagged_topic]
    for request in cases:
        assert produce_request_buffers(request, version, 1, "c") is None
        assert _outcome(encode_request_buffers, request, version, 1, "c") == \
            _outcome(_generic, request, version, 1, "c")


def test_other_versions_and_messages_are_not_its_business() -> None:
    request = _request([("t", [(0, b"x")])])
    assert produce_request_buffers(request, 2, 1, None) is None
    assert produce_request_buffers(P.TopicProduceData(name="t"), 9, 1, None) is None
