from __future__ import annotations

from pathlib import Path

from samsa.broker.internal_topic import InternalTopic, partition_for
from samsa.broker.log import LogManager
from samsa.records import RecordBatchBuilder


def _batch(*values: bytes) -> bytes:
    builder = RecordBatchBuilder(batch_size_limit=1 << 30)
    for value in values:
        builder.append(None, b"k", value)
    return builder.build()


def test_created_on_first_use_and_keeping_its_partition_count(tmp_path: Path) -> None:
    with LogManager(tmp_path) as logs:
        topic = InternalTopic(logs, "__state", num_partitions=3,
                              configs={"cleanup.policy": "compact"})
        assert not topic.exists()
        topic.ensure_created()
        topic.ensure_created()  # a second call is a no-op
        assert logs.topic("__state").partitions == 3  # type: ignore[union-attr]
        assert logs.get_log("__state", 0).config.cleanup_policy == "compact"
        # Keys stay where they were written: a new setting does not move them.
        again = InternalTopic(logs, "__state", num_partitions=50, configs={})
        assert again.num_partitions == 3
        assert again.partition_for("group-1") == partition_for("group-1", 3)


def test_read_batches_hands_out_every_batch_in_order_from_the_log_start(tmp_path: Path) -> None:
    with LogManager(tmp_path) as logs:
        topic = InternalTopic(logs, "__state", num_partitions=1, configs={})
        topic.ensure_created()
        for i in range(5):
            topic.log(0).append_as_leader(_batch(b"%d-a" % i, b"%d-b" % i), leader_epoch=0)
        topic.log(0).delete_records_before(3)  # the log now starts inside the second batch
        seen = [(record.offset, record.value) for batch, position in topic.read_batches(0)
                for record in batch if record.offset >= position]
        assert seen == [(o, b"%d-%s" % (o // 2, b"ab"[o % 2:o % 2 + 1])) for o in range(3, 10)]
