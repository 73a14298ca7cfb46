"""Producer interceptors (``interceptor.classes``), as Kafka's ``ProducerInterceptor``.

An interceptor sees every record before it is serialized and partitioned (``on_send``, which
returns the record to send, possibly a new one) and every acknowledgement
(``on_acknowledgement(metadata, exception)``, called on the Sender thread just before the
user's callback, so it must be quick).

:class:`ProducerInterceptors` runs a list of them in order and, as Java does, logs and
swallows their exceptions: a failing ``on_send`` leaves the record as the previous
interceptor returned it; a failing ``on_acknowledgement`` does not stop the others.

Records are whatever the producer passes (its ProducerRecord: ``topic`` and ``partition``
attributes are used for error reports); interceptors receive and return the same type.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Protocol, TypeVar, runtime_checkable

from samsa.producer.future import RecordMetadata

__all__ = ["ProducerInterceptor", "ProducerInterceptors"]

log = logging.getLogger(__name__)

R = TypeVar("R")


@runtime_checkable
class ProducerInterceptor(Protocol):
    def on_send(self, record: Any) -> Any:
        """Return the record to send (the same or a new one)."""
        ...

    def on_acknowledgement(
        self, metadata: RecordMetadata | None, exception: BaseException | None
    ) -> None:
        """Called once per record when it is acknowledged or fails (metadata may be partial)."""
        ...

    def close(self) -> None: ...


class ProducerInterceptors:
    """Runs interceptors in order; exceptions are logged and swallowed, as in Java."""

    __slots__ = ("interceptors",)

    def __init__(self, interceptors: Iterable[Any] = ()) -> None:
        instances = []
        for item in interceptors:
            # interceptor.classes may hold classes; instantiate them as Java does.
            instances.append(item() if isinstance(item, type) else item)
        self.interceptors: list[Any] = instances

    def __bool__(self) -> bool:
        return bool(self.interceptors)

    def __len__(self) -> int:
        return len(self.interceptors)

    def on_send(self, record: R) -> R:
        for interceptor in self.interceptors:
            try:
                record = interceptor.on_send(record)
            except Exception:
                log.warning(
                    "Interceptor %r raised in on_send for topic %r, partition %r; sending the record "
                    "as the previous interceptor returned it",
                    interceptor,
                    getattr(record, "topic", None),
                    getattr(record, "partition", None),
                    exc_info=True,
                )
        return record

    def on_acknowledgement(
        self, metadata: RecordMetadata | None, exception: BaseException | None
    ) -> None:
        for interceptor in self.interceptors:
            try:
                interceptor.on_acknowledgement(metadata, exception)
            except Exception:
                log.warning(
                    "Interceptor %r raised in on_acknowledgement",
                    interceptor,
                    exc_info=True,
                )

    def on_send_error(
        self, record: Any, partition: int | None, exception: BaseException
    ) -> None:
        """A record failed before reaching the accumulator (serialization, metadata, memory...).

        Interceptors get ``on_acknowledgement`` with metadata naming the topic and the
        partition if known (-1 otherwise), offset -1.
        """
        metadata: RecordMetadata | None = None
        if record is not None:
            if partition is None:
                partition = getattr(record, "partition", None)
            metadata = RecordMetadata(
                getattr(record, "topic", ""),
                -1 if partition is None else partition,
                -1,
                -1,
                -1,
                -1,
            )
        self.on_acknowledgement(metadata, exception)

    def close(self) -> None:
        for interceptor in self.interceptors:
            close = getattr(interceptor, "close", None)
            if close is None:
                continue
            try:
                close()
            except Exception:
                log.warning(
                    "Interceptor %r raised in close", interceptor, exc_info=True
                )
