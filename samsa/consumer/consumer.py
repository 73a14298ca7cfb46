"""KafkaConsumer: the application's handle (Java's ``KafkaConsumer``, classic protocol).

Single-threaded like Java's: the thread that calls ``poll`` does the network I/O (fetches,
offset resets, group coordination); a group member's heartbeat thread shares the
NetworkClient under ``self._lock``.  See :mod:`samsa.consumer.fetcher` for the fetch path.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Self

from samsa.consumer.config import ConsumerConfig
from samsa.consumer.deserializers import as_deserialize_fn
from samsa.consumer.errors import ConsumerClosedError
from samsa.consumer.fetcher import EARLIEST, LATEST, Fetcher
from samsa.consumer.group_metadata import ConsumerGroupMetadata
from samsa.consumer.records import (
    ConsumerRecord,
    ConsumerRecords,
    OffsetAndMetadata,
    OffsetAndTimestamp,
)
from samsa.consumer.subscription import SubscriptionState
from samsa.errors import IllegalStateError, InvalidGroupIdError, KafkaTimeoutError
from samsa.net import Metadata, NetworkClient, send_and_wait
from samsa.net.cluster import PartitionInfo, TopicPartition
from samsa.protocol import MetadataRequest

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["KafkaConsumer"]

log = logging.getLogger(__name__)

_POLL_SLICE_MS = 100.0


class KafkaConsumer:
    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self.config = cfg = ConsumerConfig(config, **kwargs)
        self.client_id: str = cfg["client.id"]
        self.group_id: str | None = cfg["group.id"]
        self._lock = threading.RLock()
        self._metadata = Metadata(
            retry_backoff_ms=cfg["retry.backoff.ms"], retry_backoff_max_ms=cfg["retry.backoff.max.ms"],
            metadata_max_age_ms=cfg["metadata.max.age.ms"], metadata_max_idle_ms=None,
            allow_auto_topic_creation=cfg["allow.auto.create.topics"])
        self._client = NetworkClient.from_config(cfg, self._metadata,
                                                 max_in_flight_requests_per_connection=100)
        self._subscriptions = SubscriptionState(cfg["auto.offset.reset"])
        self._fetcher = Fetcher(self._client, self._subscriptions, cfg, self._lock)
        self._fetcher.key_fn = as_deserialize_fn(cfg["key.deserializer"])
        self._fetcher.value_fn = as_deserialize_fn(cfg["value.deserializer"])
        self._max_poll_records: int = cfg["max.poll.records"]
        self._default_timeout_ms: float = cfg["default.api.timeout.ms"]
        self._coordinator: Any = None
        if self.group_id is not None:
            from samsa.consumer.coordinator import ConsumerCoordinator

            self._coordinator = ConsumerCoordinator(
                self._client, self._subscriptions, cfg, self._lock, self._fetcher)
        self._closed = False

    # -- helpers ------------------------------------------------------------------------------

    def _ensure_open(self) -> None:
        if self._closed:
            raise ConsumerClosedError()

    def _clock(self) -> float:
        return self._client._clock()

    def _timeout_ms(self, timeout: float | None) -> float:
        return self._default_timeout_ms if timeout is None else timeout * 1000.0

    def _require_group(self, what: str) -> Any:
        if self._coordinator is None:
            raise IllegalStateError(f"{what} needs a group.id; set group.id in the config")
        return self._coordinator

    # -- assignment -----------------------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Read exactly these partitions (no group membership); [] is unsubscribe()."""
        self._ensure_open()
        parts = [TopicPartition(*tp) for tp in partitions]
        with self._lock:
            if not parts:
                self.unsubscribe()
                return
            if self._coordinator is not None:
                self._coordinator.maybe_auto_commit_sync()
            self._subscriptions.assign_from_user(parts)
            self._fetcher.clear_buffered(self._subscriptions.is_assigned)
            self._metadata.set_topics(self._subscriptions.subscription)

    def assignment(self) -> set[TopicPartition]:
        return set(self._subscriptions.assignment)

    def subscribe(self, topics: Iterable[str] | str | None = None, pattern: str | re.Pattern[str] | None = None,
                  listener: Any = None) -> None:
        """Join the group for these topics, or for every topic matching ``pattern``."""
        self._ensure_open()
        coordinator = self._require_group("subscribe()")
        with self._lock:
            if isinstance(topics, str):
                topics = [topics]
            if topics is not None and pattern is not None:
                raise IllegalStateError("give topics or pattern, not both")
            if pattern is not None:
                compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
                self._subscriptions.subscribe_pattern(compiled, listener)
                self._metadata.need_all_topics = True
                self._metadata.request_update()
            else:
                topic_list = list(topics or [])
                if not topic_list:
                    self.unsubscribe()
                    return
                self._subscriptions.subscribe(topic_list, listener)
                self._metadata.set_topics(topic_list)
            coordinator.on_subscription_change()

    def subscription(self) -> set[str]:
        return set(self._subscriptions.subscription)

    def unsubscribe(self) -> None:
        self._ensure_open()
        with self._lock:
            if self._coordinator is not None:
                self._coordinator.on_unsubscribe()
            self._subscriptions.unsubscribe()
            self._fetcher.clear_buffered()
            self._metadata.need_all_topics = False
            self._metadata.set_topics([])

    # -- polling --------------------------------------------------------------------------------

    def poll(self, timeout: float = 0.0, max_records: int | None = None) -> ConsumerRecords:
        """Records fetched for the assigned partitions, waiting up to ``timeout`` seconds."""
        return ConsumerRecords(self._poll(timeout, max_records, self._fetcher.fetched_records))

    def poll_arrow(self, timeout: float = 0.0, max_records: int | None = None
                   ) -> dict[TopicPartition, pa.RecordBatch]:
        """As poll(), each partition's records as one ``pyarrow.RecordBatch`` (needs pyarrow and
        numpy: ``pip install samsa[arrow]``).

        Columns (samsa.consumer.arrow_records.ARROW_SCHEMA): key, value (binary, null for a null
        key or value), topic, partition, offset, timestamp (int64 ms, as ConsumerRecord's),
        timestamp_type (int8: TimestampType's value), headers (list<struct<key: string, value:
        binary>>).  Keys and values are the raw bytes: key.deserializer and value.deserializer
        do not apply.  Positions, max.poll.records (the default of ``max_records``),
        read_committed, check.crcs, pause/resume, seek, rebalance callbacks, commits and
        errors are poll()'s; v2 batches are decoded without a Python object per record.
        """
        try:
            from samsa.consumer import arrow_records  # noqa: F401
        except ImportError as exc:
            raise ImportError(f"poll_arrow() needs pyarrow and numpy ({exc}); install them with "
                              "pip install 'samsa[arrow]'") from exc
        return self._poll(timeout, max_records, self._fetcher.fetched_arrow)

    def _poll(self, timeout: float, max_records: int | None,
              collect: Callable[[int], dict[TopicPartition, Any]]) -> dict[TopicPartition, Any]:
        self._ensure_open()
        if self._subscriptions.mode == "none":
            raise IllegalStateError("poll() needs subscribe() or assign() first")
        limit = max_records or self._max_poll_records
        timeout_ms = max(timeout, 0.0) * 1000.0
        client = self._client
        fetcher = self._fetcher
        with self._lock:
            start = self._clock()
            deadline = start + timeout_ms
            if self._coordinator is not None:
                self._coordinator.on_poll(start)
            metadata = self._metadata
            while True:
                # Java's ConsumerNetworkClient.poll: a connection that failed to authenticate
                # (or a fatal metadata error) fails poll() instead of waiting on reconnects.
                metadata.maybe_throw_any_exception()
                now = self._clock()
                if self._coordinator is not None:
                    self._coordinator.poll(now, deadline)
                self._update_positions(now)
                records = collect(limit)
                if records:
                    # Prefetch: the next fetch travels while the application works.
                    if fetcher.send_fetches(now):
                        client.poll(0, now)
                    return records
                fetcher.send_fetches(now)
                remaining = deadline - self._clock()
                if remaining <= 0:
                    client.poll(0)
                    return collect(limit)
                wait = remaining
                if not fetcher.in_flight() or self._coordinator is not None:
                    wait = min(wait, _POLL_SLICE_MS)
                client.poll(wait)

    def _update_positions(self, now: float) -> None:
        subs = self._subscriptions
        if subs.missing_positions():
            if self._coordinator is not None:
                self._coordinator.refresh_committed_offsets(now)
            for tp in subs.missing_positions():
                if self._coordinator is None or not self._coordinator.fetching_committed(tp):
                    subs.request_reset(tp)
        if subs.partitions_needing_reset():
            self._fetcher.reset_offsets(now)

    def __iter__(self) -> Iterator[ConsumerRecord]:
        while not self._closed:
            yield from self.poll(1.0)

    # -- positions ------------------------------------------------------------------------------

    def position(self, partition: TopicPartition, timeout: float | None = None) -> int:
        """The offset of the next record poll() would return for this partition."""
        self._ensure_open()
        tp = TopicPartition(*partition)
        with self._lock:
            st = self._subscriptions.state(tp)
            deadline = self._clock() + self._timeout_ms(timeout)
            while not st.has_valid_position:
                now = self._clock()
                if now >= deadline:
                    reason = getattr(self._coordinator, "committed_retry_reason", None)
                    because = f" (its committed offset: {reason})" if reason else ""
                    raise KafkaTimeoutError(f"the position of {tp}{because}",
                                            self._timeout_ms(timeout))
                self._update_positions(now)
                if st.has_valid_position:
                    break
                self._client.poll(min(deadline - now, _POLL_SLICE_MS))
            assert st.position is not None
            return st.position

    def seek(self, partition: TopicPartition, offset: int | OffsetAndMetadata) -> None:
        self._ensure_open()
        tp = TopicPartition(*partition)
        if isinstance(offset, OffsetAndMetadata):
            off, epoch = offset.offset, offset.leader_epoch
        else:
            off, epoch = int(offset), None
        if off < 0:
            raise ValueError(f"seek offset must be >= 0, got {off}")
        with self._lock:
            self._subscriptions.seek(tp, off, epoch)

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        self._seek_to(partitions, "earliest")

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        self._seek_to(partitions, "latest")

    def _seek_to(self, partitions: Iterable[TopicPartition] | None, strategy: str) -> None:
        self._ensure_open()
        with self._lock:
            parts = (self._subscriptions.assigned_partitions() if partitions is None
                     else [TopicPartition(*tp) for tp in partitions])
            for tp in parts:
                self._subscriptions.request_reset(tp, strategy)

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        with self._lock:
            for tp in partitions:
                self._subscriptions.pause(TopicPartition(*tp))

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        with self._lock:
            for tp in partitions:
                self._subscriptions.resume(TopicPartition(*tp))

    def paused(self) -> set[TopicPartition]:
        return self._subscriptions.paused_partitions()

    # -- offset lookups -------------------------------------------------------------------------

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int], timeout: float | None = None
                          ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """Earliest offset whose timestamp is >= the given one (ms), per partition."""
        self._ensure_open()
        for tp, ts in timestamps.items():
            if ts < 0:
                raise ValueError(f"timestamp for {tp} must be >= 0, got {ts}")
        stamps = {TopicPartition(*tp): ts for tp, ts in timestamps.items()}
        with self._lock:
            found = self._fetcher.list_offsets(stamps, self._timeout_ms(timeout))
        return {tp: None if v is None else OffsetAndTimestamp(*v) for tp, v in found.items()}

    def beginning_offsets(self, partitions: Iterable[TopicPartition], timeout: float | None = None
                          ) -> dict[TopicPartition, int]:
        return self._list(partitions, EARLIEST, timeout)

    def end_offsets(self, partitions: Iterable[TopicPartition], timeout: float | None = None
                    ) -> dict[TopicPartition, int]:
        return self._list(partitions, LATEST, timeout)

    def _list(self, partitions: Iterable[TopicPartition], ts: int, timeout: float | None
              ) -> dict[TopicPartition, int]:
        self._ensure_open()
        stamps = {TopicPartition(*tp): ts for tp in partitions}
        with self._lock:
            found = self._fetcher.list_offsets(stamps, self._timeout_ms(timeout))
        return {tp: (v[0] if v is not None else -1) for tp, v in found.items()}

    def list_topics(self, timeout: float | None = None) -> dict[str, list[PartitionInfo]]:
        """Every topic the cluster has (internal ones included), with its partitions."""
        self._ensure_open()
        timeout_ms = self._timeout_ms(timeout)
        with self._lock:
            deadline = self._clock() + timeout_ms
            node = None
            while node is None:
                node = self._client.least_loaded_node(self._clock())
                if node is None:
                    if self._clock() >= deadline:
                        raise KafkaTimeoutError("a broker to ask for topics", timeout_ms)
                    self._client.poll(_POLL_SLICE_MS)
            body = send_and_wait(self._client, node, MetadataRequest(
                topics=None, allow_auto_topic_creation=False), max(deadline - self._clock(), 1),
                max_version=12)
        from samsa.net.cluster import Node

        nodes = {b.node_id: Node(b.node_id, b.host, b.port, b.rack) for b in body.brokers}
        out: dict[str, list[PartitionInfo]] = {}
        for t in body.topics:
            if t.error_code:
                continue
            out[t.name] = sorted(
                (PartitionInfo(t.name, p.partition_index, nodes.get(p.leader_id), tuple(p.replica_nodes),
                               tuple(p.isr_nodes), tuple(getattr(p, "offline_replicas", ()) or ()),
                               getattr(p, "leader_epoch", -1))
                 for p in t.partitions), key=lambda pi: pi.partition)
        return out

    def partitions_for(self, topic: str, timeout: float | None = None) -> list[PartitionInfo]:
        return self.list_topics(timeout).get(topic, [])

    # -- commits (group) ------------------------------------------------------------------------

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
               asynchronous: bool = False, callback: Any = None, timeout: float | None = None
               ) -> None:
        """Commit ``offsets`` (default: the positions of every assigned partition)."""
        self._ensure_open()
        coordinator = self._require_group("commit()")
        with self._lock:
            if offsets is None:
                offs = {tp: OffsetAndMetadata(pos, "", epoch)
                        for tp, (pos, epoch) in self._subscriptions.all_consumed().items()}
            else:
                offs = {TopicPartition(*tp): (o if isinstance(o, OffsetAndMetadata)
                                              else OffsetAndMetadata(int(o)))
                        for tp, o in offsets.items()}
            if asynchronous:
                coordinator.commit_async(offs, callback)
            else:
                coordinator.commit_sync(offs, self._timeout_ms(timeout))

    def commit_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
                     callback: Any = None) -> None:
        self.commit(offsets, asynchronous=True, callback=callback)

    def committed(self, partitions: Iterable[TopicPartition], timeout: float | None = None
                  ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        self._ensure_open()
        coordinator = self._require_group("committed()")
        with self._lock:
            return coordinator.fetch_committed([TopicPartition(*tp) for tp in partitions],
                                               self._timeout_ms(timeout))

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This member's group id, generation, member id and instance id, for a transactional
        producer's ``send_offsets_to_transaction`` (Java's ``KafkaConsumer.groupMetadata``)."""
        self._ensure_open()
        if self._coordinator is None:
            # Java's KafkaConsumer.groupMetadata raises InvalidGroupIdException here too.
            raise InvalidGroupIdError(
                "group_metadata() needs a group.id; set group.id in the consumer's config")
        with self._lock:
            return self._coordinator.group_metadata()

    # -- lifecycle ------------------------------------------------------------------------------

    def close(self, timeout: float | None = None, autocommit: bool = True) -> None:
        if self._closed:
            return
        timeout_ms = 30000.0 if timeout is None else timeout * 1000.0
        try:
            if self._coordinator is not None:
                with self._lock:
                    self._coordinator.close(timeout_ms, autocommit)
        finally:
            self._closed = True
            with self._lock:
                self._client.close()
                self._metadata.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def metrics(self) -> dict[str, Any]:
        return {}

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"KafkaConsumer(client_id={self.client_id!r}, group_id={self.group_id!r})"
