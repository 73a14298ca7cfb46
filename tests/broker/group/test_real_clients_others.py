"""The consumer-group scenario of test_real_clients.py's confluent-kafka tests, for kafka-python,
aiokafka and ``kcat -G``, each against a ``samsa broker`` subprocess:

three members of one group share a 12-partition topic; one member leaves partway; the other two
take over its partitions; across the group every record is processed exactly once (commit after
processing); the committed offsets equal the end offsets and survive a SIGKILL of the broker and
a restart, read back by the same client.

To make each step certain rather than likely, the topic is empty while the group forms; the
records are produced once the broker reports a stable group of three members with 4 partitions
each.  They come in two parts: 3/10 first -- the quitter's 4 partitions get 1/10 of all the
records, and it leaves once it has processed exactly those -- and the other 7/10 after it has
gone, so its partitions certainly hold records the two that stay must take over.

Each peer must be installed; a missing one fails the test, it never skips.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from typing import IO, Any

import pytest

from .test_real_clients import (
    GROUP_CONFIG,
    PATIENCE,
    append,
    committed_offsets,
    produce,
    wait_for,
)

PARTITIONS = 12
# The 300,000 records for every client: kafka-python consumes roughly 70k records/s
# here, aiokafka and kcat faster, so each test takes about 5 s (production included).
KAFKA_PYTHON_RECORDS = 300_000
AIOKAFKA_RECORDS = 300_000
KCAT_RECORDS = 300_000
# Client settings that make rebalances quick without changing what they do.
KAFKA_PYTHON_FAST = {"heartbeat_interval_ms": 200, "session_timeout_ms": 6000,
                     "metadata_max_age_ms": 1000}
KCAT_FAST = ["-X", "heartbeat.interval.ms=200", "-X", "session.timeout.ms=6000",
             "-X", "topic.metadata.refresh.interval.ms=1000"]


# --- shared scaffolding ------------------------------------------------------------------------


class Ledger:
    """Which member processed which (partition, offset), thread-safe."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.lock = threading.Lock()
        self.seen: Counter[tuple[int, int]] = Counter()
        self.by_member: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self.errors: list[str] = []

    def process(self, member: str, positions: Iterable[tuple[int, int]]) -> None:
        with self.lock:
            for position in positions:
                self.seen[position] += 1
                self.by_member[member].append(position)

    def count(self, member: str) -> int:
        with self.lock:
            return len(self.by_member[member])

    def complete(self) -> bool:
        assert not self.errors, self.errors
        with self.lock:
            return len(self.seen) >= self.total

    def last_offsets(self, member: str) -> dict[int, int]:
        """Per partition, the highest offset ``member`` processed."""
        last: dict[int, int] = {}
        with self.lock:
            for p, o in self.by_member[member]:
                last[p] = max(o, last.get(p, -1))
        return last

    def check(self, quitter: str, stayers: list[str]) -> None:
        """Everyone had a share; the stayers went on where the quitter stopped; every record
        was processed exactly once."""
        assert not self.errors, self.errors
        for member in [quitter, *stayers]:
            assert self.by_member[member], f"{member} processed nothing"
        assert self.count(quitter) < self.total
        left_off = self.last_offsets(quitter)
        went_on = {p: max(self.last_offsets(s).get(p, -1) for s in stayers) for p in left_off}
        assert all(went_on[p] > left_off[p] for p in left_off), \
            f"the quitter's partitions were not taken over: quitter stopped at {left_off}, " \
            f"the stayers got to {went_on}"
        expected = {(p, o) for p in range(PARTITIONS) for o in range(self.total // PARTITIONS)}
        assert set(self.seen) == expected, "a record was lost (or invented)"
        duplicates = [pos for pos, n in self.seen.items() if n > 1]
        assert not duplicates, f"{len(duplicates)} records processed twice, e.g. {duplicates[:5]}"


def first_part(total: int) -> int:
    """Records produced before the quitter leaves; the quitter's 4 of 12 partitions get
    ``total // 10`` of them (``total`` is a multiple of 120)."""
    assert total % 120 == 0
    return 3 * total // 10


def assignments(admin: Any, group: str) -> list[set[int]] | None:
    """Each member's partitions if the broker reports the group stable, else None."""
    from confluent_kafka import ConsumerGroupState

    described = admin.describe_consumer_groups([group])[group].result(20)
    if described.state != ConsumerGroupState.STABLE:
        return None
    return [{tp.partition for tp in m.assignment.topic_partitions} for m in described.members]


def wait_until_shared(bootstrap: str, group: str, members: int,
                      healthy: Callable[[], object] = lambda: None) -> None:
    """Wait for a stable group of ``members`` members owning an equal share of the 12
    partitions each (range and round-robin both balance one topic), together all of them.
    ``healthy`` raises if a member has failed."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})

    def shared() -> bool:
        healthy()
        time.sleep(0.1)  # between DescribeGroups requests
        got = assignments(admin, group)
        return (got is not None and len(got) == members
                and all(len(a) == PARTITIONS // members for a in got)
                and set().union(*got) == set(range(PARTITIONS)))

    wait_for(shared, f"{members} members sharing {PARTITIONS} partitions")


def start_broker(broker_process: Any, bootstrap_topic: str) -> Any:
    proc = broker_process(GROUP_CONFIG).start()
    produce(proc.bootstrap_servers, bootstrap_topic, 0, PARTITIONS)  # creates the empty topic
    return proc


# --- kafka-python ------------------------------------------------------------------------------


class KafkaPythonMember(threading.Thread):
    """A kafka-python group member that commits after each processed batch.  It records any
    exception, and running out of time, in the ledger's errors, which fail the test."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, ledger: Ledger,
                 stop: threading.Event, stop_after: int | None = None) -> None:
        super().__init__(daemon=True, name=name)
        self.bootstrap, self.group, self.topic = bootstrap, group, topic
        self.ledger, self.stop, self.stop_after = ledger, stop, stop_after
        self.assignment: list[int] = []  # the partitions it last owned, for failure messages

    def run(self) -> None:
        from kafka import KafkaConsumer

        try:
            c = KafkaConsumer(self.topic, bootstrap_servers=self.bootstrap, group_id=self.group,
                              client_id=self.name, auto_offset_reset="earliest",
                              enable_auto_commit=False, max_poll_records=500,
                              **KAFKA_PYTHON_FAST)
            try:
                deadline = time.monotonic() + 2 * PATIENCE
                while not self.stop.is_set():
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"not told to stop within {2 * PATIENCE:g} s")
                    records = [r for rs in c.poll(timeout_ms=200).values() for r in rs]
                    self.assignment = sorted(tp.partition for tp in c.assignment())
                    if records:
                        self.ledger.process(self.name, ((r.partition, r.offset) for r in records))
                        c.commit()
                    if self.stop_after is not None and \
                            self.ledger.count(self.name) >= self.stop_after:
                        break
            finally:
                c.close()  # leaves the group
        except Exception as exc:  # noqa: BLE001 -- the test thread fails on it
            self.ledger.errors.append(f"{self.name}: {exc!r}")

    def status(self) -> str:
        alive = "running" if self.is_alive() else "stopped"
        return f"{self.name} ({alive}, {self.ledger.count(self.name)} processed, " \
               f"partitions {self.assignment})"


