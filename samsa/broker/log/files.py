"""File names and small file helpers shared by the log package (Kafka's layout, as its LogFileUtils)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

__all__ = [
    "DELETED_SUFFIX",
    "INDEX_SUFFIX",
    "LOG_SUFFIX",
    "SNAPSHOT_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "TXN_INDEX_SUFFIX",
    "atomic_write",
    "filename_prefix",
    "fsync_dir",
    "is_segment_file_name",
    "offset_from_filename",
    "parse_partition_dir_name",
    "partition_dir_name",
    "segment_paths",
]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
DELETED_SUFFIX = ".deleted"
DELETE_DIR_SUFFIX = "-delete"  # a partition directory being removed
STRAY_DIR_SUFFIX = "-stray"  # one left by an interrupted create or delete


def filename_prefix(offset: int) -> str:
    """The 20-digit zero-padded base offset Kafka names segment files with."""
    return f"{offset:020d}"


def is_segment_file_name(name: str, suffix: str) -> bool:
    """``name`` is ``<20-digit offset><suffix>``, as the broker names segment files; anything else
    in a partition directory (an operator's ``1.2.log``, ``notes.log``) is not a segment."""
    stem = name[: -len(suffix)] if name.endswith(suffix) else ""
    return len(stem) == 20 and stem.isascii() and stem.isdigit()


def offset_from_filename(name: str) -> int:
    """The offset encoded in a file name such as ``00000000000000000042.log``."""
    return int(name.split(".", 1)[0])


def segment_paths(directory: Path, base_offset: int) -> tuple[Path, Path, Path]:
    """(.log, .index, .timeindex) paths of the segment starting at ``base_offset``."""
    prefix = filename_prefix(base_offset)
    return (
        directory / (prefix + LOG_SUFFIX),
        directory / (prefix + INDEX_SUFFIX),
        directory / (prefix + TIME_INDEX_SUFFIX),
    )


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def set_aside_dir_name(topic: str, partition: int, suffix: str) -> str:
    """A partition directory's name while it is removed (``suffix`` "-delete") or kept aside
    ("-stray"): ``topic-N.<uuid><suffix>``, the topic cut short so the name stays within 255
    bytes (a topic name may have 249 characters), as Kafka's
    LocalLog.logDirNameWithSuffixCappedLength does."""
    tail = f"-{partition}.{uuid.uuid4().hex}{suffix}"
    return topic[: 255 - len(tail)] + tail


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """``topic-N`` -> (topic, N); None for anything else (e.g. ``-delete`` or ``-stray`` dirs)."""
    topic, sep, number = name.rpartition("-")
    if not sep or not topic or not number.isdigit():
        return None
    return topic, int(number)


def fsync_dir(directory: Path) -> None:
    """Make a rename or create inside ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves either the old or the new file."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)  # a disk-full write leaves no partial .tmp behind
        raise
    if sync:
        fsync_dir(path.parent)
