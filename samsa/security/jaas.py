"""Java's JAAS login-module syntax, as Kafka reads a ``sasl.jaas.config`` value
(``JaasConfig``): ``<LoginModuleClass> <flag> (<name>=<value>)* ;`` with exactly one module,
flag required|requisite|sufficient|optional, values bare words or double-quoted strings, and
``//`` and ``/* */`` comments."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["OAUTHBEARER_LOGIN_MODULE", "PLAIN_LOGIN_MODULE", "SCRAM_LOGIN_MODULE", "JaasEntry", "parse_jaas_config"]

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
FLAGS = ("required", "requisite", "sufficient", "optional")

# Java's StreamTokenizer words (letters, digits, '.', '-', '_', '$'), quoted strings, '=' and ';'.
_TOKEN = re.compile(r'''\s*(?:(?P<word>[A-Za-z0-9_.$-]+)|"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<punct>[=;]))''',
                    re.DOTALL)
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # options hold passwords: never print their values
        return f"JaasEntry({self.login_module!r}, {self.flag!r}, options={sorted(self.options)})"


def parse_jaas_config(value: str, setting: str = "sasl.jaas.config") -> JaasEntry:
    """The one login module of ``value``; ValueError naming ``setting`` (and never an option's
    value) if it is malformed."""
    text = _COMMENT.sub(" ", value)
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"{setting}: unexpected character {text[pos:].lstrip()[:1]!r}")
        kind = m.lastgroup or ""
        tokens.append((kind, m.group(kind).replace('\\"', '"').replace("\\\\", "\\")
                       if kind == "quoted" else m.group(kind)))
        pos = m.end()
    if not tokens or tokens[-1] != ("punct", ";"):
        raise ValueError(f"{setting} must end with ';' (Java's JAAS syntax)")
    if sum(1 for t in tokens if t == ("punct", ";")) != 1:
        raise ValueError(f"{setting} must hold exactly one login module")
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise ValueError(f"{setting} must start with '<LoginModuleClass> <flag>'")
    module, flag = tokens[0][1], tokens[1][1].lower()
    if flag not in FLAGS:
        raise ValueError(f"{setting}: the flag must be one of {', '.join(FLAGS)}, not {tokens[1][1]!r}")
    options: dict[str, str] = {}
    rest = tokens[2:-1]
    if len(rest) % 3:
        raise ValueError(f"{setting}: options must be name=value pairs")
    for i in range(0, len(rest), 3):
        (name_kind, name), eq, (value_kind, option_value) = rest[i], rest[i + 1], rest[i + 2]
        if name_kind != "word" or eq != ("punct", "=") or value_kind not in ("word", "quoted"):
            raise ValueError(f"{setting}: options must be name=value pairs (near {name!r})")
        options[name] = option_value
    return JaasEntry(module, flag, options)
