"""DescribeConfigs (key 32), versions 1-4: topic and broker settings, where each value came
from, and (if asked) the chain of synonyms behind it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.services import HANDLER_DEFAULTS, BrokerServices
from samsa.broker.apis.topic_configs import TOPIC_CONFIGS, ConfigSource, ConfigType
from samsa.broker.log import BROKER_DEFAULTS
from samsa.errors import InvalidRequestError, UnknownTopicOrPartitionError
from samsa.protocol import DescribeConfigsResponse

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
BROKER_LOGGER_RESOURCE = 8

Result = DescribeConfigsResponse.DescribeConfigsResult
ResourceResult = DescribeConfigsResponse.DescribeConfigsResourceResult
Synonym = DescribeConfigsResponse.DescribeConfigsSynonym

# Broker settings reported for a broker resource, beyond BROKER_DEFAULTS/HANDLER_DEFAULTS.
_BROKER_TYPES: dict[type, ConfigType] = {bool: ConfigType.BOOLEAN, int: ConfigType.LONG,
                                         str: ConfigType.STRING}
_SENSITIVE_MARKERS = ("password", "secret", "sasl.jaas.config")


@dataclass(slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    type: ConfigType
    doc: str = ""
    read_only: bool = False
    sensitive: bool = False
    synonyms: list[tuple[str, str | None, ConfigSource]] = field(default_factory=list)


def config_string(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def topic_config_entries(services: BrokerServices,
                         overrides: Mapping[str, str]) -> list[ConfigEntry]:
    """Every topic config: the topic's override, else the broker's setting, else the default."""
    entries = []
    for name, d in sorted(TOPIC_CONFIGS.items()):
        synonyms: list[tuple[str, str | None, ConfigSource]] = []
        if name in overrides:
            synonyms.append((name, overrides[name], ConfigSource.TOPIC_CONFIG))
        if d.synonym is not None and d.synonym in services.explicit_config:
            synonyms.append((d.synonym, config_string(services.config.get(d.synonym)),
                             ConfigSource.STATIC_BROKER_CONFIG))
        default = config_string(services.config.get(d.synonym)) if d.synonym else None
        synonyms.append((d.synonym or name, default if default is not None else d.default,
                         ConfigSource.DEFAULT_CONFIG))
        _, value, source = synonyms[0]
        entries.append(ConfigEntry(name, value, source, d.type, d.doc, synonyms=synonyms))
    return entries


def broker_config_entries(services: BrokerServices) -> list[ConfigEntry]:
    names = set(BROKER_DEFAULTS) | set(HANDLER_DEFAULTS) | set(services.explicit_config)
    names |= {"node.id", "broker.id"}
    entries = []
    for name in sorted(names):
        if name in ("node.id", "broker.id"):
            value: Any = services.node.node_id
        else:
            value = services.config.get(name, services.explicit_config.get(name))
        source = (ConfigSource.STATIC_BROKER_CONFIG if name in services.explicit_config
                  else ConfigSource.DEFAULT_CONFIG)
        sensitive = any(marker in name for marker in _SENSITIVE_MARKERS)
        text = None if sensitive else config_string(value)
        ctype = _BROKER_TYPES.get(type(value), ConfigType.STRING)
        entries.append(ConfigEntry(name, text, source, ctype, read_only=True,
                                   sensitive=sensitive,
                                   synonyms=[(name, text, source)]))
    return entries


def _result(version: int, entries: list[ConfigEntry], keys: list[str] | None,
            include_synonyms: bool, include_docs: bool) -> list[ResourceResult]:
    wanted = None if keys is None else set(keys)
    out = []
    for e in entries:
        if wanted is not None and e.name not in wanted:
            continue
        out.append(ResourceResult(
            name=e.name, value=e.value, read_only=e.read_only,
            is_default=version == 0 and e.source == ConfigSource.DEFAULT_CONFIG,
            config_source=int(e.source), is_sensitive=e.sensitive,
            synonyms=[Synonym(name=n, value=v, source=int(s)) for n, v, s in e.synonyms]
            if include_synonyms else [],
            config_type=int(e.type), documentation=e.doc if include_docs else None,
        ))
    return out


def _error(resource: Any, code: int, message: str) -> Result:
    return Result(error_code=code, error_message=message,
                  resource_type=resource.resource_type,
                  resource_name=resource.resource_name,
                  configs=[])


def handle_describe_configs(services: BrokerServices,
                            ctx: RequestContext) -> DescribeConfigsResponse:
    version = ctx.header.request_api_version
    req = ctx.body
    synonyms = bool(req.include_synonyms)
    docs = version >= 3 and bool(req.include_documentation)
    results = []
    for resource in req.resources:
        rtype, name = resource.resource_type, resource.resource_name
        if rtype == TOPIC_RESOURCE:
            info = services.topic(name)
            if info is None:
                results.append(_error(resource, UnknownTopicOrPartitionError.code,
                                      f"topic {name!r} does not exist"))
                continue
            entries = topic_config_entries(services, info.configs)
        elif rtype == BROKER_RESOURCE:
            if name not in ("", str(services.node.node_id)):
                results.append(_error(resource, InvalidRequestError.code,
                                      f"this is broker {services.node.node_id}, not {name!r}"))
                continue
            entries = broker_config_entries(services)
        else:
            results.append(_error(resource, InvalidRequestError.code,
                                  f"resource type {rtype} is not supported; use 2 (topic) "
                                  f"or 4 (broker)"))
            continue
        results.append(Result(error_code=0, error_message=None, resource_type=rtype,
                              resource_name=name,
                              configs=_result(version, entries, resource.configuration_keys,
                                              synonyms, docs)))
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)
