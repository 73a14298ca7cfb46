"""Key and value deserializers: bytes -> objects, mirroring :mod:`samsa.producer.serializers`.

A deserializer is anything with ``deserialize(topic, data) -> object``.  The consumer turns its
``key.deserializer`` / ``value.deserializer`` setting into ``fn(topic, data)`` (or None for
plain bytes, the fast path) with :func:`as_deserialize_fn`, accepting None, a Deserializer
instance or class, a callable ``fn(bytes) -> object`` (kafka-python style) or a name from
:data:`DESERIALIZER_ALIASES`.  ``None`` data (null key, tombstone) stays ``None``.
Failures raise SerializationError naming the topic and the deserializer.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from samsa.errors import SerializationError

__all__ = [
    "DESERIALIZER_ALIASES", "BytesDeserializer", "DeserializeFn", "Deserializer",
    "DoubleDeserializer", "FloatDeserializer", "IntegerDeserializer", "JsonDeserializer",
    "LongDeserializer", "ShortDeserializer", "StringDeserializer", "as_deserialize_fn",
]

DeserializeFn = Callable[[str, "bytes | None"], Any]


@runtime_checkable
class Deserializer(Protocol):
    def deserialize(self, topic: str, data: bytes | None) -> Any: ...


class BytesDeserializer:
    def deserialize(self, topic: str, data: bytes | None) -> bytes | None:
        return data


class StringDeserializer:
    def __init__(self, encoding: str = "utf-8") -> None:
        self.encoding = encoding

    def deserialize(self, topic: str, data: bytes | None) -> str | None:
        if data is None:
            return None
        try:
            return data.decode(self.encoding)
        except UnicodeDecodeError as exc:
            raise SerializationError(
                f"StringDeserializer cannot decode a record of topic {topic!r} as "
                f"{self.encoding}: {exc}") from None


class _StructDeserializer:
    fmt: struct.Struct

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        if len(data) != self.fmt.size:
            raise SerializationError(
                f"{type(self).__name__} expects {self.fmt.size} bytes for topic {topic!r}, "
                f"got {len(data)}")
        return self.fmt.unpack(data)[0]


class ShortDeserializer(_StructDeserializer):
    fmt = struct.Struct(">h")


class IntegerDeserializer(_StructDeserializer):
    fmt = struct.Struct(">i")


class LongDeserializer(_StructDeserializer):
    fmt = struct.Struct(">q")


class FloatDeserializer(_StructDeserializer):
    fmt = struct.Struct(">f")


class DoubleDeserializer(_StructDeserializer):
    fmt = struct.Struct(">d")


class JsonDeserializer:
    def deserialize(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return json.loads(data)
        except ValueError as exc:
            raise SerializationError(
                f"JsonDeserializer cannot parse a record of topic {topic!r}: {exc}") from None


class _CallableDeserializer:
    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[bytes], Any]) -> None:
        self.fn = fn

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return self.fn(data)
        except SerializationError:
            raise
        except Exception as exc:
            raise SerializationError(
                f"deserializer {self.fn!r} failed for topic {topic!r}: {exc!r}") from exc


DESERIALIZER_ALIASES: dict[str, Any] = {
    "bytes": BytesDeserializer, "str": StringDeserializer, "string": StringDeserializer,
    "short": ShortDeserializer, "int": IntegerDeserializer, "integer": IntegerDeserializer,
    "long": LongDeserializer, "float": FloatDeserializer, "double": DoubleDeserializer,
    "json": JsonDeserializer,
}
for _java, _ours in {
    "ByteArrayDeserializer": BytesDeserializer, "BytesDeserializer": BytesDeserializer,
    "StringDeserializer": StringDeserializer, "ShortDeserializer": ShortDeserializer,
    "IntegerDeserializer": IntegerDeserializer, "LongDeserializer": LongDeserializer,
    "FloatDeserializer": FloatDeserializer, "DoubleDeserializer": DoubleDeserializer,
}.items():
    DESERIALIZER_ALIASES["org.apache.kafka.common.serialization." + _java] = _ours
del _java, _ours


def as_deserialize_fn(spec: Any) -> DeserializeFn | None:
    """``fn(topic, data)``, or None when records keep their bytes (no per-record call)."""
    if spec is None:
        return None
    if isinstance(spec, str):
        name = spec.strip()
        target = DESERIALIZER_ALIASES.get(name, DESERIALIZER_ALIASES.get(name.casefold()))
        if target is None:
            raise SerializationError(
                f"unknown deserializer name {spec!r}; known: {', '.join(DESERIALIZER_ALIASES)}")
        spec = target
    if spec is BytesDeserializer:
        return None
    if isinstance(spec, type):
        if not callable(getattr(spec, "deserialize", None)):
            raise SerializationError(
                f"deserializer class {spec.__name__} has no deserialize(topic, data) method")
        spec = spec()
    if isinstance(spec, BytesDeserializer):
        return None
    deserialize = getattr(spec, "deserialize", None)
    if callable(deserialize):
        return deserialize
    if callable(spec):
        return _CallableDeserializer(spec).deserialize
    raise SerializationError(
        f"{spec!r} is not a deserializer: give an object with deserialize(topic, data) or a callable")
