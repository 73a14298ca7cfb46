from __future__ import annotations

from pathlib import Path

import pytest

from samsa.broker.log.checkpoint import (
    read_epoch_checkpoint,
    read_offset_checkpoint,
    write_epoch_checkpoint,
    write_offset_checkpoint,
)
from samsa.errors import KafkaStorageError


def test_offset_checkpoint_is_kafkas_text_format(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_offset_checkpoint(path, {("b", 1): 7, ("a", 0): 42, ("b", 0): 0})
    assert path.read_text() == "0\n3\na 0 42\nb 0 0\nb 1 7\n"
    assert read_offset_checkpoint(path) == {("a", 0): 42, ("b", 0): 0, ("b", 1): 7}
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


def test_missing_checkpoint_reads_empty(tmp_path: Path) -> None:
    assert read_offset_checkpoint(tmp_path / "nope") == {}
    assert read_epoch_checkpoint(tmp_path / "nope") == []


@pytest.mark.parametrize(("text", "problem"), [
    ("1\n0\n", "unsupported version '1'"),
    ("1\n", "unsupported version '1'"),
    ("0\n2\na 0 1\n", "expected 2 entries of 3 fields, found 1"),
    ("0\n1\na 0 1\nb 0 2\n", "expected 1 entries of 3 fields, found 2"),  # a line too many
    ("0\n1\na 0\n", "expected 1 entries of 3 fields, found 1"),
    ("0\nx\n", "invalid literal for int() with base 10: 'x'"),
    ("garbage", "invalid literal for int() with base 10: 'garbage'"),
], ids=["version", "version-alone", "too-few", "too-many", "short-entry", "bad-count", "garbage"])
def test_malformed_checkpoint_is_reported(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "log-start-offset-checkpoint"
    path.write_text(text)
    with pytest.raises(KafkaStorageError) as info:
        read_offset_checkpoint(path)
    assert str(info.value).endswith(
        f"checkpoint file {path} is malformed ({problem}); fix or delete it to recover the logs from scratch")


@pytest.mark.parametrize("text", ["", "0\n"], ids=["empty", "version-alone"])
def test_an_empty_checkpoint_holds_no_entries(tmp_path: Path, text: str) -> None:
    # As Kafka's CheckpointFile: no count line means no entries, not a malformed file.
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_text(text)
    assert read_offset_checkpoint(path) == {}


def test_leader_epoch_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    write_epoch_checkpoint(path, [(0, 0), (3, 120)])
    assert path.read_text() == "0\n2\n0 0\n3 120\n"
    assert read_epoch_checkpoint(path) == [(0, 0), (3, 120)]
