"""The log cleaner's file protocol and its recovery at load (Kafka's LocalLog.replaceSegments,
LogLoader.removeTempFilesAndCollectSwapFiles and the swap completion in LogLoader.load).

A cleaned segment is written as ``<base>.log.cleaned`` (and ``.index``, ``.timeindex``,
``.txnindex`` with the same suffix), then, under the log's lock:

1. each of its files is renamed ``.cleaned`` -> ``.swap``;
2. the files of the segments it replaces are renamed ``.deleted``;
3. its files are renamed ``.swap`` -> their final names, the directory fsynced, and the
   ``.deleted`` files removed.

On load, before the segments are opened (``recover_swaps``): ``.deleted`` files are removed;
``.cleaned`` files are removed, and with them every ``.swap`` file whose base offset is at or
above the smallest of theirs (step 1 did not finish: the old segments are all still there);
the remaining ``.swap`` segments cover ``[smallest base, largest next offset)``, so any other
segment file whose base offset lies in that range is an old segment not yet renamed (step 2
did not finish) and is removed; then the ``.swap`` files take their final names (step 3).
"""

from __future__ import annotations

import os
from pathlib import Path

from samsa.broker.log.files import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    filename_prefix,
    fsync_dir,
    is_segment_file_name,
    offset_from_filename,
)
from samsa.records import LOG_OVERHEAD, RECORD_BATCH_OVERHEAD, read_batch_header

__all__ = [
    "CLEANED_SUFFIX",
    "DELETED_SUFFIX",
    "SEGMENT_SUFFIXES",
    "SWAP_SUFFIX",
    "recover_swaps",
    "rename_segment_files",
]

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


def _segment_suffix(name: str) -> str | None:
    for suffix in SEGMENT_SUFFIXES:
        if is_segment_file_name(name, suffix):
            return suffix
    return None


def rename_segment_files(directory: Path, base_offset: int, old_suffix: str,
                         new_suffix: str) -> list[Path]:
    """Rename the existing files of segment ``base_offset`` from ``old_suffix`` (appended to
    the normal name, "" for the normal name) to ``new_suffix``; returns the new paths."""
    prefix = filename_prefix(base_offset)
    renamed = []
    for suffix in SEGMENT_SUFFIXES:
        source = directory / (prefix + suffix + old_suffix)
        target = directory / (prefix + suffix + new_suffix)
        try:
            os.rename(source, target)
        except FileNotFoundError:
            continue
        renamed.append(target)
    return renamed


def _next_offset(log_file: Path, base_offset: int) -> int:
    """The offset after the last whole batch of a ``.log`` file (its base if it has none)."""
    next_offset = base_offset
    with open(log_file, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        position = 0
        while size - position >= RECORD_BATCH_OVERHEAD:
            head = os.pread(f.fileno(), RECORD_BATCH_OVERHEAD, position)
            header = read_batch_header(head, 0)
            if header.batch_length + LOG_OVERHEAD < RECORD_BATCH_OVERHEAD or (
                    position + header.size > size):
                break
            next_offset = header.next_offset
            position += header.size
    return next_offset


def recover_swaps(directory: Path) -> list[int]:
    """Finish or undo a cleaner's swap interrupted by a crash (see the module doc).  Returns
    the base offsets of the segments whose swap was completed."""
    cleaned: list[Path] = []
    swaps: list[Path] = []
    for path in directory.iterdir():
        name = path.name
        if name.endswith(DELETED_SUFFIX):
            path.unlink(missing_ok=True)
        elif name.endswith(CLEANED_SUFFIX):
            cleaned.append(path)
        elif name.endswith(SWAP_SUFFIX):
            swaps.append(path)
    if not cleaned and not swaps:
        return []
    min_cleaned = min((offset_from_filename(p.name) for p in cleaned), default=None)
    for path in cleaned:
        path.unlink(missing_ok=True)
    kept_swaps = []
    for path in swaps:
        if min_cleaned is not None and offset_from_filename(path.name) >= min_cleaned:
            path.unlink(missing_ok=True)  # step 1 was interrupted: the old segments remain
        else:
            kept_swaps.append(path)
    log_swaps = [p for p in kept_swaps if p.name.endswith(LOG_SUFFIX + SWAP_SUFFIX)]
    completed = sorted({offset_from_filename(p.name) for p in log_swaps})
    if log_swaps:
        low = min(completed)
        high = max(_next_offset(p, offset_from_filename(p.name)) for p in log_swaps)
        for path in directory.iterdir():
            if _segment_suffix(path.name) is not None and low <= offset_from_filename(path.name) < high:
                path.unlink(missing_ok=True)  # an old segment the swap replaces
    for path in kept_swaps:
        os.rename(path, path.with_name(path.name[: -len(SWAP_SUFFIX)]))
    fsync_dir(directory)
    return completed
