import struct

import pytest

from samsa.errors import CorruptRecordError
from samsa.records import (
    Compression,
    MemoryRecords,
    RecordBatch,
    RecordBatchBuilder,
    iter_batches,
)


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
    with pytest.raises(CorruptRecordError, match="offset 7.*below the minimum"):
        list(iter_batches(buf))


def test_check_crcs_can_be_turned_off() -> None:
    buf = bytearray(batch(0, 2))
    buf[-1] ^= 0x02  # changes a record's payload byte only
    with pytest.raises(CorruptRecordError, match="CRC"):
        list(MemoryRecords(buf))
    got = [b for b in MemoryRecords(buf, check_crcs=False)]
    assert isinstance(got[0], RecordBatch) and not got[0].is_valid()
