"""Produce-time walk of a v2 batch's records (Kafka's LogValidator): every record must fit, the
count must match, and the smallest/largest TimestampDelta are recomputed from the records.

_walk_records has fast paths (same-length runs, one-byte deltas, the header's claimed max);
these tests compare it with a plain one-record-at-a-time reference over generated batches."""

from __future__ import annotations

from typing import NamedTuple

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from samsa.broker.log import LogConfig
from samsa.broker.log.log import RecordTimestampError, _checked_max_timestamp, _walk_records
from samsa.errors import CorruptRecordError, InvalidRecordError
from samsa.records.batch_header import NO_TIMESTAMP, TIMESTAMP_TYPE_MASK
from samsa.records.varint import encode_varint, encode_varlong


def record(delta: int, size: int) -> bytes:
    """A record: length varint, Attributes, TimestampDelta, then filler up to ``size`` bytes."""
    body = b"\x00" + encode_varlong(delta)
    body += b"\x00" * max(0, size - len(body))
    return encode_varint(len(body)) + body


def batch(records: list[tuple[int, int]]) -> bytes:
    return b"".join(record(d, s) for d, s in records)


# Deltas around the one-byte zigzag bounds (-64..63) and the sizes whose length varint takes
# one, two or three bytes.
DELTAS = st.sampled_from([-65, -64, -63, -1, 0, 1, 62, 63, 64, 65, 1000, -1000])
SIZES = st.sampled_from([6, 7, 63, 64, 200, 8192, 9000])
RECORDS = st.lists(st.tuples(DELTAS, SIZES), min_size=1, max_size=14)
RUNS = st.lists(st.tuples(DELTAS, SIZES, st.integers(1, 6)), min_size=1, max_size=6).map(
    lambda runs: [(d, s) for d, s, n in runs for _ in range(n)])


@settings(max_examples=300, deadline=None)
@given(records=st.one_of(RECORDS, RUNS), claim=st.one_of(DELTAS, st.none()),
       want_min=st.booleans())
@example(records=[(0, 6)] * 4, claim=0, want_min=True)
@example(records=[(5, 6)] * 4 + [(63, 6)], claim=63, want_min=False)
@example(records=[(-64, 6)] * 3 + [(-63, 7)], claim=-64, want_min=True)
@example(records=[(64, 6)] * 5, claim=64, want_min=True)
@example(records=[(-2, 6)] * 4, claim=-1, want_min=True)  # claim absent, all below it
@example(records=[(0, 6), (0, 7), (0, 6), (128, 7)], claim=None, want_min=True)  # 0x80 0x02
def test_walk_gives_the_records_smallest_and_largest_delta(
        records: list[tuple[int, int]], claim: int | None, want_min: bool) -> None:
    data = b"\xff\xff" + batch(records) + b"\xee"
    deltas = [d for d, _ in records]
    claimed = {} if claim is None else {"claimed": claim}
    lo, hi = _walk_records(data, 2, len(data) - 1, len(records), "w", want_min=want_min,
                           **claimed)
    assert hi == max(deltas)
    if want_min:
        assert lo == min(deltas)


def test_min_is_measured_by_default() -> None:
    data = batch([(-5, 6), (7, 6)])
    assert _walk_records(data, 0, len(data), 2, "w") == (-5, 7)


@pytest.mark.parametrize("size", [6, 64, 9000])
def test_one_record_too_many_declared_is_rejected(size: int) -> None:
    data = batch([(0, size)] * 5)
    with pytest.raises(InvalidRecordError, match=r"w: header declares 6 records but the batch "
                                                 r"holds 5$"):
        _walk_records(data, 0, len(data), 6, "w")


def test_one_record_too_few_declared_mentions_trailing_bytes() -> None:
    data = batch([(0, 6)] * 5)
    with pytest.raises(InvalidRecordError, match=r"holds 5 \(or trailing bytes that do not "
                                                 r"form records\)$"):
        _walk_records(data, 0, len(data), 4, "w")


@pytest.mark.parametrize("size", [6, 100, 9000])
def test_a_record_overrunning_the_batch_is_corrupt(size: int) -> None:
    data = batch([(0, 6), (0, size)])
    with pytest.raises(CorruptRecordError, match=rf"w: record 1 has length {size}, which does "
                                                 rf"not fit the {size - 1} bytes left"):
        _walk_records(data + b"\x00" * 5, 0, len(data) - 1, 2, "w")


