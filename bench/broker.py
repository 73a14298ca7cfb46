"""Broker throughput: the samsa broker vs librdkafka's mock cluster, with confluent-kafka clients.

    .venv/bin/python bench/broker.py [--records N] [--fetch-records M] [--profile FILE]

Both brokers run in their own process (``samsa broker`` and ``python -m
tests.support.mock_cluster --brokers 1``) so the client here never shares a GIL with them.

Produce: a confluent-kafka producer sends N records (default 1,000,000) of 100-byte values with
null keys to a 4-partition topic, acks=1, linger.ms=5, for codecs none and lz4 and batch.size
16 KiB (Java's default) and 1 MiB (about librdkafka's default); time from the first produce()
to the end of flush().
Fetch: M records (default 500,000; the mock keeps only ~5 MiB per partition, so they are spread
over 16 partitions) are written, then a confluent-kafka consumer assigned to every partition
reads them all (fetch.queue.backoff.ms=10, as bench/consumer.py); time from assign() to the
last record.

``--baseline REV`` also runs the samsa broker of git revision REV (checked out in a temporary
worktree, imported from there; it gets this checkout's mypyc-compiled modules whose source is
unchanged) in the same run, and prints new/baseline ratios: the way to show what a change to
the broker costs or gains, measured side by side on the same machine.

Rows are run ``--repeat`` times (default 3), the two brokers alternating, and the best run is
kept, so other load on the machine slows both alike.  Prints records/s and MB/s (of values),
the broker process's CPU share, and samsa/mock ratios.  The goal is samsa
ingest >= 1.0x the mock's (issue 17).

It also prints each run's CPU per million records, the broker's and the client's (this
process), and the "CPU ratio": (mock + client) / (samsa + client) CPU per record.  When the
client and the broker together keep every core busy, as on a 2-core machine, the throughput
ratio follows that ratio, so it tells how much of a gap is the broker's CPU per record.

``--pin`` puts this process (the client) on the first half of the CPUs and both brokers on the
other half, so that a broker never takes CPU time from the client (as on a cluster, where
clients run on machines of their own).  On a 2-core machine each then has one core, and a
broker that keeps pace with the client shows a ratio of about 1.0x whatever its CPU per
record; its CPU share then tells the headroom left.

``--profile FILE`` runs the samsa broker under py-spy (``pip install py-spy``) and writes FILE:
speedscope JSON, a flame graph if FILE ends in .svg, collapsed stacks if it ends in .txt.  Only
busy samples are kept (no --idle); PYSPY_FLAGS="--gil" keeps only samples holding the GIL,
PYSPY_RATE sets samples per second.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VALUE_SIZE = 100
PRODUCE_PARTITIONS = 4
FETCH_PARTITIONS = 16
CODECS = ("none", "lz4")
# 16 KiB is Java's default batch.size; librdkafka's default (1,000,000) is about the 1 MiB row.
BATCH_SIZES = (16 * 1024, 1024 * 1024)


@dataclass
class Server:
    name: str
    bootstrap: str
    proc: subprocess.Popen[str]


def make_values(count: int = 1024) -> list[bytes]:
    """Half-random values (hex of random bytes) so compression has something to do."""
    return [os.urandom(VALUE_SIZE // 2).hex().encode() for _ in range(count)]


@contextmanager
def samsa_broker(data_dir: str, profile: str | None, *, name: str = "samsa",
                 source: str | None = None, cpus: set[int] | None = None) -> Iterator[Server]:
    """``samsa broker`` from this checkout, or imported from the checkout at ``source``; on
    ``cpus`` only if given (every thread of it)."""
    cmd = [sys.executable, "-m", "samsa.cli", "broker", "--host", "127.0.0.1", "--port", "0",
           "--data-dir", data_dir, "--log-level", "WARNING", "--config",
           f"num.partitions={PRODUCE_PARTITIONS}"]
    if profile:
        py_spy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
        fmt = {".svg": "flamegraph", ".txt": "raw"}.get(os.path.splitext(profile)[1], "speedscope")
        # PYSPY_RATE (samples/s) and PYSPY_FLAGS (e.g. "--gil --nonblocking") tune the profile.
        rate = os.environ.get("PYSPY_RATE", "250")
        flags = os.environ.get("PYSPY_FLAGS", "").split()
        cmd = [py_spy, "record", "--threads", "--rate", rate, *flags, "--format", fmt,
               "-o", profile, "--", *cmd]
    env = None
    if source is not None:  # its samsa package first on sys.path, before the editable install
        env = {**os.environ, "PYTHONPATH": source}
    proc = subprocess.Popen(on_cpus(cmd, cpus), stdout=subprocess.PIPE, text=True, cwd=source,
                            env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    while line and not line.startswith("listening on "):
        line = proc.stdout.readline()
    if not line:
        proc.wait(10)
        raise RuntimeError("samsa broker did not start")
    try:
        yield Server(name, line.split()[-1], proc)
    finally:
        # SIGINT reaches the broker (py-spy forwards it and then writes its profile).
        proc.send_signal(signal.SIGINT if profile else signal.SIGTERM)
        proc.wait(60)


def on_cpus(cmd: list[str], cpus: set[int] | None) -> list[str]:
    """``cmd`` run on ``cpus`` only, every thread it starts too (no taskset needed)."""
    if cpus is None:
        return cmd
    pin = "import os, sys; os.sched_setaffinity(0, %r); os.execvp(sys.argv[1], sys.argv[1:])"
    return [sys.executable, "-c", pin % sorted(cpus), *cmd]


def split_cpus() -> tuple[set[int], set[int]]:
    """(client CPUs, broker CPUs): this process's CPUs, the first half for the client."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("--pin needs at least 2 CPUs")
    half = len(cpus) // 2
    return set(cpus[:half]), set(cpus[half:])


