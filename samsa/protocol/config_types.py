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


# Not a Kafka config: the log cleaner's dirty ratio of each partition of a compacted topic, as
# "<partition>:<ratio>,..." (Kafka shows it only as the LogCleaner max-dirty-percent metric).  A
# samsa broker answers it in DescribeConfigs only when a request names it, so clients that list
# a topic's configs never see it; `samsa topics describe` asks for it.
CLEANER_DIRTY_RATIO_CONFIG = "samsa.cleaner.dirty.ratio"
