"""A well-behaved client on its own thread while the broker is attacked: each round trip is
ApiVersions, Metadata, a Produce (acks=all) of one record, and a Fetch that reads it back.
Every request must be answered with error 0 and the record must come back as written; a
stalled broker shows as a socket timeout, recorded as an error."""

from __future__ import annotations

import threading
import time

from samsa.protocol import ApiVersionsRequest, FetchRequest, MetadataRequest
from samsa.records import RecordBatchBuilder, iter_batches
from tests.broker.conftest import RawClient

HEALTHY_TOPIC = "fuzz-healthy"


class HealthyClient:
    def __init__(self, port: int, *, pause_s: float = 0.05, timeout_s: float = 30.0) -> None:
        self.port = port
        self.pause_s = pause_s
        self.timeout_s = timeout_s
        self.rounds = 0
        self.errors: list[str] = []
        self._next_offset = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fuzz-healthy-client",
                                        daemon=True)

    def start(self) -> HealthyClient:
        client = RawClient(self.port, self.timeout_s)
        try:
            assert client.create_topic(HEALTHY_TOPIC, 1) in (0, 36)
        finally:
            client.close()
        self._thread.start()
        return self

    def round_trip(self, client: RawClient) -> None:
        """One round; raises AssertionError (or OSError) saying what went wrong."""
        versions = client.call(ApiVersionsRequest(client_software_name="healthy",
                                                  client_software_version="1"), 3)
        assert versions.error_code == 0, f"ApiVersions: error {versions.error_code}"
        metadata = client.call(MetadataRequest(topics=[
            MetadataRequest.MetadataRequestTopic(name=HEALTHY_TOPIC)]), 12)
        assert metadata.topics[0].error_code == 0, f"Metadata: {metadata.topics[0]}"
        value = b"healthy-%d" % self.rounds
        builder = RecordBatchBuilder()
        builder.append(None, None, value)
        produced = client.produce(HEALTHY_TOPIC, 0, builder.build(), version=9)
        assert produced.error_code == 0, f"Produce: error {produced.error_code}"
        offset = int(produced.base_offset)
        fetch = client.call(FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[
            FetchRequest.FetchTopic(topic=HEALTHY_TOPIC, partitions=[
                FetchRequest.FetchPartition(partition=0, fetch_offset=offset,
                                            partition_max_bytes=1 << 20)])]), 12)
        part = fetch.responses[0].partitions[0]
        assert part.error_code == 0, f"Fetch: error {part.error_code}"
        got = [r.value for b in iter_batches(bytes(part.records or b"")) for r in b]
        assert got[:1] == [value], f"Fetch at {offset} gave {got[:1]}, not {value!r}"
        self.rounds += 1

    def _run(self) -> None:
        client: RawClient | None = None
        while not self._stop.is_set():
            try:
                if client is None or self.rounds % 20 == 0:
                    if client is not None:
                        client.close()
                    client = RawClient(self.port, self.timeout_s)  # new connections too
                self.round_trip(client)
            except (AssertionError, OSError) as exc:
                self.errors.append(f"round {self.rounds}: {exc!r}")
                return
            time.sleep(self.pause_s)
        if client is not None:
            client.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(self.timeout_s * 4)
        assert not self._thread.is_alive(), "the healthy client is stuck in a request"
