"""The Sender: the producer's I/O thread, as Kafka's Java ``Sender``.

One loop (``run_once``), over and over until the producer closes:

1. Idempotence: without a producer id get one with InitProducerId first; an epoch bump
   waits for the batches in flight, then happens locally; produce data waits meanwhile
   (batches still expire).
2. ``send_producer_data``: ``accumulator.ready()`` names the nodes with sendable batches and the
   topics without a known leader (metadata update requested); nodes the NetworkClient is not
   ready for are dropped (``client.ready`` starts connecting); ``accumulator.drain()`` takes at
   most ``max.request.size`` per node; drained partitions are muted so that at most one batch per
   partition is in flight (ordering with retries, and simple sequences for idempotence --
   librdkafka's mock cluster does not check sequences, so ordering cannot lean on the broker);
   batches past ``delivery.timeout.ms`` (queued or in flight) fail with KafkaTimeoutError; one
   ProduceRequest goes to each node.
3. ``client.poll()``: responses come back through :meth:`_handle_produce_response` ->
   :meth:`_complete_batch`: success completes the batch (callbacks run here, on this thread,
   in send order per partition); MESSAGE_TOO_LARGE splits a multi-record batch; retriable
   errors re-enqueue the batch at the head of its deque (the accumulator applies the
   exponential backoff) unless retries or the delivery timeout ran out; invalid-metadata errors
   request a metadata update; DUPLICATE_SEQUENCE_NUMBER counts as success; anything else fails
   the batch.

Closing: :meth:`initiate_close` lets the loop send what is queued and wait for in-flight
requests; :meth:`force_close` aborts everything left with ProducerClosedError.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from samsa.errors import (
    BrokerResponseError,
    ClusterAuthorizationFailedError,
    DuplicateSequenceNumberError,
    InvalidRecordError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    MessageTooLargeError,
    NetworkError,
    ProducerClosedError,
    RequestTimedOutError,
    TransactionAbortedError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
    for_code,
)
from samsa.net.clock import SYSTEM_CLOCK, Time
from samsa.net.cluster import ClusterView
from samsa.net.request import ClientRequest
from samsa.producer.batch import ProducerBatch, TopicPartition
from samsa.producer.metrics import ProducerMetrics
from samsa.producer.record_queue import RecordQueue
from samsa.producer.transaction_manager import TransactionManager
from samsa.producer.txn_requests import CoordinatorType
from samsa.protocol import ProduceRequest
from samsa.protocol.api_keys import ApiKey

__all__ = ["Sender"]

log = logging.getLogger(__name__)

MAX_PRODUCE_VERSION = 12  # 13+ addresses topics by id only
# Produce v12 adds a transaction's partitions implicitly (KIP-890's transaction version 2, which
# a broker infers from the version); the classic flow adds them with AddPartitionsToTxn.
MAX_TRANSACTIONAL_PRODUCE_VERSION = 11
MIN_PRODUCE_VERSION = 3  # v2 record batches
# v5 only adds TRANSACTION_ABORTABLE (KIP-890, InitProducerIdRequest.json), for transactions.
INIT_PRODUCER_ID_MAX_VERSION = 4
_NO_TIMEOUT = 2**62


class Sender(threading.Thread):
    """The background thread that moves batches from the accumulator to the brokers."""

    def __init__(
        self,
        client: Any,
        metadata: Any,
        accumulator: Any,
        *,
        acks: int,
        retries: int,
        max_request_size: int,
        request_timeout_ms: int,
        delivery_timeout_ms: int,
        retry_backoff_ms: int,
        retry_backoff_max_ms: int,
        guarantee_message_order: bool,
        transaction_manager: TransactionManager | None,
        metrics: ProducerMetrics,
        client_id: str,
        clock: Time = SYSTEM_CLOCK,
        record_queue: RecordQueue | None = None,
    ) -> None:
        super().__init__(name=f"samsa-producer-network-thread | {client_id}", daemon=False)
        self.client = client
        # send()'s queued records: appended here when no sending thread did it meanwhile.
        self.record_queue = record_queue
        self.metadata = metadata
        self.accumulator = accumulator
        self.acks = acks
        self.retries = retries
        self.max_request_size = max_request_size
        self.request_timeout_ms = request_timeout_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self.guarantee_message_order = guarantee_message_order
        self.transaction_manager = transaction_manager
        self.metrics = metrics
        self._clock = clock
        self._running = True
        self._forced = False
        # Batches sent and not yet answered, per partition, oldest first (for expiry).
        self._in_flight_batches: dict[TopicPartition, list[ProducerBatch]] = {}
        # Until then no batch can reach delivery.timeout.ms: _expire_batches skips its scans.
        self._next_expiry_scan_ms = 0
        self._init_pid_in_flight = False
        self._init_pid_attempts = 0
        self._init_pid_next_ms = 0
        self._view: ClusterView | None = None
        self.fatal_error: BaseException | None = None
        self._authentication_failures_seen = 0
        self._transactional = transaction_manager is not None and transaction_manager.is_transactional()
        self._transactional_id = transaction_manager.transactional_id if transaction_manager is not None else None
        self._txn_retry_at_ms = 0
        self._max_produce_version = MAX_TRANSACTIONAL_PRODUCE_VERSION if self._transactional else MAX_PRODUCE_VERSION

    # --- life cycle -------------------------------------------------------------------

    def run(self) -> None:
        log.debug("Starting the producer's Sender thread")
        while self._running:
            self._run_once_safely()
        # Graceful close: send what is queued and wait for answers, unless forced.
        while not self._forced and self._has_pending_work():
            self._run_once_safely()
        # A transaction still open is aborted (Java's Sender.run); close()'s timeout bounds it.
        tm = self.transaction_manager
        while not self._forced and self._transactional and tm is not None and tm.has_ongoing_transaction():
            if not tm.is_completing():
                log.info("Aborting the open transaction of %r: the producer is closing", tm.transactional_id)
                try:
                    tm.begin_abort()
                except Exception:
                    log.exception("Could not abort the open transaction while closing")
                    self._forced = True
                    break
            self._run_once_safely()
        if self._forced:
            if self._transactional and tm is not None:
                tm.close()
            self._abort_everything(ProducerClosedError(
                "the producer was closed before these records were sent or acknowledged "
                "(close() timed out or was called with timeout 0); nothing more will be retried"
            ))
        if self.record_queue is not None:
            # Records queued by a send() that raced close(): the accumulator is closed, so
            # appending fails them with ProducerClosedError.
            self.record_queue.drain(False)
        try:
            self.client.close()
        except Exception:
            log.exception("Error closing the producer's network client")
        log.debug("The producer's Sender thread has stopped")

    def _has_pending_work(self) -> bool:
        return bool(self.accumulator.has_undrained() or self._in_flight_batches or self.client.in_flight_request_count()
                    or (self._transactional and self.transaction_manager is not None
                        and self.transaction_manager.has_pending_requests()
                        and self.transaction_manager.has_ongoing_transaction()))

    def _run_once_safely(self) -> None:
        try:
            self.run_once()
        except Exception:
            # One bad iteration must not kill the thread that completes every future; pause
            # briefly so that a persistent fault does not spin.
            log.exception("Uncaught error in the producer's Sender thread; continuing")
            time.sleep(0.01)

    def initiate_close(self) -> None:
        """Stop accepting new work; send what is queued, then stop."""
        queue = self.record_queue
        if queue is not None:
            # send()'s records go into batches first (a producer dropped without close() ends
            # here, from its finalizer): without waiting for memory; the rest fail at the end.
            queue.open = False
            queue.drain(False)
        self.accumulator.close()
        self._running = False
        self.wakeup()

    def force_close(self) -> None:
        """Stop now; fail everything not yet acknowledged."""
        self._forced = True
        self.initiate_close()

    def wakeup(self) -> None:
        self.client.wakeup()

    @property
    def is_running(self) -> bool:
        return self._running

    # --- one iteration ----------------------------------------------------------------

    def run_once(self) -> None:
        queue = self.record_queue
        if queue is not None and len(queue):
            queue.drain(False)  # never blocks: records without buffer memory stay queued
        now = self._clock.milliseconds()
        if self.fatal_error is not None:
            # As Java's Sender.runOnce once the TransactionManager holds a fatal error: every
            # batch appended since (a send() racing the failure) fails with it; nothing is sent.
            self._abort_everything(self.fatal_error)
            self.client.poll(self.retry_backoff_ms or 1, now)
            return
        if self.client.authentication_failures != self._authentication_failures_seen:
            self._authentication_failed()
        can_send = True
        tm = self.transaction_manager
        if self._transactional and tm is not None:
            if tm.has_fatal_error():
                # As Java's Sender.runOnce: fail every batch, send nothing more.
                if self.accumulator.has_incomplete() or self._in_flight_batches:
                    self._abort_everything(tm.last_error or ProducerClosedError("the producer failed"))
                self.client.poll(self.retry_backoff_ms or 1, now)
                return
            if self._maybe_send_and_poll_transactional_request(now):
                return
        elif tm is not None and tm.needs_init_producer_id():
            can_send = False
            self._maybe_init_producer_id(now)
        poll_timeout = self.send_producer_data(now, can_send)
        if self._txn_retry_at_ms:
            poll_timeout = max(0, min(poll_timeout, self._txn_retry_at_ms - now))
            self._txn_retry_at_ms = 0
        if self._transactional and not self._running:
            # Closing: the abort loop in run() must look at the transaction again soon (an
            # empty transaction completes without any answer to wake this poll).
            poll_timeout = min(poll_timeout, self.retry_backoff_ms or 1)
        if not can_send:
            # Waiting for a producer id: wake for the next InitProducerId attempt if one is
            # due later; an attempt that is connecting or in flight wakes the poll itself when
            # it moves on (a timeout of 0 here would spin until the broker answers).
            poll_timeout = min(poll_timeout, self.retry_backoff_ms or 1)
            until_next_attempt = self._init_pid_next_ms - now
            if until_next_attempt > 0:
                poll_timeout = min(poll_timeout, until_next_attempt)
        if queue is not None:
            # Flag first, then look: a record queued after the look finds the flag and wakes
            # this poll; one queued before it makes the poll short.
            queue.sender_sleeps_long = True
            if len(queue):
                poll_timeout = min(poll_timeout, queue.max_wait_ms)
            queue.sender_sleeps_long = poll_timeout > queue.max_wait_ms
        self.client.poll(poll_timeout, now)

    def send_producer_data(self, now: int, can_send: bool = True) -> int:
        """Drain ready batches into produce requests; returns how long poll() may block (ms)."""
        accumulator = self.accumulator
        cluster = self.metadata.fetch()
        view = self._view
        if view is None or view.cluster is not cluster:
            view = self._view = ClusterView(cluster)
        result = accumulator.ready(view, now)
        if result.unknown_leader_topics:
            for topic in result.unknown_leader_topics:
                self.metadata.add(topic, now)
            log.debug("Requesting metadata update for topics with unknown leaders: %s", result.unknown_leader_topics)
            self.metadata.request_update()

        ready_nodes = set()
        not_ready_timeout: float = _NO_TIMEOUT
        if can_send:
            client = self.client
            for node_id in result.ready_nodes:
                node = cluster.node_by_id(node_id)
                if node is None:
                    continue
                if client.ready(node, now):
                    ready_nodes.add(node_id)
                    accumulator.update_node_latency_stats(node_id, now, True)
                else:
                    # The partitioner's availability timeout counts from here.
                    accumulator.update_node_latency_stats(node_id, now, False)
                    not_ready_timeout = min(not_ready_timeout, client.connection_delay(node, now))

        batches: Mapping[int, list[ProducerBatch]] = (
            accumulator.drain(view, ready_nodes, self.max_request_size, now) if ready_nodes else {}
        )
        # (drain() stamped producer id, epoch and sequence on the batches when idempotent.)
        in_flight = self._in_flight_batches
        order = self.guarantee_message_order
        for node_batches in batches.values():
            for batch in node_batches:
                tp = batch.topic_partition
                same_partition = in_flight.get(tp)
                if same_partition is None:
                    in_flight[tp] = [batch]
                else:
                    same_partition.append(batch)
                if order:
                    accumulator.mute_partition(tp)

        self._expire_batches(now)

        poll_timeout = min(result.next_ready_check_delay_ms, not_ready_timeout)
        next_expiry = accumulator.next_expiry_time_ms()
        if next_expiry is not None:
            # Wake for the next scan too: batches created since the last one may be due then.
            poll_timeout = min(poll_timeout, max(0, next_expiry - now), max(0, self._next_expiry_scan_ms - now))
        if ready_nodes:
            # More may be ready right away; do not block in poll().
            poll_timeout = 0
        for node, node_batches in batches.items():
            if node_batches:
                self._send_produce_request(node, node_batches, now)
        return int(max(0, min(poll_timeout, _NO_TIMEOUT)))

    # --- expiry ---------------------------------------------------------------------

    def _expire_batches(self, now: int) -> None:
        if now < self._next_expiry_scan_ms:
            return
        accumulator = self.accumulator
        accumulator.reset_next_batch_expiry_time()
        expired_in_flight = self._expired_in_flight_batches(now)
        expired = accumulator.expired_batches(now)
        # The scans saw every batch's deadline (a queue's head has the oldest); a batch created
        # after them has a deadline after now + delivery.timeout.ms.  Until the earlier of the
        # two, another scan would find nothing: the loop runs every request, the scans cost
        # a lock per partition.
        next_expiry = accumulator.next_expiry_time_ms()  # (None: unknown, scan every time)
        self._next_expiry_scan_ms = 0 if next_expiry is None else min(next_expiry, now + self.delivery_timeout_ms)
        for batch in expired_in_flight:
            self._fail_batch(batch, self._delivery_timeout_error(batch, now, in_flight=True), maybe_written=True)
        for batch in expired:
            # A batch expired in the queue may still have been sent before (a retry).
            self._fail_batch(batch, self._delivery_timeout_error(batch, now, in_flight=False),
                             maybe_written=batch.attempts > 0)

    def _expired_in_flight_batches(self, now: int) -> list[ProducerBatch]:
        expired: list[ProducerBatch] = []
        timeout = self.delivery_timeout_ms
        accumulator = self.accumulator
        for batches in self._in_flight_batches.values():
            for batch in batches:
                if batch.is_done():
                    continue
                if batch.has_reached_delivery_timeout(now, timeout):
                    expired.append(batch)
                else:
                    # As Java's Sender.getExpiredInflightBatches: the Sender's poll must wake at
                    # an in-flight batch's delivery deadline too, not only at queued ones'.
                    accumulator.maybe_update_next_batch_expiry_time(batch)
        return expired

    def _delivery_timeout_error(self, batch: ProducerBatch, now: int, in_flight: bool) -> KafkaTimeoutError:
        elapsed = now - batch.created_ms
        where = "the request was sent but the broker has not answered" if in_flight else (
            "the batch was never sent" if batch.attempts == 0 else f"the batch was retried {batch.attempts} time(s)"
        )
        leader = self._leader_text(batch.topic_partition)
        return KafkaTimeoutError(
            f"{batch.record_count} record(s) for {batch.topic_partition} to be delivered: {elapsed} ms have "
            f"passed since the batch was created ({where}; delivery.timeout.ms={self.delivery_timeout_ms}); "
            f"check that the partition's leader ({leader}) is reachable and that the topic exists, "
            "or raise delivery.timeout.ms",
            self.delivery_timeout_ms,
        )

    def _leader_text(self, tp: TopicPartition) -> str:
        leader = self.metadata.fetch().leader_for(tp)
        if leader is None:
            return "unknown"
        return f"broker {leader.id} at {leader.host}:{leader.port}"

    # --- produce requests -----------------------------------------------------------

    def _send_produce_request(self, node: int, batches: list[ProducerBatch], now: int) -> None:
        by_topic: dict[str, list[Any]] = {}
        records_by_partition: dict[TopicPartition, ProducerBatch] = {}
        size = 0
        partition_data = ProduceRequest.PartitionProduceData
        for batch in batches:
            data = batch.records()
            size += len(data)
            tp = batch.topic_partition
            records_by_partition[tp] = batch
            topic_batches = by_topic.get(batch.topic)
            if topic_batches is None:
                topic_batches = by_topic[batch.topic] = []
            topic_batches.append(partition_data(index=batch.partition, records=data))
        request = ProduceRequest(
            transactional_id=self._transactional_id,
            acks=self.acks,
            timeout_ms=self.request_timeout_ms,
            topic_data=[ProduceRequest.TopicProduceData(name=t, partition_data=p) for t, p in by_topic.items()],
        )
        self.metrics.record_request(len(batches), size)

        def on_response(response: Any) -> None:
            self._handle_produce_response(response, records_by_partition, node)

        log.debug("Sending produce request to node %s with %d batch(es)", node, len(batches))
        self.client.send(
            ClientRequest(
                node,
                request,
                expect_response=self.acks != 0,
                callback=on_response,
                created_ms=now,
                min_version=MIN_PRODUCE_VERSION,
                max_version=self._max_produce_version,
            ),
            now,
        )

    def _handle_produce_response(
        self, response: Any, batches: Mapping[TopicPartition, ProducerBatch], node: int
    ) -> None:
        now = self._clock.milliseconds()
        self.metrics.record_response(response.latency_ms)
        if response.disconnected:
            what = "did not answer within request.timeout.ms" if response.timed_out else (
                "was disconnected before it answered")
            error: KafkaError = NetworkError(
                f"node {node} {what} a produce request with {len(batches)} batch(es)"
                f"{': ' + str(response.error) if response.error is not None else ''}"
            )
            for batch in batches.values():
                self._complete_batch(batch, error, -1, -1, None, now)
            return
        failure = response.error
        if failure is not None:  # e.g. request timeout or unsupported version, set by the client
            for batch in batches.values():
                self._complete_batch(batch, failure, -1, -1, None, now)
            return
        body = response.body
        if body is None:
            # acks=0: no response; the records count as sent, with unknown offsets.
            for batch in batches.values():
                self._complete_batch(batch, None, -1, -1, None, now)
            return
        seen: set[tuple[str, int]] = set()
        by_tp: Mapping[Any, ProducerBatch] = batches  # looked up by plain (topic, partition)
        accumulator = self.accumulator
        tm = self.transaction_manager
        succeeded = 0  # records, counted in the metrics once per response
        released = False  # memory given back: a thread waiting for it is woken once
        try:
            for topic_response in body.responses:
                topic = topic_response.name
                for part in topic_response.partition_responses:
                    key = (topic, part.index)  # finds the TopicPartition key (equal hash and ==)
                    found = by_tp.get(key)
                    if found is None:
                        log.warning("Produce response from node %s names %s, which was not in the request",
                                    node, TopicPartition(*key))
                        continue
                    batch = found
                    seen.add(key)
                    if not part.error_code:
                        # _complete_batch and _succeed_batch for a success, inline: every batch
                        # of every request comes this way.
                        self._remove_in_flight(batch)
                        try:
                            if batch.complete(part.base_offset, part.log_append_time_ms):
                                succeeded += batch.record_count
                                if tm is not None:
                                    tm.handle_completed_batch(batch)
                                accumulator.deallocate(batch, False)
                                released = True
                        finally:
                            if self.guarantee_message_order:
                                accumulator.unmute_partition(batch.topic_partition)
                        continue
                    self._complete_failed_partition(batch, part, now)
        finally:
            if released:
                accumulator.wake_memory_waiter()
            if succeeded:
                self.metrics.record_success(succeeded)
        if len(seen) < len(batches):
            for tp, batch in batches.items():
                if tp not in seen:
                    self._complete_batch(batch, NetworkError(
                        f"node {node} answered a produce request without a result for {tp}"), -1, -1, None, now)

    def _complete_failed_partition(self, batch: ProducerBatch, part: Any, now: int) -> None:
        """A partition's error in a ProduceResponse: the error (per record too, KIP-467) to
        _complete_batch."""
        tp = batch.topic_partition
        cls = for_code(part.error_code)
        message = part.error_message
        err = cls(f"{message} ({tp})" if message else f"{cls.message} ({tp})")
        record_errors: dict[int, BaseException] | None = None
        if part.record_errors:
            record_errors = {
                e.batch_index: cls(e.batch_index_error_message or f"{cls.message} ({tp})")
                for e in part.record_errors
            }
        self._complete_batch(batch, err, part.base_offset, part.log_append_time_ms, record_errors, now)

    def _complete_batch(
        self,
        batch: ProducerBatch,
        error: BaseException | None,
        base_offset: int,
        log_append_time: int,
        record_errors: dict[int, BaseException] | None,
        now: int,
    ) -> None:
        tp = batch.topic_partition
        self._remove_in_flight(batch)
        if error is None:  # the common case, without the error checks below
            try:
                self._succeed_batch(batch, base_offset, log_append_time)
            finally:
                if self.guarantee_message_order:
                    self.accumulator.unmute_partition(tp)
            return
        tm = self.transaction_manager
        try:
            if isinstance(error, DuplicateSequenceNumberError):
                log.debug("Duplicate sequence for %s: the broker already has this batch", tp)
                self._succeed_batch(batch, base_offset, log_append_time)
            elif isinstance(error, MessageTooLargeError) and batch.record_count > 1 and not batch.is_done():
                log.warning(
                    "Splitting a batch of %d records for %s after MESSAGE_TOO_LARGE and retrying",
                    batch.record_count, tp,
                )
                if tm is not None:
                    tm.remove_in_flight_batch(batch)  # its records get the split batches' sequences
                self.accumulator.split_and_reenqueue(batch)
                self.accumulator.deallocate(batch)
                self.metrics.batch_splits += 1
            elif self._can_retry(batch, error, now):
                log.warning(
                    "Got error %s for %s (attempt %d); retrying, %d ms before delivery.timeout.ms runs out",
                    error, tp, batch.attempts + 1, self.delivery_timeout_ms - (now - batch.created_ms),
                )
                # Idempotent: the batch stays "in flight" for the manager and keeps its sequence.
                self.accumulator.reenqueue(batch, now)
                self.metrics.record_retry(batch.record_count)
            else:
                if isinstance(error, InvalidRecordError) and record_errors:
                    other = InvalidRecordError(
                        f"record not written because another record of its batch for {tp} was invalid"
                    )
                    record_errors = {i: record_errors.get(i, other) for i in range(batch.record_count)}
                self._fail_batch(batch, error, maybe_written=_maybe_written(error), record_errors=record_errors)
            if isinstance(error, BrokerResponseError) and error.invalid_metadata:
                if isinstance(error, UnknownTopicOrPartitionError):
                    log.warning("%s: topic or partition unknown to the broker; refreshing metadata", tp)
                self.metadata.request_update()
        finally:
            if self.guarantee_message_order:
                self.accumulator.unmute_partition(tp)

    def _can_retry(self, batch: ProducerBatch, error: BaseException, now: int) -> bool:
        if batch.is_done() or batch.attempts >= self.retries:
            return False
        if batch.has_reached_delivery_timeout(now, self.delivery_timeout_ms):
            return False
        tm = self.transaction_manager
        if tm is not None and tm.can_retry(batch, error):
            return True
        return bool(getattr(error, "retriable", False))

    def _succeed_batch(self, batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        if batch.complete(base_offset, log_append_time):
            self.metrics.record_success(batch.record_count)
            if self.transaction_manager is not None:
                self.transaction_manager.handle_completed_batch(batch)
            self.accumulator.deallocate(batch)

    def _fail_batch(
        self,
        batch: ProducerBatch,
        error: BaseException,
        maybe_written: bool,
        record_errors: Mapping[int, BaseException] | None = None,
    ) -> None:
        self._remove_in_flight(batch)
        if self.transaction_manager is not None:
            self.transaction_manager.handle_failed_batch(batch, error, maybe_written)
        if batch.complete_exceptionally(error, record_errors):
            log.debug("Failed %r: %s", batch, error)
            self.metrics.record_error(batch.record_count, error)
            if isinstance(error, KafkaTimeoutError):
                self.metrics.expired_records += batch.record_count
            self.accumulator.deallocate(batch)

    def _remove_in_flight(self, batch: ProducerBatch) -> None:
        tp = batch.topic_partition
        batches = self._in_flight_batches.get(tp)
        if batches is not None:
            if batches[0] is batch:  # answers come oldest first
                del batches[0]
            else:
                try:
                    batches.remove(batch)
                except ValueError:
                    pass
            if not batches:
                del self._in_flight_batches[tp]

    def _abort_everything(self, error: BaseException) -> None:
        for batches in list(self._in_flight_batches.values()):
            for batch in list(batches):
                self._fail_batch(batch, error, maybe_written=True)
        self._in_flight_batches.clear()
        self.accumulator.abort_incomplete_batches(error)

    # --- transactions ------------------------------------------------------------------

    def _maybe_send_and_poll_transactional_request(self, now: int) -> bool:
        """Send the transaction manager's next request, one at a time (Java's
        Sender.maybeSendAndPollTransactionalRequest); True when this loop is done (a request
        is in flight or was sent, or one waits for its node), False to go on to produce data."""
        tm = self.transaction_manager
        assert tm is not None
        client = self.client
        if tm.has_in_flight_request():
            client.poll(self.retry_backoff_ms or 1, now)
            return True
        if tm.has_abortable_error():
            self.accumulator.abort_undrained_batches(tm.last_error)
        elif tm.is_aborting():
            self.accumulator.abort_undrained_batches(TransactionAbortedError(
                f"the transaction of {tm.transactional_id!r} was aborted before this record was sent; "
                "it was not written"))
        handler = tm.next_request(self.accumulator.has_incomplete())
        if handler is None:
            return False
        if handler.not_before_ms > now:
            tm.requeue(handler)  # backing off; produce data meanwhile, wake in time for it
            self._txn_retry_at_ms = handler.not_before_ms
            return False
        kind = handler.coordinator_type
        node = tm.coordinator(kind) if kind is not None else client.least_loaded_node(now)
        if node is None:
            if kind is not None:
                tm.lookup_coordinator(kind, handler.coordinator_key)
                tm.requeue(handler)
                return True  # the FindCoordinator goes out next loop
            self.metadata.request_update()
            tm.retry(handler)
            client.poll(self.retry_backoff_ms or 1, now)
            return True
        if not client.ready(node, now):
            if kind is not None and client.connection_failed(node):
                # As Java's awaitNodeReady failing: the coordinator may have moved.
                tm.lookup_coordinator(kind, handler.coordinator_key)
                tm.retry(handler)
            else:
                tm.requeue(handler)
            client.poll(self.retry_backoff_ms or 1, now)
            return True
        if kind is CoordinatorType.TRANSACTION:
            tm.handle_coordinator_ready(client.api_versions(node.id))
        try:
            version = client.pick_version(node, handler.api_key, handler.min_version, handler.max_version)
        except UnsupportedVersionError as e:
            handler.fatal(UnsupportedVersionError(
                f"broker {node.id} does not support {handler.describe()}, which transactions need: {e}"))
            return True
        request = handler.build(version)
        tm.set_in_flight(handler)
        log.debug("Sending transactional request %s (v%d) to node %s", handler.describe(), version, node.id)
        client.send(
            ClientRequest(node, request, callback=lambda response: tm.handle_response(handler, response),
                          created_ms=now, min_version=version, max_version=version),
            now,
        )
        client.poll(self.retry_backoff_ms or 1, now)
        return True

    # --- idempotence: InitProducerId -------------------------------------------------

    def _maybe_init_producer_id(self, now: int) -> None:
        tm = self.transaction_manager
        assert tm is not None
        if self._init_pid_in_flight or now < self._init_pid_next_ms:
            return
        if tm.epoch_bump_required:
            if self._in_flight_batches or self.client.in_flight_request_count():
                return  # wait until no batch of the old epoch is in flight
            # An idempotent producer bumps its epoch itself (Java's Sender.runOnce calls
            # bumpIdempotentEpochAndResetIdIfNeeded); a fresh id only once the epoch runs out.
            tm.bump_idempotent_epoch_and_reset_id_if_needed()
            self.metrics.epoch_bumps = tm.epoch_bumps
            if tm.has_producer_id():
                return
        client = self.client
        node = client.least_loaded_node(now)
        if node is None:
            self.metadata.request_update()
            self._backoff_init_producer_id(now)
            return
        if not client.ready(node, now):
            return  # connecting; poll() runs and we come back
        try:
            version = client.pick_version(node, ApiKey.INIT_PRODUCER_ID, 0,
                                          INIT_PRODUCER_ID_MAX_VERSION)
        except UnsupportedVersionError:
            # The broker cannot do idempotence: fail loudly instead of sending unsequenced batches.
            self._fatal(UnsupportedVersionError(
                f"broker {node} does not support InitProducerId, which the idempotent producer needs; "
                "set enable.idempotence=false to produce to it"
            ))
            return
        request = tm.init_producer_id_request()
        self._init_pid_in_flight = True
        log.debug("Sending InitProducerId (v%d) to node %s: %s", version, node, request)
        client.send(
            ClientRequest(node, request, callback=self._handle_init_producer_id, created_ms=now,
                          min_version=version, max_version=version),
            now,
        )

    def _handle_init_producer_id(self, response: Any) -> None:
        tm = self.transaction_manager
        assert tm is not None
        self._init_pid_in_flight = False
        now = self._clock.milliseconds()
        body = response.body
        if response.disconnected or response.error is not None or body is None:
            log.info("InitProducerId failed (%s); retrying", response.error or "disconnected")
            self._backoff_init_producer_id(now)
            return
        if body.error_code:
            error = for_code(body.error_code)()
            if error.retriable:
                log.info("InitProducerId returned %s; retrying", error)
                if error.invalid_metadata:
                    self.metadata.request_update()
                self._backoff_init_producer_id(now)
                return
            if isinstance(error, ClusterAuthorizationFailedError):
                # Java's Sender.shouldHandleAuthorizationError: an idempotent producer fails
                # what waits for the id and goes back to uninitialized, so that it can try again
                # once an operator grants IDEMPOTENT_WRITE (or WRITE, KIP-679).
                log.error("InitProducerId refused: %s", error)
                self._abort_everything(error)
                self._backoff_init_producer_id(now)
                return
            self._fatal(error)
            return
        self._init_pid_attempts = 0
        tm.handle_init_producer_id(body.producer_id, body.producer_epoch)

    def _backoff_init_producer_id(self, now: int) -> None:
        self._init_pid_attempts += 1
        backoff = min(self.retry_backoff_max_ms, self.retry_backoff_ms * 2 ** min(self._init_pid_attempts - 1, 20))
        self._init_pid_next_ms = now + backoff

    def _authentication_failed(self) -> None:
        """A connection failed to authenticate (TLS or SASL): fail every batch not yet
        acknowledged with that error rather than let them wait out delivery.timeout.ms on
        reconnects that fail the same way (Java fails the calls waiting on the cluster with an
        AuthenticationException).  Not fatal: the producer works again once a connection
        authenticates, and send() raises the error meanwhile (Metadata holds it)."""
        self._authentication_failures_seen = self.client.authentication_failures
        error = self.client.last_authentication_error
        if error is not None:
            log.error("Failing the records not yet sent: %s", error)
            self._abort_everything(error)

    def _fatal(self, error: BaseException) -> None:
        """A producer-wide unrecoverable error (Java's TransactionManager.fatalError): fail
        everything queued; later sends raise it (KafkaProducer.send checks it) and nothing more
        is sent."""
        log.error("Fatal producer error: %s", error)
        self.fatal_error = error
        if self.record_queue is not None:
            self.record_queue.open = False  # send() takes the direct path, which raises it
        self._abort_everything(error)


def _maybe_written(error: BaseException) -> bool:
    """Could the broker have appended the batch although we saw an error?"""
    return isinstance(error, (NetworkError, RequestTimedOutError, KafkaTimeoutError, KafkaConnectionError))

