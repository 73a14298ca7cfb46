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

from samsa.broker.apis.acls import handle_create_acls, handle_delete_acls, handle_describe_acls
from samsa.broker.apis.add_offsets_to_txn import handle_add_offsets_to_txn
from samsa.broker.apis.add_partitions_to_txn import handle_add_partitions_to_txn
from samsa.broker.apis.alter_configs import handle_alter_configs
from samsa.broker.apis.api_versions import (
    handle_api_versions,
    unsupported_version_response,
)
from samsa.broker.apis.authorization import REQUEST_CHECKS
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
from samsa.broker.apis.describe_transactions import handle_describe_transactions
from samsa.broker.apis.end_txn import handle_end_txn
from samsa.broker.apis.error_codes import UNKNOWN_SERVER_ERROR, code_for
from samsa.broker.apis.error_responses import error_response
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
from samsa.broker.apis.list_transactions import handle_list_transactions
from samsa.broker.apis.metadata import handle_metadata
from samsa.broker.apis.offset_commit import handle_offset_commit
from samsa.broker.apis.offset_delete import handle_offset_delete
from samsa.broker.apis.offset_fetch import handle_offset_fetch
from samsa.broker.apis.offset_for_leader_epoch import handle_offset_for_leader_epoch
from samsa.broker.apis.produce import handle_produce, produce_runs_inline
from samsa.broker.apis.produce_frame import answer_produce_frame
from samsa.broker.apis.producer_ids import ProducerIdManager
from samsa.broker.apis.sasl import handle_sasl_authenticate, handle_sasl_handshake
from samsa.broker.apis.services import BrokerServices
from samsa.broker.apis.sync_group import handle_sync_group
from samsa.broker.apis.txn_offset_commit import handle_txn_offset_commit
from samsa.broker.apis.user_scram_credentials import (
    handle_alter_user_scram_credentials,
    handle_describe_user_scram_credentials,
)
from samsa.broker.apis.versions import SERVED
from samsa.broker.log import LogManager
from samsa.broker.meta_properties import load_or_create_meta_properties
from samsa.broker.unsupported_versions import log_unsupported_version
from samsa.protocol import ApiKey

log = logging.getLogger(__name__)

Handler = Callable[[BrokerServices, RequestContext], Any]

HANDLERS: Mapping[ApiKey, Handler] = {
    ApiKey.PRODUCE: handle_produce,
    ApiKey.FETCH: handle_fetch,
    ApiKey.LIST_OFFSETS: handle_list_offsets,
    ApiKey.METADATA: handle_metadata,
    ApiKey.OFFSET_COMMIT: handle_offset_commit,
    ApiKey.OFFSET_FETCH: handle_offset_fetch,
    ApiKey.FIND_COORDINATOR: handle_find_coordinator,
    ApiKey.JOIN_GROUP: handle_join_group,
    ApiKey.HEARTBEAT: handle_heartbeat,
    ApiKey.LEAVE_GROUP: handle_leave_group,
    ApiKey.SYNC_GROUP: handle_sync_group,
    ApiKey.DESCRIBE_GROUPS: handle_describe_groups,
    ApiKey.LIST_GROUPS: handle_list_groups,
    ApiKey.API_VERSIONS: handle_api_versions,
    ApiKey.CREATE_TOPICS: handle_create_topics,
    ApiKey.DELETE_TOPICS: handle_delete_topics,
    ApiKey.DELETE_RECORDS: handle_delete_records,
    ApiKey.INIT_PRODUCER_ID: handle_init_producer_id,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: handle_offset_for_leader_epoch,
    ApiKey.ADD_PARTITIONS_TO_TXN: handle_add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: handle_add_offsets_to_txn,
    ApiKey.END_TXN: handle_end_txn,
    ApiKey.DESCRIBE_CONFIGS: handle_describe_configs,
    ApiKey.CREATE_PARTITIONS: handle_create_partitions,
    ApiKey.DELETE_GROUPS: handle_delete_groups,
    ApiKey.TXN_OFFSET_COMMIT: handle_txn_offset_commit,
    ApiKey.DESCRIBE_CLUSTER: handle_describe_cluster,
    ApiKey.ALTER_CONFIGS: handle_alter_configs,
    ApiKey.DESCRIBE_LOG_DIRS: handle_describe_log_dirs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: handle_incremental_alter_configs,
    ApiKey.OFFSET_DELETE: handle_offset_delete,
    ApiKey.DESCRIBE_PRODUCERS: handle_describe_producers,
    ApiKey.DESCRIBE_TRANSACTIONS: handle_describe_transactions,
    ApiKey.LIST_TRANSACTIONS: handle_list_transactions,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: handle_describe_topic_partitions,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: handle_describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: handle_alter_user_scram_credentials,
    ApiKey.SASL_HANDSHAKE: handle_sasl_handshake,
    ApiKey.SASL_AUTHENTICATE: handle_sasl_authenticate,
    ApiKey.DESCRIBE_ACLS: handle_describe_acls,
    ApiKey.CREATE_ACLS: handle_create_acls,
    ApiKey.DELETE_ACLS: handle_delete_acls,
}
assert set(HANDLERS) == set(SERVED), "every served API needs a handler and vice versa"

