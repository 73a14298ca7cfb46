"""Request header v0-2 and response header v0-1 (Kafka's RequestHeader/ResponseHeader)."""

from samsa.protocol.schema import F

REQUEST_HEADER = [
    F("request_api_key", "int16", "0+"),
    F("request_api_version", "int16", "0+"),
    F("correlation_id", "int32", "0+"),
    # Always a classic int16-length string, even in flexible header v2.
    F("client_id", "string", "1+", nullable="1+", default=None, ignorable=True, flexible="none"),
]

RESPONSE_HEADER = [
    F("correlation_id", "int32", "0+"),
]
