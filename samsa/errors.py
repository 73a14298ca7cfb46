"""Kafka error codes as exceptions, one class per code, as in the Java client.

Every class carries ``code`` (the wire error code), ``name`` (Kafka's upper-case name),
``message`` (Kafka's description) and ``retriable``.  ``for_code(n)`` maps a wire code to its class.
"""

from __future__ import annotations


class KafkaError(Exception):
    """Base of every error Samsa raises."""

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"
    message: str = "The server experienced an unexpected error when processing the request."
    retriable: bool = False

    def __init__(self, detail: str | None = None) -> None:
        self.detail = detail
        super().__init__(detail if detail is not None else self.message)


class BrokerResponseError(KafkaError):
    """An error code returned by a broker."""


class CorruptRecordError(BrokerResponseError):
    """A record batch failed validation (bad CRC, size, magic or structure); names offset and reason."""

    code = 2
    name = "CORRUPT_MESSAGE"
    message = (
        "This message has failed its CRC checksum, exceeds the valid size, has a null key for a "
        "compacted topic, or is otherwise corrupt."
    )
    retriable = True


class UnsupportedVersionError(BrokerResponseError):
    """An API key or version is not supported (by us or by the peer)."""

    code = 35
    name = "UNSUPPORTED_VERSION"
    message = "The version of API is not supported."
    retriable = False
