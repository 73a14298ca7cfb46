"""AlterConfigs (key 33), versions 0-2: replace a topic's overrides or a dynamic broker layer
with exactly the given set (Kafka's legacy semantics: settings left out are removed).

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
    broker_layer,
    check_ops,
    unsupported_type,
)
from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.services import BrokerServices
from samsa.protocol import AlterConfigsResponse
from samsa.protocol.config_types import AlterConfigOpType

Result = AlterConfigsResponse.AlterConfigsResourceResponse


def _alter(services: BrokerServices, resource: Any, validate_only: bool) -> None:
    rtype, name = resource.resource_type, resource.resource_name
    check_ops([ConfigOp(c.name, AlterConfigOpType.SET, c.value) for c in resource.configs])
    configs = {c.name: c.value for c in resource.configs}
    if rtype == TOPIC_RESOURCE:
        alter_topic(services, name, configs, validate_only)
    elif rtype == BROKER_RESOURCE:
        alter_broker(services, broker_layer(services, name), configs, validate_only)
    else:
        raise unsupported_type(rtype)


def handle_alter_configs(services: BrokerServices,
                         ctx: RequestContext) -> AlterConfigsResponse:
    responses = alter_each_resource(services, ctx, "AlterConfigs", _alter, Result)
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)
