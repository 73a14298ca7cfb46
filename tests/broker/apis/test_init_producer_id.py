"""InitProducerId over the wire: raw frames to an in-process broker.

@platformatic/kafka starts every idempotent producer with InitProducerId v5 {transactional_id:
null, producer_id: 0, producer_epoch: 0}.  Kafka (TransactionCoordinator.handleInitProducerId)
hands each one a fresh id with epoch 0; if two of them shared an (id, epoch), the partition
would take their first batches for retries of one another and acknowledge records it never
wrote.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from samsa.broker import Broker
from samsa.broker.apis.producer_ids import ProducerIdManager
from samsa.protocol import FetchRequest, InitProducerIdRequest
from samsa.records import RecordBatchBuilder, iter_batches

INVALID_REQUEST = 42


def _init(client: Any, producer_id: int, epoch: int, version: int = 5) -> Any:
    return client.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000,
                                             producer_id=producer_id, producer_epoch=epoch),
                       version)


def _batch(producer_id: int, epoch: int, sequence: int, value: bytes) -> bytes:
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=epoch,
                                 base_sequence=sequence)
    builder.append(1_700_000_000_000, b"k", value)
    return builder.build()


def _fetch_values(client: Any, topic: str) -> list[bytes | None]:
    request = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[
        FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    part = client.call(request, 11).responses[0].partitions[0]
    assert part.error_code == 0
    return [r.value for b in iter_batches(bytes(part.records)) for r in b]


def test_four_producers_starting_from_zero_zero_keep_all_records(
        broker: Broker, raw_client: Callable[[int], Any]) -> None:
    client = raw_client(broker.port)
    assert client.create_topic("four-producers", 1) == 0
    answers = [_init(client, 0, 0) for _ in range(4)]
    assert [a.error_code for a in answers] == [0] * 4
    ids = [(a.producer_id, a.producer_epoch) for a in answers]
    assert len({pid for pid, _ in ids}) == 4, f"producer ids repeat: {ids}"
    assert all(epoch == 0 for _, epoch in ids)

    values = [b"producer-%d" % i for i in range(4)]
    for i, ((pid, epoch), value) in enumerate(zip(ids, values, strict=True)):
        part = client.produce("four-producers", 0, _batch(pid, epoch, 0, value), version=8)
        assert (part.error_code, part.base_offset) == (0, i)
    assert client.list_offset("four-producers", 0) == 4
    assert _fetch_values(client, "four-producers") == values


def test_current_id_and_epoch_never_bump_without_a_transactional_id(
        broker: Broker, raw_client: Callable[[int], Any]) -> None:
    client = raw_client(broker.port)
    first = _init(client, -1, -1)
    again = _init(client, first.producer_id, first.producer_epoch, version=3)
    assert again.error_code == 0 and again.producer_epoch == 0
    assert again.producer_id != first.producer_id
    foreign = _init(client, 10**12, 3, version=4)
    assert (foreign.error_code, foreign.producer_epoch) == (0, 0)
    assert foreign.producer_id not in (10**12, first.producer_id, again.producer_id)


def test_id_without_epoch_is_an_invalid_request(
        broker: Broker, raw_client: Callable[[int], Any]) -> None:
    client = raw_client(broker.port)
    for producer_id, epoch in ((5, -1), (-1, 0)):
        answer = _init(client, producer_id, epoch)
        assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (
            INVALID_REQUEST, -1, -1)


def test_two_id_managers_over_one_directory_never_share_ids(tmp_path: Path) -> None:
    # A second KafkaApis over the same logs (tests, tools) must not hand out the ids the first
    # reserved: a block starts after the end stored by whichever manager reserved last.
    first, second = ProducerIdManager(tmp_path, block_size=3), ProducerIdManager(tmp_path, block_size=3)
    ids = [manager.generate() for _ in range(5) for manager in (first, second)]
    assert len(set(ids)) == len(ids), sorted(ids)
