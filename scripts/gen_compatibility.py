"""Write docs/compatibility.md from the code's own tables.

    .venv/bin/python scripts/gen_compatibility.py          # rewrite the page
    .venv/bin/python scripts/gen_compatibility.py --check  # exit 1 if the page is out of date

Sources, all imported (nothing here restates a version or a setting): the codec's APIs
(samsa.protocol.APIS), the broker's ADVERTISED/SERVED tables, the clients' version bounds
(producer sender, consumer fetcher and group versions, admin messages), samsa.kips.KIPS, the
ConfigDef of each client and of the broker, the broker's dynamic settings and its topic configs.
tests/test_compatibility_doc.py runs the check.
"""

from __future__ import annotations

import argparse
import enum
import inspect
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from samsa.admin import groups as admin_groups
from samsa.admin import messages as admin_messages
from samsa.admin.config import AdminConfig
from samsa.broker.apis.topic_configs import TOPIC_CONFIGS
from samsa.broker.apis.versions import ADVERTISED, SERVED
from samsa.broker.config import BrokerConfig
from samsa.broker.dynamic_config import DYNAMIC_BROKER_CONFIGS
from samsa.config import NO_DEFAULT, ConfigDef, ConfigEntry
from samsa.consumer import fetcher as consumer_fetcher
from samsa.consumer import versions as consumer_versions
from samsa.consumer.config import ConsumerConfig
from samsa.kips import KIPS
from samsa.net.client import NetworkClient
from samsa.producer import sender as producer_sender
from samsa.producer.config import ProducerConfig
from samsa.protocol import APIS
from samsa.protocol.api_keys import ApiKey

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "compatibility.md"
COMMAND = ".venv/bin/python scripts/gen_compatibility.py"

Versions = tuple[int, int]


def _cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _range(versions: Versions | None) -> str:
    if versions is None:
        return "-"
    low, high = versions
    return str(low) if low == high else f"{low}-{high}"


def _api(key: int) -> str:
    return APIS[key].name


def _codec(key: int) -> Versions:
    return APIS[key].min_version, APIS[key].max_version


# -- APIs -------------------------------------------------------------------------------------

def _apis() -> list[str]:
    lines = [
        "## APIs and versions",
        "",
        "*Broker advertises*: the ranges ApiVersions reports; *serves*: the versions a request may",
        "carry (anything else closes the connection). *Codec*: the versions samsa's message",
        "declarations encode and decode, the ceiling for every samsa client; a client sends the",
        "highest version both it and the broker support, within the bounds listed in the next",
        "table.",
        "",
    ]
    rows = []
    for key in map(ApiKey, sorted(APIS)):
        rows.append((int(key), _api(key), _range(ADVERTISED.get(key)), _range(SERVED.get(key)),
                     _range(_codec(key))))
    lines += _table(("Key", "API", "Broker advertises", "Broker serves", "Codec"), rows)
    return lines


def _default_of(function: Any, parameter: str) -> Any:
    return inspect.signature(function).parameters[parameter].default


def _client_bounds() -> list[tuple[str, int, Versions, str]]:
    """(client, API key, versions, why) for every bound a client sets below the codec's."""
    rows: list[tuple[str, int, Versions, str]] = [
        ("producer", ApiKey.PRODUCE,
         (producer_sender.MIN_PRODUCE_VERSION, producer_sender.MAX_PRODUCE_VERSION),
         "v3+: v2 record batches; v13+ addresses topics by id"),
        ("producer", ApiKey.INIT_PRODUCER_ID, (0, producer_sender.INIT_PRODUCER_ID_MAX_VERSION),
         "v5 only adds an error code for transactions (KIP-890)"),
        ("all (network client)", ApiKey.METADATA,
         (0, _default_of(NetworkClient.__init__, "metadata_max_version")),
         "metadata refreshes"),
        ("consumer", ApiKey.FETCH,
         (consumer_fetcher.FETCH_MIN_VERSION, consumer_fetcher.FETCH_MAX_VERSION),
         "v4+: v2 record batches; v13+ addresses topics by id"),
        ("consumer", ApiKey.LIST_OFFSETS,
         (consumer_fetcher.LIST_OFFSETS_MIN_VERSION, consumer_fetcher.LIST_OFFSETS_MAX_VERSION),
         "v1+: timestamp lookups (KIP-79)"),
    ]
    group_keys = sorted({*consumer_versions.MIN_VERSIONS, *consumer_versions.LEGACY_CAPS})
    for key in group_keys:
        low = consumer_versions.MIN_VERSIONS.get(key, APIS[key].min_version)
        cap = consumer_versions.LEGACY_CAPS.get(key)
        why = (f"at most v{cap} to a broker without ApiVersions v3+ (KIP-511)"
               if cap is not None else "")
        rows.append(("consumer", key, (low, APIS[key].max_version), why))
    rows += [
        ("admin", ApiKey.METADATA, admin_messages.METADATA_VERSIONS,
         (f"v1+: internal flag and controller; v{admin_messages.METADATA_NO_AUTO_CREATE}+ "
          "when describing named topics")),
        ("admin", ApiKey.FIND_COORDINATOR, (APIS[ApiKey.FIND_COORDINATOR].min_version,
                                            admin_groups.FIND_COORDINATOR_MAX),
         "v4+ batches keys; one key per request"),
        ("admin", ApiKey.OFFSET_FETCH, admin_groups.OFFSET_FETCH_RANGE,
         "v2+: all partitions of a group; v8 changes the layout"),
    ]
    return rows


