"""Fixtures: a samsa broker whose request handlers can be told to misbehave, and admin clients."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from samsa.admin import AdminClient
from samsa.broker import Broker
from samsa.broker.apis import KafkaApis

# A fault gets the request context and either answers it itself (returns True) or lets the
# real handler run (returns False).
Fault = Callable[[Any], bool]


class FaultyApis(KafkaApis):
    """KafkaApis with per-API-key queues of one-shot faults, and a log of (key, version)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.faults: dict[int, deque[Fault]] = {}
        self.seen: list[tuple[int, int]] = []

    def inject(self, api_key: int, *faults: Fault) -> None:
        self.faults.setdefault(api_key, deque()).extend(faults)

    def versions(self, api_key: int) -> list[int]:
        return [v for k, v in self.seen if k == api_key]

    def handle(self, ctx: Any) -> None:
        key = ctx.header.request_api_key
        self.seen.append((key, ctx.header.request_api_version))
        queue = self.faults.get(key)
        if queue and queue[0](ctx):
            queue.popleft()
            return
        if queue:
            queue.popleft()
        super().handle(ctx)


@pytest.fixture
def broker(make_broker: Callable[..., Broker]) -> Broker:
    """A broker of each test's own: tests count topics and inject faults."""
    return make_broker(apis_factory=FaultyApis)


@pytest.fixture
def apis(broker: Broker) -> FaultyApis:
    assert isinstance(broker.apis, FaultyApis)
    return broker.apis


@pytest.fixture
def admin(broker: Broker) -> Iterator[AdminClient]:
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers,
                      "retry.backoff.ms": 10}) as client:
        yield client
