"""Shared pytest configuration: the embedded samsa broker the client and peer tests talk to.

* ``broker``: a ``Broker`` in this process on 127.0.0.1, in a tmp dir, shared by a test module
  (tests use their own topics and groups).  Its settings are the ``broker_config`` fixture's
  ({} here): a test module or a directory's conftest overrides ``broker_config`` to change them,
  or overrides ``broker`` itself, taking this one as its argument, to load data up front.
* ``make_broker``: a factory for brokers of one test's own (a clean broker per test, a custom
  ``apis_factory``), stopped when the test ends.
* ``tests.support.broker.start_broker``: the context manager both use, for tests that stop and
  restart a broker themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from samsa.broker import Broker
from tests.support.broker import start_broker


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory,
           broker_config: dict[str, Any]) -> Iterator[Broker]:
    with start_broker(tmp_path_factory.mktemp("broker"), broker_config) as b:
        yield b


@pytest.fixture
def make_broker(tmp_path: Path) -> Iterator[Callable[..., Broker]]:
    """make_broker(config=None, *, name="data", **Broker kwargs) -> a started Broker."""
    with ExitStack() as stack:

        def make(config: Mapping[str, Any] | None = None, *, name: str = "data",
                 **kwargs: Any) -> Broker:
            return stack.enter_context(start_broker(tmp_path / name, config, **kwargs))

        yield make
