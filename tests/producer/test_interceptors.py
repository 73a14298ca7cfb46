"""ProducerInterceptors: order, swallowed exceptions (logged), on_send_error metadata."""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

import pytest

from samsa.producer.future import RecordMetadata
from samsa.producer.interceptors import ProducerInterceptor, ProducerInterceptors


class Rec(NamedTuple):
    topic: str
    partition: int | None
    value: str


class Suffix:
    def __init__(self, suffix: str) -> None:
        self.suffix = suffix
        self.acks: list[tuple[Any, Any]] = []
        self.closed = False

    def on_send(self, record: Rec) -> Rec:
        return record._replace(value=record.value + self.suffix)

    def on_acknowledgement(
        self, metadata: RecordMetadata | None, exception: BaseException | None
    ) -> None:
        self.acks.append((metadata, exception))

    def close(self) -> None:
        self.closed = True


class Broken:
    def on_send(self, record: Rec) -> Rec:
        raise RuntimeError("boom")

    def on_acknowledgement(self, metadata: Any, exception: Any) -> None:
        raise RuntimeError("boom")

    def close(self) -> None:
        raise RuntimeError("boom")


def test_protocol() -> None:
    assert isinstance(Suffix("x"), ProducerInterceptor)


def test_on_send_runs_in_order_and_swallows(caplog: pytest.LogCaptureFixture) -> None:
    a, b = Suffix("-a"), Suffix("-b")
    chain = ProducerInterceptors([a, Broken(), b])
    with caplog.at_level(logging.WARNING):
        out = chain.on_send(Rec("t", None, "v"))
    assert out.value == "v-a-b"
    assert "on_send" in caplog.text and "boom" in caplog.text


def test_on_acknowledgement_reaches_all_despite_errors() -> None:
    a, b = Suffix(""), Suffix("")
    chain = ProducerInterceptors([a, Broken(), b])
    md = RecordMetadata("t", 0, 5, 10, -1, 3)
    chain.on_acknowledgement(md, None)
    assert a.acks == b.acks == [(md, None)]


def test_on_send_error_builds_partial_metadata() -> None:
    a = Suffix("")
    chain = ProducerInterceptors([a])
    err = ValueError("bad")
    chain.on_send_error(Rec("t", None, "v"), None, err)
    chain.on_send_error(Rec("t", 3, "v"), None, err)
    chain.on_send_error(None, None, err)
    assert a.acks == [
        (RecordMetadata("t", -1, -1, -1, -1, -1), err),
        (RecordMetadata("t", 3, -1, -1, -1, -1), err),
        (None, err),
    ]


def test_classes_are_instantiated_and_close_swallows() -> None:
    chain = ProducerInterceptors([Broken])
    assert isinstance(chain.interceptors[0], Broken)
    s = Suffix("")
    ProducerInterceptors([Broken(), s]).close()
    assert s.closed
    assert not ProducerInterceptors() and len(ProducerInterceptors([s])) == 1
