"""sarama 1.22 (Go; Debian's golang-github-shopify-sarama-dev) against the samsa broker.

sarama chooses every request version from its configured Kafka version and never asks
ApiVersions, so it meets the broker with versions nobody else here sends: configured as
0.10.2.0 (the oldest its consumer groups accept) it produces with Produce v2 and magic 1
message sets, fetches with Fetch v3 and commits with OffsetCommit v1; as 2.1.0 it sends
Produce v3 batches whose maxTimestamp is -1 (and zstd ones, which Kafka refuses below
Produce v7).  The Fetch v3 answers must be down-converted to magic 1, as Kafka does.  The peer is tests/peers/sarama/main.go, built
here in GOPATH mode against the Debian package (no module proxy).  The broker advertises a
RecordingProxy, so each test knows which API versions sarama used and which requests the
broker closed the connection on instead of answering; both appear in failure messages.

Go and sarama must be installed (scripts/system-deps.sh); a missing one fails, never skips.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# tests/broker is not a package: pytest puts this directory on sys.path.
from recording_proxy import HOST, RecordingProxy

from samsa.broker import Broker
from samsa.records import Compression

GOPATH = Path("/usr/share/gocode")
SARAMA_SRC = GOPATH / "src/github.com/Shopify/sarama"
PEER_SRC = Path(__file__).resolve().parents[1] / "peers" / "sarama"
PARTITIONS = 4
FETCH_KEY = 1

# sarama Config.Version -> (codec, idempotent) for the produce/consume round trip.
OLD, NEW = "0.10.2.0", "2.1.0"
ROUND_TRIPS = [(OLD, "gzip", False), (NEW, "lz4", True)]
_CODEC_IDS = {"none": Compression.NONE, "gzip": Compression.GZIP, "lz4": Compression.LZ4}

# What sarama 1.22 sends for a produce + consumer-group round trip (its source, by version).
# Heartbeat v0 too, when a session outlives Consumer.Group.Heartbeat.Interval (3 s).
EXPECTED_VERSIONS = {
    OLD: {"Produce": [2], "Fetch": [3], "Metadata": [1], "ListOffsets": [1],
          "FindCoordinator": [0], "JoinGroup": [1], "SyncGroup": [0], "LeaveGroup": [0],
          "OffsetFetch": [1], "OffsetCommit": [1]},
    NEW: {"Produce": [3], "Fetch": [4], "Metadata": [5], "ListOffsets": [1],
          "FindCoordinator": [0], "JoinGroup": [1], "SyncGroup": [0], "LeaveGroup": [0],
          "OffsetFetch": [1], "OffsetCommit": [1], "InitProducerId": [0]},
}
MAYBE_USED = {"Heartbeat": [0]}


# --- the peer -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sarama_peer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    go = shutil.which("go")
    assert go is not None, "Go is not installed (apt-get install golang-go; scripts/system-deps.sh)"
    assert SARAMA_SRC.is_dir(), ("sarama is not installed (apt-get install "
                                 "golang-github-shopify-sarama-dev; scripts/system-deps.sh)")
    out_dir = tmp_path_factory.mktemp("sarama-peer")
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": str(GOPATH), "GOFLAGS": "",
           "GOPROXY": "off", "CGO_ENABLED": "1"}  # cgo: sarama's zstd is DataDog/zstd
    if not any(env.get(v) for v in ("GOCACHE", "XDG_CACHE_HOME", "HOME")):
        env["GOCACHE"] = str(out_dir / "go-cache")
    binary = out_dir / "sarama-peer"
    built = subprocess.run([go, "build", "-o", str(binary), "."], cwd=PEER_SRC, env=env,
                           check=False, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, f"building {PEER_SRC} failed:\n{built.stderr}"
    return binary


@dataclass
class Run:
    returncode: int
    lines: list[dict[str, Any]]
    stderr: str

    @property
    def error(self) -> dict[str, Any] | None:
        return next((line for line in self.lines if "error" in line), None)


_RUN_NUMBERS = itertools.count(1)  # a client id per run, unique in the module's broker


class Sarama:
    """Runs the peer against the proxied broker; one client id per run, so the proxy can tell
    which requests the run sent."""

    def __init__(self, binary: Path, broker: Broker, proxy: RecordingProxy,
                 raw_client: Callable[[int], Any]) -> None:
        self.binary, self.broker, self.proxy = binary, broker, proxy
        self.raw_client = raw_client

    def create_topic(self, topic: str) -> None:
        """With samsa's own client, straight to the broker (not through sarama)."""
        assert self.raw_client(self.broker.port).create_topic(topic, PARTITIONS) == 0

    def run(self, command: str, version: str, topic: str, *flags: str,
            timeout: float = 120) -> tuple[Run, str]:
        client_id = f"sarama-{command}-{next(_RUN_NUMBERS)}"
        done = subprocess.run(
            [str(self.binary), command, "-brokers", self.broker.bootstrap_servers,
             "-version", version, "-client-id", client_id, "-topic", topic, *flags],
            check=False, capture_output=True, text=True, timeout=timeout)
        lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
        return Run(done.returncode, lines, done.stderr), client_id

    def explain(self, run: Run, client_id: str) -> str:
        """What went wrong, in wire terms, for an assertion message."""
        return (f"sarama error: {run.error}\n"
                f"versions sarama sent: {self.proxy.versions(client_id)}\n"
                f"requests the broker closed the connection on: "
                f"{self.proxy.dropped_summary(client_id) or 'none'}\n"
                f"sarama log tail:\n{run.stderr[-3000:]}")

    def check(self, command: str, version: str, topic: str, *flags: str) -> tuple[Run, str]:
        """Run and require success with no request dropped by the broker."""
        run, client_id = self.run(command, version, topic, *flags)
        assert run.returncode == 0 and run.error is None, \
            f"sarama {command} ({version}) failed\n{self.explain(run, client_id)}"
        assert not self.proxy.dropped_summary(client_id), self.explain(run, client_id)
        return run, client_id


