from __future__ import annotations

from typing import Any

import pytest

from samsa.protocol import FetchRequest, ProduceRequest
from samsa.records.memory_records import iter_batches

FetchTopic = FetchRequest.FetchTopic
FetchPartition = FetchRequest.FetchPartition


def fetch_request(parts: list[tuple[str, int, int]], *, max_wait_ms: int = 0,
                  min_bytes: int = 1, max_bytes: int = 50 << 20,
                  partition_max_bytes: int = 1 << 20, isolation_level: int = 0,
                  current_leader_epoch: int = -1) -> Any:
    topics: dict[str, list[Any]] = {}
    for topic, partition, offset in parts:
        topics.setdefault(topic, []).append(FetchPartition(
            partition=partition, fetch_offset=offset, partition_max_bytes=partition_max_bytes,
            current_leader_epoch=current_leader_epoch))
    return FetchRequest(max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                        isolation_level=isolation_level,
                        topics=[FetchTopic(topic=t, partitions=p) for t, p in topics.items()])


def append(log_manager: Any, topic: str, partition: int, batch: bytes) -> None:
    log_manager.get_log(topic, partition).append_as_leader(batch, leader_epoch=0)


def partitions(response: Any) -> dict[tuple[str, int], Any]:
    return {(t.topic, p.partition_index): p for t in response.responses for p in t.partitions}


def values(records: Any) -> list[bytes]:
    return [r.value for b in iter_batches(records) for r in b]


@pytest.mark.parametrize("version", [4, 5, 7, 10, 11, 12])
def test_fetch_returns_records_and_offsets(client: Any, log_manager: Any, make_batch: Any,
                                           version: int) -> None:
    log_manager.create_topic("t", 1)
    append(log_manager, "t", 0, make_batch(b"a", b"b"))
    append(log_manager, "t", 0, make_batch(b"c"))
    response = client.call(fetch_request([("t", 0, 0)]), version)
    p = partitions(response)[("t", 0)]
    assert p.error_code == 0
    assert values(p.records) == [b"a", b"b", b"c"]
    assert p.high_watermark == 3 and p.last_stable_offset == 3
    if version >= 5:
        assert p.log_start_offset == 0
    assert p.aborted_transactions is None
    if version >= 7:
        assert response.session_id == 0 and response.error_code == 0
    if version >= 11:
        assert p.preferred_read_replica == -1


def test_fetch_from_the_middle_starts_at_the_containing_batch(client: Any, log_manager: Any,
                                                              make_batch: Any) -> None:
    log_manager.create_topic("t", 1)
    append(log_manager, "t", 0, make_batch(b"a", b"b"))
    append(log_manager, "t", 0, make_batch(b"c"))
    p = partitions(client.call(fetch_request([("t", 0, 2)]), 11))[("t", 0)]
    assert values(p.records) == [b"c"]
    p = partitions(client.call(fetch_request([("t", 0, 1)]), 11))[("t", 0)]
    assert values(p.records)[0] == b"a"  # the whole batch holding offset 1; clients skip


def test_empty_partition_has_zero_length_records_not_null(client: Any,
                                                          log_manager: Any) -> None:
    log_manager.create_topic("t", 1)
    p = partitions(client.call(fetch_request([("t", 0, 0)]), 12))[("t", 0)]
    assert p.error_code == 0 and p.records is not None and len(p.records) == 0


def test_every_requested_partition_is_in_the_response(client: Any, log_manager: Any,
                                                      make_batch: Any) -> None:
    log_manager.create_topic("t", 2)
    append(log_manager, "t", 1, make_batch(b"x"))
    response = client.call(fetch_request([("t", 0, 0), ("t", 1, 0), ("t", 9, 0),
                                          ("missing", 0, 0), ("t", 1, 5)]), 11)
    got = [(t.topic, p.partition_index, p.error_code) for t in response.responses
           for p in t.partitions]
    assert got == [("t", 0, 0), ("t", 1, 0), ("t", 9, 3), ("t", 1, 1), ("missing", 0, 3)]


