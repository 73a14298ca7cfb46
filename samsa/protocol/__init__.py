"""The Kafka wire protocol: messages declared once as data, one generic codec.

Request and response classes are named as in Kafka (``ProduceRequest``, ``FetchResponse``, ...)
and importable from here; nested structs hang off them (``ProduceRequest.TopicProduceData``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.protocol.api_keys import ApiKey
from samsa.protocol.apis import APIS, APIS_BY_NAME, api_for
from samsa.protocol.frames import (
    RequestHeader,
    ResponseHeader,
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
    request_header_version,
    response_header_version,
)
from samsa.protocol.message import Message
from samsa.protocol.schema import Api
from samsa.protocol.types import ProtocolDecodeError

__all__ = [
    "APIS", "APIS_BY_NAME", "Api", "ApiKey", "Message", "ProtocolDecodeError", "RequestHeader",
    "ResponseHeader", "api_for", "decode_body", "decode_request", "decode_request_body",
    "decode_request_header", "decode_response", "encode_body", "encode_request",
    "encode_request_buffers", "encode_response", "encode_response_bytes", "peek_correlation_id",
    "request_header_version", "response_header_version",
]

_CLASSES: dict[str, Any] = {}
for _api in APIS.values():
    _CLASSES[_api.request_class.__name__] = _api.request_class
    _CLASSES[_api.response_class.__name__] = _api.response_class
globals().update(_CLASSES)
if TYPE_CHECKING:  # their types, generated from the same declarations (samsa/protocol/stubs.py)
    from samsa.protocol._classes import *
__all__.extend(sorted(_CLASSES))
