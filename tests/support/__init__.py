"""Test helpers that drive independent Kafka peers (librdkafka's mock cluster)."""
