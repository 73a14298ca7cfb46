"""__consumer_offsets record layouts and the group -> partition mapping."""

from __future__ import annotations

from samsa.broker.group.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    group_key,
    group_value,
    offset_key,
    offset_value,
)
from samsa.broker.group.store import java_string_hash, partition_for


def test_offset_key_layout_is_kafkas() -> None:
    # int16 version 1, then string group, string topic, int32 partition.
    assert offset_key("g", "t", 3).hex() == "0001" "000167" "000174" "00000003"
    assert decode_key(offset_key("grp", "topic", 7)) == OffsetKey("grp", "topic", 7)
    # Version 0 keys (written by old Kafka) read the same way.
    assert decode_key(bytes.fromhex("0000000167000174" "00000001")) == OffsetKey("g", "t", 1)


def test_group_key_layout_is_kafkas() -> None:
    assert group_key("g").hex() == "0002" "000167"
    assert decode_key(group_key("my-group")) == GroupKey("my-group")
    assert decode_key(bytes.fromhex("0005000167")) is None  # newer record types are skipped


def test_offset_value_v3_round_trip_and_older_versions() -> None:
    data = offset_value(OffsetValue(42, 5, "meta", 1_700_000_000_000))
    assert data[:2] == b"\x00\x03"
    # int64 offset, int32 leader epoch, string metadata, int64 commit timestamp
    assert data[2:].hex() == ("000000000000002a" "00000005" "00046d657461" "0000018bcfe56800")
    assert decode_offset_value(data) == OffsetValue(42, 5, "meta", 1_700_000_000_000)
    v1 = bytes.fromhex("0001" "0000000000000007" "0000" "0000000000000001" "ffffffffffffffff")
    assert decode_offset_value(v1) == OffsetValue(7, -1, "", 1)


def test_group_value_round_trip() -> None:
    value = GroupValue("consumer", 3, "range", "a", 123, (
        MemberValue("a", "static-a", "client", "/127.0.0.1", 60000, 45000, b"sub", b"asg"),
        MemberValue("b", None, "client", "/127.0.0.1", 60000, 45000, b"", b""),
    ))
    data = group_value(value)
    assert data[:2] == b"\x00\x03"
    assert decode_group_value(data) == value
    empty = GroupValue("consumer", 4, None, None, 5, ())
    assert decode_group_value(group_value(empty)) == empty


def test_java_string_hash_and_partition() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) == 0
    assert java_string_hash("\u00e9t\u00e9") == 0xE9 * 961 + 0x74 * 31 + 0xE9
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00  # UTF-16 surrogates
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("group-x", 1) == 0
