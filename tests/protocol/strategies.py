"""Hypothesis strategies built from samsa's message schemas.

``message_strategy(schema, version, flexible)`` draws a valid instance of a struct at one
version: every field present in that version gets a value of its type (None only where the
version allows null; tagged fields either keep their default or get a value), and fields the
version lacks stay at their defaults, so an encode/decode round trip must give back an equal
object.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from samsa.protocol import APIS
from samsa.protocol.schema import FieldSchema, StructSchema

INT_RANGES: dict[str, tuple[int, int]] = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}

# Small collections keep the examples fast; the interesting cases are the types, lengths
# around the 1-byte varint boundary (127/128) and null/empty, not size.
_TEXT = st.text(max_size=8) | st.sampled_from(["", "topic-ä", "é" * 64, "x" * 128, "🐍"])
_BYTES = st.binary(max_size=8) | st.sampled_from([b"", b"\x00" * 127, b"\xff" * 128])
MAX_ITEMS = 3


def _ints(kind: str) -> st.SearchStrategy[int]:
    lo, hi = INT_RANGES[kind]
    return st.integers(lo, hi) | st.sampled_from([lo, hi, 0, -1 if lo < 0 else 1])


def _primitive(kind: str) -> st.SearchStrategy[Any]:
    if kind in INT_RANGES:
        return _ints(kind)
    if kind == "bool":
        return st.booleans()
    if kind == "float64":
        return st.floats(allow_nan=False)
    if kind == "string":
        return _TEXT
    if kind in ("bytes", "records"):
        return _BYTES
    if kind == "uuid":
        return st.uuids()
    raise AssertionError(f"no strategy for {kind}")


def _field_strategy(f: FieldSchema, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    if f.kind == "struct":
        assert f.struct is not None
        base = message_strategy(f.struct, version, flexible)
    elif f.kind == "array":
        item = f.item
        if isinstance(item, StructSchema):
            item_st = message_strategy(item, version, flexible)
        else:
            assert isinstance(item, str)
            item_st = _primitive(item)
        base = st.lists(item_st, max_size=MAX_ITEMS)
    else:
        base = _primitive(f.kind)
    if version in f.nullable:
        base = st.none() | base
    if f.tag is not None:
        # A tagged field is written only when it differs from its default: draw both cases.
        default = f.default_factory()
        base = st.builds(default) | base
    return base


_CACHE: dict[tuple[int, int, bool], st.SearchStrategy[Any]] = {}


def present_fields(schema: StructSchema, version: int, flexible: bool) -> list[FieldSchema]:
    """Fields that are on the wire at ``version`` (tagged ones only in flexible versions)."""
    out = []
    for f in schema.fields:
        if version not in f.versions:
            continue
        if f.tag is not None and not (flexible and f.tagged is not None and version in f.tagged):
            continue
        out.append(f)
    return out


def message_strategy(schema: StructSchema, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    key = (id(schema), version, flexible)
    cached = _CACHE.get(key)
    if cached is None:
        kwargs = {f.name: _field_strategy(f, version, flexible)
                  for f in present_fields(schema, version, flexible)}
        cached = st.builds(schema.cls, **kwargs)
        _CACHE[key] = cached
    return cached


def body_strategy(api_key: int, side: str, version: int) -> st.SearchStrategy[Any]:
    api = APIS[api_key]
    schema = api.request_schema if side == "request" else api.response_schema
    return message_strategy(schema, version, api.is_flexible(version))


def all_cases() -> list[tuple[int, str, int]]:
    """Every (api key, side, version) samsa declares."""
    return [(key, side, v)
            for key in sorted(APIS)
            for v in range(APIS[key].min_version, APIS[key].max_version + 1)
            for side in ("request", "response")]


def case_id(case: tuple[int, str, int]) -> str:
    key, side, v = case
    return f"{APIS[key].name}-{side}-v{v}"
