"""Writing a transaction's markers, on the coordinator's own thread.

Once PREPARE_COMMIT/PREPARE_ABORT is durable the client is answered at once; this thread then
writes one COMMIT/ABORT control batch per partition of the transaction and hands the
transaction back to the coordinator, which writes COMPLETE_COMMIT/COMPLETE_ABORT (Kafka's
TransactionMarkerChannelManager, with the local broker as every partition's leader):

* data partitions: ``Log.append_control_marker``, then parked fetches of that partition are
  woken (a read_committed long poll waits for the LSO to move);
* ``__consumer_offsets`` partitions (added by AddOffsetsToTxn): the group coordinator's
  ``complete_transaction``, which writes the marker there and makes the producer's pending
  offsets committed or drops them;
* partitions of deleted topics are dropped (Kafka drops partitions whose leader is unknown).

A partition whose write fails for another reason (a storage error) is retried after a pause,
until it succeeds or the coordinator closes; a transaction left in PREPARE_* by a close is
completed when the broker next starts.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from samsa.broker.log import LogManager
from samsa.broker.txn.state import TopicPartition, TxnTransit
from samsa.errors import (
    InvalidProducerEpochError,
    KafkaError,
    TransactionCoordinatorFencedError,
    UnknownTopicOrPartitionError,
)

log = logging.getLogger(__name__)

GROUP_METADATA_TOPIC = "__consumer_offsets"
RETRY_BACKOFF_S = 0.1
# Test-only hook for the crash tests (tests/broker/txn/test_crash_mid_transaction.py): with
# SAMSA_TEST_STALL_MARKERS_AFTER=N in the environment the marker thread stops for good after
# writing N markers in this process, leaving a transaction in PREPARE_* with some of its
# partitions marked and others not -- the state a crash between two marker writes leaves --
# so that a test can SIGKILL the broker exactly there.  Unset (always, outside tests) it does
# nothing.
STALL_AFTER_ENV = "SAMSA_TEST_STALL_MARKERS_AFTER"


class GroupTransactions(Protocol):
    """What the group coordinator offers transactions (samsa/broker/group/coordinator.py)."""

    def partition_for(self, group_id: str) -> int: ...

    def complete_transaction(self, partition: int, producer_id: int, producer_epoch: int,
                             commit: bool, coordinator_epoch: int) -> None: ...


@dataclass(frozen=True, slots=True)
class MarkerJob:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: frozenset[TopicPartition]
    complete: TxnTransit  # the COMPLETE_* transition to write once every marker is in


class MarkerWriter:
    def __init__(self, logs: LogManager, groups: GroupTransactions,
                 on_marker: Callable[[str, int], object] | None,
                 on_done: Callable[[MarkerJob], None]) -> None:
        self._logs = logs
        self._groups = groups
        self._on_marker = on_marker
        self._on_done = on_done
        self._queue: queue.Queue[MarkerJob | None] = queue.Queue()
        self._closed = threading.Event()
        stall_after = os.environ.get(STALL_AFTER_ENV)
        self._stall_after = None if stall_after is None else int(stall_after)
        self._written = 0
        self._thread = threading.Thread(target=self._run, name="txn-markers", daemon=True)
        self._thread.start()

    def submit(self, job: MarkerJob) -> None:
        self._queue.put(job)

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None or self._closed.is_set():
                return
            try:
                self._write(job)
                if not self._closed.is_set():
                    self._on_done(job)
            except Exception:  # one transaction must not stop the others
                log.exception("writing the markers of transactional id %r failed",
                              job.transactional_id)

    def _write(self, job: MarkerJob) -> None:
        remaining = sorted(job.partitions)
        while remaining and not self._closed.is_set():
            failed: list[TopicPartition] = []
            for tp in remaining:
                if self._stall_after is not None and self._written >= self._stall_after:
                    log.warning("%s=%d: the marker thread stops before %s-%d",
                                STALL_AFTER_ENV, self._stall_after, *tp)
                    self._closed.wait()
                    return
                if self._write_one(job, tp):
                    self._written += 1
                else:
                    failed.append(tp)
            remaining = failed
            if remaining:
                self._closed.wait(RETRY_BACKOFF_S)

    def _write_one(self, job: MarkerJob, tp: TopicPartition) -> bool:
        """Write the marker of one partition; False to retry it later."""
        topic, partition = tp
        try:
            if topic == GROUP_METADATA_TOPIC:
                self._groups.complete_transaction(partition, job.producer_id, job.producer_epoch,
                                                  job.commit, job.coordinator_epoch)
            else:
                plog = self._logs.get_log(topic, partition)
                plog.append_control_marker(
                    producer_id=job.producer_id, producer_epoch=job.producer_epoch,
                    commit=job.commit, coordinator_epoch=job.coordinator_epoch,
                    leader_epoch=max(plog.latest_epoch, 0), now_ms=time.time_ns() // 1_000_000)
        except UnknownTopicOrPartitionError:
            log.info("transactional id %r: %s-%d no longer exists; no marker written there",
                     job.transactional_id, topic, partition)
            return True
        except (InvalidProducerEpochError, TransactionCoordinatorFencedError) as exc:
            # A newer epoch or coordinator already wrote there (Kafka stops sending then).
            log.warning("transactional id %r: marker for %s-%d refused: %s",
                        job.transactional_id, topic, partition, exc)
            return True
        except (KafkaError, OSError, ValueError) as exc:
            if self._closed.is_set():
                return False
            log.warning("transactional id %r: marker for %s-%d failed (%s); retrying",
                        job.transactional_id, topic, partition, exc)
            return False
        if self._on_marker is not None:
            self._on_marker(topic, partition)
        return True

    def close(self, timeout_s: float = 10.0) -> None:
        """Finish the transactions queued so far (bounded by ``timeout_s``), then stop."""
        self._queue.put(None)
        self._thread.join(timeout_s)
        self._closed.set()
        self._thread.join(1.0)
