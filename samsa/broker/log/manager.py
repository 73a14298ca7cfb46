"""LogManager: every partition log of one data directory, topic metadata, checkpoints, housekeeping.

Data directory layout (Kafka's LogManager and UnifiedLog layout, plus one file of our own)::

    <data_dir>/.lock                              flock'ed while a broker uses the dir
    <data_dir>/.kafka_cleanshutdown               written by close(); present => files trusted
    <data_dir>/recovery-point-offset-checkpoint   topic partition offset (all below is fsynced)
    <data_dir>/log-start-offset-checkpoint        topic partition offset
    <data_dir>/topics.json                        Samsa's topic registry: ids, partition counts,
                                                  config overrides (Kafka keeps these in KRaft)
    <data_dir>/<topic>-<partition>/               one Log; partition.metadata holds the topic id

Housekeeping runs in ``tick(now_ms)``: call it periodically (the broker's own scheduler), or call
``start_background()`` once to have a daemon thread call it every second.
"""

from __future__ import annotations

import base64
import fcntl
import functools
import json
import logging
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from samsa.broker.config import BROKER_CONFIG
from samsa.broker.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from samsa.broker.log.cleaner_manager import LogCleaner
from samsa.broker.log.config import (
    LogConfig,
    resolve_broker_config,
    validate_topic_configs,
)
from samsa.broker.log.files import (
    DELETE_DIR_SUFFIX,
    STRAY_DIR_SUFFIX,
    atomic_write,
    fsync_dir,
    parse_partition_dir_name,
    partition_dir_name,
    set_aside_dir_name,
)
from samsa.broker.log.handle_cache import HandleCache
from samsa.broker.log.log import Log
from samsa.broker.log.storage_errors import EPISODES, storage_error
from samsa.errors import (
    InvalidPartitionsError,
    InvalidTopicError,
    KafkaStorageError,
    PolicyViolationError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

log = logging.getLogger(__name__)

__all__ = ["LogManager", "TopicInfo", "topic_id_from_str", "topic_id_to_str"]

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
TOPICS_FILE = "topics.json"
PARTITION_METADATA_FILE = "partition.metadata"
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
_MAX_TOPIC_LENGTH = 249


def topic_id_to_str(topic_id: uuid.UUID) -> str:
    """Kafka's text form of a Uuid: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def topic_id_from_str(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def _new_topic_id() -> uuid.UUID:
    # Kafka never hands out the zero/one ids (reserved) or ids whose text starts with '-'.
    while True:
        candidate = uuid.uuid4()
        if candidate.int > 1 and not topic_id_to_str(candidate).startswith("-"):
            return candidate


def validate_topic_name(name: str) -> None:
    """Kafka's rules: 1-249 chars of [a-zA-Z0-9._-], not '.' or '..'."""
    if not name or name in (".", ".."):
        raise InvalidTopicError(f"topic name {name!r} is not allowed")
    if len(name) > _MAX_TOPIC_LENGTH:
        raise InvalidTopicError(f"topic name is {len(name)} characters; the maximum is {_MAX_TOPIC_LENGTH}")
    if not _LEGAL_TOPIC.fullmatch(name):
        raise InvalidTopicError(
            f"topic name {name!r} may contain only ASCII letters, digits, '.', '_' and '-'"
        )


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)  # topic-level overrides only


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class LogManager:
    """Owns the data directory: opens (and recovers) every log at construction."""

    def __init__(self, data_dir: str | os.PathLike[str], config: Mapping[str, Any] | None = None,
                 *, now_ms: int | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config = resolve_broker_config(config)
        # Every segment of this broker opens its .log through one bounded cache (handle_cache.py).
        self.files = HandleCache(int(self._setting("samsa.log.open.files.max")))
        self._lock = threading.RLock()
        self._lock_fd = self._acquire_dir_lock()
        self._topics: dict[str, TopicInfo] = {}
        self._logs: dict[tuple[str, int], Log] = {}
        self._closed = False
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        now = _now_ms() if now_ms is None else now_ms
        self._next_retention_ms = now + int(self.config["log.retention.check.interval.ms"])
        self._next_checkpoint_ms = now + int(self.config["log.flush.offset.checkpoint.interval.ms"])
        self._next_expiry_ms = now + int(self.config["producer.id.expiration.check.interval.ms"])
        try:
            self._load(now)
            # Compaction of cleanup.policy=compact logs (cleaner_manager.py); its threads
            # start with start_background().
            self.cleaner = LogCleaner(self.data_dir, self.config, self.logs)
        except BaseException:
            for opened in self._logs.values():
                opened.abandon()
            os.close(self._lock_fd)
            raise

    def _setting(self, name: str) -> Any:
        """A broker setting the log settings do not resolve (BROKER_CONFIG's default if unset)."""
        value = self.config.get(name)
        return BROKER_CONFIG[name].default if value is None else value

    @property
    def max_partitions(self) -> int:
        """``max.broker.partitions`` (KIP-578's name): the most partitions this broker holds."""
        return int(self._setting("max.broker.partitions"))

    # -- startup ------------------------------------------------------------------------------

    def _acquire_dir_lock(self) -> int:
        fd = os.open(self.data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise KafkaStorageError(
                f"data directory {self.data_dir} is in use by another broker (its .lock is held); "
                "stop that broker or use another directory"
            ) from None
        return fd

    def _load(self, now_ms: int) -> None:
        marker = self.data_dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        self.had_clean_shutdown = clean
        self._topics = self._read_topics()
        recovery_points = read_offset_checkpoint(self.data_dir / RECOVERY_POINT_CHECKPOINT)
        log_starts = read_offset_checkpoint(self.data_dir / LOG_START_OFFSET_CHECKPOINT)
        for path in sorted(self.data_dir.iterdir()):
            if not path.is_dir():
                continue
            if path.name.endswith(DELETE_DIR_SUFFIX):
                shutil.rmtree(path, ignore_errors=True)  # a topic deletion interrupted by a crash
                continue
            parsed = parse_partition_dir_name(path.name)
            if parsed is None:
                continue
            topic, partition = parsed
            info = self._topics.get(topic)
            if info is None or partition >= info.partitions:
                # Left by a create or delete interrupted by a crash; keep it aside, unused.
                path.rename(path.with_name(set_aside_dir_name(topic, partition, STRAY_DIR_SUFFIX)))
        jobs: dict[tuple[str, int], Callable[[], Log]] = {}
        for info in self._topics.values():
            log_config = self._log_config(info)
            for partition in range(info.partitions):
                key = (info.name, partition)
                jobs[key] = functools.partial(
                    self._open_log, info, partition, log_config,
                    recovery_point=recovery_points.get(key, 0),
                    log_start_offset=log_starts.get(key, 0),
                    clean=clean, now_ms=now_ms,
                )
        opened, error = self._in_parallel(jobs)
        self._logs.update(opened)  # abandoned by __init__ if another failed
        if error is not None:
            raise error
        marker.unlink(missing_ok=True)
        self.checkpoint()

    def _in_parallel(self, jobs: Mapping[tuple[str, int], Callable[[], Any]]
                     ) -> tuple[dict[tuple[str, int], Any], BaseException | None]:
        """Run one job per partition on num.recovery.threads.per.data.dir threads, as Kafka's
        LogManager.loadLogs and shutdown do for each data directory (the one here); returns
        the results of those that succeeded and the first error."""
        threads = min(int(self._setting("num.recovery.threads.per.data.dir")), len(jobs))
        results: dict[tuple[str, int], Any] = {}
        error: BaseException | None = None
        if threads <= 1:
            for key, job in jobs.items():
                try:
                    results[key] = job()
                except BaseException as exc:  # noqa: BLE001 -- the first is re-raised
                    error = error or exc
            return results, error
        with ThreadPoolExecutor(threads, thread_name_prefix="samsa-log-recovery") as pool:
            futures = {key: pool.submit(job) for key, job in jobs.items()}
        for key, future in futures.items():
            failure = future.exception()
            if failure is None:
                results[key] = future.result()
            elif error is None:
                error = failure
        return results, error

    def _open_log(self, info: TopicInfo, partition: int, log_config: LogConfig, *,
                  recovery_point: int = 0, log_start_offset: int = 0, clean: bool = False,
                  now_ms: int | None = None, new: bool = False) -> Log:
        directory = self.data_dir / partition_dir_name(info.name, partition)
        directory.mkdir(exist_ok=True)
        metadata = directory / PARTITION_METADATA_FILE
        text = f"version: 0\ntopic_id: {topic_id_to_str(info.topic_id)}\n"
        if not metadata.exists() or metadata.read_text() != text:
            # A new partition's file is not fsynced (two fsyncs were most of a creation's
            # cost): topics.json, written durably after it, is what makes the partition exist,
            # and opening the log rewrites this file from it if a crash lost it.
            atomic_write(metadata, text.encode(), sync=not new)
        return Log(
            directory, log_config, topic=info.name, partition=partition,
            recovery_point=recovery_point, log_start_offset=log_start_offset,
            clean_shutdown=clean, now_ms=now_ms, files=self.files,
        )

    def _read_topics(self) -> dict[str, TopicInfo]:
        path = self.data_dir / TOPICS_FILE
        try:
            raw = json.loads(path.read_text())
        except FileNotFoundError:
            return {}
        except ValueError as exc:
            raise KafkaStorageError(f"{path} is not valid JSON ({exc}); restore it from a backup") from None
        return {
            name: TopicInfo(name, topic_id_from_str(t["topic_id"]), int(t["partitions"]), dict(t["configs"]))
            for name, t in raw.get("topics", {}).items()
        }

    def _write_topics(self) -> None:
        body = {
            "version": 1,
            "topics": {
                name: {
                    "topic_id": topic_id_to_str(info.topic_id),
                    "partitions": info.partitions,
                    "configs": info.configs,
                }
                for name, info in sorted(self._topics.items())
            },
        }
        atomic_write(self.data_dir / TOPICS_FILE, json.dumps(body, indent=1).encode())

    def _log_config(self, info: TopicInfo) -> LogConfig:
        return LogConfig.from_configs(self.config, info.configs)

    # -- topics -------------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int | None = None,
                     configs: Mapping[str, Any] | None = None, *,
                     topic_id: uuid.UUID | None = None, validate_only: bool = False) -> TopicInfo:
        """Create a topic (``partitions`` None or -1: ``num.partitions``).  Raises
        InvalidTopicError, TopicAlreadyExistsError, InvalidPartitionsError, InvalidConfigError."""
        validate_topic_name(name)
        count = int(self.config["num.partitions"]) if partitions in (None, -1) else int(partitions)  # type: ignore[arg-type]
        if count < 1:
            raise InvalidPartitionsError(f"topic {name!r}: the partition count must be at least 1, got {count}")
        overrides = validate_topic_configs(configs)
        LogConfig.from_configs(self.config, overrides)  # resolves every value once
        with self._lock:
            self._check_open()
            if name in self._topics:
                raise TopicAlreadyExistsError(f"topic {name!r} already exists")
            collision = name.replace(".", "_")
            for other in self._topics:
                if other.replace(".", "_") == collision:
                    raise InvalidTopicError(
                        f"topic {name!r} collides with existing topic {other!r} ('.' and '_' "
                        "are interchangeable in metric names)"
                    )
            self._check_capacity(name, count)
            info = TopicInfo(name, topic_id or _new_topic_id(), count, overrides)
            if validate_only:
                return info
            self._create_partitions(info, range(count), previous=None)
            return info

    def delete_topic(self, name: str) -> None:
        """Remove the topic and its files; raises UnknownTopicOrPartitionError."""
        with self._lock:
            self._check_open()
            info = self._topics.pop(name, None)
            if info is None:
                raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
            self._write_topics()
            for partition in range(info.partitions):
                doomed_log = self._logs.pop((name, partition), None)
                if doomed_log is not None:
                    doomed_log.abandon()  # also stops a cleaning of it (Log.closed)
                self.cleaner.forget((name, partition))
                directory = self.data_dir / partition_dir_name(name, partition)
                if directory.exists():
                    doomed = directory.with_name(set_aside_dir_name(name, partition, DELETE_DIR_SUFFIX))
                    directory.rename(doomed)
                    shutil.rmtree(doomed, ignore_errors=True)
            fsync_dir(self.data_dir)
            self.checkpoint()

    def add_partitions(self, name: str, total: int, *, validate_only: bool = False) -> TopicInfo:
        """CreatePartitions: grow the topic to ``total`` partitions."""
        with self._lock:
            self._check_open()
            info = self._topics.get(name)
            if info is None:
                raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
            if total <= info.partitions:
                raise InvalidPartitionsError(
                    f"topic {name!r} has {info.partitions} partitions; the new count {total} must be larger"
                )
            self._check_capacity(name, total - info.partitions)
            grown = TopicInfo(info.name, info.topic_id, total, info.configs)
            if validate_only:
                return grown
            self._create_partitions(grown, range(info.partitions, total), previous=info)
            return grown

    def _check_capacity(self, name: str, added: int) -> None:
        """Refuse, before any work, partitions this broker cannot hold (KIP-578's
        max.broker.partitions; internal and auto-created topics count too, as there)."""
        limit = self.max_partitions
        held = sum(t.partitions for t in self._topics.values())
        if held + added > limit:
            raise PolicyViolationError(
                f"topic {name!r}: {added} more partition(s) would bring this broker to "
                f"{held + added}, past max.broker.partitions={limit}; delete topics or raise "
                "max.broker.partitions"
            )

    def _create_partitions(self, info: TopicInfo, partitions: range,
                           previous: TopicInfo | None) -> None:
        """Make the logs of ``partitions`` and record ``info``; on a storage error undo all of it
        (so nothing half-made is served or reloaded) and raise KafkaStorageError."""
        log_config = self._log_config(info)
        created: list[int] = []
        path = self.data_dir
        try:
            for partition in partitions:
                path = self.data_dir / partition_dir_name(info.name, partition)
                created.append(partition)
                self._logs[(info.name, partition)] = self._open_log(info, partition, log_config,
                                                                    new=True)
            path = self.data_dir / TOPICS_FILE
            self._topics[info.name] = info
            self._write_topics()
        except BaseException as exc:
            self._undo_create(info.name, created, previous)
            if isinstance(exc, OSError):
                error = storage_error(f"creating topic {info.name!r} ({info.partitions} "
                                      "partitions): writing", exc.filename or path, exc)
                EPISODES.failed(f"{self.data_dir}: topic creation", error)
                raise error from exc
            if isinstance(exc, KafkaStorageError):
                EPISODES.failed(f"{self.data_dir}: topic creation", exc)
            raise
        EPISODES.succeeded(f"{self.data_dir}: topic creation")

    def _undo_create(self, name: str, partitions: list[int], previous: TopicInfo | None) -> None:
        if previous is None:
            self._topics.pop(name, None)
        else:
            self._topics[name] = previous
        for partition in partitions:
            opened = self._logs.pop((name, partition), None)
            if opened is not None:
                opened.abandon()  # releases its descriptors, writes nothing
            directory = self.data_dir / partition_dir_name(name, partition)
            try:
                # As delete_topic: a crash during the removal leaves a -delete dir, removed at
                # start; one that could not be renamed is set aside (-stray) at start.
                doomed = directory.with_name(set_aside_dir_name(name, partition, DELETE_DIR_SUFFIX))
                directory.rename(doomed)
                shutil.rmtree(doomed, ignore_errors=True)
            except OSError:
                continue

    def set_topic_configs(self, name: str, configs: Mapping[str, Any], *,
                          validate_only: bool = False) -> TopicInfo:
        """Replace the topic's config overrides (AlterConfigs semantics; merge first for
        IncrementalAlterConfigs).  Applies to the open logs at once."""
        overrides = validate_topic_configs(configs)
        with self._lock:
            self._check_open()
            info = self._topics.get(name)
            if info is None:
                raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
            updated = TopicInfo(info.name, info.topic_id, info.partitions, overrides)
            log_config = self._log_config(updated)
            if validate_only:
                return updated
            self._topics[name] = updated
            self._write_topics()
            for partition in range(info.partitions):
                self._logs[(name, partition)].update_config(log_config)
            return updated

    def reconfigure(self, config: Mapping[str, Any]) -> None:
        """Replace the broker-level settings (dynamic broker configs, Kafka's DynamicLogConfig)
        and apply them at once to every open log that does not override them."""
        resolved = resolve_broker_config(config)  # raises ConfigError before anything changes
        with self._lock:
            self._check_open()
            self.config = resolved
            for info in self._topics.values():
                log_config = self._log_config(info)
                for partition in range(info.partitions):
                    self._logs[(info.name, partition)].update_config(log_config)

    def topics(self) -> dict[str, TopicInfo]:
        with self._lock:
            return dict(self._topics)

    def topic(self, name: str) -> TopicInfo | None:
        with self._lock:
            return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        with self._lock:
            return next((t for t in self._topics.values() if t.topic_id == topic_id), None)

    def get_log(self, topic: str, partition: int) -> Log:
        """The partition's Log; raises UnknownTopicOrPartitionError."""
        found = self._logs.get((topic, partition))
        if found is None:
            raise UnknownTopicOrPartitionError(f"{topic}-{partition} does not exist on this broker")
        return found

    def find_log(self, topic: str, partition: int) -> Log | None:
        """The partition's Log, or None (one dict lookup: asked for every produced batch)."""
        return self._logs.get((topic, partition))

    def logs(self) -> dict[tuple[str, int], Log]:
        with self._lock:
            return dict(self._logs)

    # -- housekeeping ---------------------------------------------------------------------------

    def checkpoint(self) -> None:
        """Write the recovery-point and log-start-offset checkpoint files now.  Raises
        KafkaStorageError (logged once per failure episode) if they cannot be written."""
        with self._lock:
            logs = dict(self._logs)
        path = self.data_dir / RECOVERY_POINT_CHECKPOINT
        try:
            write_offset_checkpoint(path, {k: lg.recovery_point for k, lg in logs.items()})
            path = self.data_dir / LOG_START_OFFSET_CHECKPOINT
            write_offset_checkpoint(path, {k: lg.log_start_offset for k, lg in logs.items()})
        except OSError as exc:
            error = storage_error("writing checkpoint", path, exc)
            EPISODES.failed(f"{self.data_dir}: checkpoints", error)
            raise error from exc
        EPISODES.succeeded(f"{self.data_dir}: checkpoints")

    def tick(self, now_ms: int | None = None) -> None:
        """Periodic work, each part at its own configured interval: per-log flush policy
        (``flush.ms``, flushing rolled segments), retention (``log.retention.check.interval.ms``),
        checkpoints (``log.flush.offset.checkpoint.interval.ms``), producer-id expiry."""
        now = _now_ms() if now_ms is None else now_ms
        logs = list(self.logs().values())
        for partition_log in logs:
            try:
                partition_log.maintain(now)
            except KafkaStorageError:
                continue  # logged once by the log; the others are still maintained
        if now >= self._next_retention_ms:
            self._next_retention_ms = now + int(self.config["log.retention.check.interval.ms"])
            for partition_log in logs:
                try:
                    partition_log.apply_retention(now)
                except KafkaStorageError:
                    continue
        if now >= self._next_expiry_ms:
            self._next_expiry_ms = now + int(self.config["producer.id.expiration.check.interval.ms"])
            for partition_log in logs:
                partition_log.remove_expired_producers(now)
        if now >= self._next_checkpoint_ms:
            self._next_checkpoint_ms = now + int(self.config["log.flush.offset.checkpoint.interval.ms"])
            self.checkpoint()

    def start_background(self, interval_s: float = 1.0) -> None:
        """Call ``tick`` every ``interval_s`` seconds on a daemon thread until ``close``."""
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(
                target=self._run, args=(interval_s,), name="samsa-log-manager", daemon=True
            )
            self._thread.start()
            self.cleaner.start()

    def _run(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            try:
                self.tick()
            except KafkaStorageError:
                pass  # logged once per failure episode where it happened; the next tick retries
            except Exception:  # keep housekeeping alive; the next tick retries
                log.exception("log housekeeping failed")

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"the log manager of {self.data_dir} is closed")

    def close(self) -> None:
        """Clean shutdown: flush and close every log, write checkpoints and the marker."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        cleaner = getattr(self, "cleaner", None)
        if cleaner is not None:
            cleaner.close()  # a round in progress stops and deletes its .cleaned files
        with self._lock:
            if self._closed:
                return
            # Flushed and closed on num.recovery.threads.per.data.dir threads (LogManager.shutdown).
            _closed, error = self._in_parallel(
                {key: partition_log.close for key, partition_log in self._logs.items()})
            if error is not None and not isinstance(error, KafkaStorageError):
                raise error
            clean = error is None  # a failed close is logged by the log; recovery checks it
            try:
                self.checkpoint()
                if clean:
                    atomic_write(self.data_dir / CLEAN_SHUTDOWN_FILE,
                                 json.dumps({"version": 0}).encode())
            finally:
                self._closed = True
                os.close(self._lock_fd)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
