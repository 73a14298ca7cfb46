"""Samsa: Apache Kafka's producer architecture rebuilt in Python."""

__version__ = "0.1.0"

__all__ = ["KafkaConsumer", "KafkaProducer", "RecordMetadata", "__version__"]


def __getattr__(name: str) -> object:
    # Lazy, so that `import samsa` stays cheap (the CLI, the broker).
    if name in ("KafkaProducer", "RecordMetadata"):
        from samsa.producer import producer

        return getattr(producer, name)
    if name == "KafkaConsumer":
        from samsa.consumer.consumer import KafkaConsumer

        return KafkaConsumer
    raise AttributeError(f"module 'samsa' has no attribute {name!r}")
