"""Value classes generated from struct schemas.

Each struct gets a class with ``__slots__`` for its fields (all versions' fields) plus
``unknown_tags`` (tagged fields we do not know, kept so they survive a decode/encode round trip).
Construct with keyword arguments; fields left out take their declared defaults.  Nested struct
classes hang off their parent class by Kafka's struct name, e.g. ``ProduceRequest.TopicProduceData``.
"""

from __future__ import annotations

import keyword
import uuid
from typing import Any, ClassVar

from samsa.protocol.schema import Api, F, StructSchema, build_struct


class Message:
    """Base of every generated struct class."""

    __slots__ = ("unknown_tags",)
    _schema: ClassVar[StructSchema]
    _defaults: ClassVar[tuple[tuple[str, Any], ...]]
    _field_names: ClassVar[tuple[str, ...]]
    api: ClassVar[Api | None] = None

    def __init__(self, **fields: Any) -> None:
        for name, factory in self._defaults:
            if name in fields:
                object.__setattr__(self, name, fields.pop(name))
            else:
                object.__setattr__(self, name, factory())
        self.unknown_tags: dict[int, bytes] | None = None
        if fields:
            raise TypeError(
                f"{type(self).__name__} has no field(s) {sorted(fields)}; "
                f"fields are {list(self._field_names)}"
            )

    def _unknown_fields(self, fields: dict[str, Any]) -> None:
        raise TypeError(
            f"{type(self).__name__} has no field(s) {sorted(fields)}; "
            f"fields are {list(self._field_names)}"
        )

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self._field_names)

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._field_names)
        return f"{type(self).__name__}({inner})"

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dicts/lists, for logging and tests."""

        def plain(v: Any) -> Any:
            if isinstance(v, Message):
                return v.to_dict()
            if isinstance(v, list):
                return [plain(x) for x in v]
            return v

        return {n: plain(getattr(self, n)) for n in self._field_names}

    # Messages are plain mutable records; hashing by identity would surprise, so forbid it.
    __hash__ = None  # type: ignore[assignment]


_IMMUTABLE = (int, float, str, bytes, bool, type(None), uuid.UUID)
_MISSING: Any = object()


def _make_init(class_name: str, defaults: tuple[tuple[str, Any], ...]) -> Any:
    """A keyword-only ``__init__`` generated for one class: constant defaults are bound as
    parameter defaults, mutable ones (lists, structs) are made fresh per instance."""
    ns: dict[str, Any] = {"_MISSING": _MISSING, "Message": Message}
    params: list[str] = []
    body: list[str] = []
    for i, (name, factory) in enumerate(defaults):
        value = factory()
        if isinstance(value, _IMMUTABLE):
            ns[f"_c{i}"] = value
            params.append(f"{name}=_c{i}")
        else:
            ns[f"_f{i}"] = factory
            params.append(f"{name}=_MISSING")
            body.append(f"    if {name} is _MISSING:\n        {name} = _f{i}()")
        body.append(f"    self.{name} = {name}")
    body.append("    self.unknown_tags = None")
    body.append("    if extra:\n        Message._unknown_fields(self, extra)")
    signature = ", ".join(["self", "*", *params, "**extra"])
    source = f"def __init__({signature}):\n" + "\n".join(body) + "\n"
    exec(compile(source, f"<samsa message {class_name}>", "exec"), ns)  # noqa: S102
    return ns["__init__"]


def make_class(schema: StructSchema, class_name: str | None = None) -> type[Message]:
    names = tuple(f.name for f in schema.fields)
    defaults = tuple((f.name, f.default_factory()) for f in schema.fields)
    if any(not n.isidentifier() or keyword.iskeyword(n) or n in ("self", "extra")
           for n in names):
        raise ValueError(f"{schema.name}: field names must be Python identifiers: {names}")
    name = class_name or schema.name
    cls = type(name, (Message,), {
        "__slots__": names,
        "__init__": _make_init(name, defaults),
        "_schema": schema,
        "_defaults": defaults,
        "_field_names": names,
    })
    schema.cls = cls
    return cls


def _build_side(api: Api, side: str) -> tuple[StructSchema, type[Message]]:
    decls = api.request_decls if side == "Request" else api.response_decls
    common = api.request_structs if side == "Request" else api.response_structs
    structs: dict[str, StructSchema] = {}
    top_name = f"{api.name}{side}"
    top = build_struct(top_name, decls, common, structs)
    top_cls = None
    # Children first so that default factories of parents can instantiate them.
    for name, schema in structs.items():
        schema.null_reads_as_empty = side == "Response"
        cls = make_class(schema)
        if schema is top:
            top_cls = cls
    assert top_cls is not None
    for name, schema in structs.items():
        if schema is not top:
            setattr(top_cls, name, schema.cls)
    top_cls.api = api
    return top, top_cls


def bind_api(api: Api) -> Api:
    """Build the schemas and classes of an Api's request and response."""
    api.request_schema, api.request_class = _build_side(api, "Request")
    api.response_schema, api.response_class = _build_side(api, "Response")
    return api


def declare_struct(name: str, decls: list[F]) -> StructSchema:
    """A standalone struct (a record key or value of an internal topic, not an API message)
    with a message class for it and for each struct nested in it."""
    structs: dict[str, StructSchema] = {}
    top = build_struct(name, decls, {}, structs)
    for schema in structs.values():  # nested structs first: parents' defaults build them
        if schema is not top:
            make_class(schema)
    make_class(top)
    return top
