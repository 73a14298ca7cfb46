"""Kafka's text checkpoint files, written atomically (tmp file + fsync + rename).

Format (Kafka's ``CheckpointFile``): line 1 the version ``0``, line 2 the entry count, then one
entry per line with space-separated fields.

* ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint`` (per data dir):
  ``topic partition offset``.
* ``leader-epoch-checkpoint`` (per partition dir): ``epoch startOffset``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from samsa.broker.log.files import atomic_write
from samsa.errors import KafkaStorageError

__all__ = [
    "LEADER_EPOCH_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT",
    "read_epoch_checkpoint",
    "read_offset_checkpoint",
    "write_epoch_checkpoint",
    "write_offset_checkpoint",
]

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
_VERSION = 0


def _render(lines: list[str]) -> bytes:
    return (f"{_VERSION}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)).encode()


def _parse(path: Path, fields: int) -> list[list[str]]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    lines = text.splitlines()
    try:
        if lines and int(lines[0]) != _VERSION:
            raise ValueError(f"unsupported version {lines[0]!r}")
        if len(lines) < 2:
            return []  # empty, or the version alone: no entries (Kafka's CheckpointReadBuffer)
        count = int(lines[1])
        # Every line after the count is an entry, and there must be exactly ``count`` of them.
        entries = [line.split() for line in lines[2:]]
        if len(entries) != count or any(len(e) != fields for e in entries):
            raise ValueError(f"expected {count} entries of {fields} fields, found {len(entries)}")
    except ValueError as exc:
        raise KafkaStorageError(
            f"checkpoint file {path} is malformed ({exc}); fix or delete it to recover the logs "
            "from scratch"
        ) from None
    return entries


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """{(topic, partition): offset}; empty if the file does not exist."""
    result: dict[tuple[str, int], int] = {}
    for topic, partition, offset in _parse(path, 3):
        result[(topic, int(partition))] = int(offset)
    return result


def write_offset_checkpoint(path: Path, offsets: Mapping[tuple[str, int], int]) -> None:
    lines = [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    atomic_write(path, _render(lines))


def read_epoch_checkpoint(path: Path) -> list[tuple[int, int]]:
    """[(epoch, start offset)] in file order; empty if the file does not exist."""
    return [(int(epoch), int(offset)) for epoch, offset in _parse(path, 2)]


def write_epoch_checkpoint(path: Path, entries: Iterable[tuple[int, int]]) -> None:
    atomic_write(path, _render([f"{epoch} {offset}" for epoch, offset in entries]))
