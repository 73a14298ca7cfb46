"""What AlterConfigs (33) and IncrementalAlterConfigs (44) share: per-resource checks, the
incremental operations, and applying a new set of configs to a topic or the broker.

Errors are Kafka's (KRaft broker + controller, 3.9): the broker's ConfigAdminManager.preprocess
refuses duplicate resources or keys, null values and non-dynamic broker settings with
INVALID_REQUEST; the controller's ConfigurationControlManager refuses bad topic values and
APPEND/SUBTRACT on non-list settings with INVALID_CONFIG and a missing topic with
UNKNOWN_TOPIC_OR_PARTITION.  Resources are independent: one failing leaves the others applied.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from samsa.broker.apis.authorization import config_resource_denied
from samsa.broker.apis.error_codes import code_for, message_for
from samsa.broker.apis.services import BrokerServices
from samsa.broker.apis.topic_configs import (
    TOPIC_CONFIGS,
    ConfigType,
    validate_topic_config_values,
)
from samsa.broker.apis.topic_names import refuse_internal
from samsa.broker.dynamic_config import DEFAULT_LAYER, check_broker_config
from samsa.broker.request_channel import RequestContext
from samsa.errors import (
    InvalidConfigError,
    InvalidRequestError,
    KafkaError,
    UnknownTopicOrPartitionError,
)
from samsa.protocol.config_types import AlterConfigOpType, ConfigResourceType
from samsa.security.acl import AclOperation

TOPIC_RESOURCE = int(ConfigResourceType.TOPIC)
BROKER_RESOURCE = int(ConfigResourceType.BROKER)

# Config changes are read-modify-write (IncrementalAlterConfigs reads the current overrides);
# one at a time, as Kafka's controller applies them in order.
ALTER_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class ConfigOp:
    name: str
    op: int
    value: str | None


def check_resources(resources: Iterable[tuple[int, str]]) -> set[tuple[int, str]]:
    """The (type, name) pairs that appear more than once: each copy fails with INVALID_REQUEST
    ("Each resource must appear at most once.")."""
    seen: set[tuple[int, str]] = set()
    duplicates: set[tuple[int, str]] = set()
    for resource in resources:
        (duplicates if resource in seen else seen).add(resource)
    return duplicates


def check_ops(ops: list[ConfigOp]) -> None:
    names = [o.name for o in ops]
    if len(set(names)) != len(names):
        raise InvalidRequestError("Error due to duplicate config keys")
    nulls = [o.name for o in ops if o.value is None and o.op != AlterConfigOpType.DELETE]
    if nulls:
        raise InvalidRequestError("Null value not supported for : " + ", ".join(nulls))
    for o in ops:
        if o.op not in AlterConfigOpType.__members__.values():
            raise InvalidRequestError(f"Unknown operations type {o.op}")


def _is_list(resource_type: int, name: str) -> bool:
    if resource_type == TOPIC_RESOURCE:
        d = TOPIC_CONFIGS.get(name)
    else:
        d = next((t for t in TOPIC_CONFIGS.values() if t.synonym == name), None)
    return d is not None and d.type == ConfigType.LIST


def apply_ops(resource_type: int, current: Mapping[str, str], ops: list[ConfigOp],
              defaults: Mapping[str, str | None]) -> dict[str, str]:
    """The configs after ``ops`` (ConfigurationControlManager.incrementalAlterConfigResource):
    APPEND/SUBTRACT start from the current value, else the default, and only apply to lists."""
    result = dict(current)
    for o in ops:
        if o.op == AlterConfigOpType.SET:
            assert o.value is not None
            result[o.name] = o.value
        elif o.op == AlterConfigOpType.DELETE:
            result.pop(o.name, None)
        else:
            verb = "APPEND" if o.op == AlterConfigOpType.APPEND else "SUBTRACT"
            if not _is_list(resource_type, o.name):
                raise InvalidConfigError(
                    f"Can't {verb} to key {o.name} because its type is not LIST.")
            base = result.get(o.name, defaults.get(o.name))
            parts = [p for p in (base or "").split(",") if p]
            for item in (o.value or "").split(","):
                if o.op == AlterConfigOpType.APPEND and item not in parts:
                    parts.append(item)
                elif o.op == AlterConfigOpType.SUBTRACT and item in parts:
                    parts.remove(item)
            result[o.name] = ",".join(parts)
    return result


def topic_defaults(services: BrokerServices) -> dict[str, str | None]:
    """Each topic config's value when not overridden: the broker's setting, else Kafka's default."""
    out: dict[str, str | None] = {}
    for name, d in TOPIC_CONFIGS.items():
        broker = services.config.get(d.synonym) if d.synonym else None
        out[name] = str(broker) if broker is not None else d.default
    return out


