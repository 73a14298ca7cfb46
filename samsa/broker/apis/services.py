"""Everything the API handlers share: the logs, this node, the broker config, the purgatory,
producer ids.  One instance per broker, owned by KafkaApis."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from samsa.broker.apis.context import BrokerNode
from samsa.broker.apis.producer_ids import ProducerIdManager
from samsa.broker.authorizer import Authorizer, authorizer_from_config
from samsa.broker.config import BROKER_CONFIG
from samsa.broker.dynamic_config import DynamicBrokerConfig
from samsa.broker.group import GroupCoordinator
from samsa.broker.log import Log, LogManager, TopicInfo
from samsa.broker.log.config import resolve_broker_config
from samsa.broker.purgatory import Purgatory
from samsa.broker.request_channel import RequestContext
from samsa.broker.scram_credentials import ScramCredentialStore
from samsa.broker.txn import TransactionCoordinator
from samsa.errors import TopicAlreadyExistsError
from samsa.security.acl import CLUSTER_NAME, AclOperation, ResourceType

log = logging.getLogger(__name__)

# Broker settings the handlers read, beyond the log settings, with BROKER_CONFIG's defaults.
HANDLER_DEFAULTS: dict[str, Any] = {name: BROKER_CONFIG[name].default for name in (
    "auto.create.topics.enable", "default.replication.factor", "delete.topic.enable",
    "min.insync.replicas", "compression.type", "log.message.downconversion.enable",
    "fetch.max.bytes",
)}


def as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


class BrokerServices:
    def __init__(self, log_manager: LogManager, node: BrokerNode, cluster_id: str,
                 config: Mapping[str, Any] | None, producer_ids: ProducerIdManager) -> None:
        self.logs = log_manager
        self.node = node
        self.cluster_id = cluster_id
        given = dict(config or {})
        # The settings the operator set (DescribeConfigs reports them as STATIC_BROKER_CONFIG):
        # a BrokerConfig knows which names were set explicitly; a plain dict holds only those.
        originals = getattr(config, "originals", None)
        self.explicit_config: dict[str, Any] = (
            {k: v for k, v in given.items() if k in originals} if originals is not None
            else given)
        self.config: dict[str, Any] = {**HANDLER_DEFAULTS, **resolve_broker_config(given)}
        # Dynamic broker configs (IncrementalAlterConfigs/AlterConfigs) over self.config.
        self.dynamic = DynamicBrokerConfig(log_manager, self.config)
        # SCRAM users (Describe/AlterUserScramCredentials, KIP-554), kept in the data directory.
        self.scram_credentials = ScramCredentialStore(log_manager.data_dir)
        # ACLs and their decisions; None without authorizer.class.name (everything allowed).
        self.authorizer: Authorizer | None = authorizer_from_config(given, log_manager.data_dir)
        self.producer_ids = producer_ids
        self.fetch_purgatory = Purgatory("fetch")
        # Loads groups and offsets from __consumer_offsets; its appends wake parked fetches.
        self.groups = GroupCoordinator(log_manager, self.config,
                                       on_append=lambda t, p: self.fetch_purgatory
                                       .check_and_complete((t, p)))
        # Loads transactional ids from __transaction_state (completing PREPARE_* ones); its
        # markers wake fetches parked on their partitions (read_committed waits for the LSO).
        self.transactions = TransactionCoordinator(
            log_manager, self.config, producer_ids, self.groups,
            on_marker=lambda t, p: self.fetch_purgatory.check_and_complete((t, p)))

    # -- authorization (Kafka's AuthHelper) --------------------------------------------------------

    def authorized(self, ctx: RequestContext, operation: AclOperation,
                   resource_type: ResourceType, name: str = CLUSTER_NAME) -> bool:
        """May the request's principal do ``operation`` on the resource?  Always, without an
        authorizer."""
        authorizer = self.authorizer
        return authorizer is None or authorizer.authorize(
            ctx.principal, ctx.client_host, operation, resource_type, name)

    def authorized_topics(self, ctx: RequestContext, operation: AclOperation,
                          names: Any) -> set[str]:
        """The topic names among ``names`` the principal may ``operation``."""
        authorizer = self.authorizer
        if authorizer is None:
            return set(names)
        return {n for n in names if authorizer.authorize(
            ctx.principal, ctx.client_host, operation, ResourceType.TOPIC, n)}

    def authorized_operations(self, ctx: RequestContext, resource_type: ResourceType,
                              name: str, every: int) -> int:
        """The authorized-operations bitfield; ``every`` (all supported) without an authorizer."""
        authorizer = self.authorizer
        if authorizer is None:
            return every
        return every & authorizer.authorized_operations(ctx.principal, ctx.client_host,
                                                        resource_type, name)

    # -- settings -------------------------------------------------------------------------------

    @property
    def auto_create_topics(self) -> bool:
        return as_bool(self.config["auto.create.topics.enable"])

    @property
    def default_partitions(self) -> int:
        return int(self.config["num.partitions"])

    # -- topics and logs ------------------------------------------------------------------------

    def topic(self, name: str) -> TopicInfo | None:
        return self.logs.topic(name)

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.logs.find_log(topic, partition)

    @staticmethod
    def leader_epoch(log: Log | None) -> int:
        """This node leads every partition in epoch 0 forever (no elections on one node); a log
        carrying a later epoch (written by a future version) keeps it."""
        if log is None:
            return 0
        return max(log.latest_epoch, 0)

    def auto_create(self, name: str) -> TopicInfo | None:
        """Create ``name`` with the default partition count; None if it could not be created."""
        try:
            info = self.logs.create_topic(name, self.default_partitions)
            log.info("auto-created topic %s with %d partition(s)", name, info.partitions)
            return info
        except TopicAlreadyExistsError:  # a concurrent request created it first
            return self.logs.topic(name)

    def close(self) -> None:
        self.transactions.close()  # first: its marker thread may still write group markers
        self.groups.close()
        self.fetch_purgatory.close()
