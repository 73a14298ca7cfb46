"""DescribeTopicPartitions (KIP-966) cursors: Kafka's DescribeTopicPartitionsRequestHandler."""

from __future__ import annotations

from typing import Any

from samsa.protocol import DescribeTopicPartitionsRequest

R = DescribeTopicPartitionsRequest
INVALID_REQUEST = 42


def _call(client: Any, topics: list[str], limit: int, cursor: tuple[str, int] | None) -> Any:
    return client.call(R(topics=[R.TopicRequest(name=t) for t in topics],
                         response_partition_limit=limit,
                         cursor=None if cursor is None else R.Cursor(topic_name=cursor[0],
                                                                     partition_index=cursor[1])),
                       0)


def test_a_negative_cursor_partition_is_an_invalid_request(client: Any, log_manager: Any) -> None:
    log_manager.create_topic("x", 2)
    # Kafka throws InvalidRequestException: every requested topic carries the error.
    response = _call(client, ["x"], 10, ("x", -1))
    assert [(t.name, t.error_code) for t in response.topics] == [("x", INVALID_REQUEST)]
    assert response.next_cursor is None


def test_a_page_that_ends_with_a_topic_points_the_cursor_at_the_next_topic(
        client: Any, log_manager: Any) -> None:
    log_manager.create_topic("x", 2)
    log_manager.create_topic("y", 1)
    page = _call(client, ["x", "y"], 2, None)
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in page.topics] == [
        ("x", [0, 1])]
    assert (page.next_cursor.topic_name, page.next_cursor.partition_index) == ("y", 0)
    rest = _call(client, ["x", "y"], 2, ("y", 0))
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in rest.topics] == [
        ("y", [0])]
    assert rest.next_cursor is None
