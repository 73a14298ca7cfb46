"""Primitive wire types: varints, strings, bytes, UUIDs, float64, and truncated input."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.protocol.codec import decode_struct, encode_struct
from samsa.protocol.message import Message, make_class
from samsa.protocol.schema import F, StructSchema, build_struct
from samsa.protocol.types import (
    FIXED,
    ProtocolDecodeError,
    bytes_codec,
    read_uvarint,
    read_varint,
    read_varlong,
    records_codec,
    string_codec,
    uvarint_size,
    write_uvarint,
    write_varint,
    write_varlong,
)


def _enc(fn: Any, value: Any) -> bytes:
    buf = bytearray()
    fn(buf, value)
    return bytes(buf)


# -- unsigned varints ---------------------------------------------------------------------------

UVARINT_VECTORS = [
    (0, "00"),
    (1, "01"),
    (127, "7f"),
    (128, "8001"),
    (300, "ac02"),
    (16383, "ff7f"),
    (16384, "808001"),
    (2**31 - 1, "ffffffff07"),
    (2**32 - 1, "ffffffff0f"),
    (2**63 - 1, "ffffffffffffffff7f"),
    (2**64 - 1, "ffffffffffffffffff01"),
]


@pytest.mark.parametrize(("value", "hexed"), UVARINT_VECTORS)
def test_uvarint_vectors(value: int, hexed: str) -> None:
    raw = bytes.fromhex(hexed)
    assert _enc(write_uvarint, value) == raw
    assert uvarint_size(value) == len(raw)
    # Decoding starts at any position and stops right after the varint.
    assert read_uvarint(b"\xee" + raw + b"\xee", 1) == (value, 1 + len(raw))


@given(st.integers(0, 2**64 - 1))
def test_uvarint_roundtrip(n: int) -> None:
    raw = _enc(write_uvarint, n)
    assert len(raw) == uvarint_size(n)
    assert read_uvarint(raw, 0) == (n, len(raw))


def test_uvarint_longer_than_ten_bytes_is_rejected() -> None:
    with pytest.raises(ProtocolDecodeError, match="longer than 10 bytes"):
        read_uvarint(b"\x80" * 11 + b"\x01", 0)


# -- zigzag varints / varlongs ------------------------------------------------------------------

VARINT_VECTORS = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (-2, "03"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (127, "fe01"),
    (128, "8002"),
    (2**31 - 1, "feffffff0f"),
    (-(2**31), "ffffffff0f"),
]

VARLONG_VECTORS = VARINT_VECTORS[:-2] + [
    (2**31 - 1, "feffffff0f"),
    (-(2**31), "ffffffff0f"),
    (2**31, "8080808010"),
    (2**63 - 1, "feffffffffffffffff01"),
    (-(2**63), "ffffffffffffffffff01"),
]


@pytest.mark.parametrize(("value", "hexed"), VARINT_VECTORS)
def test_varint_vectors(value: int, hexed: str) -> None:
    raw = bytes.fromhex(hexed)
    assert _enc(write_varint, value) == raw
    assert read_varint(raw, 0) == (value, len(raw))


@pytest.mark.parametrize(("value", "hexed"), VARLONG_VECTORS)
def test_varlong_vectors(value: int, hexed: str) -> None:
    raw = bytes.fromhex(hexed)
    assert _enc(write_varlong, value) == raw
    assert read_varlong(raw, 0) == (value, len(raw))


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_roundtrip(n: int) -> None:
    raw = _enc(write_varint, n)
    assert len(raw) <= 5
    assert read_varint(raw, 0) == (n, len(raw))
    # A varint is a varlong of the same value (Kafka relies on this for record fields).
    assert _enc(write_varlong, n) == raw


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_roundtrip(n: int) -> None:
    raw = _enc(write_varlong, n)
    assert len(raw) <= 10
    assert read_varlong(raw, 0) == (n, len(raw))


@pytest.mark.parametrize("value", [2**31, -(2**31) - 1, 2**40])
def test_varint_out_of_range_is_refused(value: int) -> None:
    # Masking would silently write another number (2**31 would become 0).
    with pytest.raises(ValueError, match="int32"):
        write_varint(bytearray(), value)


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1])
def test_varlong_out_of_range_is_refused(value: int) -> None:
    with pytest.raises(ValueError, match="int64"):
        write_varlong(bytearray(), value)


# -- strings ------------------------------------------------------------------------------------

STRING_CASES = [
    # (compact, value, expected hex)
    (False, "", "0000"),
    (False, "abc", "0003616263"),
    (False, "é", "0002c3a9"),
    (True, "", "01"),
    (True, "abc", "04616263"),
    (True, "é", "03c3a9"),
    (True, "x" * 127, "8001" + "78" * 127),  # length + 1 = 128 needs two varint bytes
]


@pytest.mark.parametrize(("compact", "value", "hexed"), STRING_CASES)
def test_string_encoding(compact: bool, value: str, hexed: str) -> None:
    enc, dec = string_codec(compact, nullable=False, field="s")
    raw = bytes.fromhex(hexed)
    assert _enc(enc, value) == raw
    assert dec(raw, 0) == (value, len(raw))


@pytest.mark.parametrize(("compact", "null_hex"), [(False, "ffff"), (True, "00")])
def test_nullable_string(compact: bool, null_hex: str) -> None:
    enc, dec = string_codec(compact, nullable=True, field="s")
    assert _enc(enc, None) == bytes.fromhex(null_hex)
    assert dec(bytes.fromhex(null_hex), 0) == (None, len(null_hex) // 2)
    strict_enc, strict_dec = string_codec(compact, nullable=False, field="s")
    with pytest.raises(ValueError, match="not nullable"):
        _enc(strict_enc, None)
    with pytest.raises(ProtocolDecodeError, match="was null"):
        strict_dec(bytes.fromhex(null_hex), 0)


@given(compact=st.booleans(), nullable=st.booleans(), value=st.text(max_size=300))
@settings(max_examples=200)
def test_string_roundtrip(compact: bool, nullable: bool, value: str) -> None:
    enc, dec = string_codec(compact, nullable, "s")
    raw = _enc(enc, value)
    assert dec(raw, 0) == (value, len(raw))


def test_string_invalid_utf8() -> None:
    _, dec = string_codec(False, False, "name")
    with pytest.raises(ProtocolDecodeError, match="UTF-8"):
        dec(b"\x00\x02\xc3\x28", 0)


@pytest.mark.parametrize("compact", [False, True])
def test_string_past_end(compact: bool) -> None:
    enc, dec = string_codec(compact, False, "name")
    raw = _enc(enc, "hello")
    with pytest.raises(ProtocolDecodeError, match="runs past the end"):
        dec(raw[:-1], 0)


# -- bytes and records --------------------------------------------------------------------------

BYTES_CASES = [
    (False, b"", "00000000"),
    (False, b"\x01\x02", "000000020102"),
    (True, b"", "01"),
    (True, b"\x01\x02", "030102"),
]


@pytest.mark.parametrize(("compact", "value", "hexed"), BYTES_CASES)
@pytest.mark.parametrize("codec", [bytes_codec, records_codec])
def test_bytes_encoding(codec: Any, compact: bool, value: bytes, hexed: str) -> None:
    enc, dec = codec(compact, False, "b")
    raw = bytes.fromhex(hexed)
    assert _enc(enc, value) == raw
    assert dec(raw, 0) == (value, len(raw))


@pytest.mark.parametrize(("compact", "null_hex"), [(False, "ffffffff"), (True, "00")])
@pytest.mark.parametrize("codec", [bytes_codec, records_codec])
def test_nullable_bytes(codec: Any, compact: bool, null_hex: str) -> None:
    enc, dec = codec(compact, True, "b")
    assert _enc(enc, None) == bytes.fromhex(null_hex)
    assert dec(bytes.fromhex(null_hex), 0) == (None, len(null_hex) // 2)
    strict_enc, _ = codec(compact, False, "b")
    with pytest.raises(ValueError, match="not nullable"):
        _enc(strict_enc, None)


def test_non_nullable_bytes_refuses_null_on_decode() -> None:
    _, dec = bytes_codec(False, False, "b")
    with pytest.raises(ProtocolDecodeError, match="was null"):
        dec(b"\xff\xff\xff\xff", 0)


@given(compact=st.booleans(), value=st.binary(max_size=300))
def test_bytes_roundtrip(compact: bool, value: bytes) -> None:
    for codec in (bytes_codec, records_codec):
        enc, dec = codec(compact, True, "b")
        raw = _enc(enc, value)
        got, end = dec(raw, 0)
        assert (bytes(got), end) == (value, len(raw))


@pytest.mark.parametrize("compact", [False, True])
@pytest.mark.parametrize("codec", [bytes_codec, records_codec])
def test_bytes_past_end(codec: Any, compact: bool) -> None:
    enc, dec = codec(compact, False, "b")
    raw = _enc(enc, b"12345")
    with pytest.raises(ProtocolDecodeError, match="runs past the end"):
        dec(raw[:-2], 0)


def test_records_accepts_memoryview_and_returns_a_slice_of_the_input() -> None:
    enc, dec = records_codec(True, True, "records")
    raw = _enc(enc, memoryview(b"batch"))
    assert raw == b"\x06batch"
    view = memoryview(b"\x00" + raw)
    got, end = dec(view, 1)
    assert isinstance(got, memoryview) and bytes(got) == b"batch" and end == 7


# -- uuid, float64, fixed-width ints -------------------------------------------------------------

def test_uuid() -> None:
    enc, dec = FIXED["uuid"]
    u = uuid.UUID("0123456789abcdef0123456789abcdef")
    assert _enc(enc, u) == bytes.fromhex("0123456789abcdef0123456789abcdef")
    assert dec(b"\x00" + u.bytes, 1) == (u, 17)
    assert _enc(enc, uuid.UUID(int=0)) == b"\x00" * 16


@given(st.uuids())
def test_uuid_roundtrip(u: uuid.UUID) -> None:
    enc, dec = FIXED["uuid"]
    assert dec(_enc(enc, u), 0) == (u, 16)


@given(st.floats(allow_nan=False))
def test_float64_roundtrip(x: float) -> None:
    enc, dec = FIXED["float64"]
    raw = _enc(enc, x)
    assert raw == struct.pack(">d", x)
    assert dec(raw, 0) == (x, 8)


def test_float64_vector() -> None:
    enc, _ = FIXED["float64"]
    assert _enc(enc, 1.5) == bytes.fromhex("3ff8000000000000")


@pytest.mark.parametrize(("kind", "value", "hexed"), [
    ("int8", -1, "ff"), ("int16", -2, "fffe"), ("uint16", 65535, "ffff"),
    ("int32", -(2**31), "80000000"), ("uint32", 2**32 - 1, "ffffffff"),
    ("int64", 2**63 - 1, "7fffffffffffffff"), ("bool", True, "01"), ("bool", False, "00"),
])
def test_fixed_width(kind: str, value: Any, hexed: str) -> None:
    enc, dec = FIXED[kind]
    assert _enc(enc, value) == bytes.fromhex(hexed)
    assert dec(bytes.fromhex(hexed), 0) == (value, len(hexed) // 2)


# -- truncated input, through the struct codec ----------------------------------------------------
# Primitive decoders may raise IndexError/struct.error on short input (no bounds checks on the
# hot path); decode_struct, the entry point every caller uses, turns those into
# ProtocolDecodeError.  So truncation is checked through small one-field structs.

def _one_field_struct(type_name: str, nullable: str | None = None,
                      fields: list[F] | None = None) -> StructSchema:
    structs: dict[str, StructSchema] = {}
    schema = build_struct("Probe", [
        F("value", type_name, "0+", nullable=nullable, fields=fields),
        F("tail", "int8", "0+"),
    ], {}, structs)
    for sub in structs.values():
        make_class(sub)
    return schema


PROBES: list[tuple[str, Any, dict[str, Any]]] = [
    ("int8", -5, {}), ("int16", 300, {}), ("uint16", 65000, {}), ("int32", -70000, {}),
    ("uint32", 2**32 - 2, {}), ("int64", -(2**40), {}), ("float64", 2.25, {}),
    ("bool", True, {}), ("uuid", uuid.uuid4(), {}), ("string", "héllo", {}),
    ("bytes", b"\x00\x01\x02", {}), ("records", b"\x09" * 20, {"nullable": "0+"}),
    ("[]int32", [1, -2, 3], {}), ("[]string", ["a", "", "ccc"], {}),
]


@pytest.mark.parametrize("flexible", [False, True])
@pytest.mark.parametrize(("type_name", "value", "opts"), PROBES, ids=[p[0] for p in PROBES])
def test_truncated_input_raises_protocol_decode_error(type_name: str, value: Any,
                                                      opts: dict[str, Any], flexible: bool) -> None:
    schema = _one_field_struct(type_name, **opts)
    obj = schema.cls(value=value, tail=7)
    buf = bytearray()
    encode_struct(obj, 0, flexible, buf)
    raw = bytes(buf)
    got, end = decode_struct(schema, 0, flexible, raw)
    assert got == obj and end == len(raw)
    for cut in range(len(raw)):
        with pytest.raises(ProtocolDecodeError, match=r"truncated|past the end|claims"):
            decode_struct(schema, 0, flexible, raw[:cut])


def test_truncated_struct_array() -> None:
    schema = _one_field_struct("[]Pair", fields=[F("k", "string", "0+"), F("v", "int64", "0+")])
    item = schema.fields[0].item
    assert isinstance(item, StructSchema)
    pair = item.cls
    obj = schema.cls(value=[pair(k="a", v=1), pair(k="bb", v=-1)], tail=1)
    for flexible in (False, True):
        buf = bytearray()
        encode_struct(obj, 0, flexible, buf)
        raw = bytes(buf)
        assert decode_struct(schema, 0, flexible, raw) == (obj, len(raw))
        for cut in range(len(raw)):
            with pytest.raises(ProtocolDecodeError):
                decode_struct(schema, 0, flexible, raw[:cut])


def test_nullable_struct_field() -> None:
    # KIP-893 nullable struct fields: an int8 marker, -1 = null, 1 = present.  No declared API
    # has one yet, so probe the codec directly.
    structs: dict[str, StructSchema] = {}
    schema = build_struct("Outer", [
        F("inner", "Inner", "0+", nullable="1+", default=None, fields=[F("x", "int32", "0+")]),
    ], {}, structs)
    for sub in structs.values():
        make_class(sub)
    inner = schema.fields[0].struct
    assert inner is not None
    inner_cls = inner.cls
    for flexible in (False, True):
        tail = b"\x00" if flexible else b""
        buf = bytearray()
        encode_struct(schema.cls(inner=None), 1, flexible, buf)
        assert bytes(buf) == b"\xff" + tail
        assert decode_struct(schema, 1, flexible, bytes(buf))[0].inner is None
        buf = bytearray()
        encode_struct(schema.cls(inner=inner_cls(x=5)), 1, flexible, buf)
        assert bytes(buf) == b"\x01\x00\x00\x00\x05" + tail + tail
        assert decode_struct(schema, 1, flexible, bytes(buf))[0].inner == inner_cls(x=5)
        # Version 0 does not allow null: no marker byte, and None is refused.
        buf = bytearray()
        encode_struct(schema.cls(inner=inner_cls(x=5)), 0, flexible, buf)
        assert bytes(buf) == b"\x00\x00\x00\x05" + tail + tail
        with pytest.raises(ValueError, match="not nullable"):
            encode_struct(schema.cls(inner=None), 0, flexible, bytearray())


def test_message_class_rejects_unknown_fields() -> None:
    schema = _one_field_struct("int32")
    with pytest.raises(TypeError, match="no field"):
        schema.cls(value=1, nope=2)
    assert isinstance(schema.cls(), Message)
