"""Fixtures for the group coordinator tests: a coordinator over a LogManager in a tmp dir, and
helpers that join/sync members and wait for parked answers; ``kafka_python_rejoins_as_java``
for the tests driving kafka-python group members."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.broker.group import (
    GroupCoordinator,
    JoinRequest,
    JoinResult,
    SyncRequest,
)
from samsa.broker.log import LogManager

FAST = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 3,
        "group.min.session.timeout.ms": 10}
PATIENCE = 10.0


class Answer:
    """A parked request's eventual answer."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.value: Any = None
        self.calls = 0

    def __call__(self, value: Any) -> None:
        self.calls += 1
        self.value = value
        self.event.set()

    @property
    def done(self) -> bool:
        return self.event.is_set()

    def wait(self, timeout: float = PATIENCE) -> Any:
        assert self.event.wait(timeout), "no answer within the test's patience"
        return self.value


def join_request(group: str = "g", member_id: str = "", *, instance_id: str | None = None,
                 protocols: list[tuple[str, bytes]] | None = None, session_ms: int = 30_000,
                 rebalance_ms: int = 30_000, client_id: str = "client", v4: bool = True,
                 protocol_type: str = "consumer") -> JoinRequest:
    return JoinRequest(group_id=group, member_id=member_id, group_instance_id=instance_id,
                       client_id=client_id, client_host="/127.0.0.1",
                       session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms,
                       protocol_type=protocol_type,
                       protocols=protocols if protocols is not None else [("range", b"m")],
                       require_known_member_id=v4)


def sync_request(group: str, generation: int, member_id: str,
                 assignments: dict[str, bytes] | None = None,
                 instance_id: str | None = None) -> SyncRequest:
    return SyncRequest(group_id=group, generation_id=generation, member_id=member_id,
                       group_instance_id=instance_id, protocol_type=None, protocol_name=None,
                       assignments=assignments or {})


class Harness:
    def __init__(self, data_dir: Path, config: dict[str, Any]) -> None:
        self.data_dir = data_dir
        self.config = config
        self.logs = LogManager(data_dir)
        self.coordinator = GroupCoordinator(self.logs, config)

    def restart(self, config: dict[str, Any] | None = None) -> GroupCoordinator:
        self.coordinator.close()
        self.logs.close()
        self.logs = LogManager(self.data_dir)
        self.coordinator = GroupCoordinator(self.logs, config or self.config)
        return self.coordinator

    def join(self, req: JoinRequest) -> Answer:
        answer = Answer()
        self.coordinator.join_group(req, answer)
        return answer

    def join_new(self, group: str = "g", **kwargs: Any) -> Answer:
        """The v4 handshake: MEMBER_ID_REQUIRED, then the join with the given id (parked)."""
        first: JoinResult = self.join(join_request(group, **kwargs)).wait()
        assert first.error_code == 79, first
        return self.join(join_request(group, first.member_id, **kwargs))

    def sync(self, req: SyncRequest) -> Answer:
        answer = Answer()
        self.coordinator.sync_group(req, answer)
        return answer

    def stable_group(self, group: str = "g", members: int = 1) -> list[JoinResult]:
        """Members joined one by one (each rebalance completed) and synced; returns the last
        generation's join results, leader first."""
        results: list[JoinResult] = []
        for _ in range(members):
            newcomer = self.join_new(group)
            answers = [self.join(join_request(group, r.member_id)) for r in results]
            results = [a.wait() for a in [*answers, newcomer]]
        leader = next(r for r in results if r.leader == r.member_id)
        syncs = [self.sync(sync_request(group, r.generation_id, r.member_id,
                                        {m[0]: m[0].encode() for m in r.members}))
                 for r in [leader] + [r for r in results if r is not leader]]
        for s in syncs:
            assert s.wait().error_code == 0
        return [leader] + [r for r in results if r is not leader]

    def close(self) -> None:
        self.coordinator.close()
        self.logs.close()


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    h = Harness(tmp_path / "data", dict(FAST))
    yield h
    h.close()


@pytest.fixture
def make_harness(tmp_path: Path) -> Iterator[Callable[[dict[str, Any]], Harness]]:
    made: list[Harness] = []

    def make(config: dict[str, Any]) -> Harness:
        h = Harness(tmp_path / f"data{len(made)}", {**FAST, **config})
        made.append(h)
        return h

    yield make
    for h in made:
        h.close()


def eventually(condition: Callable[[], bool], timeout: float = PATIENCE) -> None:
    """Wait until ``condition()`` holds (timers fire on their own thread)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached within the test's patience"
        time.sleep(0.01)


@pytest.fixture
def kafka_python_rejoins_as_java(monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka-python 3.0's ConsumerCoordinator.need_rejoin() answers True when the metadata
    changed since the leader's assignment (or the subscription since the last join) without
    requesting the rejoin, which Java's ConsumerCoordinator.rejoinNeededOrPending does
    (requestRejoinIfNecessary).  So when a consumer.poll(timeout_ms) runs out during such a
    rejoin, the next poll finds need_rejoin() False -- the leader's own assignment refreshed
    the snapshot -- and abandons the join in flight: the SyncGroup answer is never applied,
    heartbeats stay disabled, the broker expires the member's session and the member sits
    without partitions for good, not noticing.  This makes need_rejoin() request the rejoin as
    Java does, so the flag holds until the join completes."""
    from kafka.coordinator.consumer import ConsumerCoordinator

    need_rejoin = ConsumerCoordinator.need_rejoin

    def need_rejoin_as_java(self: Any) -> bool:
        if need_rejoin(self):
            self.request_rejoin()
            return True
        return False

    monkeypatch.setattr(ConsumerCoordinator, "need_rejoin", need_rejoin_as_java)
