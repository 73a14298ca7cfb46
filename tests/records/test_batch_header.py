import struct

import pytest
from crc32c import crc32c

from samsa.errors import CorruptRecordError
from samsa.records import (
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    Compression,
    RecordBatchBuilder,
    TimestampType,
    crc_is_valid,
    iter_batch_headers,
    read_batch_header,
    rewrite_crc,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    set_producer_state,
    validate_batch,
)
from samsa.records.batch_header import (
    increment_sequence,
    read_produce_check_fields,
    set_max_timestamp,
    stamp_offset_and_epoch,
)


def make_batch(n: int = 3, **kwargs: object) -> bytes:
    builder = RecordBatchBuilder(**kwargs)  # type: ignore[arg-type]
    for i in range(n):
        builder.append(1_700_000_000_000 + i, b"k%d" % i, b"v%d" % i)
    return builder.build()


def test_constants() -> None:
    assert RECORD_BATCH_OVERHEAD == 61
    assert LOG_OVERHEAD == 12
    assert [c.value for c in Compression] == [0, 1, 2, 3, 4]
    assert TimestampType.CREATE_TIME == 0 and TimestampType.LOG_APPEND_TIME == 1


def test_header_fields_and_properties() -> None:
    buf = make_batch(
        3,
        compression=Compression.GZIP,
        producer_id=42,
        producer_epoch=7,
        base_sequence=2**31 - 2,
        is_transactional=True,
        base_offset=100,
        partition_leader_epoch=5,
    )
    h = validate_batch(buf)
    assert (h.base_offset, h.partition_leader_epoch, h.magic) == (100, 5, 2)
    assert h.size == len(buf) == h.batch_length + 12
    assert (h.last_offset_delta, h.records_count, h.last_offset, h.next_offset) == (2, 3, 102, 103)
    assert (h.base_timestamp, h.max_timestamp) == (1_700_000_000_000, 1_700_000_000_002)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (42, 7, 2**31 - 2)
    assert h.last_sequence == 0  # wraps past Int32.MAX
    assert h.compression is Compression.GZIP
    assert h.timestamp_type is TimestampType.CREATE_TIME
    assert h.is_transactional and not h.is_control
    assert h.attributes == 0x11


def test_increment_sequence_wraps() -> None:
    assert increment_sequence(5, 3) == 8
    assert increment_sequence(2**31 - 1, 1) == 0
    assert increment_sequence(2**31 - 3, 5) == 2


def test_read_header_rejects_short_buffer_and_bad_magic() -> None:
    buf = bytearray(make_batch())
    with pytest.raises(CorruptRecordError, match="only 60 bytes"):
        read_batch_header(bytes(buf[:60]))
    buf[16] = 1
    with pytest.raises(CorruptRecordError, match="offset 0 .*magic 1"):
        read_batch_header(buf)


def test_validate_batch_reasons() -> None:
    buf = bytearray(make_batch(base_offset=77))
    with pytest.raises(CorruptRecordError, match="offset 77.*truncated"):
        validate_batch(bytes(buf[:-1]))
    with pytest.raises(CorruptRecordError, match="exceeds the limit"):
        validate_batch(buf, max_size=len(buf) - 1)
    short = bytearray(buf)
    struct.pack_into(">i", short, 8, 10)
    with pytest.raises(CorruptRecordError, match="smaller than the minimum"):
        validate_batch(short)
    buf[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="offset 77.*CRC-32C mismatch"):
        validate_batch(buf)


def test_crc_covers_attributes_to_end_only() -> None:
    buf = bytearray(make_batch())
    assert struct.unpack_from(">I", buf, 17)[0] == crc32c(bytes(buf[21:]))
    set_base_offset(buf, 0, 12345)
    set_partition_leader_epoch(buf, 0, 99)
    h = validate_batch(buf)  # neither field is CRC-covered
    assert (h.base_offset, h.partition_leader_epoch) == (12345, 99)


def test_one_call_stamp_and_check_fields_agree_with_the_header() -> None:
    buf = bytearray(make_batch())
    header = read_batch_header(buf)
    stamp_offset_and_epoch(buf, 0, 777, 5, header.batch_length)
    stamped = validate_batch(buf)
    assert (stamped.base_offset, stamped.partition_leader_epoch) == (777, 5)
    assert stamped[1:2] + stamped[3:] == header[1:2] + header[3:]
    assert read_produce_check_fields(buf) == (header.batch_length, header.attributes,
                                              header.base_timestamp, header.max_timestamp)


def test_set_log_append_time() -> None:
    buf = bytearray(make_batch())
    set_log_append_time(buf, 0, 1_800_000_000_000)
    h = validate_batch(buf)
    assert h.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert h.max_timestamp == 1_800_000_000_000
    assert h.base_timestamp == 1_700_000_000_000


