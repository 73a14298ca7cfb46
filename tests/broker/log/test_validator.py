"""Produce-time validation of a v2 batch's records (samsa.broker.log.validator), as Kafka's
LogValidator does it: every record must parse (DefaultRecord.readFrom), the count must match,
OffsetDeltas must be 0..n-1, the smallest/largest TimestampDelta are recomputed.

walk_records takes records in runs of one layout (the first parsed, the rest compared with
strided slices); these tests hold it to a plain record-by-record reference over generated and
mutated batches, send it every kind of lying record through Log.append_as_leader (uncompressed
and with each codec) and check that whatever it accepts, samsa's own reader decodes.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from samsa.broker.log import Log, LogConfig, validator
from samsa.broker.log import log as log_module
from samsa.broker.log.record_errors import RecordTimestampError, RecordValidationError
from samsa.errors import InvalidRecordError, KafkaError
from samsa.records import Compression, MemoryRecords
from samsa.records.batch_header import NO_TIMESTAMP, TIMESTAMP_TYPE_MASK, BatchHeader
from samsa.records.varint import decode_varint, decode_varlong
from tests.broker.handmade_batches import handmade_record, wrap_records
from tests.support.compiled_modules import both_builds, check_compiled_in_use, is_compiled

INT64 = range(-(1 << 63), 1 << 63)
NOW = 1_700_000_000_000
CODECS = [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]


# --- both implementations: the installed module (compiled by setup.py where it can be) and its
# pure-Python source, loaded under another name; every test below runs against each.

COMPILED = is_compiled(validator)


V: ModuleType = validator  # the implementation under test (set by the fixture below)


@pytest.fixture(scope="module", autouse=True, params=["installed", "source"])
def implementation(request: pytest.FixtureRequest) -> Iterator[ModuleType]:
    """The validator the tests call (V), and Log's too (Log.append_as_leader)."""
    with both_builds(request, validator) as module, pytest.MonkeyPatch.context() as patch:
        patch.setitem(globals(), "V", module)
        patch.setattr(log_module, "walk_records", module.walk_records)
        patch.setattr(log_module, "checked_max_timestamp", module.checked_max_timestamp)
        yield module


def test_the_compiled_validator_is_in_use_where_it_can_be_built() -> None:
    check_compiled_in_use(validator)


class Refused(Exception):
    pass


def reference(section: bytes, count: int, need_key: bool = False) -> list[int]:
    """The records' TimestampDeltas, read one record at a time as DefaultRecord.readFrom reads
    them (each record cut out first, so that nothing is read past it); Refused if Kafka would
    refuse the batch or samsa's rules (OffsetDelta = index, -1 the only negative length,
    64-bit timestamps, keys on a compacted topic) do."""
    deltas: list[int] = []
    pos = 0
    try:
        for index in range(count):
            if pos >= len(section):
                raise Refused("fewer records than the count")
            length, body = decode_varint(section, pos)
            if length < 6 or body + length > len(section):
                raise Refused("record length")
            record, pos = section[body : body + length], body + length
            delta, p = decode_varlong(record, 1)
            offset_delta, p = decode_varint(record, p)
            key_length, p = decode_varint(record, p)
            if delta not in INT64 or offset_delta != index or key_length < -1:
                raise Refused("delta, offset delta or key length")
            if need_key and key_length == -1:
                raise Refused("no key")
            value_length, p = decode_varint(record, p + max(key_length, 0))
            if value_length < -1:
                raise Refused("value length")
            headers, p = decode_varint(record, p + max(value_length, 0))
            if headers < 0 or headers > len(record) - p:
                raise Refused("header count")
            for _ in range(headers):
                header_key, p = decode_varint(record, p)
                if header_key < 0:
                    raise Refused("null header key")
                header_value, p = decode_varint(record, p + header_key)
                if header_value < -1:
                    raise Refused("header value length")
                p += max(header_value, 0)
            if p != len(record):
                raise Refused("fields do not end at the record's length")
            deltas.append(delta)
    except (IndexError, ValueError) as exc:
        raise Refused(str(exc)) from exc
    if pos != len(section):
        raise Refused("more records than the count")
    return deltas


