from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from samsa.broker.log import handle_cache
from samsa.broker.log.handle_cache import HandleCache
from samsa.broker.log.segment import LogSegment
from samsa.records import read_batch_header, set_base_offset

from .conftest import build_batch


def _open_descriptors(under: Path) -> int:
    """Descriptors of this process open on files under ``under`` (other tests' threads and
    garbage open and close descriptors of their own meanwhile)."""
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        count += target.startswith(str(under))
    return count


def _segment_with_one_batch(directory: Path, files: HandleCache, tag: int) -> LogSegment:
    directory.mkdir()
    segment = LogSegment(directory, 0, files=files)
    buf = bytearray(build_batch(1, value_size=20, key_prefix=b"seg%d-" % tag))
    set_base_offset(buf, 0, 0)
    segment.append(buf, [read_batch_header(buf)])
    return segment


def test_segments_hold_at_most_the_cache_capacity_of_descriptors(tmp_path: Path) -> None:
    files = HandleCache(8)
    before = _open_descriptors(tmp_path)
    segments = [_segment_with_one_batch(tmp_path / f"t-{i}", files, i) for i in range(200)]
    assert _open_descriptors(tmp_path) - before <= 8
    # Every segment still reads and appends: evicted files are reopened on use.
    for i, segment in enumerate(segments):
        piece = segment.read(0, 1 << 20)
        assert piece is not None and b"seg%d-" % i in piece.read()
        buf = bytearray(build_batch(1))
        set_base_offset(buf, 0, 1)
        segment.append(buf, [read_batch_header(buf)])
        assert segment.next_offset == 2
    assert _open_descriptors(tmp_path) - before <= 8
    assert files.opens > 200  # reopened after eviction
    for segment in segments:
        segment.close()
    del piece  # the last slice read keeps its file open until it goes
    assert _open_descriptors(tmp_path) == before


def test_a_slice_of_an_evicted_file_keeps_reading_that_file(tmp_path: Path) -> None:
    files = HandleCache(2)
    first = _segment_with_one_batch(tmp_path / "t-0", files, 0)
    piece = first.read(0, 1 << 20)
    assert piece is not None
    # Evict the first segment's handle; other files now take its place (and maybe its number).
    others = [_segment_with_one_batch(tmp_path / f"u-{i}", files, 100 + i) for i in range(5)]
    assert b"seg0-" in piece.read()
    for segment in [first, *others]:
        segment.close()


def test_a_closed_segment_does_not_reopen_its_file(tmp_path: Path) -> None:
    files = HandleCache(4)
    segment = _segment_with_one_batch(tmp_path / "t-0", files, 0)
    segment.close()
    assert len(files) == 0
    with pytest.raises((OSError, ValueError), match="closed|Bad file"):
        segment.read_bytes(0, 10)
    assert len(files) == 0


class _DeletingWhileOpening(HandleCache):
    """A cache whose next miss lets a topic deletion run between the open and the insert."""

    def __init__(self) -> None:
        super().__init__(4)
        self.segment: LogSegment | None = None

    def get(self, path: str, *, create: bool = False):  # type: ignore[no-untyped-def]
        segment, self.segment = self.segment, None
        if segment is None:
            return super().get(path, create=create)
        handle = super().get(path, create=create)
        # What the deleting thread would have done had it run just before the insert:
        self._open.pop(path, None)  # (the insert below is the racing one)
        segment.delete()
        self._open[path] = handle
        return handle


def test_a_segment_deleted_while_a_read_opens_its_file_leaves_no_descriptor_cached(
        tmp_path: Path) -> None:
    files = _DeletingWhileOpening()
    segment = _segment_with_one_batch(tmp_path / "t-0", files, 0)
    files.forget(str(segment.log_path))  # the next read misses
    files.segment = segment
    before = _open_descriptors(tmp_path)
    segment.read(0, 1 << 20)  # opens the file, and the deletion runs meanwhile
    # The unlinked file is not kept open, nor cached for a new segment at the same path.
    assert len(files) == 0
    assert _open_descriptors(tmp_path) == before


def test_running_out_of_descriptors_gives_back_cached_ones_and_retries(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = HandleCache(10)
    segments = [_segment_with_one_batch(tmp_path / f"t-{i}", files, i) for i in range(10)]
    real_open = os.open
    failures = [errno.EMFILE]

    def open_once_out_of_descriptors(path: str, flags: int, mode: int = 0o777) -> int:
        if failures and str(path).endswith(".log"):
            raise OSError(failures.pop(), os.strerror(errno.EMFILE))
        return real_open(path, flags, mode)

    monkeypatch.setattr(handle_cache.os, "open", open_once_out_of_descriptors)
    extra = _segment_with_one_batch(tmp_path / "t-new", files, 99)
    assert len(files) <= 6  # half given back, then the new file
    assert extra.read_bytes(0, 10)
    for segment in [*segments, extra]:
        segment.close()


def test_the_automatic_capacity_is_a_quarter_of_the_soft_descriptor_limit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handle_cache.resource, "getrlimit", lambda _: (1024, 4096))
    assert HandleCache().capacity == 256
    assert HandleCache(0).capacity == 256
    assert HandleCache(50).capacity == 50
    monkeypatch.setattr(handle_cache.resource, "getrlimit", lambda _: (20, 4096))
    assert HandleCache().capacity == handle_cache.MIN_CAPACITY
