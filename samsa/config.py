"""Configuration machinery shared by the producer, consumer and admin client.

Settings use Kafka's own dotted names (``bootstrap.servers``, ``linger.ms``) with Kafka's
defaults.  A :class:`ConfigDef` lists the known settings; each :class:`ConfigEntry` has a
name, a :class:`Type`, a default, an optional validator and a one-line doc.

``definition.parse(config, **kwargs)`` (or a :class:`Config` subclass's constructor) turns a
dict plus keyword arguments into a read-only :class:`Config` mapping:

* keyword arguments use underscores for dots: ``linger_ms=10`` is ``linger.ms``; the same
  spelling is accepted as a dict key.  Keyword arguments override the dict, as in
  ``dict(config, **kwargs)``.
* values may be strings (CLI ``-X key=value``, properties files) and are converted to the
  entry's type: ``"5"`` -> 5, ``"true"`` -> True, ``"a,b"`` -> ``["a", "b"]``,
  ``"pkg.mod:Name"`` -> the imported object.
* an unknown name raises :class:`~samsa.errors.ConfigError` naming it, with close matches
  suggested; an invalid value raises ``ConfigError`` naming the setting, the value and the
  allowed values or range.

A :class:`Config` reads like a dict keyed by dotted names (``cfg["linger.ms"]``) and by
attribute with underscores (``cfg.linger_ms``).  ``cfg.originals`` is the set of names the
user set explicitly, which cross-checks need (Java's ``originals().containsKey``).
Subclasses set ``DEFINITION`` and override :meth:`Config._post_process` for cross-checks.
"""

from __future__ import annotations

import difflib
import enum
import importlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from samsa.errors import ConfigError

__all__ = [
    "NO_DEFAULT",
    "Config",
    "ConfigDef",
    "ConfigEntry",
    "NonEmptyString",
    "Range",
    "Type",
    "ValidChoice",
    "Validator",
    "at_least",
    "between",
]

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()
"""Marks a setting the user must give (Java's ``ConfigDef.NO_DEFAULT_VALUE``)."""


class Type(enum.Enum):
    """Value types, as Java's ``ConfigDef.Type``."""

    INT = "int"  # 32-bit signed
    LONG = "long"  # 64-bit signed
    DOUBLE = "double"
    BOOLEAN = "boolean"
    STRING = "string"
    LIST = "list"  # list of strings, or of objects for LIST of CLASS
    CLASS = "class"  # a class, instance or callable; strings are imported or looked up