def walk(section: bytes, count: int, *, claimed: int | None = None, want_min: bool = True,
         need_key: bool = False) -> tuple[int, int]:
    """walk_records over ``section`` followed by bytes it must not read as records."""
    data = bytearray(section + b"\x80\x02\x00\x01" * 4)
    extra = {} if claimed is None else {"claimed": claimed}
    return V.walk_records(data, 0, len(section), count, "w", want_min=want_min,
                        need_key=need_key, **extra)


# --- generated batches: walk_records against the reference ---------------------------------------

# Deltas around the one-byte zigzag bounds (-64..63); values whose sizes make runs (and whose
# length varints take one, two or three bytes); keys and headers sometimes.
DELTAS = st.sampled_from([-65, -64, -63, -1, 0, 1, 62, 63, 64, 65, 1000, -1000, 1 << 40])
VALUES = st.sampled_from([None, b"", b"v", b"x" * 57, b"y" * 200, b"z" * 9000])
KEYS = st.sampled_from([None, b"", b"k", b"key" * 30])
HEADERS = st.sampled_from([(), ((b"h", b"1"),), ((b"h", None), (b"", b"x" * 70))])
RECORD = st.tuples(DELTAS, KEYS, VALUES, HEADERS)
Spec = tuple[int, bytes | None, bytes | None, tuple[tuple[bytes, bytes | None], ...]]
RECORDS = st.one_of(
    st.lists(RECORD, min_size=1, max_size=20),
    # runs of equal records, over offset deltas 63/64
    st.lists(st.tuples(RECORD, st.integers(1, 70)), min_size=1, max_size=4).map(
        lambda runs: [r for r, n in runs for _ in range(n)]),
)


def section_of(records: list[Spec]) -> bytes:
    return b"".join(handmade_record(i, value, key=key, timestamp_delta=delta, headers=headers)
                    for i, (delta, key, value, headers) in enumerate(records))


@settings(max_examples=300, deadline=None)
@given(records=RECORDS, claim=st.one_of(DELTAS, st.none()), want_min=st.booleans())
@example(records=[(0, None, b"v", ())] * 4, claim=0, want_min=True)
@example(records=[(5, None, b"v", ())] * 4 + [(63, None, b"v", ())], claim=63, want_min=False)
@example(records=[(-64, None, b"v", ())] * 3 + [(-63, None, b"vv", ())], claim=-64,
         want_min=True)
@example(records=[(64, None, b"v", ())] * 5, claim=64, want_min=True)
@example(records=[(-2, None, b"v", ())] * 4, claim=-1, want_min=True)  # claim absent, all below
def test_walk_gives_the_records_smallest_and_largest_delta(
        records: list[Spec], claim: int | None, want_min: bool) -> None:
    section = section_of(records)
    deltas = reference(section, len(records))
    lo, hi = walk(section, len(records), claimed=claim, want_min=want_min)
    assert hi == max(deltas)
    if want_min:
        assert lo == min(deltas)


class Mutation(NamedTuple):
    at: int  # where, as a fraction of the section in 1/1000
    kind: str
    byte: int


MUTATIONS = st.lists(st.builds(Mutation, st.integers(0, 999),
                               st.sampled_from(["set", "insert", "delete", "flip-high"]),
                               st.integers(0, 255)), min_size=1, max_size=3)


def mutate(section: bytes, mutations: list[Mutation]) -> bytes:
    data = bytearray(section)
    for m in mutations:
        if not data:
            break
        at = m.at * len(data) // 1000
        if m.kind == "set":
            data[at] = m.byte
        elif m.kind == "insert":
            data[at:at] = bytes((m.byte,))
        elif m.kind == "delete":
            del data[at]
        else:
            data[at] ^= 0x80
    return bytes(data)


@settings(max_examples=500, deadline=None)
@given(records=RECORDS, mutations=MUTATIONS, count_change=st.sampled_from([0, 0, 0, -1, 1]),
       need_key=st.booleans())
def test_walk_accepts_exactly_what_the_reference_accepts(
        records: list[Spec], mutations: list[Mutation], count_change: int,
        need_key: bool) -> None:
    section = mutate(section_of(records), mutations)
    count = max(len(records) + count_change, 1)
    try:
        deltas = reference(section, count, need_key)
    except Refused:
        with pytest.raises(InvalidRecordError):
            walk(section, count, need_key=need_key)
        return
    assert walk(section, count, need_key=need_key) == (min(deltas), max(deltas))


