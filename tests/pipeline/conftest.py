"""One local SparkSession for the pipeline tests (shared with tests/spark if it exists already)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    from samsa.pipeline.session import local_session

    existing = SparkSession.getActiveSession()
    session = local_session("samsa-pipeline-tests", master="local[2]")
    yield session
    if existing is None:
        session.stop()
