"""KafkaApis: dispatch each decoded request to its handler, by API key.

Called on request-handler threads (several at once) by the network layer.  A handler returns
the response message, or None when it answered itself (acks=0 produce, a parked fetch).
Versions outside the served range close the connection, as Kafka does (no response layout
exists for them) -- except ApiVersions, which answers UNSUPPORTED_VERSION in the v0 layout.
The close is logged once per client and version (samsa/broker/unsupported_versions.py).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from samsa.broker.apis.alter_configs import handle_alter_configs
from samsa.broker.apis.api_versions import (
    handle_api_versions,
    unsupported_version_response,
)
from samsa.broker.apis.cluster import handle_describe_cluster, handle_find_coordinator
from samsa.broker.apis.context import BrokerNode, RequestContext
from samsa.broker.apis.create_partitions import handle_create_partitions
from samsa.broker.apis.create_topics import handle_create_topics
from samsa.broker.apis.delete_records import handle_delete_records
from samsa.broker.apis.delete_topics import handle_delete_topics
from samsa.broker.apis.describe_configs import handle_describe_configs
from samsa.broker.apis.describe_log_dirs import handle_describe_log_dirs
from samsa.broker.apis.describe_producers import handle_describe_producers
from samsa.broker.apis.describe_topic_partitions import handle_describe_topic_partitions
from samsa.broker.apis.fetch import handle_fetch
from samsa.broker.apis.group_admin import (
    handle_delete_groups,
    handle_describe_groups,
    handle_list_groups,
)
from samsa.broker.apis.heartbeat import handle_heartbeat, handle_leave_group
from samsa.broker.apis.incremental_alter_configs import handle_incremental_alter_configs
from samsa.broker.apis.init_producer_id import handle_init_producer_id
from samsa.broker.apis.join_group import handle_join_group
from samsa.broker.apis.list_offsets import handle_list_offsets
from samsa.broker.apis.metadata import handle_metadata
from samsa.broker.apis.offset_commit import handle_offset_commit
from samsa.broker.apis.offset_delete import handle_offset_delete
from samsa.broker.apis.offset_fetch import handle_offset_fetch
from samsa.broker.apis.offset_for_leader_epoch import handle_offset_for_leader_epoch
from samsa.broker.apis.produce import handle_produce, produce_runs_inline
from samsa.broker.apis.producer_ids import ProducerIdManager
from samsa.broker.apis.services import BrokerServices
from samsa.broker.apis.sync_group import handle_sync_group
from samsa.broker.apis.versions import API_VERSIONS_KEY, SERVED
from samsa.broker.log import LogManager
from samsa.broker.meta_properties import load_or_create_meta_properties
from samsa.broker.unsupported_versions import log_unsupported_version

log = logging.getLogger(__name__)

Handler = Callable[[BrokerServices, RequestContext], Any]

HANDLERS: Mapping[int, Handler] = {
    0: handle_produce,
    1: handle_fetch,
    2: handle_list_offsets,
    3: handle_metadata,
    8: handle_offset_commit,
    9: handle_offset_fetch,
    10: handle_find_coordinator,
    11: handle_join_group,
    12: handle_heartbeat,
    13: handle_leave_group,
    14: handle_sync_group,
    15: handle_describe_groups,
    16: handle_list_groups,
    18: handle_api_versions,
    19: handle_create_topics,
    20: handle_delete_topics,
    21: handle_delete_records,
    22: handle_init_producer_id,
    23: handle_offset_for_leader_epoch,
    32: handle_describe_configs,
    37: handle_create_partitions,
    42: handle_delete_groups,
    60: handle_describe_cluster,
    33: handle_alter_configs,
    35: handle_describe_log_dirs,
    44: handle_incremental_alter_configs,
    47: handle_offset_delete,
    61: handle_describe_producers,
    75: handle_describe_topic_partitions,
}
assert set(HANDLERS) == set(SERVED), "every served API needs a handler and vice versa"

# APIs whose handlers never block: Fetch parks in the purgatory rather than waiting, Metadata's
# auto-create only makes empty log files.  Produce depends on the logs' flush policy.
_INLINE_KEYS = frozenset({1, 2, 3, 18})


class KafkaApis:
    """The broker's request handlers over one LogManager.

    ``node`` is the advertised address clients connect to (its port may be filled in after the
    listener binds).  ``config`` is the broker configuration with Kafka's names
    (``auto.create.topics.enable``, ``num.partitions``, ``log.*`` ...).  ``cluster_id`` defaults
    to the one in ``<data_dir>/meta.properties`` (created on first start).
    """

    def __init__(self, log_manager: LogManager, *, node: BrokerNode | None = None,
                 config: Mapping[str, Any] | None = None, cluster_id: str | None = None,
                 data_dir: str | os.PathLike[str] | None = None) -> None:
        node = node if node is not None else BrokerNode()
        directory = data_dir if data_dir is not None else log_manager.data_dir
        if cluster_id is None:
            cluster_id = load_or_create_meta_properties(directory, node.node_id).cluster_id
        self.services = BrokerServices(log_manager, node, cluster_id, config,
                                       ProducerIdManager(directory))

    @property
    def node(self) -> BrokerNode:
        return self.services.node

    def handle(self, ctx: RequestContext) -> None:
        header = ctx.header
        key, version = header.request_api_key, header.request_api_version
        served = SERVED.get(key)
        if served is None or not served[0] <= version <= served[1]:
            if key == API_VERSIONS_KEY:
                # The network layer answers these itself (it cannot decode their bodies); kept
                # for dispatchers that hand them over anyway.
                ctx.respond(unsupported_version_response())
                return
            log_unsupported_version(log, ctx.client_host, header.client_id, key, version,
                                    ctx.connection_id)
            ctx.close_connection(f"API key {key} version {version} is not supported")
            return
        # An exception escaping here is logged by the handler pool, which closes the connection.
        response = HANDLERS[key](self.services, ctx)
        if response is not None:
            ctx.respond(response)

    def runs_inline(self, ctx: RequestContext) -> bool:
        """True if handling ``ctx`` cannot block (no fsync, no waiting on other requests), so a
        network thread may run it itself (samsa/broker/network/processor.py)."""
        key = ctx.header.request_api_key
        if key == 0:
            return produce_runs_inline(self.services, ctx)
        return key in _INLINE_KEYS

    def close(self) -> None:
        """Answer every parked request (as if its wait expired) and stop the timers."""
        self.services.close()
