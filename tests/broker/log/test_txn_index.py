"""The ``.txnindex`` file (Kafka's TransactionIndex / AbortedTxn): format, collection, damage."""

from __future__ import annotations

from pathlib import Path

import pytest

from samsa.broker.log.index import CorruptIndexError
from samsa.broker.log.txn_index import ABORTED_TXN_SIZE, AbortedTxn, TransactionIndex


def _index(tmp_path: Path, base: int = 0) -> TransactionIndex:
    return TransactionIndex(tmp_path / f"{base:020d}.txnindex", base)


def test_entries_are_34_big_endian_bytes_and_read_back(tmp_path: Path) -> None:
    index = _index(tmp_path, 100)
    assert not index.path.exists()  # created by the first entry, as Kafka's
    index.append(AbortedTxn(producer_id=7, first_offset=100, last_offset=103, last_stable_offset=104))
    index.append(AbortedTxn(producer_id=-2, first_offset=101, last_offset=0x0102030405060708,
                            last_stable_offset=101))
    data = index.path.read_bytes()
    assert ABORTED_TXN_SIZE == 34 and len(data) == 68
    assert data[:34] == bytes.fromhex(
        "0000"  # version 0
        "0000000000000007"  # producer id
        "0000000000000064"  # first offset 100
        "0000000000000067"  # last offset 103 (the marker's)
        "0000000000000068"  # last stable offset 104
    )
    assert data[34:] == bytes.fromhex(
        "0000" "fffffffffffffffe" "0000000000000065" "0102030405060708" "0000000000000065")
    reread = _index(tmp_path, 100)
    reread.sanity_check()
    assert reread.entries == index.entries


def test_last_offsets_must_increase(tmp_path: Path) -> None:
    index = _index(tmp_path)
    index.append(AbortedTxn(1, 0, 5, 6))
    with pytest.raises(ValueError, match="not greater"):
        index.append(AbortedTxn(2, 3, 5, 6))
    assert len(index.path.read_bytes()) == 34


def test_collect_takes_overlapping_entries_and_stops_at_an_lso_past_the_range(tmp_path: Path) -> None:
    # TransactionIndex.collectAbortedTxns: keep entries with last >= fetch offset and
    # first < upper bound; stop after the first entry whose LSO >= upper bound.
    a, b, c, d = (AbortedTxn(1, 0, 4, 2), AbortedTxn(2, 2, 6, 7),
                  AbortedTxn(3, 8, 10, 11), AbortedTxn(4, 12, 14, 15))
    index = _index(tmp_path)
    for txn in (a, b, c, d):
        index.append(txn)
    assert index.collect(5, 9) == ([b, c], True)  # a ends before 5; c's LSO 11 >= 9 ends it
    assert index.collect(0, 2) == ([a], True)  # b starts at the bound; b's LSO 7 >= 2 ends it
    assert index.collect(0, 100) == ([a, b, c, d], False)  # go on into the next segment
    assert index.collect(15, 100) == ([], False)
    assert index.collect(4, 5) == ([a, b], True)  # a's marker is the fetch offset


def test_truncate_drops_entries_ending_at_or_after_the_offset(tmp_path: Path) -> None:
    index = _index(tmp_path)
    for txn in (AbortedTxn(1, 0, 4, 5), AbortedTxn(1, 5, 9, 10)):
        index.append(txn)
    index.truncate_to(9)
    assert index.entries == [AbortedTxn(1, 0, 4, 5)] and len(index.path.read_bytes()) == 34
    index.append(AbortedTxn(1, 5, 8, 9))  # the next append goes after what is left
    assert _index(tmp_path).entries == [AbortedTxn(1, 0, 4, 5), AbortedTxn(1, 5, 8, 9)]
    index.reset()
    assert index.entries == [] and index.path.read_bytes() == b""


@pytest.mark.parametrize("damage", ["torn tail", "bad version", "out of order", "before base"])
def test_a_damaged_file_fails_its_check_and_serves_only_what_precedes(tmp_path: Path, damage: str) -> None:
    good = AbortedTxn(1, 10, 12, 13)
    index = _index(tmp_path, 10)
    index.append(good)
    tail = {
        "torn tail": AbortedTxn(2, 13, 15, 16).pack()[:20],
        "bad version": b"\x00\x01" + AbortedTxn(2, 13, 15, 16).pack()[2:],
        "out of order": AbortedTxn(2, 11, 12, 16).pack(),
        "before base": AbortedTxn(2, 3, 9, 16).pack(),
    }[damage]
    with index.path.open("ab") as f:
        f.write(tail)
    reread = _index(tmp_path, 10)
    with pytest.raises(CorruptIndexError, match="transaction index"):
        reread.sanity_check()
    assert reread.entries == [good]
    reread.reset()
    assert reread.path.read_bytes() == b""
