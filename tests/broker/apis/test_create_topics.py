"""CreateTopics and auto-creation on a failing disk: an error code, never a half-made topic;
the other CreateTopics answers are in test_topics_admin.py."""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from samsa.broker.log import manager as manager_module
from samsa.protocol import CreateTopicsRequest, MetadataRequest

KAFKA_STORAGE_ERROR = 56


def _create(client: Any, *topics: tuple[str, int], validate_only: bool = False) -> dict[str, Any]:
    request = CreateTopicsRequest(topics=[
        CreateTopicsRequest.CreatableTopic(name=name, num_partitions=count, replication_factor=1,
                                           assignments=[], configs=[])
        for name, count in topics], timeout_ms=1000, validate_only=validate_only)
    return {t.name: t for t in client.call(request, 7).topics}


def _partition_dirs(data: Path) -> list[str]:
    return sorted(p.name for p in data.iterdir() if p.is_dir())


def _no_space_for_partition_metadata(monkeypatch: pytest.MonkeyPatch, after: int) -> None:
    written = [0]
    real = manager_module.atomic_write

    def write(path: Path, data: bytes, *, sync: bool = True) -> None:
        if path.name == "partition.metadata":
            written[0] += 1
            if written[0] > after:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real(path, data, sync=sync)

    monkeypatch.setattr(manager_module, "atomic_write", write)


def test_disk_full_during_create_topics_answers_storage_error_and_leaves_nothing(
        client: Any, log_manager: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "samsa")
    with monkeypatch.context() as full_disk:
        _no_space_for_partition_metadata(full_disk, after=3)
        for attempt in range(2):  # a client retrying
            result = _create(client, ("t", 8))["t"]
            assert result.error_code == KAFKA_STORAGE_ERROR
            assert f"t-{3 if attempt == 0 else 0}/partition.metadata" in result.error_message
            assert "No space left on device" in result.error_message
    assert log_manager.topics() == {} and _partition_dirs(tmp_path / "data") == []
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is None  # once, and no traceback
    assert _create(client, ("t", 8))["t"].error_code == 0  # space returned


def test_disk_full_during_auto_creation_answers_storage_error_not_a_traceback(
        client: Any, log_manager: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="auto")],
                              allow_auto_topic_creation=True)
    with monkeypatch.context() as full_disk:
        _no_space_for_partition_metadata(full_disk, after=1)
        metadata = client.call(request, 9)
    assert [(t.name, t.error_code) for t in metadata.topics] == [("auto", KAFKA_STORAGE_ERROR)]
    assert not any(r.exc_info for r in caplog.records)
    assert log_manager.topics() == {} and _partition_dirs(tmp_path / "data") == []
    [topic] = client.call(request, 9).topics  # space returned: auto-creation works
    assert topic.error_code == 0 and len(topic.partitions) == 2
