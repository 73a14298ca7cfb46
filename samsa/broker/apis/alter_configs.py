"""AlterConfigs (key 33), versions 0-2: replace a topic's overrides or a dynamic broker layer
with exactly the given set (Kafka's legacy semantics: settings left out are removed).

Per-resource errors as Kafka answers them; see config_changes.py."""

from __future__ import annotations

from typing import Any

from samsa.broker.apis.config_changes import (
    ALTER_LOCK,
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    ConfigOp,
    OpType,
    alter_broker,
    alter_topic,
    broker_layer,
    check_ops,
    check_resources,
    unsupported_type,
)
from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.error_codes import code_for, message_for
from samsa.broker.apis.services import BrokerServices
from samsa.errors import InvalidRequestError, KafkaError
from samsa.protocol import AlterConfigsResponse

Result = AlterConfigsResponse.AlterConfigsResourceResponse


def _alter(services: BrokerServices, resource: Any, validate_only: bool) -> None:
    rtype, name = resource.resource_type, resource.resource_name
    check_ops([ConfigOp(c.name, OpType.SET, c.value) for c in resource.configs])
    configs = {c.name: c.value for c in resource.configs}
    if rtype == TOPIC_RESOURCE:
        alter_topic(services, name, configs, validate_only)
    elif rtype == BROKER_RESOURCE:
        alter_broker(services, broker_layer(services, name), configs, validate_only)
    else:
        raise unsupported_type(rtype)


def handle_alter_configs(services: BrokerServices, ctx: RequestContext) -> AlterConfigsResponse:
    req = ctx.body
    duplicates = check_resources((r.resource_type, r.resource_name) for r in req.resources)
    responses = []
    for resource in req.resources:
        code, message = 0, None
        try:
            if (resource.resource_type, resource.resource_name) in duplicates:
                raise InvalidRequestError("Each resource must appear at most once.")
            with ALTER_LOCK:
                _alter(services, resource, bool(req.validate_only))
        except KafkaError as exc:
            code, message = code_for(exc, "AlterConfigs"), message_for(exc)
        responses.append(Result(error_code=code, error_message=message,
                                resource_type=resource.resource_type,
                                resource_name=resource.resource_name))
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)
