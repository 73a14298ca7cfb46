from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.broker.apis.produce_response import success_frame
from samsa.protocol import ApiKey, ProduceResponse, decode_response, encode_response

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
TOPIC = st.text("abcXYZ019._-", min_size=1, max_size=249)


def generic(version: int, correlation_id: int, topic: str, index: int, base_offset: int,
            append_time: int, start_offset: int) -> bytes:
    response = ProduceResponse(throttle_time_ms=0, responses=[
        ProduceResponse.TopicProduceResponse(name=topic, partition_responses=[
            ProduceResponse.PartitionProduceResponse(
                index=index, error_code=0, base_offset=base_offset,
                log_append_time_ms=append_time, log_start_offset=start_offset,
                record_errors=[], error_message=None)])])
    return b"".join(encode_response(response, version, correlation_id))


@pytest.mark.parametrize("version", range(3, 13))
@settings(max_examples=60, deadline=None)
@given(correlation_id=INT32, topic=TOPIC, index=INT32, base_offset=INT64, append_time=INT64,
       start_offset=INT64)
def test_template_frame_is_what_the_generic_encoder_writes(
        version: int, correlation_id: int, topic: str, index: int, base_offset: int,
        append_time: int, start_offset: int) -> None:
    args = (version, correlation_id, topic, index, base_offset, append_time, start_offset)
    assert success_frame(*args) == generic(*args)


@pytest.mark.parametrize("version", [3, 9, 12])
def test_template_frame_decodes_to_the_values(version: int) -> None:
    frame = success_frame(version, 77, "orders", 3, 1234, -1, 10)
    got_id, body = decode_response(ApiKey.PRODUCE, version, frame[4:])
    partition = body.responses[0].partition_responses[0]
    assert got_id == 77 and body.responses[0].name == "orders"
    assert (partition.index, partition.base_offset, partition.log_append_time_ms) == (3, 1234, -1)
    assert partition.log_start_offset == (10 if version >= 5 else -1)


def test_template_cache_stays_bounded_with_client_chosen_topic_names() -> None:
    from samsa.broker.apis import produce_response

    for i in range(10_001):
        success_frame(9, i, f"many-{i}", 0, i, -1, 0)
    assert 0 < len(produce_response._templates) <= 10_000
    assert success_frame(9, 5, "many-10000", 2, 7, -1, 0) == generic(9, 5, "many-10000", 2, 7, -1, 0)
    assert success_frame(9, 5, "many-1", 2, 7, -1, 0) == generic(9, 5, "many-1", 2, 7, -1, 0)
