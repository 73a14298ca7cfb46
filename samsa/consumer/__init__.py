"""The consumer: KafkaConsumer, Fetcher, SubscriptionState, group coordinator client, assignors."""

from samsa.consumer.consumer import KafkaConsumer
from samsa.consumer.errors import (
    CommitFailedError,
    ConsumerClosedError,
    NoOffsetForPartitionError,
)
from samsa.consumer.group_metadata import ConsumerGroupMetadata
from samsa.consumer.records import (
    ConsumerRecord,
    ConsumerRecords,
    OffsetAndMetadata,
    OffsetAndTimestamp,
)
from samsa.net.cluster import TopicPartition

__all__ = [
    "CommitFailedError", "ConsumerClosedError", "ConsumerGroupMetadata", "ConsumerRecord", "ConsumerRecords",
    "KafkaConsumer", "NoOffsetForPartitionError", "OffsetAndMetadata", "OffsetAndTimestamp",
    "TopicPartition",
]
