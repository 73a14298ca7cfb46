"""fetch.max.bytes caps what one Fetch may ask for, as Kafka's KafkaApis.handleFetchRequest
caps a consumer's max_bytes (and min_bytes with it) at the broker's fetch.max.bytes (KIP-541).

Found by the fuzzer: a Fetch that lists one partition a thousand times with max_bytes and
partition_max_bytes at 2^31-1 got a 1.9 GiB response, and from v0-3 (down-converted while sent)
left the broker's RSS about 200 MiB higher.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

from samsa.protocol import FetchRequest, decode_response, encode_request
from samsa.records import RecordBatchBuilder, iter_batches
from tests.broker.conftest import HOST, BrokerProcess, RawClient
from tests.broker.fuzz.target import resources

FETCH_MAX_BYTES = 1 << 20
INT_MAX = (1 << 31) - 1
BATCH_BYTES = 10_000  # about: ten records of 1000 bytes
REPEATS = 200  # the partition listed this many times: 200 x 2 MB without the cap


def _fill(client: RawClient, topic: str, batches: int) -> None:
    for _ in range(batches):
        builder = RecordBatchBuilder()
        for _ in range(10):
            builder.append(None, None, b"x" * 1000)
        assert client.produce(topic, 0, builder.build(), version=9).error_code == 0


def _fetch(port: int, version: int, max_bytes: int, repeats: int) -> tuple[int, int, bytes]:
    """(response bytes, records bytes in it, the records of its first partition)."""
    request = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, topics=[
        FetchRequest.FetchTopic(topic="big", partitions=[
            FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=INT_MAX)])
        for _ in range(repeats)])
    with socket.create_connection((HOST, port), timeout=60) as sock:
        sock.sendall(encode_request(request, version, 1, "fetch-max-bytes"))
        head = sock.recv(4, socket.MSG_WAITALL)
        size = int.from_bytes(head, "big")
        frame = bytearray()
        while len(frame) < size:
            chunk = sock.recv(min(1 << 20, size - len(frame)))
            assert chunk, "the broker closed the connection mid-response"
            frame += chunk
    _, body = decode_response(1, version, bytes(frame))
    parts = [p for t in body.responses for p in t.partitions]
    assert all(p.error_code == 0 for p in parts)
    return size, sum(len(p.records or b"") for p in parts), bytes(parts[0].records or b"")


def test_a_fetch_gets_at_most_fetch_max_bytes(broker_process: Callable[..., BrokerProcess]
                                              ) -> None:
    broker = broker_process({"fetch.max.bytes": FETCH_MAX_BYTES}).start()
    client = RawClient(broker.port)
    assert client.create_topic("big", 1) == 0
    _fill(client, "big", 200)  # about 2 MB: twice the cap
    for version in (12, 4):
        size, records, _ = _fetch(broker.port, version, INT_MAX, REPEATS)
        assert records <= FETCH_MAX_BYTES + BATCH_BYTES, (version, records)
        assert size <= FETCH_MAX_BYTES + REPEATS * 100 + BATCH_BYTES, (version, size)
    # A client's own smaller max_bytes still counts (and the first batch comes whole, KIP-74).
    _, records, first = _fetch(broker.port, 12, 100, 3)
    assert len(list(iter_batches(first))) == 1 and records == len(first)


def test_down_converted_fetch_memory_is_bounded(broker_process: Callable[..., BrokerProcess]
                                                ) -> None:
    broker = broker_process().start()  # fetch.max.bytes at its default, 55 MiB
    client = RawClient(broker.port)
    assert client.create_topic("big", 1) == 0
    _fill(client, "big", 200)
    before = resources(broker.proc.pid).rss_kb  # type: ignore[union-attr]
    size, _, _ = _fetch(broker.port, 3, INT_MAX, 1000)  # v3: magic 1, converted while sent
    grown_kb = resources(broker.proc.pid).rss_kb - before  # type: ignore[union-attr]
    assert size <= 57_671_680 + 1000 * 100 + BATCH_BYTES, size
    assert grown_kb < 100 * 1024, f"RSS grew by {grown_kb} kB for one fetch of {size} bytes"
