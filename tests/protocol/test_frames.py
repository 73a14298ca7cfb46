"""Frames and the codec's error paths: unknown keys/versions, truncated or malformed bytes,
fields a version lacks, unknown tagged fields, and external (zero-copy) records chunks."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import samsa.protocol
from samsa.errors import KafkaError, UnsupportedVersionError
from samsa.protocol import (
    APIS,
    APIS_BY_NAME,
    ApiKey,
    ProtocolDecodeError,
    api_for,
    decode_body,
    decode_request,
    decode_request_body,
    decode_request_header,
    decode_response,
    encode_body,
    encode_request,
    encode_request_buffers,
    encode_response,
    encode_response_bytes,
    peek_correlation_id,
)
from samsa.protocol.types import GATHER_MIN

from .strategies import all_cases, body_strategy, case_id

CASES = all_cases()

# The message classes are generated at import (samsa.protocol exports them by Kafka's names);
# fetch them through the registry so that type checkers see them as Any.
ApiVersionsRequest: Any = APIS_BY_NAME["ApiVersions"].request_class
ApiVersionsResponse: Any = APIS_BY_NAME["ApiVersions"].response_class
FetchRequest: Any = APIS_BY_NAME["Fetch"].request_class
FetchResponse: Any = APIS_BY_NAME["Fetch"].response_class
MetadataRequest: Any = APIS_BY_NAME["Metadata"].request_class
ProduceRequest: Any = APIS_BY_NAME["Produce"].request_class
ProduceResponse: Any = APIS_BY_NAME["Produce"].response_class


def test_message_classes_are_exported_by_kafka_name() -> None:
    for api in APIS.values():
        assert getattr(samsa.protocol, f"{api.name}Request") is api.request_class
        assert getattr(samsa.protocol, f"{api.name}Response") is api.response_class
        assert f"{api.name}Request" in samsa.protocol.__all__
    assert ProduceRequest.TopicProduceData is ProduceRequest._schema.fields[3].item.cls


def _raw_request_header(key: int, version: int, correlation_id: int, client_id: bytes | None,
                        tags: bytes = b"") -> bytes:
    cid = struct.pack(">h", -1) if client_id is None else struct.pack(">h", len(client_id)) + client_id
    return struct.pack(">hhi", key, version, correlation_id) + cid + tags


# -- unknown API keys and versions ---------------------------------------------------------------

def test_unsupported_version_error_is_kafka_code_35() -> None:
    assert issubclass(UnsupportedVersionError, KafkaError)
    assert UnsupportedVersionError.code == 35


def test_unknown_api_key_names_key_and_version() -> None:
    with pytest.raises(UnsupportedVersionError, match=r"unknown API key 9999 \(version 3\)"):
        api_for(9999, 3)
    with pytest.raises(UnsupportedVersionError, match=r"9999.*version 0"):
        decode_response(9999, 0, b"\x00\x00\x00\x01")
    payload = _raw_request_header(9999, 2, 5, b"cli") + b"\x00\x00"
    with pytest.raises(UnsupportedVersionError, match=r"9999.*version 2"):
        decode_request(payload)


def test_unknown_version_names_api_key_and_version() -> None:
    pattern = r"Produce \(API key 0\) version 99 is not supported"
    with pytest.raises(UnsupportedVersionError, match=pattern):
        api_for(ApiKey.PRODUCE, 99)
    with pytest.raises(UnsupportedVersionError, match=pattern):
        encode_request(ProduceRequest(), 99, 1, "c")
    with pytest.raises(UnsupportedVersionError, match=pattern):
        encode_response(ProduceResponse(), 99, 1)
    with pytest.raises(UnsupportedVersionError, match=pattern):
        encode_body(ProduceRequest(), 99)
    with pytest.raises(UnsupportedVersionError, match=pattern):
        decode_body(ProduceRequest, 99, b"")
    with pytest.raises(UnsupportedVersionError, match=pattern):
        decode_response(ApiKey.PRODUCE, 99, b"\x00\x00\x00\x01")
    with pytest.raises(UnsupportedVersionError, match=pattern):
        decode_request(_raw_request_header(0, 99, 1, None))
    with pytest.raises(UnsupportedVersionError, match=r"version -1"):
        api_for(ApiKey.PRODUCE, -1)


@pytest.mark.parametrize(("key", "version"), [(18, 99), (18, 5), (9999, 0), (0, 13)])
def test_request_header_of_unknown_key_or_version_still_parses(key: int, version: int) -> None:
    # The broker answers an ApiVersions request of any version (KIP-511), so the header must
    # parse even when the codec cannot read the body; the body is left untouched.
    header_bytes = _raw_request_header(key, version, 1234, b"rdkafka")
    payload = header_bytes + b"\x00\x05junk"
    header, pos = decode_request_header(payload)
    assert (header.request_api_key, header.request_api_version) == (key, version)
    assert (header.correlation_id, header.client_id) == (1234, "rdkafka")
    assert pos == len(header_bytes)
    null_client = _raw_request_header(key, version, 7, None)
    header, pos = decode_request_header(null_client)
    assert header.client_id is None and pos == len(null_client)


def test_request_header_v2_tagged_fields_are_consumed() -> None:
    # A known flexible version: header v2 ends with a tagged-field section (here one unknown tag).
    tags = b"\x01" + b"\x05" + b"\x02" + b"hi"
    payload = _raw_request_header(18, 3, 9, b"c", tags) + encode_body(
        ApiVersionsRequest(client_software_name="x", client_software_version="1"), 3)
    header, pos = decode_request_header(payload)
    assert pos == len(_raw_request_header(18, 3, 9, b"c", tags))
    body = decode_request_body(header, payload, pos)
    assert body == ApiVersionsRequest(client_software_name="x", client_software_version="1")


def test_short_request_header() -> None:
    full = _raw_request_header(3, 1, 1, b"client")
    for cut in range(len(full)):
        with pytest.raises(ProtocolDecodeError):
            decode_request_header(full[:cut])
    with pytest.raises(ProtocolDecodeError, match="UTF-8"):
        decode_request_header(_raw_request_header(3, 1, 1, b"\xff\xfe"))
    flexible = _raw_request_header(3, 9, 1, b"client", b"\x00")
    with pytest.raises(ProtocolDecodeError):
        decode_request_header(flexible[:-1])  # missing tagged-field count


def test_response_header_v1_tagged_fields_are_consumed() -> None:
    body = encode_body(ProduceResponse(throttle_time_ms=5), 9)
    plain = struct.pack(">i", 77) + b"\x00" + body
    assert decode_response(ApiKey.PRODUCE, 9, plain) == (77, ProduceResponse(throttle_time_ms=5))
    # An unknown tag in the header (tag 3, two bytes) is skipped, not taken for the body.
    tagged = struct.pack(">i", 77) + b"\x01\x03\x02hi" + body
    assert decode_response(ApiKey.PRODUCE, 9, tagged) == (77, ProduceResponse(throttle_time_ms=5))


def test_request_header_of_a_known_version_is_a_plain_request_header() -> None:
    frame = encode_request(ProduceRequest(acks=1), 9, 5, "me")[4:]
    header, _ = decode_request_header(frame)
    assert header == samsa.protocol.RequestHeader(request_api_key=ApiKey.PRODUCE,
                                                  request_api_version=9,
                                                  correlation_id=5, client_id="me")
    assert header.unknown_tags is None


def test_peek_correlation_id() -> None:
    chunks = encode_response(ProduceResponse(), 3, -42)
    assert peek_correlation_id(chunks[0][4:]) == -42


# -- truncated and malformed bodies --------------------------------------------------------------

MALFORMED = settings(max_examples=4, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
@MALFORMED
@given(data=st.data())
def test_truncated_or_corrupted_body_raises_protocol_decode_error(case: tuple[int, str, int],
                                                                  data: Any) -> None:
    key, side, version = case
    api = APIS[key]
    cls = api.request_class if side == "request" else api.response_class
    message = data.draw(body_strategy(key, side, version), label="message")
    body = encode_body(message, version)
    # Every byte of a body is read, so every proper prefix must fail -- cleanly.
    for cut in range(len(body)):
        with pytest.raises(ProtocolDecodeError):
            decode_body(cls, version, body[:cut])
    # Overwriting bytes with junk either still parses or raises ProtocolDecodeError, never
    # IndexError/struct.error/MemoryError.
    mutated = bytearray(body)
    for _ in range(data.draw(st.integers(1, 4), label="n_mutations")):
        if not mutated:
            break
        at = data.draw(st.integers(0, len(mutated) - 1), label="at")
        mutated[at] = data.draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF, 0x01]), label="byte")
    try:
        decode_body(cls, version, bytes(mutated))
    except ProtocolDecodeError:
        pass
    # Whole frames.
    if side == "request":
        frame = encode_request(message, version, 1, "c")[4:]
        for cut in range(len(frame)):
            with pytest.raises(ProtocolDecodeError):
                decode_request(frame[:cut])
    else:
        frame = encode_response(message, version, 1)[0][4:]
        for cut in range(len(frame)):
            with pytest.raises(ProtocolDecodeError):
                decode_response(key, version, frame[:cut])


@settings(max_examples=300, deadline=None)
@given(key=st.sampled_from(sorted(APIS)), data=st.data(), junk=st.binary(max_size=64))
def test_random_bytes_never_crash_the_decoder(key: int, data: Any, junk: bytes) -> None:
    api = APIS[key]
    version = data.draw(st.integers(api.min_version, api.max_version))
    for cls in (api.request_class, api.response_class):
        try:
            decode_body(cls, version, junk)
        except ProtocolDecodeError:
            pass


def test_huge_counts_are_rejected_without_allocating() -> None:
    # Metadata v1 request: int32 topic count, claiming 2**31-1 topics in a 4-byte body.
    with pytest.raises(ProtocolDecodeError, match="claims"):
        decode_body(MetadataRequest, 1, b"\x7f\xff\xff\xff")
    # Flexible (v9): compact array length varint = 2**32.
    with pytest.raises(ProtocolDecodeError):
        decode_body(MetadataRequest, 9, b"\x80\x80\x80\x80\x10\x00\x00\x00")


# -- fields the version lacks ---------------------------------------------------------------------

def test_non_ignorable_field_absent_from_version_is_refused() -> None:
    request = ProduceRequest(transactional_id="tx-1", acks=-1, timeout_ms=1000)
    with pytest.raises(UnsupportedVersionError,
                       match=r"transactional_id = 'tx-1' cannot be sent at version 2"):
        encode_body(request, 2)
    with pytest.raises(UnsupportedVersionError, match="transactional_id"):
        encode_request(request, 2, 1, "c")
    assert decode_body(ProduceRequest, 3, encode_body(request, 3)) == request
    # The default value is fine at any version.
    encode_body(ProduceRequest(transactional_id=None), 0)


def test_nested_non_ignorable_field_absent_from_version_is_refused() -> None:
    partition = FetchRequest.FetchPartition(partition=0, fetch_offset=5, last_fetched_epoch=3)
    request = FetchRequest(topics=[FetchRequest.FetchTopic(topic="t", partitions=[partition])])
    with pytest.raises(UnsupportedVersionError, match=r"last_fetched_epoch = 3 .* version 11"):
        encode_body(request, 11)
    assert decode_body(FetchRequest, 12, encode_body(request, 12)) == request
    forgotten = FetchRequest(forgotten_topics_data=[FetchRequest.ForgottenTopic(topic="t")])
    with pytest.raises(UnsupportedVersionError, match="forgotten_topics_data"):
        encode_body(forgotten, 6)


def test_tagged_field_absent_from_version_is_refused_unless_ignorable() -> None:
    endpoint = ProduceResponse.NodeEndpoint(node_id=1, host="h", port=9092)
    with pytest.raises(UnsupportedVersionError, match="node_endpoints"):
        encode_body(ProduceResponse(node_endpoints=[endpoint]), 9)
    # FetchRequest.cluster_id is tagged and ignorable: silently dropped before v12.
    body = encode_body(FetchRequest(cluster_id="c"), 11)
    assert decode_body(FetchRequest, 11, body).cluster_id is None


def test_ignorable_field_absent_from_version_is_dropped() -> None:
    response = ProduceResponse(throttle_time_ms=250)
    decoded = decode_body(ProduceResponse, 0, encode_body(response, 0))
    assert decoded.throttle_time_ms == 0
    assert decode_body(ProduceResponse, 1, encode_body(response, 1)).throttle_time_ms == 250


# -- tagged fields --------------------------------------------------------------------------------

def test_unknown_tagged_fields_survive_decode_encode() -> None:
    # ApiVersions v3 request: two compact strings, then tags 5 and 900 (unknown to us).
    tags = b"\x02" + b"\x05\x01\x07" + b"\x84\x07\x03abc"
    body = b"\x02a" + b"\x021" + tags
    decoded = decode_body(ApiVersionsRequest, 3, body)
    assert decoded.client_software_name == "a" and decoded.client_software_version == "1"
    assert decoded.unknown_tags == {5: b"\x07", 900: b"abc"}
    assert encode_body(decoded, 3) == body


def test_unknown_tags_mix_with_known_ones_in_tag_order() -> None:
    # ApiVersions v3 response, with unknown tag 2 between known tags... known tags are 0-3, so
    # use tag 7 at top level and an unknown tag inside an api_keys element.
    response = ApiVersionsResponse(error_code=0, api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=ApiKey.PRODUCE, min_version=0, max_version=12)],
        finalized_features_epoch=5)
    response.unknown_tags = {7: b"\x01\x02"}
    response.api_keys[0].unknown_tags = {3: b"z"}
    body = encode_body(response, 3)
    decoded = decode_body(ApiVersionsResponse, 3, body)
    assert decoded == response
    assert decoded.unknown_tags == {7: b"\x01\x02"}
    assert decoded.api_keys[0].unknown_tags == {3: b"z"}
    assert encode_body(decoded, 3) == body
    # Tags are written in ascending order: finalized_features_epoch (1) before the unknown 7.
    tail = body[-(1 + 2 + 8 + 2 + 2):]
    assert tail[0] == 2  # two tagged fields
    assert tail[1:3] == b"\x01\x08" and tail[11:13] == b"\x07\x02"


def test_tagged_field_with_default_value_is_not_written() -> None:
    assert encode_body(ApiVersionsResponse(), 3) == b"\x00\x00" + b"\x01" + b"\x00\x00\x00\x00" + b"\x00"
    with_epoch = encode_body(ApiVersionsResponse(finalized_features_epoch=3), 3)
    assert with_epoch.endswith(b"\x01" + b"\x01\x08" + struct.pack(">q", 3))


def test_tagged_field_payload_running_past_the_end() -> None:
    body = b"\x02a" + b"\x021" + b"\x01\x05\x09abc"  # tag 5 claims 9 bytes, 3 left
    with pytest.raises(ProtocolDecodeError, match="runs past the end"):
        decode_body(ApiVersionsRequest, 3, body)


# -- external records chunks (zero-copy sends) ----------------------------------------------------

class FakeSlice:
    """Stands in for the broker's FileSlice: a length and a read(), nothing bytes-like."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.reads = 0

    def __len__(self) -> int:
        return len(self.data)

    def read(self) -> bytes:
        self.reads += 1
        return self.data