def _clients() -> list[str]:
    lines = [
        "## Client version bounds",
        "",
        "Where a client narrows the codec's range for an API; every other API a client sends",
        "uses the codec's full range.",
        "",
    ]
    rows = [(client, f"{_api(key)} ({int(key)})", _range(versions), why)
            for client, key, versions, why in _client_bounds()]
    return lines + _table(("Client", "API", "Versions", "Why"), rows)


# -- KIPs -------------------------------------------------------------------------------------

def _kips() -> list[str]:
    lines = [
        "## KIPs",
        "",
        "From samsa/kips.py. *Supported*: yes, partly, or no (listed because the code refers",
        "to it, or a peer might expect it).",
        "",
    ]
    rows = []
    for kip in sorted(KIPS, key=lambda k: k.number):
        link = (f"[KIP-{kip.number}](https://cwiki.apache.org/confluence/display/KAFKA/"
                f"KIP-{kip.number})")
        where = ", ".join(f"`{path}`" for path in kip.where) or "-"
        rows.append((link, kip.title, kip.support.value, where, kip.note))
    return lines + _table(("KIP", "Title", "Supported", "Where", "Notes"), rows)


# -- Settings ---------------------------------------------------------------------------------

def _value(value: Any) -> str:
    if value is NO_DEFAULT:
        return "(required)"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, (list, tuple)):
        return ",".join(_value(v) for v in value) if value else '""'
    if isinstance(value, str):
        return value if value else '""'
    if isinstance(value, (int, float)):
        return str(value)
    name = getattr(value, "__qualname__", None) or type(value).__qualname__
    return f"{getattr(value, '__module__', '?')}:{name}"


_SETTINGS_HEADER = ("Setting", "Type", "Default", "Valid values", "Description")


def _row(entry: ConfigEntry, default: str, dynamic: frozenset[str] = frozenset()
         ) -> tuple[str, ...]:
    valid = entry.validator.describe() if entry.validator is not None else ""
    name = f"`{entry.name}`" + (" (dynamic)" if entry.name in dynamic else "")
    return name, entry.type.value, default, valid, entry.doc


def _client_settings(clients: Mapping[str, ConfigDef]) -> list[str]:
    """One table of the settings every client accepts, then each client's own."""
    shared = set.intersection(*(set(d.names()) for d in clients.values()))
    rows = []
    for name in sorted(shared):
        defaults = {client: f"`{_value(d[name].default)}`" for client, d in clients.items()}
        default = (next(iter(defaults.values())) if len(set(defaults.values())) == 1 else
                   "; ".join(f"{client}: {value}" for client, value in defaults.items()))
        rows.append(_row(next(iter(clients.values()))[name], default))
    lines = ["### All clients", ""] + _table(_SETTINGS_HEADER, rows)
    for client, definition in clients.items():
        own = [_row(e, f"`{_value(e.default)}`")
               for e in sorted(definition, key=lambda e: e.name) if e.name not in shared]
        lines += ["", f"### {client.capitalize()}", ""] + _table(_SETTINGS_HEADER, own)
    return lines


def _broker_settings() -> list[str]:
    rows = [_row(e, f"`{_value(e.default)}`", DYNAMIC_BROKER_CONFIGS)
            for e in sorted(BrokerConfig.DEFINITION, key=lambda e: e.name)]
    return ["### Broker", "",
            "Settings marked *dynamic* may be changed at runtime with",
            "IncrementalAlterConfigs/AlterConfigs (`samsa configs --entity-type brokers`).",
            ""] + _table(_SETTINGS_HEADER, rows)


def _topic_configs() -> list[str]:
    lines = [
        "### Topic configs",
        "",
        "Accepted by CreateTopics and (Incremental)AlterConfigs and reported by DescribeConfigs;",
        "the default comes from the broker setting named as its synonym.",
        "",
    ]
    rows = [(f"`{d.name}`", d.type.name.lower(), f"`{d.synonym}`" if d.synonym else "-",
             f"`{d.default}`", d.doc)
            for d in sorted(TOPIC_CONFIGS.values(), key=lambda d: d.name)]
    return lines + _table(("Config", "Type", "Broker synonym", "Default", "Description"), rows)


def _all_settings() -> list[str]:
    clients = {"producer": ProducerConfig.DEFINITION, "consumer": ConsumerConfig.DEFINITION,
               "admin client": AdminConfig.DEFINITION}
    return (["## Settings", "",
             "Kafka's names and defaults. Unknown names are refused, naming the closest match.",
             ""]
            + _client_settings(clients) + [""] + _broker_settings() + [""] + _topic_configs())


# -- the page ---------------------------------------------------------------------------------

def render() -> str:
    parts: list[list[str]] = [
        ["# Compatibility", "",
         f"Generated by `{COMMAND}` from the code's own tables; do not edit by hand.",
         "tests/test_compatibility_doc.py fails when this page and the code disagree."],
        _apis(), _clients(), _kips(), _all_settings(),
    ]
    return "\n\n".join("\n".join(part) for part in parts) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if docs/compatibility.md is out of date, without writing")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
        if current != text:
            print(f"{PAGE.relative_to(ROOT)} is out of date: run {COMMAND}", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

