"""The generated struct codec: its bytes against a plain field-by-field reference encoder,
tagged-field default checks (struct-typed defaults included), short and long fixed-width arrays.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from samsa.protocol import APIS, APIS_BY_NAME, encode_body
from samsa.protocol.codec import decode_struct, encode_struct, is_default
from samsa.protocol.message import make_class
from samsa.protocol.schema import F, FieldSchema, StructSchema, build_struct
from samsa.protocol.types import (
    FIXED,
    INT32,
    bytes_codec,
    records_codec,
    string_codec,
    write_uvarint,
)

from .strategies import all_cases, body_strategy, case_id

# Generated classes, fetched through the registry so that type checkers see them as Any.
FetchResponse: Any = APIS_BY_NAME["Fetch"].response_class
ProduceResponse: Any = APIS_BY_NAME["Produce"].response_class

# -- a reference encoder --------------------------------------------------------------------------
# Written the plain way, one field at a time with the primitive codecs of types.py, and with
# the tagged-field rule as Kafka states it (a tagged field is written when it is not equal to
# its default), so that the generated encoders can be checked byte for byte against it.


def _ref_value(buf: bytearray, kind: str, f: FieldSchema, v: Any, version: int,
               flexible: bool, compact: bool, nullable: bool) -> None:
    if kind in FIXED:
        FIXED[kind][0](buf, v)
    elif kind == "string":
        string_codec(compact, nullable, f.name)[0](buf, v)
    elif kind == "bytes":
        bytes_codec(compact, nullable, f.name)[0](buf, v)
    elif kind == "records":
        records_codec(compact, nullable, f.name)[0](buf, v)
    else:
        raise AssertionError(kind)


def _ref_field(buf: bytearray, f: FieldSchema, v: Any, version: int, flexible: bool) -> None:
    compact = flexible if f.flexible is None else version in f.flexible
    nullable = version in f.nullable
    if f.kind == "struct":
        assert f.struct is not None
        if nullable:
            buf.append(0xFF if v is None else 1)
        if v is not None:
            ref_encode(buf, v, f.struct, version, flexible)
    elif f.kind == "array":
        if v is None:
            assert nullable
            buf += b"\x00" if compact else INT32.pack(-1)
            return
        if compact:
            write_uvarint(buf, len(v) + 1)
        else:
            buf += INT32.pack(len(v))
        for x in v:
            if isinstance(f.item, StructSchema):
                ref_encode(buf, x, f.item, version, flexible)
            else:
                assert isinstance(f.item, str)
                _ref_value(buf, f.item, f, x, version, flexible, compact, False)
    else:
        _ref_value(buf, f.kind, f, v, version, flexible, compact, nullable)


def ref_encode(buf: bytearray, obj: Any, schema: StructSchema, version: int,
               flexible: bool) -> None:
    tagged: list[tuple[int, FieldSchema]] = []
    for f in schema.fields:
        if version not in f.versions:
            continue
        if f.tag is not None and f.tagged is not None:
            if flexible and version in f.tagged:
                tagged.append((f.tag, f))
            continue
        _ref_field(buf, f, getattr(obj, f.name), version, flexible)
    if not flexible:
        return
    present: list[tuple[int, bytes]] = []
    for tag, f in sorted(tagged, key=lambda tf: tf[0]):
        value = getattr(obj, f.name)
        if value == f.default_factory()():
            continue
        sub = bytearray()
        _ref_field(sub, f, value, version, flexible)
        present.append((tag, bytes(sub)))
    present += list((obj.unknown_tags or {}).items())
    present.sort(key=lambda kv: kv[0])
    write_uvarint(buf, len(present))
    for tag, payload in present:
        write_uvarint(buf, tag)
        write_uvarint(buf, len(payload))
        buf += payload


CASES = all_cases()


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_generated_encoder_matches_the_reference(case: tuple[int, str, int], data: Any) -> None:
    key, side, version = case
    api = APIS[key]
    message = data.draw(body_strategy(key, side, version), label="message")
    schema = api.request_schema if side == "request" else api.response_schema
    expected = bytearray()
    ref_encode(expected, message, schema, version, api.is_flexible(version))
    assert encode_body(message, version) == bytes(expected)


# -- tagged fields with struct defaults -----------------------------------------------------------

Partition = ProduceResponse.PartitionProduceResponse
Leader = ProduceResponse.LeaderIdAndEpoch


def _partition(**fields: Any) -> Any:
    return Partition(index=3, error_code=0, base_offset=7, record_errors=[], **fields)


def _encode(obj: Any, version: int) -> bytes:
    """A nested (flexible-version) struct alone."""
    buf = bytearray()
    encode_struct(obj, version, True, buf)
    return bytes(buf)


def _decode(obj_cls: Any, version: int, raw: bytes) -> Any:
    value, end = decode_struct(obj_cls._schema, version, True, raw)
    assert end == len(raw)
    return value


def test_struct_tagged_field_at_its_default_is_not_written() -> None:
    body = encode_body(ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(
        name="t", partition_responses=[_partition()])]), 10)
    # ... error_message (null), the partition's empty tag section, the topic's, throttle
    # time, the response's.
    assert body.endswith(b"\x00" + b"\x00" + b"\x00" + b"\x00\x00\x00\x00" + b"\x00")
    # An equal instance built by hand is a default too.
    explicit = _partition(current_leader=Leader(leader_id=-1, leader_epoch=-1))
    assert _encode(explicit, 10) == _encode(_partition(), 10)


@pytest.mark.parametrize("leader", [(5, -1), (-1, 0), (2, 9)])
def test_struct_tagged_field_off_its_default_is_written(leader: tuple[int, int]) -> None:
    value = _partition(current_leader=Leader(leader_id=leader[0], leader_epoch=leader[1]))
    body = _encode(value, 10)
    # One tagged field: tag 0, 9 bytes (two int32s and the struct's own empty tag section).
    assert body.endswith(b"\x01" + b"\x00" + b"\x09" + struct.pack(">ii", *leader) + b"\x00")
    assert _decode(Partition, 10, body) == value


def test_struct_tagged_field_merges_with_unknown_tags_in_order() -> None:
    value = _partition(current_leader=Leader(leader_id=1, leader_epoch=2))
    value.unknown_tags = {4: b"zz"}
    body = _encode(value, 10)
    assert body.endswith(b"\x02" + b"\x00\x09" + struct.pack(">ii", 1, 2) + b"\x00"
                         + b"\x04\x02zz")


def test_fetch_response_tagged_structs() -> None:
    partition = FetchResponse.PartitionData(partition_index=0, records=b"")
    plain = _encode(partition, 12)
    assert plain.endswith(b"\x00")
    moved = FetchResponse.PartitionData(
        partition_index=0, records=b"",
        current_leader=FetchResponse.LeaderIdAndEpoch(leader_id=4, leader_epoch=1))
    assert len(_encode(moved, 12)) == len(plain) + 2 + 9  # tag 1, size, payload
    assert _decode(FetchResponse.PartitionData, 12, _encode(moved, 12)) == moved


def test_is_default_agrees_with_equality_to_a_fresh_default() -> None:
    check = is_default(Leader._schema)
    tagged_unknown = Leader()
    tagged_unknown.unknown_tags = {9: b"x"}  # Message.__eq__ does not compare unknown tags
    value: Any
    for value in (Leader(), Leader(leader_id=0), Leader(leader_epoch=-2), tagged_unknown,
                  None, 0, [], ProduceResponse.NodeEndpoint()):
        assert check(value) == (value == Leader()), value
    # Nested: a struct whose default holds a struct default.
    structs: dict[str, StructSchema] = {}
    outer = build_struct("Outer", [
        F("n", "int32", "0+", default=-1),
        F("inner", "Inner", "0+", fields=[F("s", "string", "0+", nullable="0+", default=None),
                                          F("xs", "[]int32", "0+")]),
    ], {}, structs)
    for sub in structs.values():
        make_class(sub)
    inner_cls = structs["Inner"].cls
    check = is_default(outer)
    assert check(outer.cls())
    assert not check(outer.cls(n=0))
    assert not check(outer.cls(inner=inner_cls(s="")))
    assert not check(outer.cls(inner=inner_cls(xs=[1])))
    assert check(outer.cls(inner=inner_cls(s=None, xs=[])))


# -- fixed-width arrays: precompiled Structs for short ones, a format for long ones ---------------

def _int_array_struct() -> StructSchema:
    return build_struct("Ints", [F("xs", "[]int32", "0+", nullable="0+"),
                                 F("ys", "[]int64", "0+")], {}, {})


@pytest.mark.parametrize("count", [0, 1, 2, 31, 32, 33, 200])
@pytest.mark.parametrize("flexible", [False, True])
def test_fixed_width_arrays_of_any_length(count: int, flexible: bool) -> None:
    schema = _int_array_struct()
    make_class(schema)
    xs = list(range(-count // 2, count - count // 2))
    ys = [2**40 + i for i in range(count)]
    obj = schema.cls(xs=xs, ys=ys)
    buf = bytearray()
    encode_struct(obj, 0, flexible, buf)
    expected = bytearray()
    ref_encode(expected, obj, schema, 0, flexible)
    assert buf == expected
    if count:
        assert bytes(buf).count(struct.pack(f">{count}q", *ys)) == 1
    assert decode_struct(schema, 0, flexible, bytes(buf)) == (obj, len(buf))
    null = schema.cls(xs=None, ys=ys)
    buf = bytearray()
    encode_struct(null, 0, flexible, buf)
    assert decode_struct(schema, 0, flexible, memoryview(buf)) == (null, len(buf))


def test_long_strings_and_bytes_use_multi_byte_lengths() -> None:
    schema = build_struct("Sized", [F("s", "string", "0+"), F("b", "bytes", "0+"),
                                    F("r", "records", "0+", nullable="0+")], {}, {})
    make_class(schema)
    for size in (0, 126, 127, 128, 16383, 16384, 70000):
        # Classic strings have an int16 length: at most 32767 bytes.
        obj = schema.cls(s="é" * (min(size, 32767) // 2), b=b"\x01" * size, r=b"\x02" * size)
        for flexible in (False, True):
            buf = bytearray()
            encode_struct(obj, 0, flexible, buf)
            expected = bytearray()
            ref_encode(expected, obj, schema, 0, flexible)
            assert buf == expected
            got, end = decode_struct(schema, 0, flexible, bytes(buf))
            assert (got, end) == (obj, len(buf))
