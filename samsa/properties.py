"""Java ``.properties`` files (``server.properties``, the tools' ``--command-config``), read
as java.util.Properties.load reads them."""

from __future__ import annotations

import re
from pathlib import Path

from samsa.errors import ConfigError

__all__ = ["load_properties", "parse_properties"]

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 == len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2:i + 6]):
            out.append(chr(int(text[i + 2:i + 6], 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)


def _split_key_value(line: str) -> tuple[str, str]:
    # The key ends at the first unescaped '=', ':' or whitespace (java.util.Properties.load).
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=: \t\f":
            break
        i += 1
    key = line[:i]
    rest = line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":") and (i == len(line) or line[i] in " \t\f=:"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(key), _unescape(rest)


def parse_properties(text: str) -> dict[str, str]:
    """Java ``.properties`` text -> dict: ``key=value``, ``key: value`` or ``key value``;
    ``#``/``!`` comments; a trailing backslash continues the line; ``\\uXXXX`` escapes."""
    props: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        # An odd number of trailing backslashes continues onto the next line.
        while (len(line) - len(line.rstrip("\\"))) % 2 == 1 and i <= len(lines):
            line = line[:-1] + (lines[i].lstrip(" \t\f") if i < len(lines) else "")
            i += 1
        key, value = _split_key_value(line)
        props[key] = value
    return props


def load_properties(path: str | Path, option: str = "--config-file") -> dict[str, str]:
    """Read a Java properties file; ConfigError naming ``option`` if it cannot be read."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(option, f"cannot read {str(path)!r}: {exc.strerror}") from None
    return parse_properties(text)