@contextmanager
def mock_cluster(topics: list[tuple[str, int]], cpus: set[int] | None = None) -> Iterator[Server]:
    cmd = [sys.executable, "-m", "tests.support.mock_cluster", "--brokers", "1"]
    for name, partitions in topics:
        cmd += ["--topic", f"{name}:{partitions}"]
    # The mock's driver lives in the test tree: run it from the repository root.
    proc = subprocess.Popen(on_cpus(cmd, cpus), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, cwd=REPO_ROOT)
    assert proc.stdout is not None
    bootstrap = proc.stdout.readline().strip()
    if not bootstrap:
        proc.wait(10)
        raise RuntimeError("mock cluster did not start")
    try:
        yield Server("mock", bootstrap, proc)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


@contextmanager
def worktree(revision: str) -> Iterator[str]:
    """A temporary checkout of ``revision`` (git worktree), removed afterwards."""
    path = tempfile.mkdtemp(prefix="samsa-baseline-")
    subprocess.run(["git", "-C", REPO_ROOT, "worktree", "add", "--detach", "--force", path,
                    revision], check=True, capture_output=True)
    try:
        _copy_compiled(path)
        yield path
    finally:
        subprocess.run(["git", "-C", REPO_ROOT, "worktree", "remove", "--force", path],
                       check=False, capture_output=True)
        shutil.rmtree(path, ignore_errors=True)


def _copy_compiled(tree: str) -> None:
    """Give the worktree this checkout's mypyc-compiled modules (setup.py) whose source is the
    same in both, so that a baseline does not run the pure-Python fallback where this checkout
    runs compiled code; a compiled module whose source differs is left out, and said so."""
    for shim in glob.glob(os.path.join(REPO_ROOT, "samsa", "**", "*.so"), recursive=True):
        rel = os.path.relpath(shim, REPO_ROOT)
        stem = rel.split(".", 1)[0].removesuffix("__mypyc")
        source = stem + ".py"
        theirs = os.path.join(tree, source)
        if not os.path.exists(theirs):
            continue
        with open(os.path.join(REPO_ROOT, source), "rb") as a, open(theirs, "rb") as b:
            same = a.read() == b.read()
        if same:
            shutil.copy2(shim, os.path.join(tree, rel))
        elif not rel.split(".", 1)[0].endswith("__mypyc"):
            print(f"baseline: {source} differs from this checkout's, it runs pure Python there",
                  flush=True)


