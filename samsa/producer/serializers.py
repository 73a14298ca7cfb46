"""Key and value serializers: objects -> bytes, as Kafka's ``Serializer`` interface.

A serializer is anything with ``serialize(topic, data) -> bytes | None``.  The producer turns
its ``key.serializer`` / ``value.serializer`` setting into one plain function
``fn(topic, data) -> bytes | None`` with :func:`as_serialize_fn`, which accepts:

* ``None``: bytes pass through (bytes, bytearray, memoryview; anything else is an error);
* a :class:`Serializer` instance, or a serializer class (instantiated with no arguments);
* any other callable ``fn(data) -> bytes`` (kafka-python style);
* a name from :data:`SERIALIZER_ALIASES` (``"str"``, ``"int"``, ``"json"``, Java class names).

``None`` data is always passed through as ``None`` (a null key or a tombstone value) without
calling the serializer.  Failures raise :class:`~samsa.errors.SerializationError` naming the
topic, the serializer and the offending type.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from samsa.errors import SerializationError

__all__ = [
    "SERIALIZER_ALIASES",
    "BytesSerializer",
    "DoubleSerializer",
    "FloatSerializer",
    "IntegerSerializer",
    "JsonSerializer",
    "LongSerializer",
    "SerializeFn",
    "Serializer",
    "ShortSerializer",
    "StringSerializer",
    "as_serialize_fn",
]

SerializeFn = Callable[[str, Any], "bytes | None"]


@runtime_checkable
class Serializer(Protocol):
    def serialize(self, topic: str, data: Any) -> bytes | None: ...


def _wrong_type(
    serializer: object, topic: str, data: Any, expected: str
) -> SerializationError:
    return SerializationError(
        f"{type(serializer).__name__} cannot serialize a {type(data).__name__} for topic {topic!r}: "
        f"it expects {expected}; set key.serializer/value.serializer to match your data"
    )


class BytesSerializer:
    """Bytes as they are (bytearray and memoryview are copied to bytes)."""

    def serialize(self, topic: str, data: Any) -> bytes | None:
        if data is None or type(data) is bytes:
            return data
        if isinstance(data, (bytes, bytearray, memoryview)):
            return bytes(data)
        raise _wrong_type(self, topic, data, "bytes, bytearray or memoryview")


class StringSerializer:
    """``str`` encoded with ``encoding`` (UTF-8, as Java's StringSerializer)."""

    def __init__(self, encoding: str = "utf-8") -> None:
        self.encoding = encoding

    def serialize(self, topic: str, data: Any) -> bytes | None:
        if data is None:
            return None
        if isinstance(data, str):
            return data.encode(self.encoding)
        raise _wrong_type(self, topic, data, "a str")


class _StructSerializer:
    _struct: struct.Struct
    _expected: str

    def serialize(self, topic: str, data: Any) -> bytes | None:
        if data is None:
            return None
        if isinstance(data, bool):
            raise _wrong_type(self, topic, data, self._expected)
        try:
            return self._struct.pack(data)
        except struct.error as exc:
            raise SerializationError(
                f"{type(self).__name__} cannot serialize {data!r} for topic {topic!r}: {exc}"
            ) from None


class ShortSerializer(_StructSerializer):
    """A signed 16-bit int, 2 bytes big-endian (Java's ShortSerializer)."""

    _struct = struct.Struct(">h")
    _expected = "an int in the signed 16-bit range"


class IntegerSerializer(_StructSerializer):
    """A signed 32-bit int, 4 bytes big-endian (Java's IntegerSerializer)."""

    _struct = struct.Struct(">i")
    _expected = "an int in the signed 32-bit range"


class LongSerializer(_StructSerializer):
    """A signed 64-bit int, 8 bytes big-endian (Java's LongSerializer)."""

    _struct = struct.Struct(">q")
    _expected = "an int in the signed 64-bit range"


class FloatSerializer(_StructSerializer):
    """An IEEE 754 single, 4 bytes big-endian (Java's FloatSerializer)."""

    _struct = struct.Struct(">f")
    _expected = "a float"


class DoubleSerializer(_StructSerializer):
    """An IEEE 754 double, 8 bytes big-endian (Java's DoubleSerializer)."""

    _struct = struct.Struct(">d")
    _expected = "a float"


class JsonSerializer:
    """Any JSON-serializable object as compact UTF-8 JSON."""

    def __init__(self, **dumps_kwargs: Any) -> None:
        self._dumps_kwargs = {
            "separators": (",", ":"),
            "ensure_ascii": False,
            **dumps_kwargs,
        }

    def serialize(self, topic: str, data: Any) -> bytes | None:
        if data is None:
            return None
        try:
            return json.dumps(data, **self._dumps_kwargs).encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise SerializationError(
                f"JsonSerializer cannot serialize a value for topic {topic!r}: {exc}"
            ) from None


class _CallableSerializer:
    """Wraps ``fn(data) -> bytes``; checks the result is bytes."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def serialize(self, topic: str, data: Any) -> bytes | None:
        if data is None:
            return None
        try:
            out = self.fn(data)
        except SerializationError:
            raise
        except Exception as exc:
            raise SerializationError(
                f"serializer {self.fn!r} failed for topic {topic!r}: {exc!r}"
            ) from exc
        if out is None or type(out) is bytes:
            return out
        if isinstance(out, (bytearray, memoryview)):
            return bytes(out)
        raise SerializationError(
            f"serializer {self.fn!r} returned a {type(out).__name__} for topic {topic!r}; it must return bytes"
        )


SERIALIZER_ALIASES: dict[str, Any] = {
    "bytes": BytesSerializer,
    "str": StringSerializer,
    "string": StringSerializer,
    "short": ShortSerializer,
    "int": IntegerSerializer,
    "integer": IntegerSerializer,
    "long": LongSerializer,
    "float": FloatSerializer,
    "double": DoubleSerializer,
    "json": JsonSerializer,
}
for _java, _ours in {
    "ByteArraySerializer": BytesSerializer,
    "BytesSerializer": BytesSerializer,
    "StringSerializer": StringSerializer,
    "ShortSerializer": ShortSerializer,
    "IntegerSerializer": IntegerSerializer,
    "LongSerializer": LongSerializer,
    "FloatSerializer": FloatSerializer,
    "DoubleSerializer": DoubleSerializer,
}.items():
    SERIALIZER_ALIASES["org.apache.kafka.common.serialization." + _java] = _ours
del _java, _ours


def as_serialize_fn(spec: Any) -> SerializeFn:
    """Turn a key.serializer/value.serializer setting into ``fn(topic, data) -> bytes | None``."""
    if spec is None:
        return BytesSerializer().serialize
    if isinstance(spec, str):
        name = spec.strip()
        target = SERIALIZER_ALIASES.get(name, SERIALIZER_ALIASES.get(name.casefold()))
        if target is None:
            raise SerializationError(
                f"unknown serializer name {spec!r}; known names: {', '.join(SERIALIZER_ALIASES)}"
            )
        spec = target
    if isinstance(spec, type):
        if not callable(getattr(spec, "serialize", None)):
            raise SerializationError(
                f"serializer class {spec.__name__} has no serialize(topic, data) method"
            )
        spec = spec()
    serialize = getattr(spec, "serialize", None)
    if callable(serialize):
        return serialize
    if callable(spec):
        return _CallableSerializer(spec).serialize
    raise SerializationError(
        f"{spec!r} is not a serializer: give an object with serialize(topic, data) or a callable"
    )
