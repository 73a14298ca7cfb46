"""The embedded samsa broker as tests start it (tests/conftest.py builds its fixtures on this)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from samsa.broker import Broker

HOST = "127.0.0.1"


@contextmanager
def start_broker(data_dir: Path, config: Mapping[str, Any] | None = None, *, port: int = 0,
                 **kwargs: Any) -> Iterator[Broker]:
    """A broker on ``HOST`` (an ephemeral port unless given), answering requests once entered."""
    with Broker(data_dir, port=port, host=HOST, config=config, **kwargs) as b:
        b.wait_until_ready()
        yield b