def broker_defaults(services: BrokerServices) -> dict[str, str | None]:
    return {k: None if v is None else str(v) for k, v in services.config.items()}


def alter_topic(services: BrokerServices, name: str, configs: Mapping[str, str],
                validate_only: bool) -> None:
    """Make ``configs`` the topic's whole set of overrides; raises a KafkaError."""
    overrides = validate_topic_config_values(configs)  # INVALID_CONFIG first, as Kafka does
    refuse_internal(name, "alter the configs of")
    if services.topic(name) is None:
        raise UnknownTopicOrPartitionError(f"Topic {name} does not exist")
    services.logs.set_topic_configs(name, overrides, validate_only=validate_only)


def broker_layer(services: BrokerServices, name: str) -> bool:
    """True for the per-broker layer (name = this node's id), False for the cluster default
    (""); raises INVALID_REQUEST for another broker (ConfigAdminManager)."""
    if name == DEFAULT_LAYER:
        return False
    node_id = services.node.node_id
    try:
        requested = int(name)
    except ValueError:
        raise InvalidRequestError(f"Node id must be an integer, but it is: {name}") from None
    if requested != node_id:
        raise InvalidRequestError(f"Unexpected broker id, expected {node_id}, but received "
                                  f"{name}")
    return True


def alter_broker(services: BrokerServices, per_broker: bool, configs: Mapping[str, str],
                 validate_only: bool) -> None:
    """Make ``configs`` the whole dynamic layer; raises a KafkaError."""
    for key, value in configs.items():
        check_broker_config(key, value)
    if not validate_only:
        services.dynamic.replace(per_broker, configs)


def unsupported_type(resource_type: int) -> KafkaError:
    return InvalidRequestError(f"Unknown resource type {resource_type}")


def alter_each_resource(services: BrokerServices, ctx: RequestContext, api_name: str,
                        alter: Callable[[BrokerServices, Any, bool], None],
                        result: Callable[..., Any]) -> list[Any]:
    """Run ``alter`` on every resource of an (Incremental)AlterConfigs request under
    ALTER_LOCK and answer each with its own error: one failing leaves the others applied."""
    request = ctx.body
    duplicates = check_resources((r.resource_type, r.resource_name) for r in request.resources)
    validate_only = bool(request.validate_only)
    responses = []
    for resource in request.resources:
        code, message = 0, None
        try:
            if (resource.resource_type, resource.resource_name) in duplicates:
                raise InvalidRequestError("Each resource must appear at most once.")
            denied = config_resource_denied(services, ctx, AclOperation.ALTER_CONFIGS,
                                            resource.resource_type, resource.resource_name)
            if denied:
                responses.append(result(error_code=denied, error_message=None,
                                        resource_type=resource.resource_type,
                                        resource_name=resource.resource_name))
                continue
            with ALTER_LOCK:
                alter(services, resource, validate_only)
        except KafkaError as exc:
            code, message = code_for(exc, api_name), message_for(exc)
        responses.append(result(error_code=code, error_message=message,
                                resource_type=resource.resource_type,
                                resource_name=resource.resource_name))
    return responses
