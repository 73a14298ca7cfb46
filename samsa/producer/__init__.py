"""The producer: Kafka's Java producer architecture (see docs/architecture.md).

Modules, bottom up (none of these needs the network):

* :mod:`~samsa.producer.config`       ProducerConfig: Kafka's names, defaults and cross-checks.
* :mod:`~samsa.producer.serializers`  key/value serializers and ``as_serialize_fn``.
* :mod:`~samsa.producer.interceptors` ProducerInterceptor protocol and the list runner.
* :mod:`~samsa.producer.partitioner`  murmur2, keyed placement, BuiltInPartitioner (sticky,
  adaptive), RoundRobinPartitioner, the ClusterView protocol.
* :mod:`~samsa.producer.future`       ProduceRequestResult (per batch), RecordFuture (per
  record), RecordMetadata.
* :mod:`~samsa.producer.buffer_pool`  BufferPool (buffer.memory, blocking up to max.block.ms).
* :mod:`~samsa.producer.batch`        ProducerBatch (thunks, completion, split, sequences).
* :mod:`~samsa.producer.accumulator`  RecordAccumulator (append / ready / drain / expiry).

The Sender thread and KafkaProducer build on these.
"""

from samsa.producer.accumulator import (
    ReadyCheckResult,
    RecordAccumulator,
    RecordAppendResult,
)
from samsa.producer.batch import ProducerBatch, TopicPartition
from samsa.producer.buffer_pool import BufferExhaustedError, BufferPool
from samsa.producer.config import ProducerConfig
from samsa.producer.future import ProduceRequestResult, RecordFuture, RecordMetadata
from samsa.producer.interceptors import ProducerInterceptor, ProducerInterceptors
from samsa.producer.partitioner import (
    UNKNOWN_PARTITION,
    BuiltInPartitioner,
    ClusterView,
    Partitioner,
    RoundRobinPartitioner,
    murmur2,
    partition_for_key,
)
from samsa.producer.serializers import Serializer, as_serialize_fn

__all__ = [
    "UNKNOWN_PARTITION",
    "BufferExhaustedError",
    "BufferPool",
    "BuiltInPartitioner",
    "ClusterView",
    "Partitioner",
    "ProduceRequestResult",
    "ProducerBatch",
    "ProducerConfig",
    "ProducerInterceptor",
    "ProducerInterceptors",
    "ReadyCheckResult",
    "RecordAccumulator",
    "RecordAppendResult",
    "RecordFuture",
    "RecordMetadata",
    "RoundRobinPartitioner",
    "Serializer",
    "TopicPartition",
    "as_serialize_fn",
    "murmur2",
    "partition_for_key",
]