@pytest.fixture(scope="module")
def proxy() -> Iterator[RecordingProxy]:
    proxy = RecordingProxy(keep_responses=frozenset({FETCH_KEY}))
    try:
        yield proxy
    finally:
        proxy.close()


@pytest.fixture(scope="module")
def broker_config(proxy: RecordingProxy) -> dict[str, Any]:
    # The broker advertises the proxy, so sarama's every connection goes through it.
    return {"num.partitions": PARTITIONS, "group.initial.rebalance.delay.ms": 0,
            "advertised.listeners": f"PLAINTEXT://{HOST}:{proxy.port}"}


@pytest.fixture(scope="module")
def proxied_broker(broker: Broker, proxy: RecordingProxy) -> tuple[Broker, RecordingProxy]:
    proxy.upstream_port = broker.port
    return broker, proxy


@pytest.fixture
def sarama(sarama_peer: Path, proxied_broker: tuple[Broker, RecordingProxy],
           raw_client: Callable[[int], Any]) -> Sarama:
    return Sarama(sarama_peer, *proxied_broker, raw_client)


# --- records --------------------------------------------------------------------------------


def value_of(i: int) -> str:
    return f"value-{i:06d}-" + "abcdefgh" * (i % 5)  # as tests/peers/sarama/main.go writes it


def produced_positions(run: Run, start: int, n: int) -> dict[tuple[int, int], dict[str, Any]]:
    """(partition, offset) -> the produced record; checks each record was acknowledged once at
    a distinct position."""
    keys = [line["key"] for line in run.lines]
    assert sorted(keys) == [f"key-{i:06d}" for i in range(start, start + n)]
    positions = {(line["partition"], line["offset"]): line for line in run.lines}
    assert len(positions) == n, "two records were acknowledged at the same offset"
    return positions


def consumed_positions(run: Run) -> dict[tuple[int, int], dict[str, Any]]:
    read: dict[tuple[int, int], dict[str, Any]] = {}
    for line in run.lines:
        if "offset" not in line:
            continue  # a session line
        position = (line["partition"], line["offset"])
        assert position not in read, f"read twice: {line}"
        read[position] = line
    return read


def committed_offsets(broker: Broker, group: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": f"{HOST}:{broker.port}", "group.id": group,
                         "client.id": "committed-check"})
    try:
        got = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)],
                                 timeout=30)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in got}


def record_set_magics(records: bytes) -> list[int]:
    """The magic byte of each whole entry (batch or message) of a fetched record set."""
    magics, pos = [], 0
    while pos + 17 <= len(records):
        size = int.from_bytes(records[pos + 8:pos + 12], "big", signed=True)
        if pos + 12 + size > len(records):
            break  # a partial entry may end a fetch
        magics.append(records[pos + 16])
        pos += 12 + size
    return magics


