"""Samsa: Apache Kafka's producer architecture rebuilt in Python."""

__version__ = "0.1.0"
