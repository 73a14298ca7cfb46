"""AdminClient: create, delete and describe topics, partitions, configs and records.

A blocking client over samsa.net's NetworkClient, as Java's ``Admin`` without the futures:
every method sends its requests, waits for the answers on the calling thread and returns
plain values (samsa/admin/types.py).

* Routing, as Java's KafkaAdminClient: CreateTopics, DeleteTopics and CreatePartitions go to
  the controller named by Metadata (any broker when it names none that is known, as KRaft
  brokers and librdkafka's mock do); DeleteRecords to each partition's leader; broker
  configs to that broker; Metadata, DescribeCluster, topic configs and the ACL calls
  (samsa/admin/acls.py) to the least loaded broker.
* Versions: the highest both the broker (ApiVersions) and samsa's codec support.  An API the
  broker does not serve at all raises UnsupportedVersionError saying so.
* Time: every call has a time limit (``timeout_ms``, default ``default.api.timeout.ms``)
  within which retriable failures (lost connections, timed-out requests, NOT_CONTROLLER,
  a partition leader moving, ...) are retried after ``retry.backoff.ms``, doubling up to
  ``retry.backoff.max.ms``.  Past it a KafkaTimeoutError names the operation and the last
  error.
* Per-topic outcomes: calls on several topics return ``{topic: result}``.  With
  ``raise_errors=True`` (the default) the first failed topic's error is raised instead; it
  carries ``errors`` (every failed key -> its error) and ``results`` (every succeeded key ->
  its result).  With ``raise_errors=False`` failed keys map to their KafkaError.

Thread-safe: calls from several threads take turns on the one connection pool.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar

from samsa.admin import acls as a
from samsa.admin import configs as c
from samsa.admin import groups as g
from samsa.admin import messages as m
from samsa.admin import scram
from samsa.admin.config import AdminConfig
from samsa.admin.configs import AlterConfigOp
from samsa.admin.errors import topic_error
from samsa.admin.types import (
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    CreatedTopic,
    NewPartitions,
    NewTopic,
    TopicDescription,
)
from samsa.errors import (
    BrokerNotAvailableError,
    IllegalStateError,
    InvalidRequestError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    NotControllerError,
    ThrottlingQuotaExceededError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from samsa.net import (
    Cluster,
    NetworkClient,
    Node,
    TopicPartition,
    await_ready,
    monotonic_ms,
)
from samsa.net.backoff import ExponentialBackoff
from samsa.net.sync import send_and_wait
from samsa.protocol import ApiKey, Message
from samsa.security.acl import AclBinding, AclBindingFilter

__all__ = ["AdminClient"]

log = logging.getLogger(__name__)

K = TypeVar("K")
R = TypeVar("R")
T = TypeVar("T")
V = TypeVar("V")

_POLL_SLICE_MS = 200.0
_MISSING: Any = object()
_EVERY_ACL = AclBindingFilter()  # ANY / None everywhere: Java's AclBindingFilter.ANY

# What each API is used for, for "not supported by this broker" errors.
_API_PURPOSE: dict[int, str] = {
    ApiKey.CREATE_TOPICS: "creating topics",
    ApiKey.DELETE_TOPICS: "deleting topics",
    ApiKey.CREATE_PARTITIONS: "adding partitions",
    ApiKey.DESCRIBE_CONFIGS: "describing configs",
    ApiKey.ALTER_CONFIGS: "altering configs",
    ApiKey.INCREMENTAL_ALTER_CONFIGS: "altering configs incrementally",
    ApiKey.DELETE_RECORDS: "deleting records",
    ApiKey.DESCRIBE_CLUSTER: "describing the cluster",
    ApiKey.METADATA: "reading metadata",
    ApiKey.LIST_GROUPS: "listing groups",
    ApiKey.DESCRIBE_GROUPS: "describing groups",
    ApiKey.DELETE_GROUPS: "deleting groups",
    ApiKey.FIND_COORDINATOR: "finding a group's coordinator",
    ApiKey.OFFSET_FETCH: "fetching committed offsets",
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: "describing SCRAM users",
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: "altering SCRAM users",
    ApiKey.DESCRIBE_ACLS: "describing ACLs",
    ApiKey.CREATE_ACLS: "creating ACLs",
    ApiKey.DELETE_ACLS: "deleting ACLs",
}


def _controller_retriable(error: KafkaError) -> bool:
    """Per-topic errors worth retrying for controller operations.  Others are final:
    UNKNOWN_TOPIC_OR_PARTITION is "retriable" for producers but means "no such topic" here,
    and a timed-out create may have happened, so it is reported rather than repeated."""
    return isinstance(error, (NotControllerError, ThrottlingQuotaExceededError))


def _settle(results: dict[K, V], raise_errors: bool) -> dict[K, V]:
    """``results``, or with ``raise_errors`` its first KafkaError raised, carrying every
    failed key in ``.errors`` and the others' results in ``.results``."""
    if raise_errors:
        errors = {k: v for k, v in results.items() if isinstance(v, KafkaError)}
        if errors:
            first = next(iter(errors.values()))
            first.errors = errors  # type: ignore[attr-defined]
            first.results = {k: v for k, v in results.items()  # type: ignore[attr-defined]
                             if k not in errors}
            raise first
    return results


