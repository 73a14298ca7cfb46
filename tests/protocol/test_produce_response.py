"""The ProduceResponse fast decoder (samsa.protocol.produce_response) against the generic one.

For every version it serves (v3-v12): any response the generic codec writes, the usual answers
the fast path reads itself, and truncated or corrupted frames decode to the same objects (types,
fields and unknown tags compared) or fail with the same error.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from samsa.protocol import ProduceResponse, decode_response, encode_body, encode_response_bytes
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import struct_codec
from samsa.protocol.message import Message
from samsa.protocol.produce_response import (
    FIRST_FAST_VERSION,
    _classic_decoder,
    _flexible_decoder,
    produce_response_decoder,
)
from samsa.protocol.types import ProtocolDecodeError

from .strategies import body_strategy

R = ProduceResponse
API = R.api
assert API is not None
VERSIONS = list(range(FIRST_FAST_VERSION, API.max_version + 1))
SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _generic(version: int) -> Any:
    return struct_codec(API.response_schema, version, API.is_flexible(version))[1]


def _fast_path(version: int) -> Any:
    return _flexible_decoder(version) if version >= 9 else _classic_decoder(version)


def _same(a: Any, b: Any, where: str = "body") -> None:
    """Equal types and values all the way down, unknown tags included (Message.__eq__ skips them)."""
    assert type(a) is type(b), where
    if isinstance(a, Message):
        for name in (*a._field_names, "unknown_tags"):
            _same(getattr(a, name), getattr(b, name), f"{where}.{name}")
    elif isinstance(a, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def _outcome(decode: Any, buf: Any) -> Any:
    try:
        return decode(buf, 0)
    except Exception as e:  # noqa: BLE001 -- compared below
        return type(e), str(e)


def _check(version: int, body: bytes) -> None:
    fast = _outcome(produce_response_decoder(version, _generic(version)), body)
    generic = _outcome(_generic(version), body)
    if isinstance(generic, tuple) and isinstance(generic[0], type):
        assert fast == generic
    else:
        _same(fast[0], generic[0])
        assert fast[1] == generic[1]


def _usual(version: int, topics: list[tuple[str, list[tuple[int, int, int, int, int]]]],
           throttle: int = 0) -> Any:
    """A response as brokers usually answer: no error message, no record errors, no tags."""
    return R(responses=[
        R.TopicProduceResponse(name=name, partition_responses=[
            R.PartitionProduceResponse(index=i, error_code=e, base_offset=b, log_append_time_ms=t,
                                       log_start_offset=s if version >= 5 else -1)
            for i, e, b, t, s in parts])
        for name, parts in topics], throttle_time_ms=throttle)


_INT32 = st.integers(-(2**31), 2**31 - 1)
_INT64 = st.integers(-(2**63), 2**63 - 1)
_PARTITION = st.tuples(_INT32, st.integers(-(2**15), 2**15 - 1), _INT64, _INT64, _INT64)
_TOPICS = st.lists(st.tuples(st.text(max_size=140), st.lists(_PARTITION, max_size=4)), max_size=3)


@pytest.mark.parametrize("version", VERSIONS)
@SETTINGS
@given(data=st.data())
def test_any_response_decodes_as_the_generic_decoder_does(version: int, data: Any) -> None:
    body = encode_body(data.draw(body_strategy(ApiKey.PRODUCE, "response", version)), version)
    _check(version, body)


@pytest.mark.parametrize("version", VERSIONS)
@SETTINGS
@given(topics=_TOPICS, throttle=_INT32)
def test_usual_responses_take_the_fast_path(version: int, topics: Any, throttle: int) -> None:
    response = _usual(version, topics, throttle)
    body = encode_body(response, version)
    result = _fast_path(version)(body, 0)
    assert result is not None  # read without the generic decoder
    _same(result[0], _generic(version)(body, 0)[0])
    assert result[1] == len(body)
    _same(result[0], response)


@pytest.mark.parametrize("version", VERSIONS)
def test_many_partitions_and_long_names(version: int) -> None:
    # Counts and lengths of 127 and more take multi-byte varints in flexible versions.
    topics = [("t" * 200, [(i, 0, i * 1000, -1, 0) for i in range(130)]),
              ("é" * 70, [(7, 0, 1, 2, 3)])]
    body = encode_body(_usual(version, topics * 70), version)
    assert _fast_path(version)(body, 0) is not None
    _check(version, body)


@pytest.mark.parametrize("version", [v for v in VERSIONS if v >= 8])  # (before v8 all are usual)
def test_unusual_answers_go_the_generic_way(version: int) -> None:
    errors = [R.BatchIndexAndErrorMessage(batch_index=3, batch_index_error_message="bad")]
    cases = [
        R(responses=[R.TopicProduceResponse(name="t", partition_responses=[
            R.PartitionProduceResponse(index=0, error_code=87, base_offset=-1, record_errors=errors,
                                       error_message="invalid record")])]),
    ]
    if version >= 10:  # KIP-951's tagged fields
        cases.append(R(responses=[R.TopicProduceResponse(name="t", partition_responses=[
            R.PartitionProduceResponse(index=0, error_code=6, base_offset=-1,
                                       current_leader=R.LeaderIdAndEpoch(leader_id=2, leader_epoch=5))])],
          node_endpoints=[R.NodeEndpoint(node_id=2, host="h", port=9092, rack=None)]))
    for response in cases:
        body = encode_body(response, version)
        assert _fast_path(version)(body, 0) is None
        _check(version, body)
        _same(decode_response(ApiKey.PRODUCE, version,
                              encode_response_bytes(response, version, 9)[4:])[1],
              _generic(version)(body, 0)[0])


@pytest.mark.parametrize("version", VERSIONS)
def test_truncated_and_corrupted_frames_fail_as_the_generic_decoder_does(version: int) -> None:
    topics = [("topic", [(0, 0, 5, -1, 0), (1, 0, 9, -1, 0)]), ("t2", [(3, 0, 1, 2, 3)])]
    body = encode_body(_usual(version, topics, 7), version)
    for end in range(len(body)):
        _check(version, body[:end])
        _check(version, memoryview(body)[:end])  # frames arrive as memoryviews too
    rng = random.Random(version)
    for _ in range(300):
        corrupt = bytearray(body)
        for _ in range(rng.randint(1, 3)):
            corrupt[rng.randrange(len(corrupt))] = rng.choice([0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        _check(version, bytes(corrupt))


def test_decode_response_uses_it_and_raises_the_generic_errors() -> None:
    frame = encode_response_bytes(_usual(10, [("t", [(0, 0, 5, -1, 0)])]), 10, 42)[4:]
    correlation_id, body = decode_response(ApiKey.PRODUCE, 10, frame)
    assert correlation_id == 42 and body.responses[0].partition_responses[0].base_offset == 5
    with pytest.raises(ProtocolDecodeError, match="ProduceResponse v10 does not parse"):
        decode_response(ApiKey.PRODUCE, 10, frame[:-3])


def test_other_versions_keep_the_generic_decoder() -> None:
    generic = _generic(2)
    assert produce_response_decoder(2, generic) is generic
