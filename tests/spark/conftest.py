"""Fixtures: one local[2] SparkSession for the whole test session; the shared broker's settings."""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from samsa.admin.client import AdminClient
from samsa.admin.types import NewTopic
from samsa.broker import Broker
from samsa.producer.producer import KafkaProducer

HOST = "127.0.0.1"
PARTITIONS = 4

# Spark binds to the eth0 address unless told otherwise; tests stay on loopback.
os.environ["SPARK_LOCAL_IP"] = HOST
# Spark's Python workers must run this interpreter (the venv with samsa and pyarrow), not
# whatever "python3" is first on PATH.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    import samsa.spark

    session = (
        SparkSession.builder.master("local[2]")
        .appName("samsa-spark-tests")
        .config("spark.driver.host", HOST)
        .config("spark.driver.bindAddress", HOST)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    samsa.spark.register(session)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {"num.partitions": PARTITIONS}


@pytest.fixture(scope="module")
def admin(broker: Broker) -> Iterator[AdminClient]:
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as client:
        yield client


_topic_ids = itertools.count()


@pytest.fixture
def new_topic(admin: AdminClient, request: pytest.FixtureRequest) -> Callable[..., str]:
    """new_topic(partitions=4) -> the name of a fresh topic."""

    def make(partitions: int = PARTITIONS) -> str:
        name = f"{request.node.name.replace('[', '-').replace(']', '')}-{next(_topic_ids)}"
        admin.create_topics([NewTopic(name, partitions, 1)])
        return name

    return make


@pytest.fixture
def produce(broker: Broker) -> Callable[..., None]:
    """produce(topic, [(partition, key, value, headers, timestamp_ms), ...]) and wait for acks."""

    def run(topic: str, records: list[tuple[int | None, bytes | None, bytes | None,
                                            list[tuple[str, bytes | None]] | None, int | None]]) -> None:
        with KafkaProducer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5}) as p:
            for partition, key, value, headers, ts in records:
                p.send(topic, value, key, partition=partition, headers=headers, timestamp_ms=ts)
            p.flush()

    return run


@pytest.fixture
def kafka_options(broker: Broker) -> dict[str, str]:
    return {"kafka.bootstrap.servers": broker.bootstrap_servers}
