"""The idempotent producer's epoch bump against the samsa broker.

Kafka answers InitProducerId without a transactional id with a fresh producer id, so the
idempotent producer bumps its epoch locally (Java's
TransactionManager.bumpIdempotentEpochAndResetIdIfNeeded) and restarts the partition at
sequence 0, which the broker accepts at a higher epoch (ProducerAppendInfo.checkSequence).
"""

from __future__ import annotations

from pathlib import Path

from samsa import KafkaProducer
from samsa.broker import Broker
from samsa.records import RecordBatchBuilder, iter_batches

from .test_producer_mock import FAST


def _stolen_batch(producer_id: int, epoch: int, sequence: int, count: int) -> bytes:
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=epoch,
                                 base_sequence=sequence)
    for i in range(count):
        builder.append(1_700_000_000_000, b"k", b"stolen-%d" % i)
    return builder.build()


def test_out_of_order_sequence_bumps_the_epoch_locally_and_delivers(tmp_path: Path) -> None:
    with Broker(data_dir=tmp_path, port=0, config={"num.partitions": 1}) as broker:
        config = {"bootstrap.servers": broker.bootstrap_servers, **FAST}
        with KafkaProducer(config) as producer:
            assert producer.send("bump", b"first", partition=0).get(timeout=30).offset == 0
            before = producer.metrics()
            pid, epoch = before["producer-id"], before["producer-epoch"]
            # Someone else appends sequences 1-2 under this id and epoch: the producer's next
            # batch (sequence 1, one record) is out of order on the broker.
            log = broker.log_manager.get_log("bump", 0)
            log.append_as_leader(_stolen_batch(pid, epoch, 1, 2), leader_epoch=0)
            second = producer.send("bump", b"second", partition=0).get(timeout=30)
            after = producer.metrics()
        assert second.offset == 3
        assert (after["producer-id"], after["producer-epoch"]) == (pid, epoch + 1)
        assert after["producer-epoch-bump-total"] == 1
        data = log.read(0, 1 << 20).records
        stored = [(b.producer_id, b.producer_epoch, b.base_sequence, [r.value for r in b])
                  for b in iter_batches(data if isinstance(data, bytes) else data.read())]
    assert stored == [(pid, epoch, 0, [b"first"]), (pid, epoch, 1, [b"stolen-0", b"stolen-1"]),
                      (pid, epoch + 1, 0, [b"second"])]
