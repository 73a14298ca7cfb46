"""Producer metrics: a few counters the Sender updates per batch and per request.

Nothing here is touched per record on the send() path; records are counted when their batch
completes.  ``snapshot()`` turns the counters into the dict ``KafkaProducer.metrics()`` returns,
with Java's metric names where one exists (record-send-rate, batch-size-avg,
request-latency-avg, record-retry-total, record-error-total, buffer-available-bytes, ...).
"""

from __future__ import annotations

import threading
from typing import Any

from samsa.net.clock import SYSTEM_CLOCK, Time

__all__ = ["ProducerMetrics"]


class ProducerMetrics:
    """Totals since the producer started; rates are over the producer's lifetime and over
    the time since the previous ``snapshot()``."""

    def __init__(self, clock: Time = SYSTEM_CLOCK) -> None:
        self._lock = threading.Lock()
        self._monotonic = clock.monotonic
        self.started = clock.monotonic()
        self._last_snapshot = self.started
        self._last_records = 0
        self.records_sent = 0
        self.bytes_sent = 0
        self.batches_sent = 0
        self.requests_sent = 0
        self.responses_received = 0
        self.request_latency_total_ms = 0.0
        self.request_latency_max_ms = 0.0
        self.record_retries = 0
        self.record_errors = 0
        self.batch_splits = 0
        self.expired_records = 0
        self.epoch_bumps = 0
        self.metadata_waits = 0
        # The error of the latest failed batch (KafkaProducer.last_error()).
        self.last_error: BaseException | None = None

    def record_request(self, batches: int, size: int) -> None:
        with self._lock:
            self.requests_sent += 1
            self.batches_sent += batches
            self.bytes_sent += size

    def record_response(self, latency_ms: float) -> None:
        with self._lock:
            self.responses_received += 1
            self.request_latency_total_ms += latency_ms
            self.request_latency_max_ms = max(self.request_latency_max_ms, latency_ms)

    def record_success(self, records: int) -> None:
        with self._lock:
            self.records_sent += records

    def record_retry(self, records: int) -> None:
        with self._lock:
            self.record_retries += records

    def record_error(self, records: int, error: BaseException | None = None) -> None:
        with self._lock:
            self.record_errors += records
            if error is not None:
                self.last_error = error

    def snapshot(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        now = self._monotonic()
        with self._lock:
            elapsed = max(now - self.started, 1e-9)
            window = max(now - self._last_snapshot, 1e-9)
            window_records = self.records_sent - self._last_records
            self._last_snapshot = now
            self._last_records = self.records_sent
            responses = self.responses_received
            out: dict[str, Any] = {
                "record-send-total": self.records_sent,
                "record-send-rate": self.records_sent / elapsed,
                "record-send-rate-recent": window_records / window,
                "byte-total": self.bytes_sent,
                "byte-rate": self.bytes_sent / elapsed,
                "batch-total": self.batches_sent,
                "batch-size-avg": self.bytes_sent / self.batches_sent if self.batches_sent else 0.0,
                "records-per-batch-avg": self.records_sent / self.batches_sent if self.batches_sent else 0.0,
                "request-total": self.requests_sent,
                "response-total": responses,
                "request-latency-avg": self.request_latency_total_ms / responses if responses else 0.0,
                "request-latency-max": self.request_latency_max_ms,
                "record-retry-total": self.record_retries,
                "record-error-total": self.record_errors,
                "batch-split-total": self.batch_splits,
                "record-expired-total": self.expired_records,
                "producer-epoch-bump-total": self.epoch_bumps,
                "uptime-seconds": elapsed,
            }
        if extra:
            out.update(extra)
        return out
