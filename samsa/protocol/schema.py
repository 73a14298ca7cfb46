"""How Kafka protocol messages are declared: as data, once, for every version.

A message is a tree of fields.  Each field has a name (snake_case of Kafka's), a type, the versions
it exists in, and optionally the versions it may be null in, a default, a tag (tagged fields exist
only in flexible versions), and nested ``fields`` when its type is a struct or an array of structs::

    F("topic_data", "[]TopicProduceData", "0+", fields=[
        F("name", "string", "0+"),
        F("records", "records", "0+", nullable="0+"),
    ])

Types are Kafka's: bool, int8, int16, uint16, int32, uint32, int64, float64, string, bytes, uuid,
records, ``[]T`` arrays and struct names.  Version ranges are Kafka's strings: ``"3+"``, ``"0-12"``,
``"none"``.  ``Api`` pairs a request and a response declaration under one API key.

From a declaration we build a ``StructSchema`` tree and, for each struct, a small slotted class
whose instances hold field values (see message.py); samsa/protocol/codec.py compiles an encoder
and a decoder per struct and version.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PRIMITIVES = frozenset(
    {"bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64",
     "string", "bytes", "uuid", "records"}
)
ZERO_UUID = uuid.UUID(int=0)
_MISSING: Any = object()


@dataclass(frozen=True, slots=True)
class VersionRange:
    """An inclusive range of versions; ``high is None`` means open-ended ("3+")."""

    low: int
    high: int | None

    @classmethod
    def parse(cls, text: str | None) -> VersionRange:
        if text is None or text == "none":
            return NO_VERSIONS
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            lo, hi = text.split("-")
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, version: int) -> bool:
        return self.low <= version and (self.high is None or version <= self.high)

    def __str__(self) -> str:
        if self.high is None:
            return f"{self.low}+"
        return f"{self.low}-{self.high}" if self.high != self.low else str(self.low)


NO_VERSIONS = VersionRange(1, 0)


class F:
    """One field declaration (see the module docstring)."""

    __slots__ = ("default", "fields", "flexible", "ignorable", "name", "nullable", "tag", "tagged",
                 "type", "versions")

    def __init__(self, name: str, type: str, versions: str, *, nullable: str | None = None,
                 default: Any = _MISSING, ignorable: bool = False, tag: int | None = None,
                 tagged: str | None = None, fields: list[F] | None = None,
                 flexible: str | None = None) -> None:
        self.name = name
        self.type = type
        self.versions = VersionRange.parse(versions)
        self.nullable = VersionRange.parse(nullable)
        self.default = default
        self.ignorable = ignorable
        self.tag = tag
        self.tagged = VersionRange.parse(tagged) if tagged is not None else None
        self.fields = fields
        # A field-level override of the message's flexible versions ("none" for the request
        # header's ClientId, which is always a classic int16-length string).
        self.flexible = VersionRange.parse(flexible) if flexible is not None else None


class FieldSchema:
    """A resolved field: its kind (a primitive, ``array`` or ``struct``) and what it holds."""

    __slots__ = ("default", "flexible", "ignorable", "item", "kind", "name", "nullable", "struct",
                 "tag", "tagged", "type_name", "versions")

    def __init__(self, decl: F, kind: str, item: str | StructSchema | None,
                 struct: StructSchema | None) -> None:
        self.name = decl.name
        self.type_name = decl.type
        self.kind = kind
        self.item = item
        self.struct = struct
        self.versions = decl.versions
        self.nullable = decl.nullable
        self.default = decl.default
        self.ignorable = decl.ignorable
        self.tag = decl.tag
        self.tagged = decl.tagged
        self.flexible = decl.flexible

    def default_factory(self) -> Callable[[], Any]:
        """A callable giving this field's default value (a fresh one for mutable kinds)."""
        d = self.default
        if self.kind == "array":
            if d is None:
                return lambda: None
            return list
        if self.kind == "struct":
            if d is None:
                return lambda: None
            struct = self.struct
            assert struct is not None
            return lambda: struct.cls()
        if d is not _MISSING:
            if self.kind == "uuid" and isinstance(d, str):
                value = uuid.UUID(d) if d else ZERO_UUID
                return lambda: value
            return lambda: d
        return _PRIMITIVE_DEFAULTS[self.kind]


_PRIMITIVE_DEFAULTS: dict[str, Callable[[], Any]] = {
    "bool": lambda: False,
    "int8": lambda: 0, "int16": lambda: 0, "uint16": lambda: 0, "int32": lambda: 0,
    "uint32": lambda: 0, "int64": lambda: 0,
    "float64": lambda: 0.0,
    "string": lambda: "",
    "bytes": lambda: b"",
    "uuid": lambda: ZERO_UUID,
    "records": lambda: None,
}


class StructSchema:
    """A struct: ordered fields; ``cls`` is the generated value class (message.py)."""

    def __init__(self, name: str, fields: list[FieldSchema]) -> None:
        self.name = name
        self.fields = fields
        self.cls: Any = None
        self.codecs: dict[tuple[int, bool], Any] = {}
        # Responses only: a null in a non-nullable string or bytes field reads as empty.
        # librdkafka's mock cluster answers a failed SyncGroup with a null assignment
        # (rdkafka_mock_handlers.c); librdkafka reads it as empty, Java's generated parser
        # refuses it.  A client loses nothing by tolerating it; the broker's request parsing
        # stays strict.
        self.null_reads_as_empty = False


def build_struct(name: str, decls: list[F], common: dict[str, list[F]],
                 out: dict[str, StructSchema]) -> StructSchema:
    """Resolve declarations into a StructSchema tree; every struct lands in ``out`` by name."""
    fields: list[FieldSchema] = []
    for decl in decls:
        t = decl.type
        is_array = t.startswith("[]")
        base = t[2:] if is_array else t
        struct: StructSchema | None = None
        if base not in PRIMITIVES:
            if decl.fields is not None:
                struct = build_struct(base, decl.fields, common, out)
            elif base in out:
                struct = out[base]
            elif base in common:
                struct = build_struct(base, common[base], common, out)
            else:
                raise ValueError(f"field {decl.name}: unknown type {t!r}")
        if is_array:
            fields.append(FieldSchema(decl, "array", struct if struct else base, None))
        elif struct is not None:
            fields.append(FieldSchema(decl, "struct", None, struct))
        else:
            fields.append(FieldSchema(decl, base, None, None))
    schema = StructSchema(name, fields)
    out[name] = schema
    return schema


class Api:
    """One API key: request and response declarations over a range of versions."""

    def __init__(self, *, key: int, name: str, versions: str, flexible: str,
                 request: list[F], response: list[F],
                 request_structs: dict[str, list[F]] | None = None,
                 response_structs: dict[str, list[F]] | None = None) -> None:
        self.key = key
        self.name = name
        rng = VersionRange.parse(versions)
        assert rng.high is not None
        self.min_version: int = rng.low
        self.max_version: int = rng.high
        self.flexible = VersionRange.parse(flexible)
        self.request_decls = request
        self.response_decls = response
        self.request_structs = request_structs or {}
        self.response_structs = response_structs or {}
        # Filled in by samsa.protocol.message.bind_api.
        self.request_schema: StructSchema
        self.response_schema: StructSchema
        self.request_class: Any = None
        self.response_class: Any = None

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible

    def __repr__(self) -> str:
        return f"Api({self.name}, key={self.key}, versions={self.min_version}-{self.max_version})"