def test_set_max_timestamp_rewrites_only_a_change() -> None:
    buf = bytearray(make_batch())
    sent = bytes(buf)
    assert not set_max_timestamp(buf, 0, False, 1_700_000_000_002)  # what it already says
    assert buf == sent
    assert set_max_timestamp(buf, 0, False, 1_700_000_000_009)
    h = validate_batch(buf)  # the CRC follows the new value
    assert (h.max_timestamp, h.timestamp_type) == (1_700_000_000_009, TimestampType.CREATE_TIME)
    assert set_max_timestamp(buf, 0, True, 1_700_000_000_009)  # the type alone changes too
    assert validate_batch(buf).timestamp_type is TimestampType.LOG_APPEND_TIME
    assert set_max_timestamp(buf, 0, False, 1_700_000_000_009)
    h = validate_batch(buf)
    assert h.timestamp_type is TimestampType.CREATE_TIME and h.attributes == sent[22]


def test_set_producer_state_recomputes_crc() -> None:
    buf = bytearray(make_batch())
    set_producer_state(buf, 0, 9, 3, 17, is_transactional=True)
    h = validate_batch(buf)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.is_transactional) == (9, 3, 17, True)
    set_producer_state(buf, 0, 9, 4, 0, is_transactional=False)
    h = validate_batch(buf)
    assert (h.producer_epoch, h.base_sequence, h.is_transactional) == (4, 0, False)


def test_rewrites_at_a_position_inside_a_larger_buffer() -> None:
    first, second = make_batch(2), make_batch(4)
    buf = bytearray(first + second)
    set_base_offset(buf, len(first), 2)
    set_log_append_time(buf, len(first), 5)
    assert [h.base_offset for _, h in iter_batch_headers(buf)] == [0, 2]
    validate_batch(buf, len(first))
    validate_batch(buf, 0)


def test_iter_batch_headers_stops_at_partial_tail() -> None:
    a, b = make_batch(2), make_batch(5)
    buf = a + b
    for cut in range(len(buf) + 1):
        got = [pos for pos, _ in iter_batch_headers(buf[:cut])]
        expected = [p for p, size in ((0, len(a)), (len(a), len(b))) if p + size <= cut]
        assert got == expected


def test_iter_batch_headers_rejects_impossible_length() -> None:
    buf = bytearray(make_batch())
    struct.pack_into(">i", buf, 8, 3)
    with pytest.raises(CorruptRecordError, match="smaller than the minimum"):
        list(iter_batch_headers(buf))


def empty_batch(base_offset: int = 0, records_count: int = 0) -> bytes:
    """A header-only batch, as log compaction leaves to keep a producer's last sequence
    (Kafka's DefaultRecordBatch allows a batch of zero records)."""
    tail = struct.pack(">hiqqqhii", 0, 0, -1, -1, 9, 0, 0, records_count)
    return struct.pack(">qiibI", base_offset, len(tail) + 9, 0, 2, crc32c(tail)) + tail


def test_increment_sequence_reaches_int32_max_without_wrapping() -> None:
    assert increment_sequence(2**31 - 4, 3) == 2**31 - 1
    assert increment_sequence(2**31 - 1, 0) == 2**31 - 1


def test_header_only_batch_is_valid() -> None:
    buf = empty_batch(5)
    assert len(buf) == RECORD_BATCH_OVERHEAD
    assert read_batch_header(buf).records_count == 0
    assert validate_batch(buf, max_size=len(buf)).base_offset == 5  # the limit is inclusive
    assert [pos for pos, _ in iter_batch_headers(buf + buf)] == [0, RECORD_BATCH_OVERHEAD]


def test_validate_batch_messages_name_the_first_problem() -> None:
    buf = make_batch(base_offset=77)
    where = r"batch at offset 77 \(byte 5\)"
    with pytest.raises(CorruptRecordError, match=(
            rf"{where}: truncated, claims {len(buf)} bytes but only {len(buf) - 1} are present$")):
        validate_batch(b"\x00" * 5 + buf[:-1], 5, max_size=len(buf))
    with pytest.raises(CorruptRecordError, match=rf"{where}: size {len(buf)} exceeds the limit {len(buf) - 1}$"):
        validate_batch(b"\x00" * 5 + buf, 5, max_size=len(buf) - 1)
    short = bytearray(b"\x00" * 5 + buf)
    struct.pack_into(">i", short, 5 + 8, 48)
    with pytest.raises(CorruptRecordError, match=rf"{where}: batch length 48 is smaller than the minimum 49$"):
        validate_batch(short, 5)
    negative = bytearray(buf)
    struct.pack_into(">i", negative, 57, -1)
    with pytest.raises(CorruptRecordError, match=r"\(byte 0\): negative record count -1$"):
        validate_batch(negative)
    with pytest.raises(CorruptRecordError, match=r"\(byte 0\): negative record count -1$"):
        validate_batch(empty_batch(records_count=-1))