TOPIC_ID = uuid.UUID(int=12345)


def _fetch_response(records: list[Any], version: int = 12) -> Any:
    partitions = [FetchResponse.PartitionData(partition_index=i, high_watermark=10, records=r)
                  for i, r in enumerate(records)]
    # Fetch v13+ names topics by id only.
    topic = (FetchResponse.FetchableTopicResponse(topic_id=TOPIC_ID, partitions=partitions)
             if version >= 13 else
             FetchResponse.FetchableTopicResponse(topic="t", partitions=partitions))
    return FetchResponse(responses=[topic])


def _join(chunks: list[Any]) -> bytes:
    return b"".join(c if isinstance(c, bytes) else c.read() for c in chunks)


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_external_records_are_separate_chunks(version: int) -> None:
    first, second = FakeSlice(b"A" * 100), FakeSlice(b"B" * 300)
    response = _fetch_response([first, b"inline", second, None], version)
    chunks = encode_response(response, version, 77)
    assert [type(c) for c in chunks] == [bytes, FakeSlice, bytes, FakeSlice, bytes]
    assert chunks[1] is first and chunks[3] is second
    assert first.reads == 0 and second.reads == 0  # not copied while encoding
    total = sum(len(c) for c in chunks)
    assert struct.unpack_from(">i", chunks[0])[0] == total - 4  # the size counts the externals
    joined = _join(chunks)
    as_bytes = _fetch_response([b"A" * 100, b"inline", b"B" * 300, None], version)
    assert joined == encode_response(as_bytes, version, 77)[0]
    correlation_id, decoded = decode_response(ApiKey.FETCH, version, joined[4:])
    assert correlation_id == 77 and decoded == as_bytes