def test_a_negative_length_is_corrupt() -> None:
    data = encode_varint(-7) + b"\x00" * 10
    with pytest.raises(CorruptRecordError, match="record 0 has length -7"):
        _walk_records(data, 0, len(data), 1, "w")


def test_a_two_byte_negative_length_is_corrupt() -> None:
    data = encode_varint(-100) + b"\x00" * 200
    with pytest.raises(CorruptRecordError, match="record 0 has length -100"):
        _walk_records(data, 0, len(data), 1, "w")


def test_a_length_running_off_the_data_is_malformed() -> None:
    data = batch([(0, 6)]) + b"\x80"
    with pytest.raises(CorruptRecordError, match=r"w: record 1 is malformed \("):
        _walk_records(data, 0, len(data), 2, "w")


# --- _checked_max_timestamp: message.timestamp.before/after.max.ms and LogAppendTime --------

class Header(NamedTuple):
    attributes: int
    base_timestamp: int
    max_timestamp: int
    records_count: int


NOW = 1_000_000


def check(deltas: list[int], *, base: int = NOW, attributes: int = 0, max_ts: int = NOW,
          before: int = 100, after: int = 100, append: bool = False) -> int:
    data = batch([(d, 6) for d in deltas])
    config = LogConfig(timestamp_before_max_ms=before, timestamp_after_max_ms=after)
    header = Header(attributes, base, max_ts, len(deltas))
    return _checked_max_timestamp(config, header, min(deltas), max(deltas), append, NOW, data,
                                  0, len(data), "w")


def test_timestamps_exactly_at_the_before_and_after_bounds_are_accepted() -> None:
    assert check([-100, 100]) == NOW + 100


@pytest.mark.parametrize("delta", [-101, 101])
def test_one_ms_past_a_bound_rejects_that_record(delta: int) -> None:
    with pytest.raises(RecordTimestampError) as info:
        check([0, delta, 0])
    assert info.value.record_errors == [
        (1, (f"Timestamp {NOW + delta} of record 1 is out of range. The timestamp should be "
             f"within [{NOW - 100}, {NOW + 100}]"))]


def test_the_error_names_at_most_three_records_joined_by_semicolons() -> None:
    with pytest.raises(RecordTimestampError, match=r"4 record\(s\) rejected") as info:
        check([500, 501, 502, 503])
    assert str(info.value).count("; ") == 2
    assert "record 3 " not in str(info.value)


def test_producer_flagged_log_append_time_is_refused_on_a_log_append_time_topic() -> None:
    with pytest.raises(RecordTimestampError, match="which only the broker may set") as info:
        check([0, 0], attributes=TIMESTAMP_TYPE_MASK, append=True)
    assert info.value.record_errors == [
        (i, "Producer should not set timestamp type to LogAppendTime") for i in range(2)]


def test_producer_flagged_log_append_time_is_create_time_max_on_a_create_time_topic() -> None:
    # Every record reads as MaxTimestamp: the check uses it, not the deltas.
    assert check([-5000, 5000], attributes=TIMESTAMP_TYPE_MASK, max_ts=NOW + 7) == NOW + 7
    with pytest.raises(RecordTimestampError) as info:
        check([0, 0], attributes=TIMESTAMP_TYPE_MASK, max_ts=NOW + 101)
    assert [i for i, _ in info.value.record_errors] == [0, 1]


def test_log_append_time_topic_stamps_now() -> None:
    assert check([-5000, 5000], append=True) == NOW


def test_records_without_timestamp_are_not_range_checked() -> None:
    assert check([0, 0], base=NO_TIMESTAMP, before=10) == NO_TIMESTAMP


def test_a_record_exactly_at_the_after_bound_is_not_named_with_a_rejected_one() -> None:
    with pytest.raises(RecordTimestampError) as info:
        check([-101, 100])
    assert [i for i, _ in info.value.record_errors] == [0]


def test_rejected_records_are_listed_separated_by_semicolons() -> None:
    with pytest.raises(RecordTimestampError, match=rf"{NOW + 100}\]; Timestamp {NOW + 501} "):
        check([500, 501])


def test_a_negative_timestamp_other_than_minus_one_is_range_checked() -> None:
    with pytest.raises(RecordTimestampError, match="of record 0 is out of range"):
        check([0], base=-2 * NOW)


def test_unlimited_before_max_accepts_even_the_oldest_int64_timestamp() -> None:
    # before.max.ms = Long.MAX_VALUE means no lower bound (Kafka's subtraction overflows there).
    assert check([0], base=-(2**63) + 5, before=2**63 - 1) == NO_TIMESTAMP  # Kafka: max >= -1
