"""Fixtures for the log storage tests: batch builders and data directories."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from samsa.broker.log import LogManager
from samsa.records import Compression, RecordBatchBuilder

BASE_TS = 1_700_000_000_000

MakeBatch = Callable[..., bytes]


def build_batch(
    count: int = 1,
    *,
    ts: int = BASE_TS,
    ts_step: int = 1,
    value_size: int = 10,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    transactional: bool = False,
    compression: Compression = Compression.NONE,
    key_prefix: bytes = b"k",
) -> bytes:
    """A v2 batch of ``count`` records as a client would send it (offsets from 0)."""
    builder = RecordBatchBuilder(
        compression=compression,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=transactional,
        batch_size_limit=1 << 30,
    )
    for i in range(count):
        value = (b"v%d-" % i).ljust(value_size, b"x")
        assert builder.append(ts + i * ts_step, key_prefix + b"%d" % i, value) is not None
    return builder.build()


@pytest.fixture
def make_batch() -> MakeBatch:
    return build_batch


@pytest.fixture
def open_manager(tmp_path: Path) -> Iterator[Callable[..., LogManager]]:
    """open_manager(config=None, data_dir=None) -> LogManager, closed after the test."""
    opened: list[LogManager] = []

    def factory(config: dict[str, object] | None = None, data_dir: Path | None = None) -> LogManager:
        manager = LogManager(data_dir or tmp_path / "data", config)
        opened.append(manager)
        return manager

    yield factory
    for manager in opened:
        if not manager._closed:
            manager.close()
