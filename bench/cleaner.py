"""Log cleaner throughput and memory next to produce throughput, on one samsa broker.

    .venv/bin/python bench/cleaner.py [--records N] [--keys K] [--value-bytes B]
                                      [--buffer-mib M ...] [--segment-mib S]

For each dedupe buffer size (``--buffer-mib``, repeatable; default 128, Kafka's default, and 1,
too small for the keys, so the cleaner cleans what fits and goes on in later rounds) a fresh
``samsa broker`` process (log level INFO, its stderr read for the cleaner's lines) gets a
one-partition compacted topic (segment.bytes S MiB, min.cleanable.dirty.ratio 1.0, so nothing is
cleaned while writing).

Produce: a confluent-kafka producer (acks=1, linger.ms=5, batch.size 1 MiB) writes N updates
(default 1,000,000) over K keys (default 100,000) with B-byte values (default 100); time from the
first produce() to the end of flush(); MB/s counts keys and values.
Clean: the topic's min.cleanable.dirty.ratio is lowered to 0.01 and the clock runs until the
broker's ``cleaner-offset-checkpoint`` reaches the active segment (all rounds).  Reported: the
wall time of that, and the cleaner's own figures summed over its rounds from its "cleaned ..."
log lines (MB read, records read, seconds), as MB/s and records/s.
Memory: the broker's resident memory (VmRSS) just before cleaning and its peak (VmHWM, reset
just before) during cleaning; the growth is compared with the dedupe buffer.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from samsa.broker.log.checkpoint import read_offset_checkpoint
from samsa.broker.log.cleaner_manager import CLEANER_OFFSET_CHECKPOINT

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TOPIC = "bench-changelog"
MIB = 1024 * 1024
CLEANED = re.compile(r"cleaned \S+: offsets (\d+)\.\.(\d+) .* (\d+) of (\d+) records kept, "
                     r"([\d.]+) MB read, ([\d.]+) MB written, in ([\d.]+) s")


@dataclass
class Broker:
    proc: subprocess.Popen[str]
    bootstrap: str
    data_dir: Path
    lines: list[str] = field(default_factory=list)


@contextmanager
def samsa_broker(data_dir: Path, config: dict[str, object]) -> Iterator[Broker]:
    cmd = [sys.executable, "-m", "samsa.cli", "broker", "--host", "127.0.0.1", "--port", "0",
           "--data-dir", str(data_dir), "--log-level", "INFO"]
    for key, value in config.items():
        cmd += ["--config", f"{key}={value}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=REPO_ROOT)
    assert proc.stdout is not None and proc.stderr is not None
    line = proc.stdout.readline()
    while line and not line.startswith("listening on "):
        line = proc.stdout.readline()
    if not line:
        proc.wait(10)
        raise RuntimeError("samsa broker did not start")
    broker = Broker(proc, line.split()[-1], data_dir)
    stderr = proc.stderr

    def drain() -> None:  # keep the pipe empty; keep the cleaner's lines
        for text in stderr:
            if " cleaned " in text or "ERROR" in text:
                broker.lines.append(text.rstrip())

    threading.Thread(target=drain, daemon=True).start()
    try:
        yield broker
    finally:
        proc.terminate()
        proc.wait(60)


def proc_status(pid: int, field_name: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field_name} for process {pid}")


def produce(bootstrap: str, n: int, keys: int, value_bytes: int) -> tuple[float, int]:
    """(seconds, key + value bytes) to write ``n`` updates over ``keys`` keys."""
    errors: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
                         "batch.size": MIB, "queue.buffering.max.messages": 1_000_000,
                         "queue.buffering.max.kbytes": 1_048_576,
                         "delivery.report.only.error": True,
                         "on_delivery": lambda err, msg: errors.append(err)})
    producer.list_topics(TOPIC, timeout=10)
    values = [os.urandom(value_bytes // 2).hex().encode().ljust(value_bytes, b"v")
              for _ in range(1024)]
    key_list = [b"key-%09d" % k for k in range(keys)]
    payload = 0
    produce_one = producer.produce
    start = time.perf_counter()
    for i in range(n):
        key = key_list[(i * 7919) % keys]  # every key once per `keys` updates, spread out
        value = values[i & 1023]
        payload += len(key) + len(value)
        while True:
            try:
                produce_one(TOPIC, value, key=key)
                break
            except BufferError:
                producer.poll(0.005)
        if not i & 0x3FFF:
            producer.poll(0)
        if not i % 200_000 and i:
            print(f"    produced {i:,}", flush=True)
    remaining = producer.flush(300)
    elapsed = time.perf_counter() - start
    if remaining or errors:
        raise RuntimeError(f"{remaining} records undelivered, delivery errors: {errors[:3]}")
    return elapsed, payload


@dataclass
class Row:
    buffer: int
    produce_rate: float
    produce_mb_s: float
    log_mb_before: float
    log_mb_after: float
    clean_wall_s: float
    rounds: int
    mb_read: float
    records_read: int
    cleaner_s: float
    rss_before: int
    rss_peak: int


def log_bytes(data_dir: Path) -> int:
    return sum(p.stat().st_size for p in (data_dir / f"{TOPIC}-0").glob("*.log"))


def run(buffer: int, args: argparse.Namespace) -> Row:
    with tempfile.TemporaryDirectory(prefix="samsa-bench-cleaner-") as tmp:
        config = {"log.cleaner.backoff.ms": 100, "log.cleaner.dedupe.buffer.size": buffer}
        with samsa_broker(Path(tmp), config) as broker:
            topic_config = {"cleanup.policy": "compact",
                            "segment.bytes": str(args.segment_mib * MIB),
                            "min.cleanable.dirty.ratio": "1.0"}
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            admin.create_topics([NewTopic(TOPIC, 1, 1, config=topic_config)])[TOPIC].result(30)
            print(f"  buffer {buffer / MIB:g} MiB: producing {args.records:,} updates over "
                  f"{args.keys:,} keys", flush=True)
            seconds, payload = produce(broker.bootstrap, args.records, args.keys,
                                       args.value_bytes)
            before = log_bytes(broker.data_dir)
            active = max(int(p.stem) for p in (broker.data_dir / f"{TOPIC}-0").glob("*.log"))
            pid = broker.proc.pid
            rss_before = proc_status(pid, "VmRSS")
            Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM starts again from VmRSS
            print(f"  cleaning {before / 1e6:.1f} MB", flush=True)
            resource = ConfigResource("topic", TOPIC, set_config={
                **topic_config, "min.cleanable.dirty.ratio": "0.01"})
            start = time.perf_counter()
            admin.alter_configs([resource])[resource].result(30)
            checkpoint = Path(tmp) / CLEANER_OFFSET_CHECKPOINT
            deadline = time.monotonic() + 3600
            while read_offset_checkpoint(checkpoint).get((TOPIC, 0), -1) < active:
                if broker.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"cleaning did not finish: {broker.lines[-5:]}")
                time.sleep(0.01)
            wall = time.perf_counter() - start
            rss_peak = proc_status(pid, "VmHWM")
            time.sleep(0.2)  # the last "cleaned" line is logged before the checkpoint
            rounds = [m for m in map(CLEANED.search, broker.lines) if m]
            if not rounds:
                raise RuntimeError(f"no cleaning logged: {broker.lines[-5:]}")
            return Row(buffer, args.records / seconds, payload / 1e6 / seconds, before / 1e6,
                       log_bytes(broker.data_dir) / 1e6, wall, len(rounds),
                       sum(float(m.group(5)) for m in rounds),
                       sum(int(m.group(4)) for m in rounds),
                       sum(float(m.group(7)) for m in rounds), rss_before, rss_peak)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000, help="updates to produce")
    parser.add_argument("--keys", type=int, default=100_000, help="distinct keys")
    parser.add_argument("--value-bytes", type=int, default=100, help="bytes per value")
    parser.add_argument("--buffer-mib", type=float, action="append", dest="buffers",
                        help="log.cleaner.dedupe.buffer.size in MiB (repeatable; "
                             "default: 128 and 1)")
    parser.add_argument("--segment-mib", type=int, default=8, help="segment.bytes in MiB")
    args = parser.parse_args()
    buffers = [int(b * MIB) for b in (args.buffers or [128, 1])]

    rows = [run(buffer, args) for buffer in buffers]
    print()
    print(f"{'buffer':>8}{'produce rec/s':>15}{'MB/s':>7}{'log MB':>15}{'rounds':>7}"
          f"{'clean s':>9}{'rec/s':>11}{'MB/s':>7}{'cleaner rec/s':>15}{'MB/s':>7}"
          f"{'RSS MiB':>9}{'peak +MiB':>10}")
    for r in rows:
        print(f"{r.buffer / MIB:>5g}MiB{r.produce_rate:>15,.0f}{r.produce_mb_s:>7.1f}"
              f"{r.log_mb_before:>7.1f}->{r.log_mb_after:<6.2f}{r.rounds:>7}"
              f"{r.clean_wall_s:>9.2f}{args.records / r.clean_wall_s:>11,.0f}"
              f"{r.log_mb_before / r.clean_wall_s:>7.1f}"
              f"{r.records_read / r.cleaner_s:>15,.0f}{r.mb_read / r.cleaner_s:>7.1f}"
              f"{r.rss_before / MIB:>9.0f}{(r.rss_peak - r.rss_before) / MIB:>10.1f}")
    print("\nclean s: from lowering min.cleanable.dirty.ratio to the checkpoint at the active "
          "segment (rec/s, MB/s: of the records and log bytes written); cleaner rec/s, MB/s: "
          "records and MB read over the cleaner's own time, summed over its rounds (the clean "
          "section is read again each round); peak +MiB: the broker's peak resident memory "
          "during cleaning above its resident memory before, next to the buffer.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
