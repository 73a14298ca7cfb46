"""IncrementalAlterConfigs (key 44), versions 0-1: SET / DELETE / APPEND / SUBTRACT single
settings of a topic or of a dynamic broker layer, leaving the others as they are.

Per-resource errors as Kafka answers them; see config_changes.py."""

from __future__ import annotations

from typing import Any

from samsa.broker.apis.config_changes import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    ConfigOp,
    alter_broker,
    alter_each_resource,
    alter_topic,
    apply_ops,
    broker_defaults,
    broker_layer,
    check_ops,
    topic_defaults,
    unsupported_type,
)
from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.services import BrokerServices
from samsa.errors import UnknownTopicOrPartitionError
from samsa.protocol import IncrementalAlterConfigsResponse

Result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse


def _alter(services: BrokerServices, resource: Any, validate_only: bool) -> None:
    rtype, name = resource.resource_type, resource.resource_name
    ops = [ConfigOp(c.name, c.config_operation, c.value) for c in resource.configs]
    check_ops(ops)
    if rtype == TOPIC_RESOURCE:
        info = services.topic(name)
        if info is None:
            raise UnknownTopicOrPartitionError(f"Topic {name} does not exist")
        new = apply_ops(rtype, info.configs, ops, topic_defaults(services))
        alter_topic(services, name, new, validate_only)
    elif rtype == BROKER_RESOURCE:
        per_broker = broker_layer(services, name)
        new = apply_ops(rtype, services.dynamic.layer(per_broker), ops,
                        broker_defaults(services))
        alter_broker(services, per_broker, new, validate_only)
    else:
        raise unsupported_type(rtype)


def handle_incremental_alter_configs(services: BrokerServices,
                                     ctx: RequestContext) -> IncrementalAlterConfigsResponse:
    responses = alter_each_resource(services, ctx, "IncrementalAlterConfigs", _alter, Result)
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)