def test_offset_out_of_range(client: Any, log_manager: Any, make_batch: Any) -> None:
    log_manager.create_topic("t", 1)
    append(log_manager, "t", 0, make_batch(b"x"))
    p = partitions(client.call(fetch_request([("t", 0, 2)]), 11))[("t", 0)]
    assert p.error_code == 1 and p.high_watermark == -1
    log_manager.get_log("t", 0).delete_records_before(1)
    p = partitions(client.call(fetch_request([("t", 0, 0)]), 11))[("t", 0)]
    assert p.error_code == 1


def test_partition_max_bytes_still_returns_the_first_whole_batch(client: Any, log_manager: Any,
                                                                 make_batch: Any) -> None:
    """KIP-74: a batch larger than the limits comes back whole when it is the first data."""
    log_manager.create_topic("t", 2)
    big = make_batch(b"x" * 5000)
    append(log_manager, "t", 0, big)
    append(log_manager, "t", 0, make_batch(b"y"))
    append(log_manager, "t", 1, make_batch(b"z" * 100))
    response = client.call(fetch_request([("t", 0, 0), ("t", 1, 0)], partition_max_bytes=100,
                                         max_bytes=1000), 11)
    got = partitions(response)
    assert len(got[("t", 0)].records) == len(big)  # whole first batch, not the second
    assert values(got[("t", 0)].records) == [b"x" * 5000]
    # max_bytes (1000) is used up by the first partition: the second returns nothing.
    assert got[("t", 1)].error_code == 0 and len(got[("t", 1)].records) == 0


def test_max_bytes_spans_partitions(client: Any, log_manager: Any, make_batch: Any) -> None:
    log_manager.create_topic("t", 3)
    sizes = []
    for p in range(3):
        batch = make_batch(bytes([65 + p]) * 300)
        sizes.append(len(batch))
        append(log_manager, "t", p, batch)
    response = client.call(fetch_request([("t", 0, 0), ("t", 1, 0), ("t", 2, 0)],
                                         max_bytes=sizes[0] + sizes[1] + 10), 11)
    got = partitions(response)
    assert [len(got[("t", p)].records) for p in range(3)][:2] == sizes[:2]
    # The third gets at most the 10 bytes left: not a whole batch.
    assert len(values(got[("t", 2)].records)) == 0


def test_long_poll_is_woken_by_a_produce(client: Any, log_manager: Any, apis: Any,
                                         make_batch: Any) -> None:
    log_manager.create_topic("t", 1)
    ctx = client.send(fetch_request([("t", 0, 0)], max_wait_ms=60_000, min_bytes=1), 11)
    assert ctx.outcome is None  # parked, no thread blocked
    assert apis.services.fetch_purgatory.watched() == 1
    request = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=make_batch(b"wake"))])])
    client.call(request, 9)
    response = ctx.wait()
    assert values(partitions(response)[("t", 0)].records) == [b"wake"]
    assert apis.services.fetch_purgatory.watched() == 0


def test_long_poll_waits_for_min_bytes(client: Any, log_manager: Any, apis: Any,
                                       make_batch: Any) -> None:
    from samsa.broker.apis.produce import handle_produce  # noqa: F401 - same path as produce

    log_manager.create_topic("t", 1)
    first = make_batch(b"1")
    ctx = client.send(fetch_request([("t", 0, 0)], max_wait_ms=60_000,
                                    min_bytes=len(first) + 1), 11)
    append(log_manager, "t", 0, first)
    apis.services.fetch_purgatory.check_and_complete(("t", 0))
    assert ctx.outcome is None  # not enough yet
    append(log_manager, "t", 0, make_batch(b"2"))
    apis.services.fetch_purgatory.check_and_complete(("t", 0))
    assert values(partitions(ctx.wait())[("t", 0)].records) == [b"1", b"2"]


