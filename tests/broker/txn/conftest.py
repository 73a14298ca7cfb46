"""A TransactionCoordinator over a real LogManager in a tmp dir, with a recording stand-in for
the group coordinator's side of transactions."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.broker.apis.producer_ids import ProducerIdManager
from samsa.broker.log import LogManager
from samsa.broker.txn import TransactionCoordinator


class RecordingGroups:
    """partition_for/complete_transaction as the group coordinator offers them; records each
    completion (the real one is tested with the group coordinator)."""

    def __init__(self) -> None:
        self.completed: list[tuple[int, int, int, bool, int]] = []

    def partition_for(self, group_id: str) -> int:
        return len(group_id) % 50

    def complete_transaction(self, partition: int, producer_id: int, producer_epoch: int,
                             commit: bool, coordinator_epoch: int) -> None:
        self.completed.append((partition, producer_id, producer_epoch, commit,
                               coordinator_epoch))


def wait_for(condition: Callable[[], Any], what: str, patience_s: float = 15.0) -> Any:
    """Poll until ``condition()`` is true; fail naming ``what`` if it never is."""
    deadline = time.monotonic() + patience_s
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.01)


class Harness:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.groups = RecordingGroups()
        self.logs = LogManager(data_dir)
        self.woken: list[tuple[str, int]] = []
        self.coordinators: list[TransactionCoordinator] = []

    def coordinator(self, config: dict[str, Any] | None = None,
                    clock: Callable[[], int] | None = None) -> TransactionCoordinator:
        kwargs: dict[str, Any] = {} if clock is None else {"clock": clock}
        coordinator = TransactionCoordinator(
            self.logs, config, ProducerIdManager(self.data_dir), self.groups,
            on_marker=lambda t, p: self.woken.append((t, p)), **kwargs)
        self.coordinators.append(coordinator)
        return coordinator

    def crash_and_restart(self, config: dict[str, Any] | None = None) -> TransactionCoordinator:
        """Stop the coordinators, abandon every log as a crash would (no clean close, no
        producer-state snapshot, no checkpoint), and start a coordinator over the reopened
        data directory."""
        for coordinator in self.coordinators:
            coordinator.close()
        self.coordinators.clear()
        for plog in self.logs.logs().values():
            plog.abandon()
        self.logs._closed = True  # what close() would do, minus flushing and checkpoints
        os.close(self.logs._lock_fd)
        self.logs = LogManager(self.data_dir)
        return self.coordinator(config)

    def close(self) -> None:
        for coordinator in self.coordinators:
            coordinator.close()
        self.logs.close()


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    h = Harness(tmp_path / "data")
    yield h
    h.close()
