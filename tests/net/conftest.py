"""Fixtures and helpers shared by the network-layer tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from samsa.net.client import ClientResponse, NetworkClient
from samsa.net.cluster import Node
from tests.support.mock_cluster import MockCluster

from .fake_broker import FakeBroker

ROUND_MS = 50
MAX_ROUNDS = 400  # 20 s of polling before a test gives up (a failure, not a timing check)


def poll_until(client: NetworkClient, cond: Callable[[], bool],
               into: list[ClientResponse] | None = None, rounds: int = MAX_ROUNDS) -> None:
    """Poll until ``cond()`` holds (checked after each poll); collect responses in ``into``."""
    for _ in range(rounds):
        responses = client.poll(ROUND_MS)
        if into is not None:
            into.extend(responses)
        if cond():
            return
    raise AssertionError("condition not reached while polling the client")


def connect(client: NetworkClient, node: Node) -> None:
    def ready() -> bool:
        return client.ready(node, client._clock())
    if not ready():
        poll_until(client, ready)


@pytest.fixture
def broker() -> Iterator[FakeBroker]:
    with FakeBroker(node_id=0) as b:
        yield b


@pytest.fixture
def mock() -> Iterator[MockCluster]:
    with MockCluster(3, topics={"t": 4}) as mc:
        yield mc