def assert_fetch_down_converted(proxy: RecordingProxy, client_id: str) -> None:
    """Fetch v2-v3 answers carry magic 1 message sets only (v0-v1: magic 0): Kafka converts
    v2 batches down for clients that asked with a version older than the v2 format (KIP-98:
    Fetch v4), as KafkaApis.handleFetchRequest does."""
    from samsa.protocol import decode_response

    seen = 0
    for request, frame in proxy.responses:
        if request.client_id != client_id or request.api_version >= 4:
            continue
        want = 0 if request.api_version <= 1 else 1
        _, response = decode_response(FETCH_KEY, request.api_version, frame)
        for topic in response.responses:
            for part in topic.partitions:
                magics = record_set_magics(bytes(part.records or b""))
                seen += len(magics)
                assert set(magics) <= {want}, (
                    f"Fetch v{request.api_version} answered {topic.topic}-"
                    f"{part.partition_index} with magic {sorted(set(magics))}, not {want}")
    assert seen, "no old Fetch answer carried records"


# --- tests ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version,codec,idempotent", ROUND_TRIPS,
                         ids=[f"{v}-{c}" for v, c, _ in ROUND_TRIPS])
def test_sarama_produce_and_group_consume(sarama: Sarama, read_stored: Any, version: str,
                                          codec: str, idempotent: bool) -> None:
    """acks=all, compressed: every acknowledged record is stored and read once by a consumer
    group, whose commits (OffsetCommit v1) hold, so a second session reads only newer ones."""
    broker = sarama.broker
    topic, group, n, more = f"sarama-{version}-{codec}", f"sarama-group-{version}", 2000, 300
    base_ts = 1_700_000_000_000
    sarama.create_topic(topic)
    produce_flags = ["-codec", codec, "-timestamp-base", str(base_ts), "-chunk", "250"]
    if idempotent:
        produce_flags.append("-idempotent")
    run, producer_id = sarama.check("produce", version, topic, *produce_flags, "-n", str(n))
    written = produced_positions(run, 0, n)

    # Stored compressed, as acknowledged (the broker may rewrite magic 0/1 sets as v2 batches
    # but keeps the codec, as Kafka's LogValidator does).
    stored: dict[tuple[int, int], tuple[bytes | None, int]] = {}
    for p in range(PARTITIONS):
        for batch in read_stored(broker.data_dir, topic, p):
            assert batch.header.compression == _CODEC_IDS[codec], \
                f"{topic}-{p} at {batch.header.base_offset}: {batch.header.compression.name}"
            for record in batch:
                stored[(p, record.offset)] = (record.key, record.timestamp)
    assert stored == {pos: (line["key"].encode(), line["timestamp"])
                      for pos, line in written.items()}

    run, consumer_id = sarama.check("consume", version, topic, "-group", group, "-n", str(n))
    read = consumed_positions(run)
    assert read.keys() == written.keys()
    for position, line in read.items():
        i = int(line["key"].removeprefix("key-"))
        assert line["value"] == value_of(i)
        assert line["timestamp"] == written[position]["timestamp"] == base_ts + i
        if version != OLD:  # headers need magic 2
            assert line["headers"] == {"seq": str(i)}

    if version == OLD:
        assert_fetch_down_converted(sarama.proxy, consumer_id)

    ends = {p: 1 + max((o for q, o in written if q == p), default=-1) for p in range(PARTITIONS)}
    assert committed_offsets(broker, group, topic) == ends

    # A new session of the group resumes from the commits: it reads exactly the new records.
    run, _ = sarama.check("produce", version, topic, *produce_flags, "-start", str(n),
                          "-n", str(more))
    newer = produced_positions(run, n, more)
    run, _ = sarama.check("consume", version, topic, "-group", group, "-n", str(more))
    assert consumed_positions(run).keys() == newer.keys()

    used: dict[str, set[int]] = {}
    for client_id in (producer_id, consumer_id):
        for api, versions in sarama.proxy.versions(client_id).items():
            used.setdefault(api, set()).update(versions)
    for api, versions in MAYBE_USED.items():
        if used.get(api) == set(versions):
            del used[api]
    assert used == {api: set(v) for api, v in EXPECTED_VERSIONS[version].items()}, \
        "sarama did not send the versions this test is meant to exercise"


