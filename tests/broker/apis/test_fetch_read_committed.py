"""Fetch and ListOffsets with isolation_level=read_committed over a partition holding committed,
aborted, open and non-transactional data (markers written as the coordinator does, through
Log.append_control_marker): what Kafka answers (LSO cap, AbortedTransactions from the
.txnindex, ListOffsets' LSO), then confluent-kafka's read_committed consumer against it."""

from __future__ import annotations

from typing import Any

import pytest

from samsa.broker import Broker
from samsa.broker.log import Log
from samsa.records.memory_records import iter_batches
from tests.support.confluent_reads import read_raw

from .conftest import batch
from .test_fetch import fetch_request, partitions
from .test_offsets import list_offsets

T0 = 1_700_000_000_000


def _txn(log: Log, pid: int, *values: bytes, at: int) -> None:
    log.append_as_leader(batch(*values, producer_id=pid, producer_epoch=0, base_sequence=0,
                               timestamp=T0 + at, transactional=True), leader_epoch=0)


def _plain(log: Log, value: bytes, at: int) -> None:
    log.append_as_leader(batch(value, timestamp=T0 + at), leader_epoch=0)


def _end(log: Log, pid: int, commit: bool, at: int) -> None:
    log.append_control_marker(producer_id=pid, producer_epoch=0, commit=commit,
                              coordinator_epoch=0, leader_epoch=0, now_ms=T0 + at)


def fill(log: Log) -> None:
    """0 plain · 1-2 committed (producer 10) · 3-4 aborted (11) · 5 plain · 6 COMMIT(10) ·
    7 ABORT(11) · 8 committed (12) · 9 COMMIT(12) · 10 open (13) · 11 plain · 12 aborted
    (14) · 13 ABORT(14).  LSO 10, HW 14."""
    _plain(log, b"p0", 0)
    _txn(log, 10, b"c1", b"c2", at=1)
    _txn(log, 11, b"a1", b"a2", at=3)
    _plain(log, b"p1", 5)
    _end(log, 10, True, 6)
    _end(log, 11, False, 7)
    _txn(log, 12, b"c3", at=8)
    _end(log, 12, True, 9)
    _txn(log, 13, b"open", at=10)
    _plain(log, b"after-open", 11)
    _txn(log, 14, b"a3", at=12)
    _end(log, 14, False, 13)


def _offsets(records: Any) -> list[int]:
    return [b.header.base_offset for b in iter_batches(records)]


@pytest.mark.parametrize("version", [4, 5, 7, 11, 12])
def test_read_committed_fetch_stops_at_the_lso_and_lists_aborted_transactions(
        client: Any, log_manager: Any, version: int) -> None:
    log_manager.create_topic("t", 1)
    log = log_manager.get_log("t", 0)
    fill(log)
    assert (log.last_stable_offset, log.high_watermark) == (10, 14)

    def fetch(offset: int, isolation: int) -> Any:
        return partitions(client.call(fetch_request([("t", 0, offset)], isolation_level=isolation),
                                      version))[("t", 0)]

    def aborted(p: Any) -> list[tuple[int, int]]:
        return [(a.producer_id, a.first_offset) for a in p.aborted_transactions]

    p = fetch(0, 1)
    assert p.error_code == 0 and (p.high_watermark, p.last_stable_offset) == (14, 10)
    assert _offsets(p.records) == [0, 1, 3, 5, 6, 7, 8, 9]  # batch base offsets, below 10
    # As LocalLog.addAbortedTransactions: the range's bound is the log end here (no offset
    # index entry past the bytes read), so producer 14's abort past the LSO is listed too;
    # the walk goes on since no entry's LSO (8, then 10) reaches 14.
    assert aborted(p) == [(11, 3), (14, 12)]
    p = fetch(8, 1)  # producer 11's abort ended before offset 8
    assert _offsets(p.records) == [8, 9] and aborted(p) == [(14, 12)]
    for at_or_past_lso in (10, 12):  # nothing read: an empty list (emptyFetchDataInfo)
        p = fetch(at_or_past_lso, 1)
        assert len(p.records or b"") == 0 and p.aborted_transactions == []
    p = fetch(0, 0)  # read_uncommitted: up to the high watermark, no list
    assert _offsets(p.records)[-3:] == [11, 12, 13] and p.aborted_transactions is None
    assert (p.high_watermark, p.last_stable_offset) == (14, 10)


@pytest.mark.parametrize("version", [2, 5, 7])
def test_list_offsets_read_committed_answers_below_the_lso(client: Any, log_manager: Any,
                                                           version: int) -> None:
    log_manager.create_topic("t", 1)
    fill(log_manager.get_log("t", 0))
    assert list_offsets(client, "t", 0, -1, isolation_level=1, version=version).offset == 10
    assert list_offsets(client, "t", 0, -1, isolation_level=0, version=version).offset == 14
    found = list_offsets(client, "t", 0, T0 + 8, isolation_level=1, version=version)
    assert (found.offset, found.timestamp) == (8, T0 + 8)
    past = list_offsets(client, "t", 0, T0 + 11, isolation_level=1, version=version)
    assert (past.error_code, past.offset, past.timestamp) == (0, -1, -1)  # 11 >= the LSO
    assert list_offsets(client, "t", 0, T0 + 11, isolation_level=0, version=version).offset == 11


def test_confluent_kafka_read_committed_consumer(make_broker: Any) -> None:
    broker: Broker = make_broker({"num.partitions": 1})
    broker.log_manager.create_topic("rc", 1)
    fill(broker.log_manager.get_log("rc", 0))
    bs = broker.bootstrap_servers
    # The committed and the non-transactional records; not the aborted ones, nothing from the
    # open transaction on (offset 10, the LSO).
    assert read_raw(bs, "rc", 5, partitions=1, timeout_s=30) == [b"p0", b"c1", b"c2", b"p1", b"c3"]
    assert read_raw(bs, "rc", 10, committed=False, partitions=1, timeout_s=30) == [
        b"p0", b"c1", b"c2", b"a1", b"a2", b"p1", b"c3", b"open", b"after-open", b"a3"]
