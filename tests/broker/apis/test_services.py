"""BrokerServices: shared helpers of the request handlers."""

from __future__ import annotations

from typing import Any


def test_auto_create_of_a_topic_created_meanwhile_returns_that_topic(apis: Any,
                                                                     log_manager: Any) -> None:
    # Two Metadata requests may both find the topic missing; the second create loses the race
    # and answers with the first one's topic (as Kafka's TopicExistsException is not an error
    # for auto-creation).
    existing = log_manager.create_topic("raced", 3)
    info = apis.services.auto_create("raced")
    assert info is not None
    assert (info.name, info.partitions, info.topic_id) == ("raced", 3, existing.topic_id)
