"""Every served API at every served version has an error response (Kafka's
AbstractRequest.getErrorResponse) that the codec writes and that carries the error in every
error field it has: what KafkaApis answers when a handler raises."""

from __future__ import annotations

from typing import Any

import pytest

from samsa.broker.apis.error_responses import error_response
from samsa.broker.apis.versions import SERVED
from samsa.protocol import ApiKey, api_for, decode_response, encode_response_bytes
from samsa.protocol.message import Message

UNKNOWN_SERVER_ERROR = -1
# DescribeLogDirsRequest.getErrorResponse sets only the top-level code, which v0-2 lack.
NO_ERROR_FIELD = {(ApiKey.DESCRIBE_LOG_DIRS, v) for v in range(3)}


def error_codes(message: Any, version: int) -> list[int]:
    if isinstance(message, list):
        return [c for item in message for c in error_codes(item, version)]
    if not isinstance(message, Message):
        return []
    return [c for field in message._schema.fields if version in field.versions
            for c in ([getattr(message, field.name)] if field.name == "error_code"
                      else error_codes(getattr(message, field.name), version))]


@pytest.mark.parametrize(("key", "version"), [
    (key, v) for key, (low, high) in SERVED.items() for v in range(low, high + 1)],
    ids=lambda x: x.name if isinstance(x, ApiKey) else f"v{x}")
def test_every_served_version_has_an_error_response(key: ApiKey, version: int) -> None:
    api = api_for(key)
    request = api.request_class()
    if key == ApiKey.PRODUCE:
        request.acks = -1
    response = error_response(int(key), version, request, UNKNOWN_SERVER_ERROR)
    assert response is not None and response.api.key == key
    frame = encode_response_bytes(response, version, 7)
    correlation_id, decoded = decode_response(int(key), version, frame[4:])
    assert correlation_id == 7
    codes = error_codes(decoded, version)
    assert set(codes) == ({UNKNOWN_SERVER_ERROR} if codes else set())
    if (key, version) not in NO_ERROR_FIELD and not any(
            f.kind == "array" for f in api.request_schema.fields if version in f.versions):
        # Nothing named in the request: the error must be at the top level.
        assert codes == [UNKNOWN_SERVER_ERROR]


def test_produce_with_acks_0_has_no_error_response() -> None:
    request = api_for(ApiKey.PRODUCE).request_class(acks=0)
    assert error_response(int(ApiKey.PRODUCE), 7, request, UNKNOWN_SERVER_ERROR) is None
