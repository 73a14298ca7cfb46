"""Broker: wiring, lifecycle, meta.properties; and end-to-end smoke tests with real clients."""

from __future__ import annotations

import socket
import struct
from pathlib import Path
from typing import Any

import pytest

from samsa.broker import Broker
from samsa.broker.meta_properties import load_or_create_meta_properties
from samsa.errors import ConfigError
from samsa.protocol import (
    ApiKey,
    ApiVersionsRequest,
    ApiVersionsResponse,
    decode_response,
    encode_request,
)


class FakeLogManager:
    def __init__(self, data_dir: Path, config: Any) -> None:
        self.data_dir = data_dir
        self.config = config
        self.background = False
        self.closed = False

    def start_background(self) -> None:
        self.background = True

    def close(self) -> None:
        self.closed = True


class FakeApis:
    def __init__(self, log_manager: FakeLogManager, *, node: Any, config: Any, cluster_id: str,
                 data_dir: Path) -> None:
        self.node = node
        self.cluster_id = cluster_id
        self.closed = False

    def handle(self, ctx: Any) -> None:
        ctx.respond(ApiVersionsResponse(error_code=0, api_keys=[]))

    def close(self) -> None:
        self.closed = True


def fake_broker(data_dir: Path, **kwargs: Any) -> Broker:
    return Broker(data_dir, log_manager_factory=FakeLogManager, apis_factory=FakeApis, **kwargs)


def api_versions(host: str, port: int) -> Any:
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(encode_request(ApiVersionsRequest(), 0, 3, "t"))
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
            chunk = sock.recv(65536)
            assert chunk
            data += chunk
        return decode_response(ApiKey.API_VERSIONS, 0, data[4:])[1]


# --- lifecycle with stand-in log and handlers ----------------------------------------------------


def test_start_serves_on_an_ephemeral_port_and_close_closes_everything(tmp_path: Path) -> None:
    broker = fake_broker(tmp_path / "data")
    with pytest.raises(RuntimeError):
        _ = broker.bootstrap_servers
    with broker:
        assert broker.port > 0
        assert broker.bootstrap_servers == f"127.0.0.1:{broker.port}"
        assert (broker.apis.node.host, broker.apis.node.port) == ("127.0.0.1", broker.port)
        assert broker.apis.node.node_id == 1
        assert broker.log_manager.background
        broker.wait_until_ready(timeout=10)
        assert api_versions("127.0.0.1", broker.port).error_code == 0
    assert broker.apis.closed and broker.log_manager.closed
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", broker.port), timeout=5)
    broker.close()  # twice is fine
    with pytest.raises(RuntimeError):
        broker.start()


def test_cluster_id_is_kept_in_meta_properties(tmp_path: Path) -> None:
    with fake_broker(tmp_path) as first:
        cluster_id = first.cluster_id
    assert len(cluster_id) == 22 and not cluster_id.startswith("-")
    text = (tmp_path / "meta.properties").read_text()
    assert f"cluster.id={cluster_id}\n" in text
    assert "node.id=1\n" in text and "version=1\n" in text and "directory.id=" in text
    with fake_broker(tmp_path) as second:
        assert second.cluster_id == cluster_id
        assert second.apis.cluster_id == cluster_id


def test_a_data_dir_belongs_to_one_node_id(tmp_path: Path) -> None:
    load_or_create_meta_properties(tmp_path, 1)
    with pytest.raises(ConfigError) as info:
        fake_broker(tmp_path, config={"node.id": 2})
    assert info.value.setting == "node.id"


def test_settings_reach_the_parts(tmp_path: Path) -> None:
    broker = fake_broker(tmp_path, config={"num.partitions": "3", "node.id": 7,
                                           "num.network.threads": 1})
    assert broker.node_id == 7
    assert broker.log_manager.config["num.partitions"] == 3
    assert len(broker.socket_server.processors) == 1
    broker.close()


def test_listeners_and_explicit_host_port(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free_port = probe.getsockname()[1]
    with fake_broker(tmp_path, config={"listeners": f"PLAINTEXT://127.0.0.1:{free_port}"}) as b:
        assert b.port == free_port
    with fake_broker(tmp_path, port=0, config={"listeners": f"PLAINTEXT://127.0.0.1:{free_port}",
                                               "advertised.listeners": "PLAINTEXT://localhost:0"}) as b:
        assert b.port != free_port
        assert b.bootstrap_servers == f"localhost:{b.port}"


def test_data_dir_is_required(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        Broker(None, log_manager_factory=FakeLogManager, apis_factory=FakeApis)
    assert info.value.setting == "log.dirs"
    broker = Broker(None, config={"log.dirs": str(tmp_path / "from-config")},
                    log_manager_factory=FakeLogManager, apis_factory=FakeApis)
    assert broker.data_dir == tmp_path / "from-config"
    broker.close()


def test_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        broker = fake_broker(tmp_path, port=taken.getsockname()[1])
        with pytest.raises(OSError, match="cannot listen on 127.0.0.1"):
            broker.start()
        broker.close()


# --- the real thing: LogManager + KafkaApis, with real clients ---------------------------------------


@pytest.fixture
def broker(tmp_path: Path) -> Any:
    with Broker(tmp_path / "data", config={"group.initial.rebalance.delay.ms": 0}) as b:
        yield b


def test_confluent_kafka_sees_the_cluster(broker: Broker) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    futures = admin.create_topics([NewTopic("smoke", num_partitions=3, replication_factor=1)])
    futures["smoke"].result(timeout=30)
    metadata = admin.list_topics(timeout=30)
    assert metadata.cluster_id == broker.cluster_id
    assert list(metadata.brokers) == [1]
    assert (metadata.brokers[1].host, metadata.brokers[1].port) == ("127.0.0.1", broker.port)
    assert sorted(metadata.topics["smoke"].partitions) == [0, 1, 2]


def test_kafka_python_admin_and_produce_fetch_round_trip(broker: Broker) -> None:
    from confluent_kafka import Producer
    from kafka import KafkaConsumer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic("events", num_partitions=1, replication_factor=1)])
        assert "events" in admin.list_topics()
    finally:
        admin.close()

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for i in range(500):
        producer.produce("events", key=str(i).encode(), value=b"v%d" % i)
    assert producer.flush(30) == 0

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers,
                             enable_auto_commit=False, consumer_timeout_ms=30000)
    values = []
    try:
        tp = TopicPartition("events", 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        for message in consumer:
            values.append(message.value)
            if len(values) == 500:
                break
    finally:
        consumer.close()
    assert values == [b"v%d" % i for i in range(500)]
