"""Locating and loading the librdkafka bundled with confluent-kafka."""

from __future__ import annotations

from pathlib import Path

import confluent_kafka
import pytest

from tests.support import librdkafka


def test_loads_the_copy_confluent_kafka_uses() -> None:
    path = Path(librdkafka.find_library())
    assert path.name.startswith("librdkafka")
    assert librdkafka.version() == confluent_kafka.libversion()[0]


def test_required_and_mock_symbols_are_exported() -> None:
    lib = librdkafka.load()
    for name in librdkafka.REQUIRED:
        assert librdkafka.has(name, lib), name
    assert librdkafka.has("rd_kafka_mock_push_request_errors_array")
    assert not librdkafka.has("rd_kafka_no_such_function")


def test_error_names() -> None:
    assert librdkafka.err_name(87) == "INVALID_RECORD"
    # librdkafka keeps the pre-KIP-392 name for code 6.
    assert librdkafka.err_name(6) == "NOT_LEADER_FOR_PARTITION"
    assert librdkafka.err_name(-195) == "_TRANSPORT"


def test_override_must_exist(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(librdkafka.ENV_OVERRIDE, "/nonexistent/librdkafka.so")
    with pytest.raises(librdkafka.LibrdkafkaNotFoundError, match="does not exist"):
        librdkafka.find_library()