def cpu_times(pid: int) -> tuple[float, float]:
    """(user, system) CPU time of a process so far, in seconds (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    return sum(cpu_times(pid))


def produce(bootstrap: str, topic: str, n: int, codec: str, batch_size: int,
            values: list[bytes]) -> float:
    """Seconds to produce and flush ``n`` records."""
    errors: list[object] = []
    # Delivery reports only for failures: a Python callback per record would cap the client
    # well below what either broker can take.
    config = {"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
              "compression.type": codec, "queue.buffering.max.messages": 1_000_000,
              "queue.buffering.max.kbytes": 1_048_576, "batch.size": batch_size,
              "delivery.report.only.error": True,
              "on_delivery": lambda err, msg: errors.append(err)}
    producer = Producer(config)

    producer.list_topics(topic, timeout=10)  # connect and learn the topic first
    nv = len(values)
    start = time.perf_counter()
    produce_one = producer.produce
    for i in range(n):
        while True:
            try:
                produce_one(topic, values[i % nv])
                break
            except BufferError:
                producer.poll(0.005)
        if not i & 0x3FFF:
            producer.poll(0)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - start
    if remaining or errors:
        raise RuntimeError(f"{remaining} records undelivered, delivery errors: {errors[:3]}")
    return elapsed


def fetch(bootstrap: str, topic: str, partitions: int) -> tuple[int, float]:
    """(records, seconds) to read every record of ``topic`` from the beginning."""
    # fetch.queue.backoff.ms=10 as in bench/consumer.py: librdkafka's default (1000 ms) can
    # leave the consumer waiting between fetches, and then neither broker is measured.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                         "enable.auto.commit": False, "check.crcs": False,
                         "fetch.queue.backoff.ms": 10})
    try:
        expected = 0
        for p in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            expected += high - low
        start = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        count = 0
        deadline = time.monotonic() + 300
        while count < expected and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 1.0):
                if msg.error() is None:
                    count += 1
        elapsed = time.perf_counter() - start
    finally:
        consumer.close()
    if count < expected:
        raise RuntimeError(f"read {count} of {expected} records")
    return count, elapsed


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(30)


def own_cpu_seconds() -> float:
    """User + system CPU time of this process (the client: its Python thread and
    librdkafka's threads) so far."""
    times = os.times()
    return times.user + times.system


Row = tuple[float, float, float]  # records/s, broker CPU share, client CPU share


def measured_row(server: Server, work: Callable[[], tuple[int, float]]) -> Row:
    """``work()`` -> (records, seconds), as a Row: the broker's and this process's CPU time
    over it, as shares of the seconds."""
    broker0, own0 = cpu_seconds(server.proc.pid), own_cpu_seconds()
    records, seconds = work()
    return (records / seconds, (cpu_seconds(server.proc.pid) - broker0) / seconds,
            (own_cpu_seconds() - own0) / seconds)


def produce_row(server: Server, topic: str, n: int, codec: str, batch_size: int,
                values: list[bytes]) -> Row:
    """One produce run."""
    if server.name != "mock":
        create_topic(server.bootstrap, topic, PRODUCE_PARTITIONS)
    return measured_row(server, lambda: (n, produce(server.bootstrap, topic, n, codec,
                                                      batch_size, values)))


def fetch_row(server: Server, topic: str) -> Row:
    """Reading ``topic`` from the beginning."""
    return measured_row(server, lambda: fetch(server.bootstrap, topic, FETCH_PARTITIONS))


def per_million(share: float, rate: float) -> float:
    """CPU seconds per million records, from a CPU share at ``rate`` records/s."""
    return share / rate * 1e6 if rate else 0.0


def run(servers: list[Server], n: int, fetch_n: int, repeat: int, values: list[bytes],
        codecs: tuple[str, ...] = CODECS, batch_sizes: tuple[int, ...] = BATCH_SIZES
        ) -> dict[tuple[str, str], Row]:
    """Best of ``repeat`` runs per row and broker; the brokers alternate run by run, so a busy
    machine slows both alike."""
    results: dict[tuple[str, str], Row] = {}

    def keep(label: str, server: Server, row: Row) -> None:
        print(f"  {server.name:<5} {label}: {row[0]:>10,.0f} records/s "
              f"(broker CPU {row[1]:.0%}, client CPU {row[2]:.0%})", flush=True)
        if row[0] > results.get((label, server.name), (0.0, 0.0, 0.0))[0]:
            results[(label, server.name)] = row

    for codec in codecs:
        for batch_size in batch_sizes:
            label = f"produce {codec:<4} batch.size={batch_size // 1024} KiB"
            for r in range(repeat):
                for server in servers:
                    topic = f"produce-{codec}-{batch_size}-{r}"
                    keep(label, server, produce_row(server, topic, n, codec, batch_size, values))
    for codec in codecs if fetch_n > 0 else ():
        topic = f"fetch-{codec}"
        for server in servers:
            if server.name != "mock":
                create_topic(server.bootstrap, topic, FETCH_PARTITIONS)
            produce(server.bootstrap, topic, fetch_n, codec, 1024 * 1024, values)
        label = f"fetch   {codec:<4} ({FETCH_PARTITIONS} partitions)"
        for _ in range(repeat):
            for server in servers:
                keep(label, server, fetch_row(server, topic))
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000, help="records per produce run")
    parser.add_argument("--fetch-records", type=int, default=500_000,
                        help="records written then read per fetch run (0: no fetch rows)")
    parser.add_argument("--profile", metavar="FILE", default=None,
                        help="profile the samsa broker with py-spy into FILE")
    parser.add_argument("--repeat", type=int, default=3, help="runs per row (best is kept)")
    parser.add_argument("--only", choices=("samsa", "mock"), default=None,
                        help="benchmark one broker only")
    parser.add_argument("--codec", choices=CODECS, action="append", dest="codecs",
                        help="run this codec's rows only (repeatable)")
    parser.add_argument("--batch-kib", type=int, choices=[b // 1024 for b in BATCH_SIZES],
                        action="append", help="run this batch.size's produce rows only")
    parser.add_argument("--baseline", metavar="REV", default=None,
                        help="also run the samsa broker of git revision REV, same run")
    parser.add_argument("--pin", action="store_true",
                        help="client on the first half of the CPUs, brokers on the other half")
    args = parser.parse_args()
    client_cpus, broker_cpus = split_cpus() if args.pin else (None, None)

    values = make_values()
    topics = [(f"produce-{c}-{b}-{r}", PRODUCE_PARTITIONS)
              for c in CODECS for b in BATCH_SIZES for r in range(args.repeat)]
    topics += [(f"fetch-{c}", FETCH_PARTITIONS) for c in CODECS]
    with ExitStack() as stack:
        data_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="samsa-bench-"))
        samsa = stack.enter_context(samsa_broker(data_dir + "/new", args.profile, cpus=broker_cpus))
        mock = stack.enter_context(mock_cluster(topics, broker_cpus))
        print(f"samsa broker at {samsa.bootstrap}, mock cluster at {mock.bootstrap}", flush=True)
        servers = [s for s in (samsa, mock) if args.only in (None, s.name)]
        if args.baseline:
            source = stack.enter_context(worktree(args.baseline))
            servers.insert(1, stack.enter_context(samsa_broker(
                data_dir + "/base", None, name="base", source=source, cpus=broker_cpus)))
            print(f"baseline: samsa broker of {args.baseline} at {servers[1].bootstrap}",
                  flush=True)
        if client_cpus is not None:
            # This thread's CPUs; librdkafka's threads, started later, inherit them.
            os.sched_setaffinity(0, client_cpus)
            print(f"pinned: client on CPUs {sorted(client_cpus)}, brokers on {sorted(broker_cpus or ())}",
                  flush=True)
        codecs = tuple(args.codecs or CODECS)
        batch_sizes = tuple(k * 1024 for k in args.batch_kib) if args.batch_kib else BATCH_SIZES
        results = run(servers, args.records, args.fetch_records, args.repeat, values, codecs,
                      batch_sizes)

    labels = list(dict.fromkeys(label for label, _ in results))
    mb = VALUE_SIZE / 1e6
    print()
    print(f"{'':<36}{'samsa rec/s':>12}{'MB/s':>7}{'CPU':>6}{'s/M':>6}{'cl s/M':>7}"
          f"{'mock rec/s':>12}{'MB/s':>7}{'CPU':>6}{'s/M':>6}{'cl s/M':>7}{'ratio':>7}"
          f"{'CPU ratio':>10}")
    for label in labels:
        s_rate, s_cpu, s_client = results.get((label, "samsa"), (0.0, 0.0, 0.0))
        m_rate, m_cpu, m_client = results.get((label, "mock"), (0.0, 0.0, 0.0))
        ratio = f"{s_rate / m_rate:.2f}x" if s_rate and m_rate else "-"
        s_cost, s_client_cost = per_million(s_cpu, s_rate), per_million(s_client, s_rate)
        m_cost, m_client_cost = per_million(m_cpu, m_rate), per_million(m_client, m_rate)
        # What the ratio would be if the machine's cores were the only limit: the same work
        # (client + broker CPU per record) spread over them in both runs.
        cpu_ratio = (f"{(m_cost + m_client_cost) / (s_cost + s_client_cost):.2f}x"
                     if s_rate and m_rate else "-")
        print(f"{label:<36}{s_rate:>12,.0f}{s_rate * mb:>7.1f}{s_cpu:>6.0%}{s_cost:>6.2f}"
              f"{s_client_cost:>7.2f}{m_rate:>12,.0f}{m_rate * mb:>7.1f}{m_cpu:>6.0%}"
              f"{m_cost:>6.2f}{m_client_cost:>7.2f}{ratio:>7}{cpu_ratio:>10}")
    if args.baseline:
        print(f"\n{'':<36}{'base rec/s':>12}{'s/M':>6}{'new/base':>10}")
        for label in labels:
            s_rate = results.get((label, "samsa"), (0.0, 0.0, 0.0))[0]
            b_rate, b_cpu, _ = results.get((label, "base"), (0.0, 0.0, 0.0))
            b_cost = per_million(b_cpu, b_rate)
            ratio = f"{s_rate / b_rate:.2f}x" if s_rate and b_rate else "-"
            print(f"{label:<36}{b_rate:>12,.0f}{b_cost:>6.2f}{ratio:>10}")
    print("\nCPU = broker process CPU time / wall time (100% = one core); s/M = broker CPU "
          "seconds per million records; cl s/M = the client's (this process: confluent-kafka's "
          "Python\nthread and librdkafka's threads).  CPU ratio = (mock + its client s/M) / "
          f"(samsa + its client s/M): with all {os.cpu_count()} cores shared and busy, the ratio "
          "the work alone allows.")
    if args.pin:
        print("Pinned: the client's CPUs set the pace; a broker that keeps up shows about 1.0x, "
              "and its CPU share is what it needed to (the CPU ratio is what sharing would give).")
    print("Target (issue 17): samsa produce >= 1.0x mock on every row.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
