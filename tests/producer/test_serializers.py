"""Serializers: Java's byte layouts, None passthrough, resolution of settings."""

from __future__ import annotations

import struct

import pytest

from samsa.errors import SerializationError
from samsa.producer.serializers import (
    BytesSerializer,
    DoubleSerializer,
    IntegerSerializer,
    JsonSerializer,
    LongSerializer,
    ShortSerializer,
    StringSerializer,
    as_serialize_fn,
)


def test_integer_and_long_are_big_endian_like_java() -> None:
    assert IntegerSerializer().serialize("t", 1) == b"\x00\x00\x00\x01"
    assert IntegerSerializer().serialize("t", -1) == b"\xff\xff\xff\xff"
    assert IntegerSerializer().serialize("t", 2**31 - 1) == b"\x7f\xff\xff\xff"
    assert LongSerializer().serialize("t", 258) == b"\x00" * 6 + b"\x01\x02"
    assert ShortSerializer().serialize("t", -2) == b"\xff\xfe"
    assert DoubleSerializer().serialize("t", 1.5) == struct.pack(">d", 1.5)


@pytest.mark.parametrize("bad", [2**31, -(2**31) - 1, "1", True, 1.5])
def test_integer_out_of_range_or_wrong_type(bad: object) -> None:
    with pytest.raises(SerializationError, match="IntegerSerializer"):
        IntegerSerializer().serialize("t", bad)


def test_string_and_bytes() -> None:
    assert StringSerializer().serialize("t", "héllo") == "héllo".encode()
    assert StringSerializer("latin-1").serialize("t", "é") == b"\xe9"
    assert BytesSerializer().serialize("t", bytearray(b"ab")) == b"ab"
    assert BytesSerializer().serialize("t", memoryview(b"cd")) == b"cd"
    with pytest.raises(SerializationError, match="topic 't'"):
        StringSerializer().serialize("t", b"bytes")
    with pytest.raises(SerializationError, match="BytesSerializer"):
        BytesSerializer().serialize("t", "str")


def test_json() -> None:
    assert JsonSerializer().serialize("t", {"a": [1, "é"]}) == '{"a":[1,"é"]}'.encode()
    with pytest.raises(SerializationError, match="JsonSerializer"):
        JsonSerializer().serialize("t", object())


@pytest.mark.parametrize(
    "ser",
    [
        BytesSerializer(),
        StringSerializer(),
        IntegerSerializer(),
        LongSerializer(),
        JsonSerializer(),
    ],
)
def test_none_passes_through(ser: object) -> None:
    assert ser.serialize("t", None) is None  # type: ignore[attr-defined]
    assert as_serialize_fn(ser)("t", None) is None


def test_as_serialize_fn_resolution() -> None:
    assert as_serialize_fn(None)("t", b"x") == b"x"
    assert as_serialize_fn("str")("t", "x") == b"x"
    assert as_serialize_fn("INT")("t", 1) == b"\x00\x00\x00\x01"
    assert (
        as_serialize_fn("org.apache.kafka.common.serialization.LongSerializer")("t", 1)
        == b"\x00" * 7 + b"\x01"
    )
    assert as_serialize_fn(StringSerializer)("t", "y") == b"y"
    assert as_serialize_fn(lambda v: v.upper().encode())("t", "z") == b"Z"
    assert as_serialize_fn(lambda v: bytearray(v))("t", b"q") == b"q"


def test_callable_errors_are_serialization_errors() -> None:
    with pytest.raises(SerializationError, match="must return bytes"):
        as_serialize_fn(lambda v: 5)("t", "v")
    with pytest.raises(SerializationError, match="failed"):
        as_serialize_fn(lambda v: 1 / 0)("t", "v")
    with pytest.raises(SerializationError, match="unknown serializer"):
        as_serialize_fn("nope")
    with pytest.raises(SerializationError, match="not a serializer"):
        as_serialize_fn(42)
