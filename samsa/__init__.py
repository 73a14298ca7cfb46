"""Samsa: Apache Kafka's producer architecture rebuilt in Python."""

from samsa._version import __version__

__all__ = ["KafkaConsumer", "KafkaProducer", "RecordMetadata", "__version__"]


def __getattr__(name: str) -> object:
    # The user-facing shortcuts, lazy so that `import samsa` stays cheap (the CLI, the broker)
    # and so that importing any lower package (samsa.net, samsa.records, ...) never pulls in
    # the clients; code inside samsa imports the defining modules, never these names.
    if name in ("KafkaProducer", "RecordMetadata"):
        from samsa.producer import producer

        return getattr(producer, name)
    if name == "KafkaConsumer":
        from samsa.consumer.consumer import KafkaConsumer

        return KafkaConsumer
    raise AttributeError(f"module 'samsa' has no attribute {name!r}")