def test_read_header_messages_say_where_and_how_short() -> None:
    buf = make_batch(base_offset=1234)
    with pytest.raises(CorruptRecordError, match=r"batch at offset 1234 \(byte 0\): only 8 bytes left, a v2 batch header needs 61$"):
        read_batch_header(buf[:8])
    with pytest.raises(CorruptRecordError, match=r"batch at byte 0: only 7 bytes left"):
        read_batch_header(buf[:7])
    with pytest.raises(CorruptRecordError, match=r"batch at byte 10: only 7 bytes left"):
        read_batch_header(buf[:17], 10)
    with pytest.raises(CorruptRecordError, match=r"batch at offset 1234 \(byte 3\): only 60 bytes left"):
        read_batch_header(b"\x00\x00\x01" + buf[:60], 3)
    with pytest.raises(CorruptRecordError, match=r"batch at byte 20: only 0 bytes left"):
        read_batch_header(buf[:10], 20)


def test_iter_batch_headers_reads_the_length_of_a_bare_log_overhead() -> None:
    # ByteBufferLogInputStream.nextBatch checks the size once LOG_OVERHEAD bytes are there.
    with pytest.raises(CorruptRecordError, match=r"batch at offset 9 \(byte 0\): batch length 3 is smaller than the minimum 49$"):
        list(iter_batch_headers(struct.pack(">qi", 9, 3)))
    assert list(iter_batch_headers(struct.pack(">qi", 9, 49))) == []


def test_rewrites_in_the_middle_of_a_buffer_touch_only_that_batch() -> None:
    first, middle, last = make_batch(2), make_batch(3, compression=Compression.GZIP), make_batch(4)
    buf = bytearray(first + middle + last)
    pos = len(first)
    assert set_max_timestamp(buf, pos, True, 5)
    h = validate_batch(buf, pos)
    assert (h.max_timestamp, h.timestamp_type) == (5, TimestampType.LOG_APPEND_TIME)
    set_producer_state(buf, pos, 7, 1, 0, is_transactional=True)
    h = validate_batch(buf, pos)
    assert (h.producer_id, h.is_transactional) == (7, True)
    struct.pack_into(">I", buf, pos + 17, 0)
    assert rewrite_crc(buf, pos) == validate_batch(buf, pos).crc
    assert buf[:pos] == first and buf[pos + len(middle):] == last
    stale = bytearray(first)
    struct.pack_into(">I", stale, 17, 0)
    assert rewrite_crc(stale) == crc32c(bytes(stale[21:]))  # pos defaults to 0
    assert crc_is_valid(stale, 0, read_batch_header(stale))
    stale[-1] ^= 1
    assert not crc_is_valid(stale, 0, read_batch_header(stale))


def test_attribute_rewrites_keep_the_other_bits() -> None:
    buf = bytearray(make_batch(compression=Compression.GZIP, is_transactional=True))
    set_log_append_time(buf, 0, 1_800_000_000_000)
    h = validate_batch(buf)
    assert (h.attributes, h.max_timestamp) == (0x01 | 0x08 | 0x10, 1_800_000_000_000)
    set_producer_state(buf, 0, 1, 0, 0, is_transactional=False)
    assert validate_batch(buf).attributes == 0x01 | 0x08
    set_producer_state(buf, 0, 1, 0, 0, is_transactional=True)
    assert validate_batch(buf).attributes == 0x01 | 0x08 | 0x10


def test_set_log_append_time_skips_only_what_is_already_there() -> None:
    buf = bytearray(make_batch())
    set_log_append_time(buf, 0, 1_700_000_000_002)  # MaxTimestamp already, but CreateTime
    h = validate_batch(buf)
    assert (h.timestamp_type, h.max_timestamp) == (TimestampType.LOG_APPEND_TIME, 1_700_000_000_002)
    set_log_append_time(buf, 0, 1_700_000_000_009)  # LogAppendTime already, new time
    assert validate_batch(buf).max_timestamp == 1_700_000_000_009
    done = bytes(buf)
    set_log_append_time(buf, 0, 1_700_000_000_009)
    assert buf == done
    # The skip reads this batch's MaxTimestamp, not bytes around it.
    prefix = struct.pack(">q", 1_700_000_000_042) + bytes(27)
    buf = bytearray(prefix + done)
    set_log_append_time(buf, len(prefix), 1_700_000_000_042)
    assert validate_batch(buf, len(prefix)).max_timestamp == 1_700_000_000_042
