"""isolation.level=read_committed in the fetcher: aborted transactions and transaction markers.

The embedded broker has no transactions and librdkafka's mock returns no AbortedTransactions,
so the fetched partition data is written here as a transaction coordinator and producers would
leave it in a log (samsa.records builds the batches and markers), and handed to the fetcher's
CompletedFetch with the AbortedTransactions list a Fetch response carries.  Expected results
follow Kafka's CompletedFetch.nextFetchedRecord / FetchCollector (KIP-98).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from samsa.consumer.fetcher import CompletedFetch
from samsa.net.cluster import TopicPartition
from samsa.records import RecordBatchBuilder
from samsa.records.control import ControlRecordType, build_control_batch

TP = TopicPartition("txn", 0)
ABORTING, COMMITTING = 7, 8  # producer ids


def data_batch(base_offset: int, values: list[bytes], producer_id: int = -1,
               transactional: bool = False) -> bytes:
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                 base_sequence=0 if producer_id >= 0 else -1,
                                 is_transactional=transactional, base_offset=base_offset)
    for value in values:
        builder.append(1_700_000_000_000, None, value)
    return builder.build()


def marker(offset: int, kind: ControlRecordType, producer_id: int) -> bytes:
    return build_control_batch(kind, producer_id, 0, coordinator_epoch=3,
                               timestamp_ms=1_700_000_000_000, base_offset=offset)


# Offsets 0-1: ABORTING's first transaction, later aborted.
# 2-3: COMMITTING's transaction, interleaved, later committed.
# 4: a non-transactional record.
# 5: ABORT marker for ABORTING; 6: COMMIT marker for COMMITTING.
# 7-8: ABORTING's next transaction (same producer id), committed by the marker at 9.
LOG = b"".join([
    data_batch(0, [b"aborted-0", b"aborted-1"], ABORTING, transactional=True),
    data_batch(2, [b"committed-2", b"committed-3"], COMMITTING, transactional=True),
    data_batch(4, [b"plain-4"]),
    marker(5, ControlRecordType.ABORT, ABORTING),
    marker(6, ControlRecordType.COMMIT, COMMITTING),
    data_batch(7, [b"next-7", b"next-8"], ABORTING, transactional=True),
    marker(9, ControlRecordType.COMMIT, ABORTING),
])
ABORTED = [SimpleNamespace(producer_id=ABORTING, first_offset=0)]


def take_all(cf: CompletedFetch, per_take: int = 100) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    while not cf.consumed:
        records = cf.take(per_take, None, None)
        if not records and not cf.consumed:
            break
        out += [(r.offset, r.value) for r in records]
    return out


@pytest.mark.parametrize("per_take", [1, 100])
def test_read_committed_skips_aborted_records_and_markers(per_take: int) -> None:
    cf = CompletedFetch(TP, 0, LOG, check_crcs=True, read_committed=True, aborted=ABORTED)
    got = take_all(cf, per_take)
    assert got == [(2, b"committed-2"), (3, b"committed-3"), (4, b"plain-4"),
                   (7, b"next-7"), (8, b"next-8")]
    # The position moves past the last marker: the next fetch starts after it.
    assert cf.next_offset == 10


def test_read_uncommitted_returns_aborted_records_but_never_markers() -> None:
    cf = CompletedFetch(TP, 0, LOG, check_crcs=True, read_committed=False, aborted=ABORTED)
    got = take_all(cf)
    assert [offset for offset, _ in got] == [0, 1, 2, 3, 4, 7, 8]
    assert cf.next_offset == 10


def test_read_committed_without_aborted_transactions_returns_every_data_record() -> None:
    # A Fetch response lists only the transactions aborted in the returned range; none listed
    # means every transactional batch is committed (or its outcome lies beyond the LSO).
    cf = CompletedFetch(TP, 0, LOG, check_crcs=True, read_committed=True, aborted=None)
    assert [offset for offset, _ in take_all(cf)] == [0, 1, 2, 3, 4, 7, 8]


def test_read_committed_fetch_from_inside_the_log_skips_what_was_already_returned() -> None:
    # A fetch at offset 3 gets whole batches back (from offset 2): records before the fetch
    # offset are dropped, and the abort of ABORTING still hides its batch at 0-1.
    cf = CompletedFetch(TP, 3, LOG, check_crcs=True, read_committed=True, aborted=ABORTED)
    assert [offset for offset, _ in take_all(cf)] == [3, 4, 7, 8]


def test_only_a_marker_left_moves_the_position_past_it() -> None:
    # A response holding nothing but a marker (the end of a transaction) returns no records
    # and still advances the position, or the consumer would fetch the marker forever.
    cf = CompletedFetch(TP, 9, marker(9, ControlRecordType.COMMIT, ABORTING), check_crcs=True,
                        read_committed=True, aborted=None)
    assert cf.take(10, None, None) == []
    assert cf.consumed and cf.next_offset == 10


@pytest.mark.parametrize(("level", "isolation", "min_version"),
                         [("read_committed", 1, 2), ("read_uncommitted", 0, 1)])
def test_list_offsets_carries_the_isolation_level(level: str, isolation: int, min_version: int) -> None:
    # end_offsets() / auto.offset.reset=latest of a read_committed consumer are the LSO: the
    # broker answers it for isolation_level 1, a field ListOffsets has from v2 on
    # (ListOffsetsRequest.Builder.forConsumer), so older versions are not used.
    from samsa.consumer import KafkaConsumer

    with KafkaConsumer({"bootstrap.servers": "127.0.0.1:9", "isolation.level": level}) as c:
        request = c._fetcher._list_offsets_request({TP: -1})
        assert request.isolation_level == isolation
        assert c._fetcher.list_offsets_min_version == min_version