def kafka_python_committed(bootstrap: str, group: str, topic: str) -> list[int | None]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return [c.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)]
    finally:
        c.close()


@pytest.mark.usefixtures("kafka_python_rejoins_as_java")
def test_three_kafka_python_consumers_share_take_over_and_survive_sigkill(
        broker_process: Any) -> None:
    topic, group, n = "kp-share", "kp-share", KAFKA_PYTHON_RECORDS
    proc = start_broker(broker_process, topic)
    bs = proc.bootstrap_servers
    ledger, stop = Ledger(n), threading.Event()
    quitter = KafkaPythonMember("quitter", bs, group, topic, ledger, stop, stop_after=n // 10)
    stayers = [KafkaPythonMember(f"stayer{i}", bs, group, topic, ledger, stop) for i in (1, 2)]
    members = [quitter, *stayers]

    def waiting_for(wait: Callable[[], None]) -> None:
        try:
            wait()
        except AssertionError as exc:  # say where each member was
            raise AssertionError(f"{exc}; {', '.join(m.status() for m in members)}") from None

    try:
        for m in members:
            m.start()
        waiting_for(lambda: wait_until_shared(bs, group, 3, ledger.complete))
        append(bs, topic, first_part(n), PARTITIONS)
        waiting_for(lambda: wait_for(lambda: (ledger.complete(), not quitter.is_alive())[1],
                                     "the quitter to leave"))
        append(bs, topic, n - first_part(n), PARTITIONS, start=first_part(n))
        waiting_for(lambda: wait_for(ledger.complete, "every record"))
        # The stayers own all 12 between them.
        waiting_for(lambda: wait_until_shared(bs, group, 2, ledger.complete))
    finally:
        stop.set()
        for m in members:
            m.join(PATIENCE)
    assert not [m.name for m in members if m.is_alive()], "a member did not stop"
    ledger.check("quitter", ["stayer1", "stayer2"])
    end = [n // PARTITIONS] * PARTITIONS
    assert kafka_python_committed(bs, group, topic) == end
    proc.kill()
    proc.start()
    assert kafka_python_committed(bs, group, topic) == end


# --- aiokafka ----------------------------------------------------------------------------------


async def aiokafka_member(name: str, bootstrap: str, group: str, topic: str, ledger: Ledger,
                          stop: asyncio.Event, stop_after: int | None = None) -> None:
    from aiokafka import AIOKafkaConsumer

    c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, client_id=name,
                         auto_offset_reset="earliest", enable_auto_commit=False,
                         **KAFKA_PYTHON_FAST)
    await c.start()
    try:
        while not stop.is_set():
            batches = await c.getmany(timeout_ms=200, max_records=500)
            records = [r for rs in batches.values() for r in rs]
            if records:
                ledger.process(name, ((r.partition, r.offset) for r in records))
                await c.commit()
            if stop_after is not None and ledger.count(name) >= stop_after:
                break
    except Exception as exc:  # noqa: BLE001 -- the test fails on it
        ledger.errors.append(f"{name}: {exc!r}")
    finally:
        await c.stop()  # leaves the group


async def aiokafka_committed(bootstrap: str, group: str, topic: str) -> list[int | None]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await c.start()
    try:
        return [await c.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)]
    finally:
        await c.stop()


