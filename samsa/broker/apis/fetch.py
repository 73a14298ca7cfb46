"""Fetch (key 1), versions 0-12: read each partition's log, long-polling for ``min_bytes``.

* v0-3 get magic 0 (v0-1) or magic 1 (v2-3) message sets, converted lazily while the response
  is sent (samsa/broker/log/down_conversion.py); v0-2 byte limits are hard (no whole first
  batch when it exceeds them); no isolation level or aborted transactions before v4.
* ``max_bytes`` (capped at the broker's ``fetch.max.bytes``, as is ``min_bytes``) bounds the
  whole response and ``partition_max_bytes`` each partition, except that the first non-empty
  partition always returns its first batch whole (KIP-74), so a batch larger than the limits
  cannot stall a consumer.
* Every requested partition appears in the response, errors included: a session-less (full)
  response that omits a partition is thrown away by the Java consumer.
* Incremental fetch sessions (KIP-227) are not implemented; answering ``session_id = 0`` keeps
  every client on full requests, which the protocol allows.
* When fewer than ``min_bytes`` are available the request is parked in the fetch purgatory
  (no thread waits): appends to its partitions retry it, and it is answered with whatever is
  there when ``max_wait_ms`` passes.
* Records go out as the log's FileSlice: the codec splices it into the response for sendfile.
* read_committed (v4+) reads stop at the last stable offset; the response lists the aborted
  transactions of the range read (from the segments' ``.txnindex``), an empty list when nothing
  was read, and null for read_uncommitted.  last_stable_offset is always filled.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.error_codes import code_for
from samsa.broker.apis.fetch_zstd import ZSTD_MIN_FETCH_VERSION, without_zstd
from samsa.broker.apis.services import BrokerServices, as_bool
from samsa.broker.log import FileSlice, IsolationLevel
from samsa.broker.log.down_conversion import LazyDownConversionRecords
from samsa.broker.purgatory import DelayedOperation
from samsa.errors import (
    FencedLeaderEpochError,
    FetchSessionIdNotFoundError,
    InvalidFetchSessionEpochError,
    KafkaError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    TopicAuthorizationFailedError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
    UnsupportedCompressionTypeError,
    UnsupportedVersionError,
)
from samsa.protocol import FetchResponse
from samsa.security.acl import AclOperation

log = logging.getLogger(__name__)

TopicResponse = FetchResponse.FetchableTopicResponse
PartitionData = FetchResponse.PartitionData
AbortedTransaction = FetchResponse.AbortedTransaction


@dataclass(slots=True)
class PartitionFetch:
    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int


@dataclass(slots=True)
class FetchResult:
    responses: list[TopicResponse]
    size: int
    has_error: bool


def leader_epoch_error(log_epoch: int, requested: int) -> int:
    """FENCED_LEADER_EPOCH if the client's epoch is older than ours, UNKNOWN_LEADER_EPOCH if
    newer, 0 if it matches or was not given (-1)."""
    if requested < 0 or requested == log_epoch:
        return 0
    return FencedLeaderEpochError.code if requested < log_epoch else UnknownLeaderEpochError.code


def _error_partition(partition: int, code: int) -> PartitionData:
    return PartitionData(partition_index=partition, error_code=code, high_watermark=-1,
                         last_stable_offset=-1, log_start_offset=-1, aborted_transactions=None,
                         preferred_read_replica=-1, records=b"")


class FetchPlan:
    """One fetch request, ready to be (re)read against the logs."""

    def __init__(self, services: BrokerServices, version: int, req: Any,
                 unreadable: frozenset[str] = frozenset()) -> None:
        self.services = services
        self.unreadable = unreadable  # topics the principal may not READ
        self.version = version
        self.max_wait_ms: int = req.max_wait_ms
        # A client's max_bytes (2^31-1 before v3) and min_bytes are capped at fetch.max.bytes,
        # as Kafka's KafkaApis.handleFetchRequest does for consumers: a request listing one
        # partition a thousand times must not build a response of gigabytes.
        self.max_bytes: int = min(req.max_bytes, int(services.config["fetch.max.bytes"]))
        self.min_bytes: int = min(req.min_bytes, self.max_bytes)
        self.isolation = (IsolationLevel.READ_COMMITTED
                          if req.isolation_level == 1
                          else IsolationLevel.READ_UNCOMMITTED)
        # Topics in request order; a topic listed twice stays twice, as Kafka answers.
        self.topics: list[tuple[str, list[PartitionFetch]]] = [
            (t.topic, [PartitionFetch(t.topic, p.partition, p.fetch_offset,
                                      p.partition_max_bytes, p.current_leader_epoch)
                       for p in t.partitions])
            for t in req.topics
        ]

    def keys(self) -> list[tuple[str, int]]:
        return [(p.topic, p.partition) for _, parts in self.topics for p in parts]

    def read(self) -> FetchResult:
        remaining = max(self.max_bytes, 0)
        # Fetch v0-2 limits are hard (FetchParams.hardMaxBytesLimit): no whole first batch.
        min_one = self.version >= 3
        total = 0
        has_error = False
        responses: list[TopicResponse] = []
        for topic, parts in self.topics:
            out: list[PartitionData] = []
            for p in parts:
                data = self._read_partition(p, remaining, min_one)
                if data.error_code:
                    has_error = True
                size = len(data.records) if data.records is not None else 0
                if size:
                    min_one = False
                    remaining = max(0, remaining - size)
                    total += size
                out.append(data)
            responses.append(TopicResponse(topic=topic, partitions=out))
        return FetchResult(responses, total, has_error)

    def _read_partition(self, p: PartitionFetch, remaining: int, min_one: bool) -> PartitionData:
        services = self.services
        if self.unreadable and p.topic in self.unreadable:  # checked before existence, as Kafka
            return _error_partition(p.partition, TopicAuthorizationFailedError.code)
        plog = services.get_log(p.topic, p.partition)
        if plog is None:
            return _error_partition(p.partition, UnknownTopicOrPartitionError.code)
        epoch_error = leader_epoch_error(services.leader_epoch(plog), p.current_leader_epoch)
        if epoch_error:
            return _error_partition(p.partition, epoch_error)
        limit = max(0, min(p.max_bytes, remaining))
        try:
            data = plog.read(p.fetch_offset, limit, min_one_message=min_one,
                             isolation=self.isolation)
        except KafkaError as exc:
            code = code_for(exc, f"fetch from {p.topic}-{p.partition}")
            if code == KafkaStorageError.code and self.version <= 5:
                code = NotLeaderOrFollowerError.code  # KafkaApis.maybeDownConvertStorageError
            return _error_partition(p.partition, code)
        records = data.records
        if self.version < ZSTD_MIN_FETCH_VERSION:  # KIP-110; fetch_zstd.py says why both
            if self._topic_codec(p.topic) == "zstd":
                return _error_partition(p.partition, UnsupportedCompressionTypeError.code)
            if isinstance(records, FileSlice) and records.size:
                kept = without_zstd(records)
                if kept is None:
                    return _error_partition(p.partition, UnsupportedCompressionTypeError.code)
                records = kept
        if self.version < 4 and not self._downconversion_enabled(p.topic):
            # KIP-283: with message.downconversion.enable=false consumers get 35 instead.
            return _error_partition(p.partition, UnsupportedVersionError.code)
        sent: FileSlice | bytes | LazyDownConversionRecords = records
        if self.version < 4 and len(records):
            # Fetch v0-1 read magic 0, v2-3 magic 1: converted while sent (down_conversion.py).
            try:
                sent = LazyDownConversionRecords(records, 0 if self.version <= 1 else 1,
                                                    p.fetch_offset)
            except UnsupportedCompressionTypeError:
                return _error_partition(p.partition, UnsupportedCompressionTypeError.code)
        aborted = None
        if self.isolation == IsolationLevel.READ_COMMITTED:
            aborted = [AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
                       for a in (data.aborted_transactions or ())]
        return PartitionData(partition_index=p.partition, error_code=0,
                             high_watermark=data.high_watermark,
                             last_stable_offset=data.last_stable_offset,
                             log_start_offset=data.log_start_offset,
                             aborted_transactions=aborted, preferred_read_replica=-1,
                             records=sent)

    def _topic_codec(self, topic: str) -> str:
        """The topic's compression.type (its override, else the broker's)."""
        info = self.services.topic(topic)
        codec = info.configs.get("compression.type") if info is not None else None
        return str(codec if codec is not None else self.services.config["compression.type"])

    def _downconversion_enabled(self, topic: str) -> bool:
        """message.downconversion.enable: the topic's, else the broker's log.* setting."""
        info = self.services.topic(topic)
        value = info.configs.get("message.downconversion.enable") if info is not None else None
        if value is None:
            value = self.services.config.get("log.message.downconversion.enable", True)
        return as_bool(value)

    def response(self, result: FetchResult) -> FetchResponse:
        return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0,
                             responses=result.responses)

    def satisfied_by(self, result: FetchResult) -> bool:
        return result.has_error or result.size >= self.min_bytes


class DelayedFetch(DelayedOperation):
    """A fetch waiting in the purgatory for ``min_bytes`` or its ``max_wait_ms``."""

    def __init__(self, plan: FetchPlan, ctx: RequestContext) -> None:
        # The wait counts from when the request arrived, not from when a handler picked it up.
        received = getattr(ctx, "received_ms", None)
        waited = time.monotonic() * 1000 - received if received is not None else 0
        super().__init__(plan.max_wait_ms - max(waited, 0))
        self.plan = plan
        self.ctx = ctx
        self._result: FetchResult | None = None

    def try_complete(self) -> bool:
        result = self.plan.read()
        if self.plan.satisfied_by(result):
            self._result = result
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        # Take the result out: the purgatory may keep a completed operation until its deadline,
        # and the FileSlices in the result would keep their segment files open (even deleted).
        result, self._result = self._result, None
        try:
            if result is None:
                result = self.plan.read()
            self.ctx.respond(self.plan.response(result))
        except Exception:
            log.exception("completing a delayed fetch failed; closing the connection")
            if not getattr(self.ctx, "completed", False):
                self.ctx.close_connection("completing a delayed fetch failed")


def _session_error(version: int, req: Any) -> int:
    if version < 7:
        return 0
    session_id = req.session_id
    epoch = req.session_epoch
    if session_id != 0:
        return FetchSessionIdNotFoundError.code  # we never hand out session ids
    if epoch not in (0, -1):
        return InvalidFetchSessionEpochError.code
    return 0


def handle_fetch(services: BrokerServices, ctx: RequestContext) -> FetchResponse | None:
    version = ctx.header.request_api_version
    req = ctx.body
    session_error = _session_error(version, req)
    if session_error:
        return FetchResponse(throttle_time_ms=0, error_code=session_error, session_id=0,
                             responses=[])
    unreadable: frozenset[str] = frozenset()
    if services.authorizer is not None:
        names = {t.topic for t in req.topics}
        unreadable = frozenset(names - services.authorized_topics(ctx, AclOperation.READ, names))
    plan = FetchPlan(services, version, req, unreadable)
    result = plan.read()
    if plan.max_wait_ms <= 0 or not plan.topics or plan.satisfied_by(result):
        return plan.response(result)
    # Just read and found too little: watch, then check once more (an append may have landed
    # in between) instead of checking twice first.
    services.fetch_purgatory.try_complete_else_watch(DelayedFetch(plan, ctx), plan.keys(),
                                                     try_first=False)
    return None