class AdminClient:
    """See the module docstring.  ``config`` takes Kafka's admin settings
    (``bootstrap.servers`` is required); keyword arguments with underscores override it::

        with AdminClient({"bootstrap.servers": "127.0.0.1:9092"}) as admin:
            admin.create_topics([NewTopic("events", num_partitions=3)])
    """

    def __init__(self, config: Mapping[str, Any] | None = None, /, **kwargs: Any) -> None:
        self.config = AdminConfig(config, **kwargs)
        self._client = NetworkClient.from_config(self.config, allow_auto_topic_creation=False,
                                                 metadata_max_idle_ms=None)
        self._lock = threading.RLock()
        self._backoff = ExponentialBackoff(self.config["retry.backoff.ms"], 2,
                                           self.config["retry.backoff.max.ms"])
        self._need_refresh = True
        self._closed = False

    # -- public API ------------------------------------------------------------------------

    def create_topics(self, new_topics: Iterable[NewTopic | str], *, validate_only: bool = False,
                      timeout_ms: float | None = None,
                      raise_errors: bool = True) -> dict[str, CreatedTopic | KafkaError]:
        """Create topics (a plain name means broker defaults).  ``validate_only`` asks the
        broker to check the request without creating anything.  Returns ``{name:
        CreatedTopic}``; a topic that already exists raises TopicAlreadyExistsError, a bad
        name InvalidTopicError, a bad count InvalidPartitionsError or
        InvalidReplicationFactorError (see the module docstring for ``raise_errors``)."""
        topics = [t if isinstance(t, NewTopic) else NewTopic(t) for t in new_topics]
        by_name = _unique({t.name: t for t in topics}, [t.name for t in topics], "topic")
        lowest = 1 if validate_only else 0  # validate_only arrived in CreateTopics v1

        def round_(pending: list[str], deadline: float) -> Mapping[str, Any]:
            node = self._controller(deadline)
            _, body = self._send(
                node, ApiKey.CREATE_TOPICS, lowest, None, deadline,
                lambda v: m.create_topics_request(v, [by_name[n] for n in pending],
                                                  self._request_timeout(deadline),
                                                  validate_only))
            return m.parse_create_topics(body)

        return self._per_key(f"creating topics {list(by_name)}", list(by_name), timeout_ms,
                             round_, _controller_retriable, raise_errors)

    def delete_topics(self, names: Iterable[str], *, timeout_ms: float | None = None,
                      raise_errors: bool = True) -> dict[str, Any]:
        """Delete topics.  Returns ``{name: topic id}`` (the id is None before DeleteTopics
        v6); a missing topic raises UnknownTopicOrPartitionError."""
        given = list(names)
        topics = list(_unique(dict.fromkeys(given), given, "topic"))

        def round_(pending: list[str], deadline: float) -> Mapping[str, Any]:
            node = self._controller(deadline)
            _, body = self._send(
                node, ApiKey.DELETE_TOPICS, None, None, deadline,
                lambda v: m.delete_topics_request(v, pending, self._request_timeout(deadline)))
            return m.parse_delete_topics(body)

        return self._per_key(f"deleting topics {topics}", topics, timeout_ms, round_,
                             _controller_retriable, raise_errors)

    def create_partitions(self, new_counts: Mapping[str, int | NewPartitions], *,
                          validate_only: bool = False, timeout_ms: float | None = None,
                          raise_errors: bool = True) -> dict[str, int | KafkaError]:
        """Grow topics to the given total partition counts.  Returns ``{name: new total}``;
        a count not above the current one raises InvalidPartitionsError."""
        wanted = {name: n if isinstance(n, NewPartitions) else NewPartitions(int(n))
                  for name, n in new_counts.items()}

        def round_(pending: list[str], deadline: float) -> Mapping[str, Any]:
            node = self._controller(deadline)
            _, body = self._send(
                node, ApiKey.CREATE_PARTITIONS, None, None, deadline,
                lambda v: m.create_partitions_request(
                    v, {n: wanted[n] for n in pending}, self._request_timeout(deadline),
                    validate_only))
            return {name: (wanted[name].total_count if error is None else error)
                    for name, error in m.parse_create_partitions(body).items()}

        return self._per_key(f"adding partitions to {list(wanted)}", list(wanted), timeout_ms,
                             round_, _controller_retriable, raise_errors)

    def list_topics(self, include_internal: bool = False, *,
                    timeout_ms: float | None = None) -> list[str]:
        """Names of the cluster's topics, sorted; internal ones (``__consumer_offsets``...)
        only with ``include_internal``."""

        def attempt(deadline: float) -> list[str]:
            body = self._metadata(None, deadline)
            return sorted(t.name for t in body.topics
                          if t.name is not None and not t.error_code
                          and (include_internal or not getattr(t, "is_internal", False)))

        return self._retrying("listing topics", timeout_ms, attempt)

    def describe_topics(self, names: Iterable[str], *, timeout_ms: float | None = None,
                        raise_errors: bool = True) -> dict[str, TopicDescription | KafkaError]:
        """Partitions, leaders, replicas and ISR of the named topics (from Metadata).  A
        missing topic raises UnknownTopicOrPartitionError."""
        given = list(names)
        topics = list(_unique(dict.fromkeys(given), given, "topic"))

        def round_(pending: list[str], deadline: float) -> Mapping[str, Any]:
            return m.parse_topic_descriptions(self._metadata(pending, deadline))

        return self._per_key(f"describing topics {topics}", topics, timeout_ms, round_,
                             lambda e: isinstance(e, LeaderNotAvailableError), raise_errors)

    def describe_cluster(self, *, timeout_ms: float | None = None) -> ClusterDescription:
        """Cluster id, controller and brokers: DescribeCluster where the broker serves it,
        else Metadata."""

        def attempt(deadline: float) -> ClusterDescription:
            node = self._any_node(deadline)
            try:
                _, body = self._send(node, ApiKey.DESCRIBE_CLUSTER, None, None, deadline,
                                     m.describe_cluster_request)
            except UnsupportedVersionError:
                return m.cluster_from_metadata(self._metadata((), deadline, node))
            return m.parse_describe_cluster(body)

        return self._retrying("describing the cluster", timeout_ms, attempt)

    def describe_configs(self, topics: Iterable[str] = (), broker: int | Iterable[int] | None = None,
                         *, resources: Iterable[ConfigResource] = (),
                         include_synonyms: bool = False, keys: Sequence[str] | None = None,
                         timeout_ms: float | None = None, raise_errors: bool = True,
                         ) -> dict[ConfigResource, dict[str, ConfigEntry] | KafkaError]:
        """Every setting of the given topics, brokers (by id) and other ``resources`` (a
        group, the brokers' dynamic defaults) with its value and source; only the settings
        named in ``keys`` if given.
        Returns ``{ConfigResource: {name: ConfigEntry}}``; a missing topic raises
        UnknownTopicOrPartitionError."""
        brokers = [] if broker is None else [broker] if isinstance(broker, int) else list(broker)
        resources = [ConfigResource.topic(t) for t in topics] + \
            [ConfigResource.broker(b) for b in brokers] + list(resources)
        _unique(dict.fromkeys(resources), resources, "resource")

        def round_(pending: list[ConfigResource], deadline: float) -> Mapping[ConfigResource, Any]:
            out: dict[ConfigResource, Any] = {}
            groups: dict[Node, list[ConfigResource]] = {}
            cluster = self._cluster(deadline)
            for r in pending:
                if r.type == m.ConfigResourceType.BROKER and r.name:
                    node = cluster.node_by_id(int(r.name))
                    if node is None:
                        out[r] = BrokerNotAvailableError(
                            f"cannot describe the configs of broker {r.name}: no such broker; "
                            f"the cluster's brokers are {[n.id for n in cluster.nodes]}")
                        continue
                else:
                    node = self._any_node(deadline)
                groups.setdefault(node, []).append(r)
            for node, group in groups.items():
                version, body = self._send(node, ApiKey.DESCRIBE_CONFIGS, None, None, deadline,
                                           functools.partial(m.describe_configs_request,
                                                             resources=group,
                                                             include_synonyms=include_synonyms,
                                                             keys=keys))
                out.update(m.parse_describe_configs(version, body))
            return out

        return self._per_key(f"describing configs of {[str(r) for r in resources]}", resources,
                             timeout_ms, round_, lambda e: False, raise_errors)

    def incremental_alter_configs(
            self, changes: Mapping[ConfigResource, Sequence[AlterConfigOp]], *,
            validate_only: bool = False, timeout_ms: float | None = None,
            raise_errors: bool = True) -> dict[ConfigResource, None | KafkaError]:
        """Change single settings of topics or brokers (IncrementalAlterConfigs); the others
        stay.  Returns None per changed resource (or its error, with ``raise_errors=False``)."""
        build = functools.partial(c.incremental_alter_configs_request,
                                  validate_only=validate_only)
        return self._alter_configs(ApiKey.INCREMENTAL_ALTER_CONFIGS, dict(changes), build,
                                   timeout_ms, raise_errors)

    def alter_configs(self, configs: Mapping[ConfigResource, Mapping[str, str]], *,
                      validate_only: bool = False, timeout_ms: float | None = None,
                      raise_errors: bool = True) -> dict[ConfigResource, None | KafkaError]:
        """Replace the whole set of settings of topics or brokers (legacy AlterConfigs:
        settings not given return to their defaults)."""
        return self._alter_configs(ApiKey.ALTER_CONFIGS, dict(configs), functools.partial(
            c.alter_configs_request, validate_only=validate_only), timeout_ms, raise_errors)

    def _alter_configs(self, api_key: int, changes: dict[ConfigResource, Any],
                       build: Callable[..., Message], timeout_ms: float | None,
                       raise_errors: bool) -> dict[ConfigResource, None | KafkaError]:
        resources = list(changes)

        def round_(pending: list[ConfigResource], deadline: float) -> Mapping[ConfigResource, Any]:
            out: dict[ConfigResource, Any] = {}
            groups: dict[Node, list[ConfigResource]] = {}
            cluster = self._cluster(deadline)
            for r in pending:
                if r.type == m.ConfigResourceType.BROKER and r.name:  # that broker itself
                    node = cluster.node_by_id(int(r.name))
                    if node is None:
                        out[r] = BrokerNotAvailableError(
                            f"cannot alter the configs of broker {r.name}: no such broker")
                        continue
                else:
                    node = self._controller(deadline)
                groups.setdefault(node, []).append(r)
            for node, group in groups.items():
                request = functools.partial(build, configs={r: changes[r] for r in group})
                _, body = self._send(node, api_key, None, None, deadline, request)
                out.update(c.parse_alter_configs(body))
            return out

        return self._per_key(f"altering configs of {[str(r) for r in resources]}", resources,
                             timeout_ms, round_, lambda e: False, raise_errors)

    def describe_user_scram_credentials(
            self, users: Iterable[str] | None = None, *, timeout_ms: float | None = None,
            raise_errors: bool = True) -> dict[str, scram.UserScramCredentialsDescription | KafkaError]:
        """The SCRAM mechanisms and iteration counts of ``users`` (None: every user), never a
        secret (KIP-554). A user without credentials maps to ResourceNotFoundError."""
        wanted = None if users is None else list(users)

        def attempt(deadline: float) -> dict[str, scram.UserScramCredentialsDescription | KafkaError]:
            _, body = self._send(self._controller(deadline), ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
                                 None, None, deadline, lambda v: scram.describe_request(v, wanted))
            return scram.parse_describe(body)

        found = self._retrying("describing SCRAM users", timeout_ms, attempt)
        return _settle(found, raise_errors)

    def alter_user_scram_credentials(
            self, alterations: Iterable[scram.UserScramCredentialUpsertion | scram.UserScramCredentialDeletion],
            *, timeout_ms: float | None = None, raise_errors: bool = True) -> dict[str, None | KafkaError]:
        """Create, replace or delete SCRAM credentials (KIP-554); None per user changed. The
        password is salted here and never sent."""
        changes = list(alterations)
        users = list(dict.fromkeys(a.user for a in changes))

        def round_(pending: list[str], deadline: float) -> Mapping[str, Any]:
            batch = [a for a in changes if a.user in pending]
            _, body = self._send(self._controller(deadline), ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
                                 None, None, deadline, lambda v: scram.alter_request(v, batch))
            return scram.parse_alter(body)

        return self._per_key(f"altering the SCRAM credentials of {users}", users, timeout_ms,
                             round_, _controller_retriable, raise_errors)

    # -- ACLs (samsa/admin/acls.py) ----------------------------------------------------------

    def create_acls(self, bindings: Iterable[AclBinding], *, timeout_ms: float | None = None,
                    raise_errors: bool = True) -> dict[AclBinding, None | KafkaError]:
        """Create ACLs (Java's Admin.createAcls); None per binding created.  Creating one that
        exists succeeds; a binding listed twice is sent once.  A field left UNKNOWN, ANY or
        MATCH is refused here with InvalidRequestError, as Java does; the broker refuses
        other bad bindings (empty name, a principal without ``Type:``) with
        InvalidRequestError and its message, and answers SecurityDisabledError without an
        authorizer and ClusterAuthorizationFailedError without ALTER on the cluster."""
        wanted = list(dict.fromkeys(bindings))
        results: dict[AclBinding, None | KafkaError] = {}
        sendable: list[AclBinding] = []
        for binding in wanted:
            problem = a.indefinite_field(binding)
            if problem is None:
                sendable.append(binding)
            else:
                results[binding] = InvalidRequestError(f"{problem} ACL binding: {binding}")

        def round_(pending: list[AclBinding], deadline: float) -> Mapping[AclBinding, Any]:
            # Any broker: KRaft brokers forward ACL changes to the controller themselves.
            _, body = self._send(self._any_node(deadline), ApiKey.CREATE_ACLS,
                                 a.min_version(b.pattern_type for b in pending), None, deadline,
                                 lambda v: a.create_request(v, pending))
            return a.parse_create(body, pending)

        # Retrying a whole request after a lost answer is safe: creating an ACL twice is a no-op.
        results.update(self._per_key(f"creating {len(sendable)} ACLs", sendable, timeout_ms,
                                     round_, lambda e: False, raise_errors=False,
                                     describe=lambda b: f"ACL {b}"))
        return _settle({b: results[b] for b in wanted}, raise_errors)

    def describe_acls(self, acl_filter: AclBindingFilter = _EVERY_ACL, *,
                      timeout_ms: float | None = None) -> list[AclBinding]:
        """The ACLs ``acl_filter`` selects (Java's Admin.describeAcls; the default filter
        selects every ACL), in the broker's order.  A pattern type of MATCH selects every ACL
        that applies to the named resource (literal, ``*`` and prefixes).  The broker's error
        (SecurityDisabledError, ClusterAuthorizationFailedError, ...) is raised."""
        unknown = a.unknown_filter_error(acl_filter)
        if unknown is not None:
            raise unknown

        def attempt(deadline: float) -> list[AclBinding]:
            _, body = self._send(self._any_node(deadline), ApiKey.DESCRIBE_ACLS,
                                 a.min_version([acl_filter.pattern_type]), None, deadline,
                                 lambda v: a.describe_request(v, acl_filter))
            return a.parse_describe(body)

        return self._retrying("describing ACLs", timeout_ms, attempt)

    def delete_acls(self, filters: Iterable[AclBindingFilter], *, timeout_ms: float | None = None,
                    raise_errors: bool = True,
                    ) -> dict[AclBindingFilter, list[AclBinding] | KafkaError]:
        """Delete every ACL each filter selects (Java's Admin.deleteAcls); per filter the
        ACLs it deleted (an empty list when it matched none).  A filter listed twice is sent
        once.  The broker's per-filter errors are the filter's results."""
        wanted = list(dict.fromkeys(filters))

        def round_(pending: list[AclBindingFilter], deadline: float) -> Mapping[AclBindingFilter, Any]:
            _, body = self._send(self._any_node(deadline), ApiKey.DELETE_ACLS,
                                 a.min_version(f.pattern_type for f in pending), None, deadline,
                                 lambda v: a.delete_request(v, pending))
            return a.parse_delete(body, pending)

        return self._per_key(f"deleting the ACLs of {len(wanted)} filters", wanted, timeout_ms,
                             round_, lambda e: False, raise_errors,
                             describe=lambda f: f"ACL filter {f}")

    def delete_records(self, offsets: Mapping[TopicPartition | tuple[str, int], int], *,
                       timeout_ms: float | None = None,
                       raise_errors: bool = True) -> dict[TopicPartition, int | KafkaError]:
        """Delete each partition's records before the given offset (-1: up to the high
        watermark).  Returns ``{TopicPartition: new low watermark}``."""
        wanted = {TopicPartition(*tp): int(offset) for tp, offset in offsets.items()}

        def round_(pending: list[TopicPartition], deadline: float) -> Mapping[TopicPartition, Any]:
            out: dict[TopicPartition, Any] = {}
            by_leader: dict[int, list[TopicPartition]] = {}
            leaders, failed = self._leaders({tp.topic for tp in pending}, deadline)
            for tp in pending:
                leader = leaders.get(tp, _MISSING)
                if tp.topic in failed:
                    out[tp] = failed[tp.topic]
                elif isinstance(leader, KafkaError):
                    out[tp] = leader
                elif leader is _MISSING:
                    out[tp] = topic_error(UnknownTopicOrPartitionError.code,
                                          "the topic has no such partition", str(tp),
                                          "delete records of", what="partition")
                else:
                    by_leader.setdefault(leader, []).append(tp)
            cluster = self._cluster(deadline)
            for leader_id, tps in by_leader.items():
                node = cluster.node_by_id(leader_id)
                if node is None:  # a leader not among the brokers: ask again later
                    for tp in tps:
                        out[tp] = LeaderNotAvailableError(f"the leader of {tp} is not known yet")
                    continue
                _, body = self._send(
                    node, ApiKey.DELETE_RECORDS, None, None, deadline,
                    functools.partial(m.delete_records_request,
                                      offsets={tp: wanted[tp] for tp in tps},
                                      timeout_ms=self._request_timeout(deadline)))
                out.update(m.parse_delete_records(body))
            return out

        def retriable(e: KafkaError) -> bool:
            if isinstance(e, UnknownTopicOrPartitionError):
                return False  # the lookup just now said so; a stale leader gets NOT_LEADER
            if e.invalid_metadata or e.retriable:
                self._need_refresh = True
                return True
            return False

        return self._per_key(f"deleting records of {[str(tp) for tp in wanted]}",
                             list(wanted), timeout_ms, round_, retriable, raise_errors,
                             describe=lambda tp: f"partition {tp}")

    # -- consumer groups (samsa/admin/groups.py) ---------------------------------------------

    def list_groups(self, *, timeout_ms: float | None = None) -> list[g.GroupListing]:
        """Every group known to any broker (ListGroups to each), sorted by id."""

        def attempt(deadline: float) -> list[g.GroupListing]:
            found: dict[str, g.GroupListing] = {}
            for node in self._cluster(deadline).nodes:
                version, body = self._send(node, ApiKey.LIST_GROUPS, None, None, deadline,
                                           g.list_groups_request)
                found.update((x.group_id, x) for x in g.parse_list_groups(version, body))
            return [found[k] for k in sorted(found)]

        return self._retrying("listing groups", timeout_ms, attempt)

    def describe_groups(self, group_ids: Iterable[str], *, timeout_ms: float | None = None,
                        raise_errors: bool = True) -> dict[str, g.GroupDescription | KafkaError]:
        """State, protocol and members of each group, from its coordinator.  A group that
        does not exist is described with state ``Dead`` and no members, as Kafka does."""
        given = list(group_ids)
        groups = list(_unique(dict.fromkeys(given), given, "group"))

        def round_(pending: list[str], deadline: float) -> Mapping[str, Any]:
            out: dict[str, Any] = {}
            for node, ids in self._group_coordinators(pending, deadline, out).items():
                _, body = self._send(node, ApiKey.DESCRIBE_GROUPS, None, None, deadline,
                                     functools.partial(g.describe_groups_request, group_ids=ids))
                out.update(g.parse_describe_groups(body, node))
            return out

        return self._per_key(f"describing groups {groups}", groups, timeout_ms, round_,
                             self._coordinator_moved, raise_errors)

    def delete_groups(self, group_ids: Iterable[str], *, timeout_ms: float | None = None,
                      raise_errors: bool = True) -> dict[str, None | KafkaError]:
        """Delete empty groups and their committed offsets.  A group with members raises
        NonEmptyGroupError, a missing one GroupIdNotFoundError."""
        given = list(group_ids)
        groups = list(_unique(dict.fromkeys(given), given, "group"))

        def round_(pending: list[str], deadline: float) -> Mapping[str, Any]:
            out: dict[str, Any] = {}
            for node, ids in self._group_coordinators(pending, deadline, out).items():
                _, body = self._send(node, ApiKey.DELETE_GROUPS, None, None, deadline,
                                     functools.partial(g.delete_groups_request, group_ids=ids))
                out.update(g.parse_delete_groups(body))
            return out

        return self._per_key(f"deleting groups {groups}", groups, timeout_ms, round_,
                             self._coordinator_moved, raise_errors)

    def list_group_offsets(self, group_id: str, *,
                           timeout_ms: float | None = None) -> dict[TopicPartition, int]:
        """The group's committed offset of every partition it committed (OffsetFetch)."""

        def attempt(deadline: float) -> dict[TopicPartition, int]:
            errors: dict[str, Any] = {}
            nodes = self._group_coordinators([group_id], deadline, errors)
            if errors:
                raise errors[group_id]
            node = next(iter(nodes))
            lo, hi = g.OFFSET_FETCH_RANGE
            _, body = self._send(node, ApiKey.OFFSET_FETCH, lo, hi, deadline,
                                 functools.partial(g.offset_fetch_request, group_id=group_id))
            return g.parse_offset_fetch(body, group_id)

        return self._retrying(f"fetching the committed offsets of group {group_id!r}",
                              timeout_ms, attempt)

    def _coordinator_moved(self, error: KafkaError) -> bool:
        if isinstance(error, g.COORDINATOR_ERRORS):
            self._need_refresh = True
            return True
        return False

    def _group_coordinators(self, group_ids: list[str], deadline: float,
                            failed: dict[str, Any]) -> dict[Node, list[str]]:
        """FindCoordinator for each group: {coordinator: its groups}; errors go to ``failed``."""
        by_node: dict[Node, list[str]] = {}
        for group_id in group_ids:
            _, body = self._send(self._any_node(deadline), ApiKey.FIND_COORDINATOR, None,
                                 g.FIND_COORDINATOR_MAX, deadline,
                                 functools.partial(g.find_coordinator_request, group_id=group_id))
            found = g.parse_find_coordinator(body, group_id)
            if isinstance(found, KafkaError):
                failed[group_id] = found
                continue
            known = self._cluster(deadline).node_by_id(found.id)
            by_node.setdefault(known if known is not None else found, []).append(group_id)
        return by_node

    def close(self) -> None:
        """Close every connection.  Safe to call twice."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._client.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"AdminClient(client_id={self.config['client.id']!r}, "
                f"bootstrap_servers={self.config['bootstrap.servers']!r})")

    # -- retries and per-key bookkeeping -----------------------------------------------------

    def _retrying(self, operation: str, timeout_ms: float | None,
                  attempt: Callable[[float], T]) -> T:
        """Run ``attempt(deadline)`` until it returns, retrying retriable errors with
        backoff while time (and ``retries``) remain."""
        timeout = self.config["default.api.timeout.ms"] if timeout_ms is None else timeout_ms
        with self._lock:
            if self._closed:
                raise IllegalStateError("the AdminClient is closed; create a new one")
            deadline = monotonic_ms() + timeout
            tries = 0
            answered: KafkaError | None = None  # the last error a broker answered
            while True:
                try:
                    return attempt(deadline)
                except UnsupportedVersionError:
                    raise  # retriable or not, the broker will not change its mind
                except KafkaError as e:
                    if not e.retriable or tries >= self.config["retries"]:
                        raise
                    if e.invalid_metadata or isinstance(e, (NotControllerError,
                                                            KafkaConnectionError)):
                        self._need_refresh = True
                    if not isinstance(e, KafkaTimeoutError):
                        answered = e
                    wait = self._backoff.backoff(tries)
                    tries += 1
                    if monotonic_ms() + wait >= deadline:
                        if isinstance(e, KafkaTimeoutError):
                            # The last try ran out of time: say what it waited for, and what
                            # the try before it was answered.
                            cause = f"; it was waiting for {e.waited_for}"
                            if answered is not None:
                                cause += f" (the previous try failed: {answered})"
                        else:
                            cause = f" (last error: {e})"
                        raise KafkaTimeoutError(f"{operation}{cause}", timeout) from e
                    log.debug("%s: retrying after %.0f ms: %s", operation, wait, e)
                    self._sleep(wait)

    def _per_key(self, operation: str, keys: list[K], timeout_ms: float | None,
                 round_: Callable[[list[K], float], Mapping[K, Any]],
                 retry_key: Callable[[KafkaError], bool], raise_errors: bool,
                 describe: Callable[[K], str] = lambda k: repr(k)) -> dict[K, Any]:
        """Send rounds for the keys still pending; keys with an error ``retry_key`` accepts
        stay pending for the next round, the rest are settled."""
        results: dict[K, Any] = {}
        pending = list(keys)

        def attempt(deadline: float) -> None:
            nonlocal pending
            answered = round_(pending, deadline)
            still: list[K] = []
            retry: KafkaError | None = None
            for key in pending:
                outcome = answered.get(key, _MISSING)
                if outcome is _MISSING:
                    results[key] = UnknownServerError(
                        f"the broker's answer did not mention {describe(key)}")
                elif isinstance(outcome, KafkaError) and retry_key(outcome):
                    still.append(key)
                    retry = retry or outcome
                else:
                    results[key] = outcome
            pending = still
            if retry is not None:
                raise retry

        if keys:
            try:
                self._retrying(operation, timeout_ms, attempt)
            except KafkaError as e:
                for key in pending:
                    results[key] = e
        return _settle({key: results[key] for key in keys}, raise_errors)

    # -- transport ---------------------------------------------------------------------------

    def _sleep(self, ms: float) -> None:
        """Wait while keeping the client's I/O going (metadata updates, connects)."""
        end = monotonic_ms() + ms
        while (left := end - monotonic_ms()) > 0:
            self._client.poll(min(left, _POLL_SLICE_MS))

    def _cluster(self, deadline: float) -> Cluster:
        """Current cluster metadata, refreshed first if it is still the bootstrap list or a
        retry asked for a refresh."""
        metadata = self._client.metadata
        cluster = metadata.fetch()
        if not self._need_refresh and not cluster.is_bootstrap and cluster.nodes:
            return cluster
        version = metadata.request_update()
        while metadata.update_version <= version:
            metadata.maybe_throw_any_exception()
            left = deadline - monotonic_ms()
            if left <= 0:
                raise KafkaTimeoutError(self._no_metadata_reason(), None)
            self._client.poll(min(left, _POLL_SLICE_MS))
        self._need_refresh = False
        return metadata.fetch()

    def _no_metadata_reason(self) -> str:
        servers = ",".join(self.config["bootstrap.servers"])
        errors = {str(e) for n in self._client.metadata.fetch().nodes
                  if (e := self._client.last_connection_error(n)) is not None}
        last = f"; last error: {'; '.join(sorted(errors))}" if errors else ""
        return (f"cluster metadata from {servers} (bootstrap.servers){last}; check that a "
                "broker is running at that address")

    def _any_node(self, deadline: float) -> Node:
        cluster = self._cluster(deadline)
        node = self._client.least_loaded_node(monotonic_ms())
        return node if node is not None else cluster.nodes[0]

    def _controller(self, deadline: float) -> Node:
        cluster = self._cluster(deadline)
        if cluster.controller is not None:
            return cluster.controller
        return self._any_node(deadline)  # KRaft brokers and the mock name no usable id

    def _request_timeout(self, deadline: float) -> int:
        """The timeout_ms field for the broker: what is left, capped by request.timeout.ms."""
        left = max(deadline - monotonic_ms(), 0)
        return int(min(left, self.config["request.timeout.ms"]))

    def _send(self, node: Node, api_key: int, lo: int | None, hi: int | None, deadline: float,
              build: Callable[[int], Message]) -> tuple[int, Any]:
        """Send ``build(version)`` to ``node`` at the best common version; (version, body)."""
        await_ready(self._client, node, max(deadline - monotonic_ms(), 0))
        try:
            version = self._client.pick_version(node, api_key, lo, hi)
        except UnsupportedVersionError as e:
            purpose = _API_PURPOSE.get(api_key, f"API key {api_key}")
            raise UnsupportedVersionError(
                f"{purpose} is not supported by this broker ({node}): {e.detail}. Use a "
                "broker that serves it (Apache Kafka, or samsa's own broker)") from None
        body = send_and_wait(self._client, node, build(version),
                             max(deadline - monotonic_ms(), 0),
                             min_version=version, max_version=version)
        return version, body

    def _metadata(self, topics: Iterable[str] | None, deadline: float,
                  node: Node | None = None) -> Any:
        lo, hi = m.METADATA_VERSIONS
        target = node if node is not None else self._any_node(deadline)
        wanted = None if topics is None else list(topics)
        if wanted:
            lo = m.METADATA_NO_AUTO_CREATE  # as Java: never create topics by describing them
        _, body = self._send(target, ApiKey.METADATA, lo, hi, deadline,
                             lambda v: m.metadata_request(v, wanted))
        return body

    def _leaders(self, topics: set[str], deadline: float,
                 ) -> tuple[dict[TopicPartition, Any], dict[str, KafkaError]]:
        """(leader id or LeaderNotAvailableError per partition, error per failed topic)."""
        leaders: dict[TopicPartition, Any] = {}
        failed: dict[str, KafkaError] = {}
        descriptions = m.parse_topic_descriptions(self._metadata(sorted(topics), deadline))
        for name in topics:
            d = descriptions.get(name)
            if isinstance(d, KafkaError):
                failed[name] = d
                continue
            for p in d.partitions if d is not None else ():
                tp = TopicPartition(name, p.partition)
                leaders[tp] = p.leader if p.leader is not None else LeaderNotAvailableError(
                    f"partition {tp} has no leader right now")
        return leaders, failed

def _unique(mapping: dict[Any, Any], given: Sequence[Any], what: str) -> dict[Any, Any]:
    if len(mapping) != len(given):
        seen: set[Any] = set()
        for item in given:
            if item in seen:
                raise ValueError(f"{what} {item!r} is listed more than once")
            seen.add(item)
    return mapping
