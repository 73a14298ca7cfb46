"""The errors of produce-time record validation, and where a batch sits for their messages.

Apart from samsa.broker.log.validator because that module may be compiled (mypyc): the
compiled module and its pure-Python source (which the tests also run) then raise the same
classes, and these stay ordinary Python classes that pickle and subclass as any other error.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from samsa.errors import InvalidRecordError, InvalidTimestampError

__all__ = ["BatchPlace", "RecordTimestampError", "RecordValidationError"]


class BatchPlace(NamedTuple):
    """Where a produced batch sits, formatted only if an error message needs it."""

    pos: int
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"batch at byte {self.pos} of {self.topic}-{self.partition}"


class _WithRecordErrors(Exception):
    """``(batch index, message)`` for each rejected record: the RecordErrors of ProduceResponse
    v8+ (KIP-467), carried by the KafkaError it is mixed into."""

    detail: str | None

    def __init__(self, detail: str | None = None,
                 record_errors: list[tuple[int, str]] | None = None) -> None:
        super().__init__(detail)
        self.record_errors = record_errors or []

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.detail, self.record_errors))


class RecordValidationError(_WithRecordErrors, InvalidRecordError):
    """INVALID_RECORD with the rejected records."""


class RecordTimestampError(_WithRecordErrors, InvalidTimestampError):
    """INVALID_TIMESTAMP with the rejected records."""