# What handle() looks up per request, in one dict with plain int keys: API key -> (lowest
# served version, highest, handler).
_ROUTES: dict[int, tuple[int, int, Handler]] = {
    int(key): (lo, hi, HANDLERS[key]) for key, (lo, hi) in SERVED.items()}
_API_VERSIONS = int(ApiKey.API_VERSIONS)
_PRODUCE = int(ApiKey.PRODUCE)
_PRODUCE_MAX_VERSION = _ROUTES[_PRODUCE][1]
# APIs whose handlers never block: Fetch parks in the purgatory rather than waiting, Metadata's
# auto-create only makes empty log files.  Produce depends on the logs' flush policy.
_INLINE_KEYS = frozenset(int(k) for k in (ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.METADATA,
                                          ApiKey.API_VERSIONS))


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
        key, version = ctx.api_key, ctx.api_version
        route = _ROUTES.get(key)
        if route is None or not route[0] <= version <= route[1]:
            if key == _API_VERSIONS:
                # KIP-511: UNSUPPORTED_VERSION and our range; for a version the codec does not
                # know either, the network layer's context writes it in the v0 layout.
                ctx.respond(unsupported_version_response())
                return
            log_unsupported_version(log, ctx.client_host, ctx.header.client_id, key, version,
                                    ctx.connection_id)
            ctx.close_connection(f"API key {key} version {version} is not supported")
            return
        try:
            if self.services.authorizer is not None and key in REQUEST_CHECKS:
                denied = REQUEST_CHECKS[key](self.services, ctx)
                if denied:
                    log.info("%s from %s may not send %r", ctx.principal, ctx.client_host, ctx)
                    ctx.respond(error_response(key, version, ctx.body, denied))
                    return
            response = route[2](self.services, ctx)
            if response is not None:
                ctx.respond(response)
        except Exception as exc:  # noqa: BLE001 - answered as Kafka's KafkaApis.handle does
            self._handle_error(ctx, exc)

    def _handle_error(self, ctx: RequestContext, exc: Exception) -> None:
        """A handler raised: answer the request's error response, UNKNOWN_SERVER_ERROR (or the
        Kafka error raised) in every error field (Kafka's RequestHandlerHelper.handleError ->
        AbstractRequest.getErrorResponse); close the connection when no response is due (Produce
        with acks=0).  A request already completed, or an error response that cannot be sent,
        goes on to whoever dispatched (handler_failed), which logs it and closes the connection.
        """
        if ctx.completed:
            raise exc
        code = code_for(exc, repr(ctx))  # logs an unexpected exception with its traceback
        if code != UNKNOWN_SERVER_ERROR:
            log.warning("%r from %s failed: %s", ctx, ctx.client_host, exc)
        response = error_response(ctx.api_key, ctx.api_version, ctx.body, code)
        if response is None:
            ctx.close_connection(f"handler error: {exc!r}")
        else:
            ctx.respond(response)

    def runs_inline(self, ctx: RequestContext) -> bool:
        """True if handling ``ctx`` cannot block (no fsync, no waiting on other requests), so a
        network thread may run it itself (samsa/broker/network/processor.py)."""
        key = ctx.api_key
        if key == _PRODUCE:
            return produce_runs_inline(self.services, ctx)
        return key in _INLINE_KEYS

    def answer_frame(self, payload: Any) -> list[Any] | None:
        """The response chunks of a request answered straight from its frame (without the size
        prefix; the usual Produce: produce_frame.py), for a network thread that would run it
        inline; None, with nothing done, to decode and dispatch it as usual."""
        return answer_produce_frame(self.services, payload, _PRODUCE_MAX_VERSION)

    def close(self) -> None:
        """Answer every parked request (as if its wait expired) and stop the timers."""
        self.services.close()