@pytest.mark.parametrize("version,codec", [(OLD, "snappy"), (NEW, "gzip")])
def test_sarama_offsets_for_times(sarama: Sarama, read_stored: Any, version: str,
                                  codec: str) -> None:
    """ListOffsets v1 by timestamp finds each record sarama wrote.  sarama 1.22 sends v2
    batches with maxTimestamp -1 and magic 1 wrappers stamped with their *first* record's
    time: the broker must index the records' real maximum (Kafka's LogValidator recomputes
    it), or lookups past a batch's first record miss.  Compressed both ways, so the broker
    must read inside the batch; snappy as sarama writes it in magic 1 wrappers: a raw snappy
    block, without the xerial framing Kafka's Java clients use (Kafka reads both)."""
    broker = sarama.broker
    topic, n, base_ts = f"sarama-times-{version}-{codec}", 400, 1_700_000_000_000
    sarama.create_topic(topic)
    run, _ = sarama.check("produce", version, topic, "-codec", codec, "-n", str(n),
                          "-chunk", "100", "-timestamp-base", str(base_ts))
    written = produced_positions(run, 0, n)
    for p in range(PARTITIONS):
        # Timestamps grow with offsets in each partition: asking for a record's timestamp
        # must answer that record's offset.
        in_p = sorted((o, line["timestamp"]) for (q, o), line in written.items() if q == p)
        assert in_p, f"no record went to partition {p}"
        times = [ts for _, ts in in_p] + [in_p[-1][1] + 1]
        run, _ = sarama.check("offsets", version, topic, "-partition", str(p),
                              "-times", ",".join(map(str, times)))
        got = [line["offset"] for line in run.lines]
        want = [o for o, _ in in_p] + [-1]  # past the last timestamp: no offset
        wrong = [(ts, g, w) for ts, g, w in zip(times, got, want, strict=True) if g != w]
        assert not wrong, (f"{topic}-{p}: (timestamp, answered, expected) {wrong[:5]} "
                           f"({len(wrong)} of {len(want)} wrong); stored max timestamps: "
                           f"{[b.header.max_timestamp for b in read_stored(broker.data_dir, topic, p)]}")


@pytest.mark.parametrize("version", [OLD, NEW])
def test_sarama_admin_create_topic_and_describe_configs(sarama: Sarama, version: str) -> None:
    """ClusterAdmin creates a topic with a config (CreateTopics v0 for 0.10.2.0, v2 for 2.1.0)
    and, as 2.1.0, reads it back with DescribeConfigs v0 -- the only version sarama 1.22 sends
    (it refuses to send it at all when configured older than 0.11)."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    topic = f"sarama-admin-{version}"
    run, client_id = sarama.check("admin", version, topic, "-partitions", "3",
                                  "-retention-ms", "3600000")
    versions = sarama.proxy.versions(client_id)
    assert versions["CreateTopics"] == ([0] if version == OLD else [2])

    # What was created, read independently.
    admin = AdminClient({"bootstrap.servers": f"{HOST}:{sarama.broker.port}"})
    assert len(admin.list_topics(topic, timeout=30).topics[topic].partitions) == 3
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    described = admin.describe_configs([resource])[resource].result(timeout=30)
    assert described["retention.ms"].value == "3600000"

    if version == OLD:
        assert "DescribeConfigs" not in versions
        return
    assert versions["DescribeConfigs"] == [0]
    configs = next(line["configs"] for line in run.lines if "configs" in line)
    assert configs["retention.ms"] == {"value": "3600000", "default": False,
                                       "read_only": False, "sensitive": False}
    assert configs["cleanup.policy"] == {"value": "delete", "default": True,
                                         "read_only": False, "sensitive": False}


def test_sarama_zstd_on_produce_v3_is_refused(sarama: Sarama, read_stored: Any) -> None:
    """sarama 1.22 sends zstd batches on Produce v3; Kafka refuses zstd below Produce v7
    (KIP-110) with UNSUPPORTED_COMPRESSION_TYPE (76), and stores nothing."""
    topic = "sarama-zstd"
    sarama.create_topic(topic)
    run, client_id = sarama.run("produce", NEW, topic, "-codec", "zstd", "-n", "10")
    assert run.returncode == 1 and run.error is not None and run.error.get("kerror") == 76, \
        sarama.explain(run, client_id)
    assert sarama.proxy.versions(client_id)["Produce"] == [3]
    assert all(read_stored(sarama.broker.data_dir, topic, p) == [] for p in range(PARTITIONS))
