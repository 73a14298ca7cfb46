import gzip
import struct

import pytest
from crc32c import crc32c

from samsa.errors import CorruptRecordError
from samsa.records import (
    Compression,
    MemoryRecords,
    RecordBatch,
    RecordBatchBuilder,
    iter_batches,
)
from samsa.records.batch_header import (
    ATTRIBUTES_OFFSET,
    BATCH_LENGTH_OFFSET,
    CRC_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORDS_COUNT_OFFSET,
)
from samsa.records.control import ControlRecordType, build_control_batch

from .legacy_data import entry, message, wrapper


def batch(base_offset: int, n: int, codec: Compression = Compression.NONE) -> bytes:
    builder = RecordBatchBuilder(compression=codec, base_offset=base_offset)
    for i in range(n):
        builder.append(1_700_000_000_000 + i, None, b"v%d" % (base_offset + i))
    return builder.build()


def test_iterates_batches_and_records_across_codecs() -> None:
    buf = batch(0, 3) + batch(3, 2, Compression.ZSTD) + batch(5, 4, Compression.GZIP)
    records = MemoryRecords(buf)
    assert [b.base_offset for b in records] == [0, 3, 5]
    assert [b.next_offset for b in records.batches()] == [3, 5, 9]
    assert [r.value for r in records.records()] == [b"v%d" % i for i in range(9)]
    assert records.valid_bytes() == len(buf) == records.size_in_bytes()
    assert not records.has_partial_batch()


def test_partial_tail_is_reported_not_raised() -> None:
    full = batch(0, 3) + batch(3, 3)
    for cut in range(len(full)):
        records = MemoryRecords(full[:cut])
        n = len(list(records))
        assert n == (0 if cut < len(batch(0, 3)) else 1)
        assert records.has_partial_batch() == (cut not in (0, len(batch(0, 3))))


def test_bad_magic_and_bad_size() -> None:
    buf = bytearray(batch(7, 1))
    buf[16] = 9
    with pytest.raises(CorruptRecordError, match="offset 7.*unknown magic 9"):
        list(iter_batches(buf))
    buf = bytearray(batch(7, 1))
    struct.pack_into(">i", buf, 8, 20)
    with pytest.raises(CorruptRecordError, match="offset 7 .*batch length 20 is below the minimum 49"):
        list(iter_batches(buf))
    short = entry(4, message(0, None, None))[:-1]  # a v0 message one byte below its minimum
    short = short[:8] + struct.pack(">i", 13) + short[12:]
    with pytest.raises(CorruptRecordError, match="offset 4 .*size 13 is below the minimum 14"):
        list(iter_batches(short))


def test_check_crcs_can_be_turned_off() -> None:
    buf = bytearray(batch(0, 2))
    buf[-1] ^= 0x02  # changes a record's payload byte only
    with pytest.raises(CorruptRecordError, match="CRC"):
        list(MemoryRecords(buf))
    got = [b for b in MemoryRecords(buf, check_crcs=False)]
    assert isinstance(got[0], RecordBatch) and not got[0].is_valid()


def test_a_v2_batch_without_records_is_a_batch() -> None:
    # Compaction keeps emptied batches (header only) for their producer state (Kafka's
    # DefaultRecordBatch with a records count of 0).
    buf = bytearray(batch(7, 1)[:RECORD_BATCH_OVERHEAD])
    struct.pack_into(">i", buf, BATCH_LENGTH_OFFSET, RECORD_BATCH_OVERHEAD - 12)
    struct.pack_into(">i", buf, RECORDS_COUNT_OFFSET, 0)
    struct.pack_into(">I", buf, CRC_OFFSET, crc32c(bytes(buf[ATTRIBUTES_OFFSET:])))
    buf += batch(8, 1)
    records = MemoryRecords(bytes(buf))
    assert [(b.base_offset, len(b.records())) for b in records] == [(7, 0), (8, 1)]
    assert records.valid_bytes() == len(buf)


def test_a_legacy_message_of_the_minimum_size_is_a_batch() -> None:
    buf = entry(4, message(0, None, None)) + entry(5, message(0, None, b"v"))
    assert len(message(0, None, None)) == 14  # Kafka's LegacyRecord.RECORD_OVERHEAD_V0
    records = MemoryRecords(buf)
    assert [(r.offset, r.value) for r in records.records()] == [(4, None), (5, b"v")]
    assert records.valid_bytes() == len(buf)


def test_a_cut_off_tail_with_an_unreadable_magic_ends_the_iteration() -> None:
    first = batch(0, 1)
    for length in (RECORD_BATCH_OVERHEAD - 12, 1000):  # size 61 (the minimum) and more
        tail = struct.pack(">qib", 1, length, 0) + b"\x00" * 3 + b"\x09" + b"\x00" * 5
        assert [b.base_offset for b in iter_batches(first + tail)] == [0]


def test_batches_checks_crcs_as_configured() -> None:
    buf = bytearray(batch(0, 2))
    buf[-1] ^= 0x02
    with pytest.raises(CorruptRecordError, match="CRC"):
        list(MemoryRecords(buf).batches())
    assert len(list(MemoryRecords(buf, check_crcs=False).batches())) == 1


def test_legacy_inner_crcs_are_checked_as_configured() -> None:
    inner = bytearray(entry(0, message(1, b"k", b"v", 0, 1_700_000_000_000)))
    inner[-1] ^= 0x01  # the inner message's value: its CRC no longer matches
    buf = wrapper(1, 1, gzip.compress(bytes(inner)), 0, 1_700_000_000_000)
    with pytest.raises(CorruptRecordError, match="CRC"):
        list(MemoryRecords(buf).records())
    assert [r.value for r in MemoryRecords(buf, check_crcs=False).records()] == [b"w"]


def test_records_skip_control_batches_and_go_on() -> None:
    marker = build_control_batch(ControlRecordType.COMMIT, 1, 0, 0, 1_700_000_000_000, base_offset=0)
    records = MemoryRecords(marker + batch(1, 2))
    assert [r.value for r in records.records()] == [b"v1", b"v2"]
    assert [r.offset for r in records.records(include_control=True)] == [0, 1, 2]