def test_external_records_in_bytes_helpers() -> None:
    response = _fetch_response([FakeSlice(b"xyz")])
    expected = encode_response(_fetch_response([b"xyz"]), 12, 1)[0]
    assert encode_response_bytes(response, 12, 1) == expected
    assert encode_body(_fetch_response([FakeSlice(b"xyz")]), 12) == encode_body(
        _fetch_response([b"xyz"]), 12)


def test_external_records_in_a_request() -> None:
    def produce(records: Any) -> Any:
        partition = ProduceRequest.PartitionProduceData(index=0, records=records)
        return ProduceRequest(acks=-1, timeout_ms=30000, topic_data=[
            ProduceRequest.TopicProduceData(name="t", partition_data=[partition])])

    for version in (3, 9):
        frame = encode_request(produce(FakeSlice(b"batch")), version, 3, "p")
        assert frame == encode_request(produce(b"batch"), version, 3, "p")


@pytest.mark.parametrize("version", range(3, 13))
def test_request_buffers_carry_large_records_uncopied(version: int) -> None:
    # A Produce request goes out as a gather write: record batches of GATHER_MIN bytes or more
    # are the caller's own objects between views of the encoded frame; smaller ones are
    # inlined, and external values are read.
    big, other = b"B" * GATHER_MIN, bytearray(b"C" * 5000)
    partitions = [ProduceRequest.PartitionProduceData(index=i, records=r)
                  for i, r in enumerate([big, b"small", None, other, FakeSlice(b"slice")])]
    request = ProduceRequest(acks=1, timeout_ms=30000, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=partitions)])
    buffers = encode_request_buffers(request, version, 3, "p")
    assert b"".join(buffers) == encode_request(request, version, 3, "p")
    assert [b for b in buffers if b is big or b is other] == [big, other]
    assert b"small" not in buffers
    # A request without large records is one buffer.
    small = ProduceRequest(acks=1, timeout_ms=30000, topic_data=[])
    assert encode_request_buffers(small, version, 4, None) == [encode_request(small, version, 4, None)]


def test_a_null_non_nullable_field_reads_as_empty_in_a_response_only() -> None:
    # librdkafka's mock cluster answers a failed SyncGroup with a null assignment: the client
    # must still see the error code (and rejoin) rather than drop the connection.
    body = struct.pack(">ihi", 0, 27, -1)  # throttle 0, REBALANCE_IN_PROGRESS, null bytes
    frame = struct.pack(">i", 9) + body
    correlation_id, response = decode_response(ApiKey.SYNC_GROUP, 3, frame)
    assert (correlation_id, response.error_code, response.assignment) == (9, 27, b"")
    # The broker's request parsing stays strict: a null member id is refused.
    request = struct.pack(">h", 1) + b"g" + struct.pack(">i", 1) + struct.pack(">h", -1)
    request += struct.pack(">h", -1) + struct.pack(">i", 0)
    SyncGroupRequest = APIS_BY_NAME["SyncGroup"].request_class
    with pytest.raises(ProtocolDecodeError, match="non-nullable string 'member_id' was null"):
        decode_body(SyncGroupRequest, 3, request)
