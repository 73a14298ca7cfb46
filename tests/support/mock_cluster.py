"""librdkafka's mock Kafka cluster, driven from Python through ctypes.

The mock cluster (``rdkafka_mock.h``) is an independent Kafka-protocol implementation with real
TCP listeners on 127.0.0.1, several brokers, leader moves, brokers going down and injected
request errors.  It makes a test peer that nobody here wrote.  It differs from a real broker
in ways tests must allow for (librdkafka's rdkafka_mock_handlers.c): ApiVersions only up to v2,
no CRC validation, acks=0 still answered, a downed broker stays leader, ...

    with MockCluster(3, topics={"t": 4}) as cluster:
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers})
        cluster.push_request_errors(0, [6, 6])    # next two Produce requests: NOT_LEADER

Threading: the cluster runs on its own librdkafka thread, created by rd_kafka_mock_cluster_new
and bound to a throw-away producer handle that this object keeps alive.  Every mock function
either takes the cluster's mutex or posts a command to that thread and waits for its reply, so
methods may be called from any Python thread; ctypes releases the GIL while they block.
Broker ids run from 1 to ``num_brokers``.  API keys and error codes are Kafka's wire numbers
(Produce = 0, NOT_LEADER_OR_FOLLOWER = 6); librdkafka's own negative codes also work, e.g.
``-195`` (``_TRANSPORT``) makes the broker drop the connection.

Run ``python -m tests.support.mock_cluster --brokers 3`` for a cluster to poke at by hand.
"""

from __future__ import annotations

import argparse
import ctypes
import signal
import sys
import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from ctypes import c_int, c_size_t
from dataclasses import dataclass
from types import FrameType, TracebackType
from typing import Self, TypeVar

from samsa.errors import KafkaError
from tests.support import librdkafka

ALL_BROKERS = -1
"""Pass as ``broker_id`` to apply a broker setting (down, up, RTT, rack) to every broker."""

_RD_KAFKA_PRODUCER = 0
_RD_KAFKA_CONF_OK = 0
_ERRSTR_SIZE = 512
# ctypes caps the number of arguments per call; variadic pushes are split into chunks this big.
_VARARG_CHUNK = 128

_T = TypeVar("_T")


class MockClusterError(KafkaError):
    """A librdkafka mock-cluster call failed; ``code`` is librdkafka's error code."""

    def __init__(self, operation: str, code: int, hint: str = "") -> None:
        self.code = code
        self.name = librdkafka.err_name(code) if code else "NO_ERROR"
        self.operation = operation
        text = f"{operation} failed: {self.name} ({code})"
        super().__init__(f"{text}; {hint}" if hint else text)


@dataclass(frozen=True, slots=True)
class MockRequest:
    """One request the mock cluster received while request tracking was on."""

    broker_id: int
    api_key: int
    timestamp_us: int  # librdkafka's monotonic clock, microseconds


def _destroy(lib: ctypes.CDLL, mcluster: int, rk: int) -> None:
    # The cluster refers to the handle, so it goes first.
    lib.rd_kafka_mock_cluster_destroy(mcluster)
    lib.rd_kafka_destroy(rk)


