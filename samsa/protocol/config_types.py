"""The config APIs' wire enums, shared by the admin client and the broker.

ConfigResourceType is Kafka's ``ConfigResource.Type`` (DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs ResourceType); AlterConfigOpType is ``AlterConfigOp.OpType``
(IncrementalAlterConfigs ConfigOperation).
"""

from __future__ import annotations

import enum


class ConfigResourceType(enum.IntEnum):
    """Resource types of the config APIs (Kafka's ConfigResource.Type)."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    GROUP = 32  # KIP-848 group configs (Kafka 4.0)


class AlterConfigOpType(enum.IntEnum):
    """Kafka's AlterConfigOp.OpType ids."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3
