"""Changing configs: AlterConfigs (33) and IncrementalAlterConfigs (44) requests and answers.

``AlterConfigOp`` is Kafka's AlterConfigOp: SET / DELETE one setting, APPEND / SUBTRACT items
of a list setting (``cleanup.policy``).  AlterConfigs replaces a resource's whole set of
settings; prefer IncrementalAlterConfigs, which changes only the named ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from samsa.admin.messages import config_resource_result
from samsa.admin.types import ConfigResource
from samsa.errors import KafkaError
from samsa.protocol import APIS, ApiKey, Message
from samsa.protocol.config_types import AlterConfigOpType

AlterConfigsRequest: Any = APIS[ApiKey.ALTER_CONFIGS].request_class
IncrementalAlterConfigsRequest: Any = APIS[ApiKey.INCREMENTAL_ALTER_CONFIGS].request_class


@dataclass(frozen=True, slots=True)
class AlterConfigOp:
    """One change to one setting; ``value`` is ignored for DELETE."""

    name: str
    value: str | None = None
    op: AlterConfigOpType = AlterConfigOpType.SET

    @classmethod
    def set(cls, name: str, value: str) -> AlterConfigOp:
        return cls(name, value, AlterConfigOpType.SET)

    @classmethod
    def delete(cls, name: str) -> AlterConfigOp:
        return cls(name, None, AlterConfigOpType.DELETE)


def incremental_alter_configs_request(
        version: int, configs: Mapping[ConfigResource, Sequence[AlterConfigOp]],
        validate_only: bool) -> Message:
    R = IncrementalAlterConfigsRequest
    return R(resources=[
        R.AlterConfigsResource(resource_type=int(r.type), resource_name=r.name, configs=[
            R.AlterableConfig(name=o.name, config_operation=int(o.op),
                              value=None if o.op == AlterConfigOpType.DELETE else o.value)
            for o in ops])
        for r, ops in configs.items()], validate_only=validate_only)


def alter_configs_request(version: int, configs: Mapping[ConfigResource, Mapping[str, str]],
                          validate_only: bool) -> Message:
    R = AlterConfigsRequest
    return R(resources=[
        R.AlterConfigsResource(resource_type=int(r.type), resource_name=r.name, configs=[
            R.AlterableConfig(name=k, value=v) for k, v in values.items()])
        for r, values in configs.items()], validate_only=validate_only)


def parse_alter_configs(response: Any) -> dict[ConfigResource, None | KafkaError]:
    """None per altered resource, or the error that refused it (both APIs answer alike)."""
    out: dict[ConfigResource, None | KafkaError] = {}
    for r in response.responses:
        resource, error = config_resource_result(r, "alter the configs of")
        out[resource] = error
    return out