class MockCluster:
    """A running librdkafka mock cluster of ``num_brokers`` brokers on 127.0.0.1.

    ``topics`` maps names to partition counts to create up front.  Topics the mock creates by
    itself (on Metadata or Produce for an unknown topic) get librdkafka's fixed defaults: 4
    partitions and replication factor min(3, brokers); the C API offers no way to change them.
    ``rtt_ms`` delays every broker's responses.  ``group_initial_rebalance_delay_ms`` overrides
    the mock's first-rebalance delay (3000 ms, as in Kafka); 0 makes group tests fast.
    ``track_requests`` starts request tracking at once (see :meth:`requests`).
    """

    def __init__(
        self,
        num_brokers: int = 3,
        *,
        topics: Mapping[str, int] | None = None,
        rtt_ms: int | None = None,
        group_initial_rebalance_delay_ms: int | None = None,
        track_requests: bool = False,
    ) -> None:
        if num_brokers < 1:
            raise ValueError(f"num_brokers must be at least 1, got {num_brokers}")
        self._lib = librdkafka.load()
        self._rk = self._new_handle()
        mcluster = self._lib.rd_kafka_mock_cluster_new(self._rk, num_brokers)
        if not mcluster:
            self._lib.rd_kafka_destroy(self._rk)
            raise MockClusterError(
                "rd_kafka_mock_cluster_new",
                -1,
                "could not create listeners on 127.0.0.1",
            )
        self._mcluster: int | None = mcluster
        self._finalizer = weakref.finalize(
            self, _destroy, self._lib, mcluster, self._rk
        )
        self._bootstrap: str = self._lib.rd_kafka_mock_cluster_bootstraps(
            mcluster
        ).decode()
        self._broker_ids: set[int] = set(range(1, num_brokers + 1))
        try:
            for name, partitions in (topics or {}).items():
                self.create_topic(name, partitions)
            if rtt_ms is not None:
                self.set_rtt(ALL_BROKERS, rtt_ms)
            if group_initial_rebalance_delay_ms is not None:
                self.set_group_initial_rebalance_delay(group_initial_rebalance_delay_ms)
            if track_requests:
                self.start_request_tracking()
        except BaseException:
            self.close()
            raise

    def _new_handle(self) -> int:
        """A producer handle the cluster hangs off; it never connects anywhere."""
        lib = self._lib
        errstr = ctypes.create_string_buffer(_ERRSTR_SIZE)
        conf = lib.rd_kafka_conf_new()
        # Quiet the "no bootstrap.servers" warning this idle handle would otherwise log.
        for key, value in (("client.id", "samsa-mock-cluster"), ("log_level", "3")):
            res = lib.rd_kafka_conf_set(
                conf, key.encode(), value.encode(), errstr, _ERRSTR_SIZE
            )
            if res != _RD_KAFKA_CONF_OK:
                lib.rd_kafka_conf_destroy(conf)
                raise MockClusterError("rd_kafka_conf_set", -1, errstr.value.decode())
        rk = lib.rd_kafka_new(_RD_KAFKA_PRODUCER, conf, errstr, _ERRSTR_SIZE)
        if not rk:
            lib.rd_kafka_conf_destroy(conf)  # rd_kafka_new owns conf only on success
            raise MockClusterError("rd_kafka_new", -1, errstr.value.decode())
        return int(rk)

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the brokers (cluster first, then its handle).  Safe to call twice."""
        self._mcluster = None
        self._finalizer()

    @property
    def closed(self) -> bool:
        return self._mcluster is None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else self._bootstrap
        return f"MockCluster({len(self._broker_ids)} brokers, {state})"

    def _cluster(self) -> int:
        if self._mcluster is None:
            raise RuntimeError("MockCluster is closed; create a new one")
        return self._mcluster

    def _fn(self, name: str) -> ctypes._CFuncPtr:  # type: ignore[name-defined]
        if not librdkafka.has(name, self._lib):
            raise NotImplementedError(
                f"librdkafka {librdkafka.version()} does not export {name}; "
                "upgrade confluent-kafka for a newer bundled librdkafka"
            )
        return getattr(self._lib, name)

    def _call(self, name: str, *args: object) -> None:
        """Call a mock function that returns rd_kafka_resp_err_t and raise on failure."""
        err = self._fn(name)(self._cluster(), *args)
        if err:
            raise MockClusterError(name, err)

    # -- cluster facts ----------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """Comma-separated ``host:port`` list for ``bootstrap.servers``."""
        return self._bootstrap

    @property
    def broker_ids(self) -> list[int]:
        """Ids of the cluster's brokers (1..n, adjusted by add/decommission)."""
        return sorted(self._broker_ids)

    # -- topics and partitions --------------------------------------------------------------

    def create_topic(
        self, name: str, partitions: int, replication_factor: int = 1
    ) -> None:
        """Create a topic (the mock does not serve CreateTopics)."""
        self._call(
            "rd_kafka_mock_topic_create", name.encode(), partitions, replication_factor
        )

    def delete_topic(self, name: str) -> None:
        """Delete a topic; later requests for it get UNKNOWN_TOPIC_OR_PARTITION."""
        self._call("rd_kafka_mock_topic_delete", name.encode())

    def set_topic_error(self, topic: str, error: int) -> None:
        """Make Metadata (and AddPartitionsToTxn) report ``error`` for ``topic``; 0 clears it."""
        self._fn("rd_kafka_mock_topic_set_error")(
            self._cluster(), topic.encode(), error
        )

    def set_partition_leader(self, topic: str, partition: int, broker_id: int) -> None:
        """Move a partition's leadership (bumps its leader epoch); -1 leaves it leaderless.

        Creates the topic with the default layout if it does not exist.
        """
        self._call(
            "rd_kafka_mock_partition_set_leader", topic.encode(), partition, broker_id
        )

    def set_partition_follower(
        self, topic: str, partition: int, broker_id: int
    ) -> None:
        """Set the preferred read replica that Fetch points consumers to (KIP-392)."""
        self._call(
            "rd_kafka_mock_partition_set_follower", topic.encode(), partition, broker_id
        )

    def set_partition_follower_watermarks(
        self, topic: str, partition: int, low: int, high: int
    ) -> None:
        """Set the follower's low/high watermarks; -1 means use the leader's."""
        self._call(
            "rd_kafka_mock_partition_set_follower_wmarks",
            topic.encode(),
            partition,
            low,
            high,
        )

    def delete_records(self, topic: str, partition: int, before_offset: int) -> None:
        """Advance a partition's log start offset to ``before_offset``."""
        self._call(
            "rd_kafka_mock_partition_delete_records",
            topic.encode(),
            partition,
            before_offset,
        )

    # -- brokers ----------------------------------------------------------------------------

    def broker_down(self, broker_id: int) -> None:
        """Drop the broker's connections and refuse new ones.  It stays leader of its partitions
        (Metadata omits it from the broker list but still names it leader)."""
        self._call("rd_kafka_mock_broker_set_down", broker_id)

    def broker_up(self, broker_id: int) -> None:
        """Accept connections on the broker again."""
        self._call("rd_kafka_mock_broker_set_up", broker_id)

    def set_rtt(self, broker_id: int, rtt_ms: int) -> None:
        """Delay the broker's responses by ``rtt_ms`` (``ALL_BROKERS`` for every broker)."""
        self._call("rd_kafka_mock_broker_set_rtt", broker_id, rtt_ms)

    def set_broker_rack(self, broker_id: int, rack: str) -> None:
        """Set the rack the broker reports in Metadata."""
        self._call("rd_kafka_mock_broker_set_rack", broker_id, rack.encode())

    def decommission_broker(self, broker_id: int) -> None:
        """Remove a broker; its partitions move to the others."""
        self._call("rd_kafka_mock_broker_decommission", broker_id)
        self._broker_ids.discard(broker_id)

    def add_broker(self, broker_id: int) -> None:
        """Add a broker; partitions are reassigned to include it."""
        self._call("rd_kafka_mock_broker_add", broker_id)
        self._broker_ids.add(broker_id)

    def set_coordinator(self, key_type: str, key: str, broker_id: int) -> None:
        """Pin the coordinator for a ``"group"`` or ``"transaction"`` id to a broker."""
        if key_type not in ("group", "transaction"):
            raise ValueError(
                f"key_type must be 'group' or 'transaction', got {key_type!r}"
            )
        self._call(
            "rd_kafka_mock_coordinator_set", key_type.encode(), key.encode(), broker_id
        )

    # -- error injection --------------------------------------------------------------------

    def push_request_errors(self, api_key: int, errors: Sequence[int]) -> None:
        """Fail the next ``len(errors)`` requests of ``api_key`` on any broker, in order.

        A 0 entry lets that request through.  Broker-level errors take precedence.
        """
        if not errors:
            return
        mcluster = self._cluster()
        if librdkafka.has("rd_kafka_mock_push_request_errors_array", self._lib):
            array = (c_int * len(errors))(*errors)
            self._lib.rd_kafka_mock_push_request_errors_array(
                mcluster, api_key, len(errors), array
            )
            return
        for chunk in _chunks(errors, _VARARG_CHUNK):
            self._fn("rd_kafka_mock_push_request_errors")(
                mcluster, api_key, len(chunk), *(c_int(e) for e in chunk)
            )

    def broker_push_request_error_rtts(
        self, broker_id: int, api_key: int, errors: Sequence[tuple[int, int]]
    ) -> None:
        """On one broker, answer the next requests of ``api_key`` with ``(error, rtt_ms)`` each.

        ``(0, 500)`` delays a request by 500 ms without failing it.  From then on this broker's
        stack for ``api_key``, even once used up, shadows the cluster-wide errors that
        :meth:`push_request_errors` pushes for that key (rd_kafka_mock_next_request_error).
        """
        fn = self._fn("rd_kafka_mock_broker_push_request_error_rtts")
        for chunk in _chunks(errors, _VARARG_CHUNK // 2):
            varargs = [c_int(v) for pair in chunk for v in (pair[0], pair[1])]
            err = fn(self._cluster(), broker_id, api_key, len(chunk), *varargs)
            if err:
                raise MockClusterError(
                    "rd_kafka_mock_broker_push_request_error_rtts", err
                )

    def broker_error_stack_count(self, broker_id: int, api_key: int) -> int:
        """How many pushed broker-level errors for ``api_key`` are still waiting."""
        count = c_size_t(0)
        self._call(
            "rd_kafka_mock_broker_error_stack_cnt",
            broker_id,
            api_key,
            ctypes.byref(count),
        )
        return count.value

    def partition_push_request_errors(
        self, topic: str, partition: int, api_key: int, errors: Sequence[int]
    ) -> None:
        """Return ``errors`` as the partition-level error code in the next ``api_key`` requests
        that name this partition (other partitions in the same request are unaffected)."""
        fn = self._fn("rd_kafka_mock_partition_push_request_errors")
        for chunk in _chunks(errors, _VARARG_CHUNK):
            err = fn(
                self._cluster(),
                topic.encode(),
                partition,
                api_key,
                len(chunk),
                *(c_int(e) for e in chunk),
            )
            if err:
                raise MockClusterError(
                    "rd_kafka_mock_partition_push_request_errors", err
                )

    def clear_request_errors(self, api_key: int) -> None:
        """Drop the cluster-level errors still pushed for ``api_key``."""
        self._fn("rd_kafka_mock_clear_request_errors")(self._cluster(), api_key)

    def set_api_version(self, api_key: int, min_version: int, max_version: int) -> None:
        """Narrow what ApiVersions advertises for ``api_key``; (-1, -1) disables the API."""
        self._call("rd_kafka_mock_set_apiversion", api_key, min_version, max_version)

    def set_group_initial_rebalance_delay(self, delay_ms: int) -> None:
        """Set group.initial.rebalance.delay.ms for every group (mock default 3000)."""
        self._fn("rd_kafka_mock_group_initial_rebalance_delay_ms")(
            self._cluster(), delay_ms
        )

    # -- request tracking -------------------------------------------------------------------

    def start_request_tracking(self) -> None:
        """Record every request the brokers receive from now on (clears earlier records)."""
        self._fn("rd_kafka_mock_start_request_tracking")(self._cluster())

    def stop_request_tracking(self) -> None:
        """Stop recording.  librdkafka 2.16 also clears the records: read them first."""
        self._fn("rd_kafka_mock_stop_request_tracking")(self._cluster())

    def clear_requests(self) -> None:
        """Forget the requests recorded so far; tracking stays on."""
        self._fn("rd_kafka_mock_clear_requests")(self._cluster())

    def requests(self, api_key: int | None = None) -> list[MockRequest]:
        """The requests recorded since tracking started, oldest first, optionally of one key."""
        lib = self._lib
        get = self._fn("rd_kafka_mock_get_requests")
        count = c_size_t(0)
        array = get(self._cluster(), ctypes.byref(count))
        if not array:
            return []
        try:
            found = [
                MockRequest(
                    broker_id=lib.rd_kafka_mock_request_id(array[i]),
                    api_key=lib.rd_kafka_mock_request_api_key(array[i]),
                    timestamp_us=lib.rd_kafka_mock_request_timestamp(array[i]),
                )
                for i in range(count.value)
            ]
        finally:
            lib.rd_kafka_mock_request_destroy_array(array, count.value)
        if api_key is not None:
            found = [r for r in found if r.api_key == api_key]
        return found


def _chunks(items: Sequence[_T], size: int) -> Iterable[Sequence[_T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _parse_topic(spec: str) -> tuple[str, int]:
    name, _, partitions = spec.rpartition(":")
    if not name or not partitions.isdigit() or int(partitions) < 1:
        raise argparse.ArgumentTypeError(f"expected NAME:PARTITIONS, got {spec!r}")
    return name, int(partitions)


def main(argv: Sequence[str] | None = None) -> int:
    """Run a mock cluster until Ctrl-C or SIGTERM; print its bootstrap servers first."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.mock_cluster",
        description="Run librdkafka's mock Kafka cluster on 127.0.0.1 until interrupted.",
    )
    parser.add_argument(
        "--brokers", type=int, default=3, help="number of brokers (default 3)"
    )
    parser.add_argument(
        "--topic",
        action="append",
        default=[],
        type=_parse_topic,
        metavar="NAME:PARTITIONS",
        help="create a topic up front (repeatable); others are auto-created with 4 partitions",
    )
    parser.add_argument("--rtt-ms", type=int, default=None, help="delay every response")
    args = parser.parse_args(argv)
    if args.brokers < 1:
        parser.error("--brokers must be at least 1")

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    with MockCluster(
        args.brokers, topics=dict(args.topic), rtt_ms=args.rtt_ms
    ) as cluster:
        print(cluster.bootstrap_servers, flush=True)
        print(
            f"librdkafka {librdkafka.version()} mock cluster, brokers {cluster.broker_ids}; "
            "Ctrl-C to stop",
            file=sys.stderr,
            flush=True,
        )
        while not stop.wait(1.0):  # short waits so the signal handler gets to run
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
