"""The transactional producer's states and their allowed transitions (Java's
``TransactionManager.State``, KIP-98; PREPARED_TRANSACTION of KIP-939's two-phase commit is not
implemented), and the waitable result of init/commit/abort/send_offsets.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable

from samsa.errors import KafkaError, KafkaTimeoutError

__all__ = ["TransactionalRequestResult", "TxnState", "error_like", "is_transition_valid"]


class TxnState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


S = TxnState
# target -> the states it may be entered from (Java's State.isTransitionValid).
_SOURCES: dict[TxnState, frozenset[TxnState]] = {
    S.UNINITIALIZED: frozenset({S.READY, S.ABORTABLE_ERROR}),
    # From COMMITTING/ABORTING: the KIP-360 epoch bump after the transaction completed.
    S.INITIALIZING: frozenset({S.UNINITIALIZED, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION}),
    S.READY: frozenset({S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION}),
    S.IN_TRANSACTION: frozenset({S.READY}),
    S.COMMITTING_TRANSACTION: frozenset({S.IN_TRANSACTION}),
    S.ABORTING_TRANSACTION: frozenset({S.IN_TRANSACTION, S.ABORTABLE_ERROR}),
    S.ABORTABLE_ERROR: frozenset({
        S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR, S.INITIALIZING,
    }),
}


def is_transition_valid(source: TxnState, target: TxnState) -> bool:
    if target is TxnState.FATAL_ERROR:
        return True  # from anywhere; terminal
    return source in _SOURCES[target]


class TransactionalRequestResult:
    """The outcome of one transactional call, completed by the Sender thread and awaited by
    the caller (Java's TransactionalRequestResult).  ``acked`` turns true once a caller saw
    the outcome: until then a timed-out call keeps it, and only the same call may resume it."""

    def __init__(self, operation: str) -> None:
        self.operation = operation
        self._done = threading.Event()
        self.error: BaseException | None = None
        self.acked = False

    def done(self) -> None:
        self._done.set()

    def fail(self, error: BaseException) -> None:
        if not self._done.is_set():
            self.error = error
            self._done.set()

    @property
    def is_completed(self) -> bool:
        return self._done.is_set()

    @property
    def is_successful(self) -> bool:
        return self._done.is_set() and self.error is None

    def wait(self, timeout_s: float | None, waiting_for: Callable[[], str]) -> None:
        """Block until completed; raise its error, or KafkaTimeoutError with ``waiting_for()``
        (read when the time ran out, so that it names the request outstanding then)."""
        if not self._done.wait(timeout_s):
            raise KafkaTimeoutError(waiting_for(), None if timeout_s is None else timeout_s * 1000.0)
        self.acked = True
        if self.error is not None:
            raise self.error

    def __repr__(self) -> str:
        state = "pending" if not self.is_completed else ("failed" if self.error else "done")
        return f"TransactionalRequestResult({self.operation}, {state})"


def error_like(error: BaseException | None, text: str) -> KafkaError:
    """A fresh error of ``error``'s class saying ``text`` (the cause attached), for raising
    again from a later call (Java's maybeFailWithError)."""
    kind = type(error) if isinstance(error, KafkaError) else KafkaError
    try:
        fresh = kind(text)
    except TypeError:
        fresh = KafkaError(text)
    fresh.__cause__ = error
    return fresh