class Validator(Protocol):
    """Checks (and may normalise) a converted value; raises ConfigError when invalid."""

    def __call__(self, name: str, value: Any) -> Any: ...

    def describe(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Range:
    """``min <= value <= max`` (either bound optional); ``also`` lists allowed extra values."""

    min: float | None = None
    max: float | None = None
    also: tuple[Any, ...] = ()

    def __call__(self, name: str, value: Any) -> Any:
        if value is None or value in self.also:
            return value
        if (self.min is not None and value < self.min) or (
            self.max is not None and value > self.max
        ):
            raise ConfigError(
                name, f"value {value!r} is out of range: must be {self.describe()}"
            )
        return value

    def describe(self) -> str:
        if self.min is not None and self.max is not None:
            text = f"between {self.min} and {self.max}"
        elif self.min is not None:
            text = f"at least {self.min}"
        elif self.max is not None:
            text = f"at most {self.max}"
        else:
            text = "any value"
        if self.also:
            text += " or " + " or ".join(repr(v) for v in self.also)
        return text


def at_least(minimum: float) -> Range:
    return Range(min=minimum)


def between(minimum: float, maximum: float) -> Range:
    return Range(min=minimum, max=maximum)


@dataclass(frozen=True, slots=True)
class ValidChoice:
    """The value must be one of ``choices``; with ``case_insensitive`` it is returned in the
    spelling of the matching choice."""

    choices: tuple[str, ...]
    case_insensitive: bool = False

    def __call__(self, name: str, value: Any) -> Any:
        if value is None:
            return value
        if value in self.choices:
            return value
        if self.case_insensitive and isinstance(value, str):
            folded = value.strip().casefold()
            for choice in self.choices:
                if choice.casefold() == folded:
                    return choice
        raise ConfigError(name, f"value {value!r} is not one of: {self.describe()}")

    def describe(self) -> str:
        return ", ".join(self.choices)


@dataclass(frozen=True, slots=True)
class NonEmptyString:
    """A string that is not empty (None passes: the setting is unset)."""

    def __call__(self, name: str, value: Any) -> Any:
        if value is not None and not value.strip():
            raise ConfigError(name, "must not be an empty string")
        return value

    def describe(self) -> str:
        return "a non-empty string"


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One setting: Kafka's dotted name, type, default, validator and a one-line doc.

    ``aliases`` (CLASS, or LIST whose ``item_type`` is CLASS) maps short or Java names such as
    ``"string"`` or ``"org.apache.kafka.common.serialization.StringSerializer"`` to objects.
    """

    name: str
    type: Type
    default: Any = None
    validator: Validator | None = None
    doc: str = ""
    item_type: Type | None = None
    aliases: Mapping[str, Any] = field(default_factory=dict)

    def convert(self, value: Any) -> Any:
        """Convert ``value`` (possibly a string) to this entry's type and validate it."""
        if value is None:
            if self.default is None:
                return None
            raise ConfigError(self.name, f"must not be None; {self._expected()}")
        converted = _convert(self, self.type, value)
        if self.validator is not None:
            converted = self.validator(self.name, converted)
        return converted

    @property
    def choices(self) -> tuple[str, ...]:
        """The allowed values of a setting checked by :class:`ValidChoice`."""
        if not isinstance(self.validator, ValidChoice):
            raise TypeError(f"{self.name} is not checked against a list of choices")
        return self.validator.choices

    def _expected(self) -> str:
        if self.validator is not None:
            return f"expected {_TYPE_NAMES[self.type]}, {self.validator.describe()}"
        return f"expected {_TYPE_NAMES[self.type]}"

    def describe(self) -> str:
        """``name (type, default X[, valid values]): doc`` for help texts."""
        parts = [_TYPE_NAMES[self.type]]
        if self.default is NO_DEFAULT:
            parts.append("required")
        else:
            parts.append(f"default {self.default!r}")
        if self.validator is not None:
            parts.append(self.validator.describe())
        return f"{self.name} ({'; '.join(parts)}): {self.doc}"


_TYPE_NAMES = {
    Type.INT: "an integer",
    Type.LONG: "an integer",
    Type.DOUBLE: "a number",
    Type.BOOLEAN: "a boolean (true/false)",
    Type.STRING: "a string",
    Type.LIST: "a list (or a comma-separated string)",
    Type.CLASS: "a class, instance or callable (or 'module:name')",
}


def _bad_type(entry: ConfigEntry, value: Any) -> ConfigError:
    return ConfigError(
        entry.name,
        f"value {value!r} ({type(value).__name__}) has the wrong type: {entry._expected()}",
    )


def _convert(entry: ConfigEntry, type_: Type, value: Any) -> Any:
    if type_ is Type.INT or type_ is Type.LONG:
        if isinstance(value, bool):
            raise _bad_type(entry, value)
        if isinstance(value, str):
            try:
                value = int(value.strip())
            except ValueError:
                raise _bad_type(entry, value) from None
        elif isinstance(value, float) and value.is_integer():
            value = int(value)
        elif not isinstance(value, int):
            raise _bad_type(entry, value)
        low, high = (
            (_INT32_MIN, _INT32_MAX) if type_ is Type.INT else (_INT64_MIN, _INT64_MAX)
        )
        if not low <= value <= high:
            bits = 32 if type_ is Type.INT else 64
            raise ConfigError(
                entry.name, f"value {value} does not fit a signed {bits}-bit integer"
            )
        return value
    if type_ is Type.DOUBLE:
        if isinstance(value, bool):
            raise _bad_type(entry, value)
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                raise _bad_type(entry, value) from None
        raise _bad_type(entry, value)
    if type_ is Type.BOOLEAN:
        if isinstance(value, bool):
            return value
        if isinstance(value, str):
            folded = value.strip().casefold()
            if folded == "true":
                return True
            if folded == "false":
                return False
        raise _bad_type(entry, value)
    if type_ is Type.STRING:
        if isinstance(value, str):
            return value.strip()
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)  # acks=1 from Python means "1"
        raise _bad_type(entry, value)
    if type_ is Type.LIST:
        if isinstance(value, str):
            items: list[Any] = [
                part.strip() for part in value.split(",") if part.strip()
            ]
        elif isinstance(value, (list, tuple)):
            items = [item.strip() if isinstance(item, str) else item for item in value]
        else:
            # A single non-string object (say, one interceptor instance) is a list of one.
            items = [value]
        if entry.item_type is Type.CLASS:
            return [_convert(entry, Type.CLASS, item) for item in items]
        for item in items:
            if not isinstance(item, str):
                raise _bad_type(entry, value)
        return items
    if type_ is Type.CLASS:
        if isinstance(value, str):
            return _resolve_class(entry, value.strip())
        return value
    raise AssertionError(f"unhandled config type {type_}")


def _resolve_class(entry: ConfigEntry, spec: str) -> Any:
    if spec in entry.aliases:
        return entry.aliases[spec]
    folded = spec.casefold()
    for alias, target in entry.aliases.items():
        if alias.casefold() == folded:
            return target
    module_name, sep, attr = spec.partition(":")
    if not sep:
        module_name, _, attr = spec.rpartition(".")
    known = f"; known names: {', '.join(entry.aliases)}" if entry.aliases else ""
    if not module_name or not attr:
        raise ConfigError(
            entry.name, f"cannot resolve {spec!r}: use 'package.module:Name'{known}"
        )
    try:
        module = importlib.import_module(module_name)
        obj = module
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(
            entry.name, f"cannot import {spec!r} ({exc}){known}"
        ) from None
    return obj


