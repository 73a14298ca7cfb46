"""Property test: every declared API, every version, request and response, survives a round trip.

Bodies go through encode_body/decode_body; whole frames through encode_request/decode_request
and encode_response/decode_response, with the header bytes checked against the header-version
rules (request v2 when flexible else v1; response v1 when flexible else v0; ApiVersions
responses always v0).
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from samsa.protocol import (
    APIS,
    decode_body,
    decode_request,
    decode_response,
    encode_body,
    encode_request,
    encode_request_buffers,
    encode_response,
    request_header_version,
    response_header_version,
)

from .strategies import all_cases, body_strategy, case_id

CASES = all_cases()
ROUNDTRIP = settings(max_examples=15, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def test_case_list_covers_every_version() -> None:
    # the broker's first 30 APIs plus the admin calls (33, 35, 44, 47, 50, 51, 61, 65, 66, 75)
    assert len(APIS) == 43 and {29, 30, 31, 33, 35, 44, 47, 50, 51, 61, 65, 66, 75} <= set(APIS)
    expected = sum(2 * (a.max_version - a.min_version + 1) for a in APIS.values())
    assert len(CASES) == expected


def _expected_request_header(key: int, version: int, correlation_id: int,
                             client_id: str | None) -> bytes:
    out = struct.pack(">hhi", key, version, correlation_id)
    if client_id is None:
        out += struct.pack(">h", -1)
    else:
        raw = client_id.encode()
        out += struct.pack(">h", len(raw)) + raw  # always int16 length, even in header v2
    if request_header_version(key, version) == 2:
        out += b"\x00"  # empty tagged-field section
    return out


def _expected_response_header(key: int, version: int, correlation_id: int) -> bytes:
    out = struct.pack(">i", correlation_id)
    if response_header_version(key, version) == 1:
        out += b"\x00"
    return out


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
@ROUNDTRIP
@given(data=st.data())
def test_roundtrip(case: tuple[int, str, int], data: Any) -> None:
    key, side, version = case
    api = APIS[key]
    message = data.draw(body_strategy(key, side, version), label="message")
    cls = api.request_class if side == "request" else api.response_class

    body = encode_body(message, version)
    decoded = decode_body(cls, version, body)
    assert decoded == message
    assert encode_body(decoded, version) == body  # re-encoding is byte-identical
    # The broker decodes straight from its receive buffer: memoryview and bytearray work too
    # (records then come back as views of that buffer, which compare equal to bytes).
    assert decode_body(cls, version, memoryview(body)) == message
    assert decode_body(cls, version, bytearray(body)) == message

    correlation_id = data.draw(st.integers(-(2**31), 2**31 - 1), label="correlation_id")
    if side == "request":
        client_id = data.draw(st.none() | st.text(max_size=5), label="client_id")
        frame = encode_request(message, version, correlation_id, client_id)
        assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
        assert b"".join(encode_request_buffers(message, version, correlation_id, client_id)) == frame
        header_bytes = _expected_request_header(key, version, correlation_id, client_id)
        assert frame[4:] == header_bytes + body
        header, decoded_frame_body = decode_request(memoryview(frame)[4:])
        assert (header.request_api_key, header.request_api_version) == (key, version)
        assert (header.correlation_id, header.client_id) == (correlation_id, client_id)
        assert decoded_frame_body == message
    else:
        chunks = encode_response(message, version, correlation_id)
        assert len(chunks) == 1  # bytes records only: no external chunks
        frame = chunks[0]
        assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
        assert frame[4:] == _expected_response_header(key, version, correlation_id) + body
        got_correlation_id, decoded_frame_body = decode_response(key, version,
                                                                 memoryview(frame)[4:])
        assert got_correlation_id == correlation_id
        assert decoded_frame_body == message


@pytest.mark.parametrize("key", sorted(APIS), ids=[APIS[k].name for k in sorted(APIS)])
def test_header_versions(key: int) -> None:
    api = APIS[key]
    for v in range(api.min_version, api.max_version + 1):
        flexible = api.is_flexible(v)
        assert request_header_version(key, v) == (2 if flexible else 1)
        if key == 18:
            # KIP-511: ApiVersions responses always use header v0 so that any client can read
            # the error code of a version the broker does not know.
            assert response_header_version(key, v) == 0
        else:
            assert response_header_version(key, v) == (1 if flexible else 0)


def test_api_versions_flexible_response_header_is_v0() -> None:
    api = APIS[18]
    response = api.response_class(error_code=0, api_keys=[
        api.response_class.ApiVersion(api_key=18, min_version=0, max_version=4)])
    frame = encode_response(response, 3, 7)[0]
    # correlation id, then straight into the body (int16 error code): no tagged-field byte.
    assert frame[4:8] == struct.pack(">i", 7)
    assert frame[8:] == encode_body(response, 3)