def test_long_poll_expires_with_an_empty_answer(client: Any, log_manager: Any) -> None:
    log_manager.create_topic("t", 1)
    ctx = client.send(fetch_request([("t", 0, 0)], max_wait_ms=20, min_bytes=1), 11)
    p = partitions(ctx.wait())[("t", 0)]
    assert p.error_code == 0 and len(p.records) == 0


def test_parked_fetches_are_answered_on_close(client: Any, log_manager: Any, apis: Any) -> None:
    log_manager.create_topic("t", 1)
    ctx = client.send(fetch_request([("t", 0, 0)], max_wait_ms=600_000), 11)
    apis.close()
    assert ctx.outcome == "respond"


def test_deleting_a_topic_completes_its_parked_fetch(client: Any, log_manager: Any) -> None:
    from samsa.protocol import DeleteTopicsRequest

    log_manager.create_topic("t", 1)
    ctx = client.send(fetch_request([("t", 0, 0)], max_wait_ms=600_000), 11)
    client.call(DeleteTopicsRequest(topic_names=["t"], timeout_ms=1000), 4)
    assert partitions(ctx.wait())[("t", 0)].error_code == 3


def test_errors_answer_at_once_without_waiting(client: Any) -> None:
    ctx = client.send(fetch_request([("missing", 0, 0)], max_wait_ms=600_000), 11)
    assert ctx.outcome == "respond"


def test_unknown_session_is_refused(client: Any, log_manager: Any) -> None:
    log_manager.create_topic("t", 1)
    request = fetch_request([("t", 0, 0)])
    request.session_id = 12
    request.session_epoch = 3
    assert client.call(request, 11).error_code == 70  # FETCH_SESSION_ID_NOT_FOUND
    request.session_id = 0
    assert client.call(request, 11).error_code == 71  # INVALID_FETCH_SESSION_EPOCH
    request.session_epoch = 0  # asks for a new session: declined with session id 0
    response = client.call(request, 11)
    assert response.error_code == 0 and response.session_id == 0


def test_leader_epoch_checks(client: Any, log_manager: Any) -> None:
    log_manager.create_topic("t", 1)
    assert partitions(client.call(fetch_request([("t", 0, 0)], current_leader_epoch=0), 11)) \
        [("t", 0)].error_code == 0
    assert partitions(client.call(fetch_request([("t", 0, 0)], current_leader_epoch=5), 11)) \
        [("t", 0)].error_code == 75  # UNKNOWN_LEADER_EPOCH


def test_read_committed_without_transactions(client: Any, log_manager: Any,
                                             make_batch: Any) -> None:
    log_manager.create_topic("t", 1)
    append(log_manager, "t", 0, make_batch(b"a"))
    p = partitions(client.call(fetch_request([("t", 0, 0)], isolation_level=1), 11))[("t", 0)]
    assert values(p.records) == [b"a"]
    assert p.last_stable_offset == 1 and p.aborted_transactions == []




def test_a_long_poll_answered_early_keeps_no_segment_file_open(
        client: Any, log_manager: Any, make_batch: Any) -> None:
    """The purgatory may hold a completed fetch until its deadline (a day here); what it read
    must not keep the segment's file open after the topic is deleted."""
    import os

    from samsa.protocol import DeleteTopicsRequest

    def deleted_files_open() -> list[str]:
        targets = []
        for name in os.listdir("/proc/self/fd"):
            try:
                targets.append(os.readlink(f"/proc/self/fd/{name}"))
            except OSError:
                pass
        return [t for t in targets if t.endswith(" (deleted)") and "/t-0" in t]

    log_manager.create_topic("t", 1)
    ctx = client.send(fetch_request([("t", 0, 0)], max_wait_ms=86_400_000), 11)
    request = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=make_batch(b"wake"))])])
    client.call(request, 9)
    assert values(partitions(ctx.wait())[("t", 0)].records) == [b"wake"]
    del ctx  # the client's own copy of the response
    client.call(DeleteTopicsRequest(topic_names=["t"], timeout_ms=1000), 4)
    assert deleted_files_open() == []