class ConfigDef:
    """The known settings of one client kind (``owner`` names it in error messages)."""

    def __init__(self, owner: str, entries: Iterable[ConfigEntry] = ()) -> None:
        self.owner = owner
        self._entries: dict[str, ConfigEntry] = {}
        for entry in entries:
            self.add(entry)

    def add(self, entry: ConfigEntry) -> ConfigDef:
        if entry.name in self._entries:
            raise ValueError(f"setting {entry.name!r} is defined twice")
        self._entries[entry.name] = entry
        return self

    def define(
        self,
        name: str,
        type: Type,
        default: Any = None,
        validator: Validator | None = None,
        doc: str = "",
        **extra: Any,
    ) -> ConfigDef:
        """Add an entry; returns self so definitions chain, as in Java."""
        return self.add(ConfigEntry(name, type, default, validator, doc, **extra))

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[ConfigEntry]:
        return iter(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, name: str) -> ConfigEntry:
        return self._entries[name]

    def names(self) -> list[str]:
        return list(self._entries)

    def describe(self) -> str:
        """One line per setting, sorted by name, for ``--help`` texts and docs."""
        return "\n".join(
            self._entries[name].describe() for name in sorted(self._entries)
        )

    def canonical_name(self, key: str) -> str:
        """The dotted name for ``key`` (dotted or underscored), or ConfigError if unknown."""
        if key in self._entries:
            return key
        dotted = key.replace("_", ".")
        if dotted in self._entries:
            return dotted
        matches = difflib.get_close_matches(dotted, self._entries, n=3, cutoff=0.6)
        hint = (
            f"; did you mean {' or '.join(repr(m) for m in matches)}?"
            if matches
            else ""
        )
        raise ConfigError(key, f"unknown {self.owner} setting{hint}")

    def parse_values(
        self, config: Mapping[str, Any] | None, kwargs: Mapping[str, Any]
    ) -> tuple[dict[str, Any], frozenset[str]]:
        """Converted values for every entry (defaults filled in) and the names set explicitly."""
        given: dict[str, Any] = {}
        spelled: dict[str, str] = {}
        for key, value in (config or {}).items():
            if not isinstance(key, str):
                raise ConfigError(repr(key), "setting names must be strings")
            name = self.canonical_name(key)
            if name in given and spelled[name] != key:
                raise ConfigError(
                    name, f"given twice, as {spelled[name]!r} and as {key!r}"
                )
            given[name] = value
            spelled[name] = key
        for key, value in kwargs.items():
            given[self.canonical_name(key)] = (
                value  # keyword arguments override the dict
            )
        values: dict[str, Any] = {}
        for name, entry in self._entries.items():
            if name in given:
                values[name] = entry.convert(given[name])
            elif entry.default is NO_DEFAULT:
                raise ConfigError(name, f"is required and was not given: {entry.doc}")
            else:
                values[name] = entry.default
        return values, frozenset(given)

    def parse(
        self, config: Mapping[str, Any] | None = None, /, **kwargs: Any
    ) -> Config:
        """Parse without any cross-checks; clients use their Config subclass instead."""
        values, originals = self.parse_values(config, kwargs)
        return Config._build(self, values, originals)


class Config(Mapping[str, Any]):
    """Parsed, read-only settings: ``cfg["linger.ms"]``, ``cfg.linger_ms``, ``cfg.originals``."""

    DEFINITION: ClassVar[ConfigDef]

    _definition: ConfigDef
    _values: dict[str, Any]
    _originals: frozenset[str]

    def __init__(
        self, config: Mapping[str, Any] | None = None, /, **kwargs: Any
    ) -> None:
        self._definition = self.DEFINITION
        self._values, self._originals = self._definition.parse_values(config, kwargs)
        self._post_process()

    @classmethod
    def _build(
        cls, definition: ConfigDef, values: dict[str, Any], originals: frozenset[str]
    ) -> Config:
        self = cls.__new__(cls)
        self._definition = definition
        self._values = values
        self._originals = originals
        return self

    def _post_process(self) -> None:
        """Cross-checks between settings; subclasses override (Java's postProcessParsedConfig)."""

    def _set(self, name: str, value: Any) -> None:
        """For _post_process only: replace a value after cross-checks."""
        if name not in self._values:
            raise KeyError(name)
        self._values[name] = value

    @property
    def definition(self) -> ConfigDef:
        return self._definition

    @property
    def originals(self) -> frozenset[str]:
        """Dotted names the user set explicitly (even to the default value)."""
        return self._originals

    def is_set(self, name: str) -> bool:
        return name in self._originals

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __getattr__(self, attr: str) -> Any:
        # Only called when normal lookup fails: cfg.linger_ms -> cfg["linger.ms"].
        if attr.startswith("_"):
            raise AttributeError(attr)
        try:
            return self._values[attr.replace("_", ".")]
        except KeyError:
            raise AttributeError(
                f"{type(self).__name__} has no setting {attr!r}"
            ) from None

    def __repr__(self) -> str:
        changed = {name: self._values[name] for name in sorted(self._originals)}
        return f"{type(self).__name__}({changed!r})"