@pytest.mark.parametrize("lie_at", [0, 63, 64, 8191, 8192, 8500])
def test_runs_past_the_offset_delta_widths_are_checked_to_the_last_record(lie_at: int) -> None:
    # 9,000 records of one size (a 1 MiB producer batch): OffsetDeltas of one, two and three
    # bytes; one record's key length lies (the record keeps its length).
    good = [handmade_record(i, b"x" * 100, key=b"key") for i in range(9000)]
    assert walk(b"".join(good), 9000) == (0, 0)
    bad = list(good)
    bad[lie_at] = handmade_record(lie_at, b"x" * 99, key=b"key", key_length=110)
    assert len(bad[lie_at]) == len(good[lie_at])
    with pytest.raises(RecordValidationError) as raised:
        walk(b"".join(bad), 9000)
    message = f"record {lie_at}: key length 110 runs past the end of the record (105 bytes left)"
    assert raised.value.record_errors == [(lie_at, message)]


def test_the_work_stays_linear_when_runs_keep_breaking(monkeypatch: pytest.MonkeyPatch) -> None:
    # Runs of 4 records, each run one byte longer than the last: every run's first check must
    # not look at all the records that could still follow.
    records = [handmade_record(i, b"x" * (10 + i // 4)) for i in range(4000)]
    if V is validator and COMPILED:
        pytest.skip("compiled: walk_records calls _matching natively, not through the module")
    looked_at = 0
    matching = V._matching

    def counting(*args: object) -> object:
        nonlocal looked_at
        looked_at += int(args[4]) - int(args[3])  # type: ignore[call-overload]
        return matching(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(V, "_matching", counting)
    walk(b"".join(records), 4000)
    assert looked_at <= 4 * 4000


def test_a_batch_of_records_of_all_different_sizes_is_walked_record_by_record() -> None:
    records = [handmade_record(i, b"v" * (10 + i % 7 * 30)) for i in range(200)]
    assert walk(b"".join(records), 200) == (0, 0)
    with pytest.raises(InvalidRecordError, match=r"87\): w: header declares 199 records but "):
        walk(b"".join(records), 199)


@pytest.mark.parametrize(("lie_at", "said"), [(8191, 8190), (8192, 8193), (8500, 8499),
                                              (8999, 9000)])
def test_records_of_different_sizes_past_8192_have_their_offset_deltas_checked(
        lie_at: int, said: int) -> None:
    # Sizes vary, so records go one at a time; from 8192 on their OffsetDeltas take three
    # bytes.  One record gives another's place (of the same width: its length is kept).
    records = [handmade_record(i, b"v" * (10 + i % 7 * 30)) for i in range(9000)]
    assert walk(b"".join(records), 9000) == (0, 0)
    bad = list(records)
    bad[lie_at] = handmade_record(said, b"v" * (10 + lie_at % 7 * 30))
    assert len(bad[lie_at]) == len(records[lie_at])
    with pytest.raises(RecordValidationError) as raised:
        walk(b"".join(bad), 9000)
    message = f"record {lie_at}: offset delta {said} is not the record's place in the batch"
    assert raised.value.record_errors == [(lie_at, f"{message} ({lie_at})")]


# --- messages of the batch-level errors ---------------------------------------------------------

def plain(count: int, size: int = 6) -> bytes:
    return b"".join(handmade_record(i, b"v" * size) for i in range(count))


@pytest.mark.parametrize("size", [6, 64, 9000])
def test_one_record_too_many_declared_is_rejected(size: int) -> None:
    with pytest.raises(InvalidRecordError,
                       match=r"87\): w: header declares 6 records but the batch holds 5$"):
        walk(plain(5, size), 6)


def test_one_record_too_few_declared_names_the_bytes_left() -> None:
    data = plain(5)
    last = len(handmade_record(4, b"v" * 6))
    with pytest.raises(InvalidRecordError, match=rf"87\): w: header declares 4 records but {last} "
                                                 r"bytes follow the last of them \(more "
                                                 r"records than declared, or trailing bytes\)$"):
        walk(data, 4)


@pytest.mark.parametrize("size", [6, 100, 9000])
def test_a_record_overrunning_the_batch_is_refused(size: int) -> None:
    last = handmade_record(1, b"v" * size)
    length = decode_varint(last, 0)[0]
    with pytest.raises(RecordValidationError, match=rf"87\): w: record 1: length {length} does not "
                                                    rf"fit the {length - 1} bytes left in the "
                                                    r"batch$"):
        walk(plain(1) + last[:-1], 2)


def test_a_negative_record_length_is_refused() -> None:
    with pytest.raises(RecordValidationError, match="record 0: length -7 does not fit"):
        walk(handmade_record(0, length=-7), 1)


def test_a_length_running_off_the_data_is_malformed() -> None:
    data = bytearray(plain(1) + b"\x80")
    with pytest.raises(RecordValidationError, match=r"87\): w: record 1: malformed \("):
        V.walk_records(data, 0, len(data), 2, "w")


# --- lying records, through Log.append_as_leader ------------------------------------------------

def normal(i: int) -> bytes:
    return handmade_record(i, b"x" * 20, key=b"key", headers=[(b"h", b"1")])


# Each lie keeps the record's length, so that it sits inside a run of records like it.
LIES: dict[str, tuple[Callable[[int], bytes], str]] = {
    "key-length-past-the-record": (
        lambda i: handmade_record(i, b"x" * 20, key=b"key", headers=[(b"h", b"1")],
                                  key_length=30),
        "key length 30 runs past the end of the record (29 bytes left)"),
    "value-length-past-the-record": (
        lambda i: handmade_record(i, b"x" * 20, key=b"key", headers=[(b"h", b"1")],
                                  value_length=60),
        "value length 60 runs past the end of the record (25 bytes left)"),
    "key-length-below-minus-one": (
        lambda i: handmade_record(i, b"x" * 23, key=None, headers=[(b"h", b"1")],
                                  key_length=-2),
        "key length -2 (only -1, a null key, may be negative)"),
    "value-length-below-minus-one": (
        lambda i: handmade_record(i, b"x" * 20, key=b"key", headers=[(b"h", b"1")],
                                  value_length=-3),
        "value length -3 (only -1, a null value, may be negative)"),
    "offset-delta-not-its-place": (
        lambda i: handmade_record(i + 1, b"x" * 20, key=b"key", headers=[(b"h", b"1")]),
        "offset delta 38 is not the record's place in the batch (37)"),
    "negative-header-count": (
        lambda i: handmade_record(i, b"x" * 20, key=b"key", headers=[(b"h", b"1")],
                                  header_count=-1),
        "header count -1 is negative"),
    "header-count-past-the-headers": (
        lambda i: handmade_record(i, b"x" * 20, key=b"key", headers=[(b"h", b"1")],
                                  header_count=2),
        "header 1's key runs past the end of the record"),
    "header-count-beyond-the-record": (
        lambda i: handmade_record(i, b"x" * 20, key=b"key", headers=[(b"h", b"1")],
                                  header_count=40),
        "header count 40 exceeds the 4 bytes left in the record"),
    "header-count-short-of-the-headers": (
        lambda i: handmade_record(i, b"x" * 20, key=b"key", headers=[(b"h", b"1")],
                                  header_count=0),
        "its fields take 29 bytes but its length says 33"),
    "null-header-key": (
        lambda i: handmade_record(i, b"x" * 20, key=b"key", headers=[(None, b"12")]),
        "header 0 has key length -1; header keys cannot be null"),
    "bytes-after-the-fields": (
        lambda i: handmade_record(i, b"x" * 18, key=b"key", headers=[(b"h", b"1")],
                                  trailing=b"\x00\x00"),
        "its fields take 31 bytes but its length says 33"),
    "length-short-of-the-fields": (
        lambda i: handmade_record(i, b"x" * 20, key=b"key", headers=[(b"h", b"1")],
                                  length=32),
        "header 0's value runs past the end of the record"),
}


def open_log(path: Path, **configs: str) -> Log:
    return Log(path / "t-0", LogConfig.from_configs(None, configs), topic="t", partition=0,
               now_ms=NOW)


def lying_batch(lie: Callable[[int], bytes], codec: Compression, at: int = 37) -> bytes:
    records = [normal(i) for i in range(100)]
    records[at] = lie(at)
    assert len(records[at]) == len(records[0])
    return wrap_records(b"".join(records), 100, codec=codec, base_timestamp=NOW)


@pytest.mark.parametrize("codec", [Compression.NONE, *CODECS], ids=lambda c: c.name.lower())
@pytest.mark.parametrize("lie", LIES, ids=str)
def test_a_lying_record_is_refused_with_its_index_and_nothing_is_appended(
        tmp_path: Path, lie: str, codec: Compression) -> None:
    make, problem = LIES[lie]
    log = open_log(tmp_path)
    log.append_as_leader(wrap_records(b"".join(normal(i) for i in range(3)), 3,
                                      base_timestamp=NOW), leader_epoch=0, now_ms=NOW)
    with pytest.raises(RecordValidationError) as raised:
        log.append_as_leader(lying_batch(make, codec), leader_epoch=0, now_ms=NOW)
    assert raised.value.code == 87  # INVALID_RECORD, as Kafka's InvalidRecordException
    assert raised.value.record_errors == [(37, f"record 37: {problem}")]
    assert raised.value.detail == f"batch at byte 0 of t-0: record 37: {problem}"
    assert log.log_end_offset == 3
    assert log.size_bytes == len(wrap_records(b"".join(normal(i) for i in range(3)), 3))
    log.close()


@pytest.mark.parametrize("declared", [99, 101])
@pytest.mark.parametrize("codec", [Compression.NONE, *CODECS], ids=lambda c: c.name.lower())
def test_a_count_that_is_not_the_records_present_is_refused(
        tmp_path: Path, codec: Compression, declared: int) -> None:
    log = open_log(tmp_path)
    section = b"".join(normal(i) for i in range(100))
    with pytest.raises(InvalidRecordError, match=rf"header declares {declared} records but "):
        log.append_as_leader(wrap_records(section, declared, codec=codec), leader_epoch=0,
                             now_ms=NOW)
    assert log.log_end_offset == 0
    log.close()


def test_a_compacted_topic_refuses_records_without_key_naming_each(tmp_path: Path) -> None:
    log = open_log(tmp_path, **{"cleanup.policy": "compact"})
    keyed = [handmade_record(i, b"v", key=b"k") for i in range(3)]
    log.append_as_leader(wrap_records(b"".join(keyed), 3, base_timestamp=NOW), leader_epoch=0,
                         now_ms=NOW)
    records = [handmade_record(i, b"v", key=None if i in (1, 2, 5) else b"k")
               for i in range(8)]
    with pytest.raises(RecordValidationError, match=r"3 record\(s\) rejected: compacted topic "
                                                    r"cannot accept message without key") as raised:
        log.append_as_leader(wrap_records(b"".join(records), 8, base_timestamp=NOW),
                             leader_epoch=0, now_ms=NOW)
    message = "compacted topic cannot accept message without key"
    assert raised.value.record_errors == [(i, f"record {i}: {message}") for i in (1, 2, 5)]
    assert log.log_end_offset == 3
    log.close()


def test_a_timestamp_delta_past_64_bits_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    records = [handmade_record(0, b"v"), handmade_record(1, b"v", timestamp_delta=1 << 62)]
    with pytest.raises(RecordTimestampError, match="record 1 does not fit 64 bits"):
        log.append_as_leader(wrap_records(b"".join(records), 2, base_timestamp=1 << 62),
                             leader_epoch=0, now_ms=NOW)
    assert log.log_end_offset == 0
    log.close()


# --- whatever is accepted reads back ------------------------------------------------------------

@pytest.fixture(scope="module")
def scratch_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as name:
        yield Path(name)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=RECORDS, mutations=MUTATIONS, codec=st.sampled_from([Compression.NONE, *CODECS]),
       count_change=st.sampled_from([0, 0, 0, -1, 1]))
def test_a_mutated_batch_is_refused_or_reads_back_whole(
        scratch_dir: Path, records: list[Spec], mutations: list[Mutation], codec: Compression,
        count_change: int) -> None:
    # Any mutation of a valid batch, its CRC recomputed: refused (nothing appended), or
    # appended and then decoded by samsa's own reader, every record of it.
    section = mutate(section_of(records), mutations)
    count = max(len(records) + count_change, 1)
    with tempfile.TemporaryDirectory(dir=scratch_dir) as name:
        log = open_log(Path(name), **{"message.timestamp.after.max.ms": str(1 << 62),
                                      "max.message.bytes": str(1 << 24)})
        try:
            log.append_as_leader(wrap_records(section, count, codec=codec, base_timestamp=NOW),
                                 leader_epoch=0, now_ms=NOW)
        except KafkaError:
            assert log.log_end_offset == 0
            return
        finally:
            log.close()
        log = open_log(Path(name))
        raw = log.read(0, 1 << 24).records
        batches = MemoryRecords(raw if isinstance(raw, bytes) else raw.read()).batches()
        read = [r.offset for batch in batches for r in batch]
        log.close()
    assert read == list(range(count))


# --- checked_max_timestamp: message.timestamp.before/after.max.ms and LogAppendTime --------------

TS_NOW = 1_000_000


def check(deltas: list[int], *, base: int = TS_NOW, attributes: int = 0, max_ts: int = TS_NOW,
          before: int = 100, after: int = 100, append: bool = False) -> int:
    data = b"".join(handmade_record(i, b"v", timestamp_delta=d) for i, d in enumerate(deltas))
    config = LogConfig(timestamp_before_max_ms=before, timestamp_after_max_ms=after)
    header = BatchHeader(0, 0, -1, 2, 0, attributes, len(deltas) - 1, base, max_ts, -1, -1, -1,
                         len(deltas))
    return V.checked_max_timestamp(config, header, min(deltas), max(deltas), append, TS_NOW,
                                   data, 0, len(data), "w")


def test_timestamps_exactly_at_the_before_and_after_bounds_are_accepted() -> None:
    assert check([-100, 100]) == TS_NOW + 100


@pytest.mark.parametrize("delta", [-101, 101])
def test_one_ms_past_a_bound_rejects_that_record(delta: int) -> None:
    with pytest.raises(RecordTimestampError) as info:
        check([0, delta, 0])
    assert info.value.record_errors == [
        (1, (f"Timestamp {TS_NOW + delta} of record 1 is out of range. The timestamp should be "
             f"within [{TS_NOW - 100}, {TS_NOW + 100}]"))]


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
    assert check([-5000, 5000], attributes=TIMESTAMP_TYPE_MASK, max_ts=TS_NOW + 7) == TS_NOW + 7
    with pytest.raises(RecordTimestampError) as info:
        check([0, 0], attributes=TIMESTAMP_TYPE_MASK, max_ts=TS_NOW + 101)
    assert [i for i, _ in info.value.record_errors] == [0, 1]


def test_log_append_time_topic_stamps_now() -> None:
    assert check([-5000, 5000], append=True) == TS_NOW


def test_records_without_timestamp_are_not_range_checked() -> None:
    assert check([0, 0], base=NO_TIMESTAMP, before=10) == NO_TIMESTAMP


def test_a_record_exactly_at_the_after_bound_is_not_named_with_a_rejected_one() -> None:
    with pytest.raises(RecordTimestampError) as info:
        check([-101, 100])
    assert [i for i, _ in info.value.record_errors] == [0]


def test_rejected_records_are_listed_separated_by_semicolons() -> None:
    with pytest.raises(RecordTimestampError, match=rf"{TS_NOW + 100}\]; Timestamp {TS_NOW + 501} "):
        check([500, 501])


def test_a_negative_timestamp_other_than_minus_one_is_range_checked() -> None:
    with pytest.raises(RecordTimestampError, match="of record 0 is out of range"):
        check([0], base=-2 * TS_NOW)


def test_unlimited_before_max_accepts_even_the_oldest_int64_timestamp() -> None:
    # before.max.ms = Long.MAX_VALUE means no lower bound (Kafka's subtraction overflows there).
    assert check([0], base=-(2**63) + 5, before=2**63 - 1) == NO_TIMESTAMP  # Kafka: max >= -1
