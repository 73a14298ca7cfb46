"""Tests for samsa.config: names, conversion of strings, validators, errors and suggestions."""

from __future__ import annotations

import os
from collections import OrderedDict

import pytest

from samsa.config import (
    NO_DEFAULT,
    Config,
    ConfigDef,
    ConfigEntry,
    NonEmptyString,
    Range,
    Type,
    ValidChoice,
    at_least,
    between,
)
from samsa.errors import ConfigError


class Plugin:
    pass


DEF = ConfigDef(
    "test",
    [
        ConfigEntry("linger.ms", Type.LONG, 5, at_least(0), "wait"),
        ConfigEntry("batch.size", Type.INT, 16384, between(0, 1 << 20), "size"),
        ConfigEntry("ratio", Type.DOUBLE, 1.5, None, "a double"),
        ConfigEntry("enable.thing", Type.BOOLEAN, True, None, "flag"),
        ConfigEntry(
            "codec",
            Type.STRING,
            "none",
            ValidChoice(("none", "gzip"), case_insensitive=True),
            "codec",
        ),
        ConfigEntry("servers", Type.LIST, [], None, "hosts"),
        ConfigEntry(
            "plugin", Type.CLASS, None, None, "a class", aliases={"short": Plugin}
        ),
        ConfigEntry(
            "plugins",
            Type.LIST,
            [],
            None,
            "classes",
            item_type=Type.CLASS,
            aliases={"short": Plugin},
        ),
        ConfigEntry("name.id", Type.STRING, None, NonEmptyString(), "nullable"),
        ConfigEntry("level", Type.INT, -1, Range(1, 9, (-1,)), "level"),
    ],
)


def test_defaults_and_mapping_access() -> None:
    cfg = DEF.parse()
    assert cfg["linger.ms"] == 5
    assert cfg.linger_ms == 5
    assert cfg.enable_thing is True
    assert dict(cfg)["batch.size"] == 16384
    assert len(cfg) == len(DEF)
    assert cfg.originals == frozenset()


def test_kwargs_map_underscores_to_dots_and_override_dict() -> None:
    cfg = DEF.parse({"linger.ms": 1, "batch.size": 10}, linger_ms=7)
    assert cfg["linger.ms"] == 7
    assert cfg["batch.size"] == 10
    assert cfg.originals == {"linger.ms", "batch.size"}
    assert cfg.is_set("batch.size") and not cfg.is_set("ratio")


def test_underscored_dict_keys_are_accepted_but_not_twice() -> None:
    assert DEF.parse({"linger_ms": 3})["linger.ms"] == 3
    with pytest.raises(ConfigError, match="given twice"):
        DEF.parse({"linger_ms": 3, "linger.ms": 4})


@pytest.mark.parametrize(
    ("name", "raw", "expected"),
    [
        ("linger.ms", "10", 10),
        ("linger.ms", " 10 ", 10),
        ("linger.ms", 10.0, 10),
        ("ratio", "2.5", 2.5),
        ("ratio", 3, 3.0),
        ("enable.thing", "FALSE", False),
        ("enable.thing", "true", True),
        ("codec", "GZIP", "gzip"),
        ("servers", "a:1, b:2,,", ["a:1", "b:2"]),
        ("servers", ("a:1",), ["a:1"]),
        ("servers", "", []),
        ("plugin", "short", Plugin),
        ("plugin", "collections:OrderedDict", OrderedDict),
        ("plugin", "collections.OrderedDict", OrderedDict),
        ("plugin", "os.path:join", os.path.join),
        ("plugins", "short, collections:OrderedDict", [Plugin, OrderedDict]),
        ("level", -1, -1),
        ("level", "9", 9),
        ("name.id", None, None),
    ],
)
def test_string_values_are_converted(name: str, raw: object, expected: object) -> None:
    assert DEF.parse({name: raw})[name] == expected


def test_class_entries_take_objects_as_they_are() -> None:
    instance = Plugin()
    assert DEF.parse(plugin=instance)["plugin"] is instance
    assert DEF.parse(plugins=instance)["plugins"] == [instance]


def test_unknown_setting_names_it_and_suggests() -> None:
    with pytest.raises(ConfigError) as info:
        DEF.parse(linger_mss=5)
    assert info.value.setting == "linger_mss"
    assert "unknown test setting" in str(info.value)
    assert "'linger.ms'" in str(info.value)


def test_unknown_setting_without_close_match() -> None:
    with pytest.raises(ConfigError, match="unknown test setting") as info:
        DEF.parse({"zzzzzz": 1})
    assert "did you mean" not in str(info.value)


@pytest.mark.parametrize(
    ("name", "raw", "fragment"),
    [
        ("linger.ms", -1, "at least 0"),
        ("linger.ms", "abc", "wrong type"),
        ("linger.ms", True, "wrong type"),
        ("linger.ms", 1.5, "wrong type"),
        ("batch.size", 2**31, "32-bit"),
        ("batch.size", 1 << 21, "between 0 and 1048576"),
        ("enable.thing", "yes", "boolean"),
        ("enable.thing", 1, "boolean"),
        ("codec", "zip", "not one of: none, gzip"),
        ("codec", None, "must not be None"),
        ("ratio", "x", "number"),
        ("level", 0, "between 1 and 9 or -1"),
        ("name.id", "  ", "empty string"),
        ("plugin", "no.such.module:Thing", "cannot import"),
        ("plugin", "nodots", "cannot resolve"),
        ("servers", 5, "list"),
    ],
)
def test_invalid_values_name_setting_value_and_allowed(
    name: str, raw: object, fragment: str
) -> None:
    with pytest.raises(ConfigError) as info:
        DEF.parse({name: raw})
    assert info.value.setting == name
    message = str(info.value)
    assert name in message
    assert fragment in message


def test_required_settings() -> None:
    d = ConfigDef("x", [ConfigEntry("must", Type.STRING, NO_DEFAULT, None, "needed")])
    with pytest.raises(ConfigError, match="required"):
        d.parse()
    assert d.parse(must="v")["must"] == "v"


def test_config_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        DEF.parse(batch_size=-5)


def test_define_chains_and_rejects_duplicates() -> None:
    d = ConfigDef("x").define("a", Type.INT, 1).define("b", Type.BOOLEAN, False)
    assert d.names() == ["a", "b"]
    with pytest.raises(ValueError):
        d.define("a", Type.INT, 2)


def test_choices_of_a_valid_choice_setting() -> None:
    entry = ConfigEntry("acks", Type.STRING, "all", ValidChoice(("all", "0", "1")))
    assert entry.choices == ("all", "0", "1")
    with pytest.raises(TypeError, match="linger.ms"):
        _ = ConfigEntry("linger.ms", Type.LONG, 5, at_least(0)).choices


def test_describe_lists_every_setting() -> None:
    text = DEF.describe()
    assert "linger.ms (an integer; default 5; at least 0): wait" in text
    assert text.count("\n") == len(DEF) - 1


def test_config_subclass_post_process_and_attribute_errors() -> None:
    class Doubled(Config):
        DEFINITION = DEF

        def _post_process(self) -> None:
            self._set("linger.ms", self["linger.ms"] * 2)

    cfg = Doubled({"linger.ms": "4"})
    assert cfg.linger_ms == 8
    assert "linger.ms" in repr(cfg)
    with pytest.raises(AttributeError):
        _ = cfg.no_such_setting
