"""DescribeConfigs (key 32), versions 0-4: topic and broker settings, where each value came
from, and (if asked, v1+) the chain of synonyms behind it; v0 reports ``is_default`` instead."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from samsa.broker.apis.authorization import config_resource_denied
from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.services import HANDLER_DEFAULTS, BrokerServices
from samsa.broker.apis.topic_configs import TOPIC_CONFIGS, ConfigSource, ConfigType
from samsa.broker.dynamic_config import DYNAMIC_BROKER_CONFIGS
from samsa.broker.log import BROKER_DEFAULTS
from samsa.errors import InvalidRequestError, UnknownTopicOrPartitionError
from samsa.protocol import DescribeConfigsResponse
from samsa.protocol.config_types import CLEANER_DIRTY_RATIO_CONFIG, ConfigResourceType
from samsa.security.acl import AclOperation

TOPIC_RESOURCE = int(ConfigResourceType.TOPIC)
BROKER_RESOURCE = int(ConfigResourceType.BROKER)
BROKER_LOGGER_RESOURCE = int(ConfigResourceType.BROKER_LOGGER)
GROUP_RESOURCE = int(ConfigResourceType.GROUP)

# Kafka 4.0's GroupConfig (KIP-848/KIP-932): name -> (broker setting supplying it, default, doc).
GROUP_CONFIGS: dict[str, tuple[str, int, str]] = {
    "consumer.session.timeout.ms": (
        "group.consumer.session.timeout.ms", 45000,
        "The timeout to detect client failures when using the consumer group protocol."),
    "consumer.heartbeat.interval.ms": (
        "group.consumer.heartbeat.interval.ms", 5000,
        "The heartbeat interval given to the members of a consumer group."),
    "share.session.timeout.ms": (
        "group.share.session.timeout.ms", 45000,
        "The timeout to detect client failures when using the share group protocol."),
    "share.heartbeat.interval.ms": (
        "group.share.heartbeat.interval.ms", 5000,
        "The heartbeat interval given to the members of a share group."),
    "share.record.lock.duration.ms": (
        "group.share.record.lock.duration.ms", 30000,
        "The record acquisition lock duration in milliseconds for share groups."),
}

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


def _broker_synonyms(services: BrokerServices, name: str,
                     static_value: Any) -> list[tuple[str, str | None, ConfigSource]]:
    """The broker-level chain for ``name``, highest priority first (DynamicBrokerConfig):
    per-broker dynamic, cluster-default dynamic, static."""
    chain: list[tuple[str, str | None, ConfigSource]] = []
    broker, default = services.dynamic.layer(True), services.dynamic.layer(False)
    if name in broker:
        chain.append((name, broker[name], ConfigSource.DYNAMIC_BROKER_CONFIG))
    if name in default:
        chain.append((name, default[name], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
    if name in services.explicit_config:
        chain.append((name, config_string(static_value), ConfigSource.STATIC_BROKER_CONFIG))
    return chain


def topic_config_entries(services: BrokerServices,
                         overrides: Mapping[str, str]) -> list[ConfigEntry]:
    """Every topic config: the topic's override, else the broker's setting (dynamic, then
    static), else the default."""
    entries = []
    for name, d in sorted(TOPIC_CONFIGS.items()):
        synonyms: list[tuple[str, str | None, ConfigSource]] = []
        if name in overrides:
            synonyms.append((name, overrides[name], ConfigSource.TOPIC_CONFIG))
        if d.synonym is not None:
            synonyms += _broker_synonyms(services, d.synonym,
                                         services.explicit_config.get(d.synonym))
        default = (config_string(services.dynamic.static_value(d.synonym)) if d.synonym
                   else None)
        synonyms.append((d.synonym or name, default if default is not None else d.default,
                         ConfigSource.DEFAULT_CONFIG))
        _, value, source = synonyms[0]
        entries.append(ConfigEntry(name, value, source, d.type, d.doc, synonyms=synonyms))
    return entries


def broker_config_entries(services: BrokerServices) -> list[ConfigEntry]:
    """This node's settings (DescribeConfigs of broker "<id>"); only the dynamic ones may be
    altered, so only those are not read-only (Kafka's ConfigHelper.createBrokerConfigEntry)."""
    names = set(BROKER_DEFAULTS) | set(HANDLER_DEFAULTS) | set(services.explicit_config)
    names |= {"node.id", "broker.id"} | set(services.dynamic.layer(True))
    names |= set(services.dynamic.layer(False))
    entries = []
    for name in sorted(names):
        if name in ("node.id", "broker.id"):
            value: Any = services.node.node_id
        else:
            value = services.config.get(name, services.explicit_config.get(name))
        sensitive = any(marker in name for marker in _SENSITIVE_MARKERS)
        synonyms = _broker_synonyms(services, name, services.explicit_config.get(name))
        static = value if name in ("node.id", "broker.id") else \
            services.dynamic.static_value(name)
        synonyms.append((name, config_string(static), ConfigSource.DEFAULT_CONFIG))
        _, text, source = synonyms[0]
        if sensitive:
            text = None
            synonyms = [(n, None, s) for n, _, s in synonyms]
        ctype = _BROKER_TYPES.get(type(value), ConfigType.STRING)
        entries.append(ConfigEntry(name, text, source, ctype,
                                   read_only=name not in DYNAMIC_BROKER_CONFIGS,
                                   sensitive=sensitive, synonyms=synonyms))
    return entries


def dynamic_default_entries(services: BrokerServices) -> list[ConfigEntry]:
    """DescribeConfigs of broker "": the cluster-wide dynamic defaults only (Kafka answers
    ``currentDynamicDefaultConfigs``)."""
    source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    return [ConfigEntry(name, value, source, ConfigType.STRING, synonyms=[(name, value, source)])
            for name, value in sorted(services.dynamic.layer(False).items())]


def group_config_entries(services: BrokerServices) -> list[ConfigEntry]:
    """A group's KIP-848 configs (Kafka 4.0's GroupConfig), none set per group here: each is
    the broker's ``group.*`` setting or its default, source DEFAULT_CONFIG, not read-only."""
    entries = []
    for name, (broker_name, default, doc) in sorted(GROUP_CONFIGS.items()):
        value = str(services.config.get(broker_name, default))
        entries.append(ConfigEntry(name, value, ConfigSource.DEFAULT_CONFIG, ConfigType.INT, doc,
                                   synonyms=[(name, value, ConfigSource.DEFAULT_CONFIG)]))
    return entries


def _dirty_ratio_entry(services: BrokerServices, topic: str, partitions: int) -> ConfigEntry:
    """The cleaner's dirty ratio (dirty bytes / cleanable bytes, LogCleanerManager's
    cleanableRatio) of each partition of a compacted topic; no value for other topics."""
    cleaner = services.logs.cleaner
    ratios = []
    for partition in range(partitions):
        plog = services.get_log(topic, partition)
        if plog is None or "compact" not in plog.config.cleanup_policy.split(","):
            return ConfigEntry(CLEANER_DIRTY_RATIO_CONFIG, None, ConfigSource.UNKNOWN,
                               ConfigType.STRING, read_only=True)
        ratio = cleaner.dirtiness((topic, partition), plog).ratio
        ratios.append(f"{partition}:{ratio:.3f}")
    return ConfigEntry(CLEANER_DIRTY_RATIO_CONFIG, ",".join(ratios), ConfigSource.UNKNOWN,
                       ConfigType.STRING, "The log cleaner's dirty ratio per partition.",
                       read_only=True)


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


def _error(resource: Any, code: int, message: str | None) -> Result:
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
        denied = config_resource_denied(services, ctx, AclOperation.DESCRIBE_CONFIGS, rtype, name)
        if denied:
            results.append(_error(resource, denied, None))
            continue
        if rtype == TOPIC_RESOURCE:
            info = services.topic(name)
            if info is None:
                results.append(_error(resource, UnknownTopicOrPartitionError.code,
                                      f"topic {name!r} does not exist"))
                continue
            entries = topic_config_entries(services, info.configs)
            if CLEANER_DIRTY_RATIO_CONFIG in (resource.configuration_keys or ()):
                entries.append(_dirty_ratio_entry(services, name, info.partitions))
        elif rtype == BROKER_RESOURCE:
            if name == "":
                entries = dynamic_default_entries(services)
            elif name == str(services.node.node_id):
                entries = broker_config_entries(services)
            else:
                results.append(_error(resource, InvalidRequestError.code,
                                      f"Unexpected broker id, expected {services.node.node_id} "
                                      f"or empty string, but received {name}"))
                continue
        elif rtype == GROUP_RESOURCE:
            # Kafka 4.0 (ConfigHelper) answers for any group name, existing or not.
            if not name:
                results.append(_error(resource, InvalidRequestError.code,
                                      "Group name must not be empty"))
                continue
            entries = group_config_entries(services)
        else:
            results.append(_error(resource, InvalidRequestError.code,
                                  f"resource type {rtype} is not supported; use 2 (topic), "
                                  f"4 (broker) or 32 (group)"))
            continue
        results.append(Result(error_code=0, error_message=None, resource_type=rtype,
                              resource_name=name,
                              configs=_result(version, entries, resource.configuration_keys,
                                              synonyms, docs)))
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)
