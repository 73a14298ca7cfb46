"""Turning exceptions into protocol error codes."""

from __future__ import annotations

import logging

from samsa.errors import BrokerResponseError, KafkaError, UnknownServerError

log = logging.getLogger(__name__)

NONE = 0
UNKNOWN_SERVER_ERROR = UnknownServerError.code


def code_for(exc: BaseException, what: str) -> int:
    """The wire code for an error raised while handling ``what``; anything that is not a
    Kafka error is logged with its traceback and answered UNKNOWN_SERVER_ERROR."""
    if isinstance(exc, BrokerResponseError) or (isinstance(exc, KafkaError) and exc.code >= 0):
        return exc.code
    log.error("unexpected error while handling %s", what, exc_info=exc)
    return UNKNOWN_SERVER_ERROR


def message_for(exc: BaseException) -> str:
    detail = getattr(exc, "detail", None)
    return detail if isinstance(detail, str) else str(exc)