async def async_wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def test_three_aiokafka_consumers_share_take_over_and_survive_sigkill(
        broker_process: Any) -> None:
    topic, group, n = "aio-share", "aio-share", AIOKAFKA_RECORDS
    proc = start_broker(broker_process, topic)
    bs = proc.bootstrap_servers
    ledger = Ledger(n)

    async def scenario() -> None:
        stop = asyncio.Event()
        quitter = asyncio.create_task(
            aiokafka_member("quitter", bs, group, topic, ledger, stop, stop_after=n // 10))
        stayers = [asyncio.create_task(aiokafka_member(f"stayer{i}", bs, group, topic, ledger,
                                                       stop)) for i in (1, 2)]
        try:
            # The broker is asked from a thread so the members keep heartbeating meanwhile.
            await asyncio.to_thread(wait_until_shared, bs, group, 3, ledger.complete)
            await asyncio.to_thread(append, bs, topic, first_part(n), PARTITIONS)
            await async_wait_for(lambda: (ledger.complete(), quitter.done())[1],
                                 "the quitter to leave")
            await asyncio.to_thread(append, bs, topic, n - first_part(n), PARTITIONS, first_part(n))
            await async_wait_for(ledger.complete, "every record")
            await asyncio.to_thread(wait_until_shared, bs, group, 2, ledger.complete)
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(quitter, *stayers), PATIENCE)

    asyncio.run(scenario())
    ledger.check("quitter", ["stayer1", "stayer2"])
    end = [n // PARTITIONS] * PARTITIONS
    assert asyncio.run(aiokafka_committed(bs, group, topic)) == end
    proc.kill()
    proc.start()
    assert asyncio.run(aiokafka_committed(bs, group, topic)) == end


# --- kcat -G -----------------------------------------------------------------------------------


def kcat_path() -> str:
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is not installed (apt-get install kcat)"
    return kcat


class KcatMember:
    """One ``kcat -G`` process; a thread feeds the '%p %o' lines it prints into the ledger.
    kcat stores each offset as it hands the message over and auto-commits them every 100 ms,
    and on a clean exit (SIGTERM) or a revoke it commits what it stored."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str,
                 ledger: Ledger) -> None:
        self.name, self.ledger = name, ledger
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 -- closed by kill()
        self.proc = subprocess.Popen(
            [kcat_path(), "-b", bootstrap, "-G", group, "-f", "%p %o\n", "-q", "-u",
             "-X", "auto.offset.reset=earliest", "-X", "enable.auto.commit=true",
             "-X", "auto.commit.interval.ms=100", *KCAT_FAST, topic],
            stdout=subprocess.PIPE, stderr=self.stderr)
        self.reader = threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True)
        self.reader.start()

    def _read(self, stdout: IO[bytes]) -> None:
        for line in stdout:
            p, o = line.split()
            self.ledger.process(self.name, [(int(p), int(o))])

    def stderr_text(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")

    def healthy(self) -> None:
        code = self.proc.poll()
        assert code is None, f"kcat {self.name} exited with {code}: {self.stderr_text()}"

    def terminate(self) -> None:
        """SIGTERM: kcat closes its consumer, committing and leaving the group."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(PATIENCE)
        self.reader.join(PATIENCE)
        assert code == 0, f"kcat {self.name} exited with {code}: {self.stderr_text()}"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.stderr.close()


def test_three_kcat_consumers_share_take_over_and_survive_sigkill(broker_process: Any) -> None:
    topic, group, n = "kcat-share", "kcat-share", KCAT_RECORDS
    proc = start_broker(broker_process, topic)
    bs = proc.bootstrap_servers
    ledger = Ledger(n)
    members = [KcatMember(name, bs, group, topic, ledger)
               for name in ("quitter", "stayer1", "stayer2")]
    quitter, stayers = members[0], members[1:]

    def healthy() -> bool:
        for m in members:
            if m is not quitter or quitter.proc.returncode is None:
                m.healthy()
        return True

    try:
        wait_until_shared(bs, group, 3, healthy)
        append(bs, topic, first_part(n), PARTITIONS)
        wait_for(lambda: healthy() and ledger.count("quitter") >= n // 10,
                 "the quitter's share of the first part")
        quitter.terminate()
        append(bs, topic, n - first_part(n), PARTITIONS, start=first_part(n))
        wait_for(lambda: healthy() and ledger.complete(), "every record")
        wait_until_shared(bs, group, 2, healthy)  # the stayers own all 12 between them
        for m in stayers:
            m.terminate()
    finally:
        for m in members:
            m.kill()
    # Exactly once holds because each member commits what it handed over whenever it gives
    # partitions up (the quitter's clean close; the stayers' eager revoke before the rebalance).
    # kcat's periodic auto-commit alone would only make it at-least-once.
    ledger.check("quitter", ["stayer1", "stayer2"])
    end = [n // PARTITIONS] * PARTITIONS
    assert committed_offsets(bs, group, topic, PARTITIONS) == end
    proc.kill()
    proc.start()
    # Read the committed offsets back with kcat itself: one more record per partition, and a
    # kcat in the same group must print exactly those -- it resumes from the committed offsets
    # (with nothing committed it would start at 0, auto.offset.reset=earliest).
    append(bs, topic, PARTITIONS, PARTITIONS, start=n)
    out = subprocess.run(
        [kcat_path(), "-b", bs, "-G", group, "-e", "-q", "-f", "%p %o\n",
         "-X", "auto.offset.reset=earliest", *KCAT_FAST, topic],
        capture_output=True, timeout=PATIENCE, check=True).stdout.decode()
    printed = sorted(tuple(map(int, line.split())) for line in out.splitlines())
    assert printed == [(p, n // PARTITIONS) for p in range(PARTITIONS)]
