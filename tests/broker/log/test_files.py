from __future__ import annotations

import os
from pathlib import Path

import pytest

from samsa.broker.log.files import atomic_write, is_segment_file_name, parse_partition_dir_name


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("t-0", ("t", 0)),
        ("my-topic-12", ("my-topic", 12)),  # the partition follows the last dash
        ("-3", None),  # no topic
        ("topic", None),  # no dash
        ("t-", None),  # no partition
        ("t-x", None),
        ("t-0.0123abcd-delete", None),
        ("t-0.0123abcd-stray", None),
    ],
    ids=["plain", "dashed-topic", "no-topic", "no-dash", "no-number", "not-a-number", "delete", "stray"],
)
def test_parse_partition_dir_name(name: str, parsed: tuple[str, int] | None) -> None:
    assert parse_partition_dir_name(name) == parsed


@pytest.mark.parametrize(
    ("name", "segment"),
    [
        ("00000000000000000042.log", True),
        ("00000000000000000042.bak", False),  # as long as a segment name, another suffix
        ("000000000000000000424242", False),  # 24 digits, no suffix
        ("42.log", False),  # digits, not 20 of them
        ("0000000000000000004x.log", False),  # 20 characters, not all digits
        ("abcdefghijabcdefghij.log", False),
        ("0000000000000000004٢.log", False),  # a non-ASCII digit (isdigit() alone takes it)
    ],
    ids=["segment", "other-suffix", "no-suffix", "short", "not-digits", "letters", "non-ascii-digit"],
)
def test_is_segment_file_name(name: str, segment: bool) -> None:
    assert is_segment_file_name(name, ".log") is segment


def test_atomic_write_syncs_the_file_and_its_directory_unless_told_not_to(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    atomic_write(tmp_path / "a", b"x")
    assert len(synced) == 2  # the data, then the rename in its directory
    synced.clear()
    atomic_write(tmp_path / "b", b"y", sync=False)
    assert synced == []
    assert [(p.name, p.read_bytes()) for p in sorted(tmp_path.iterdir())] == [("a", b"x"), ("b", b"y")]


def test_an_atomic_write_that_fails_leaves_the_old_file_and_no_temporary_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    target = tmp_path / "topics.json"
    atomic_write(target, b"old")

    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError):
        atomic_write(target, b"new")
    assert [(p.name, p.read_bytes()) for p in tmp_path.iterdir()] == [("topics.json", b"old")]
