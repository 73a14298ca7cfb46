import pytest
from hypothesis import given
from hypothesis import strategies as st

from samsa.records.varint import (
    SMALL_VARINT_LIMIT,
    SMALL_VARINTS,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    size_of_varint,
)

INT32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


def test_zigzag_small_values() -> None:
    assert [encode_varint(n) for n in (0, -1, 1, -2, 2, 63, -64, 64)] == [
        b"\x00", b"\x01", b"\x02", b"\x03", b"\x04", b"\x7e", b"\x7f", b"\x80\x01",
    ]
    assert encode_varint(2**31 - 1) == b"\xfe\xff\xff\xff\x0f"
    assert encode_varint(-(2**31)) == b"\xff\xff\xff\xff\x0f"
    assert encode_varlong(-(2**63)) == b"\xff" * 9 + b"\x01"


@given(INT32)
def test_varint_roundtrip(n: int) -> None:
    data = encode_varint(n)
    assert decode_varint(b"\xaa" + data + b"\xbb", 1) == (n, 1 + len(data))
    assert size_of_varint(n) == len(data)


@given(INT64)
def test_varlong_roundtrip(n: int) -> None:
    data = encode_varlong(n)
    assert decode_varlong(data) == (n, len(data))
    assert size_of_varint(n) == len(data)


def test_range_and_truncation_errors() -> None:
    with pytest.raises(ValueError):
        encode_varint(2**31)
    with pytest.raises(ValueError):
        encode_varlong(2**63)
    with pytest.raises(IndexError):
        decode_varint(b"\x80\x80")
    with pytest.raises(ValueError):
        decode_varint(b"\x80\x80\x80\x80\x80\x01")  # six bytes is too long for an int32


def test_small_table_matches_encoder() -> None:
    assert len(SMALL_VARINTS) == SMALL_VARINT_LIMIT
    for n in (0, 1, 63, 64, 8191, 8192, SMALL_VARINT_LIMIT - 1):
        assert SMALL_VARINTS[n] == encode_varint(n)


def test_errors_name_the_value_and_the_limit() -> None:
    with pytest.raises(ValueError, match=r"^varint out of int32 range: 2147483648$"):
        encode_varint(2**31)
    with pytest.raises(ValueError, match=r"^varlong out of int64 range: -9223372036854775809$"):
        encode_varlong(-(2**63) - 1)
    with pytest.raises(ValueError, match=r"^varint longer than 5 bytes$"):
        decode_varint(b"\x80" * 5 + b"\x01")
    # ten bytes hold any int64; an eleventh is corrupt even if its value would fit
    assert decode_varlong(b"\xff" * 9 + b"\x01") == (-(2**63), 10)
    with pytest.raises(ValueError, match=r"^varint longer than 10 bytes$"):
        decode_varlong(b"\x80" * 10 + b"\x00")
