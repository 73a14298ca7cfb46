"""Broker CPU per Produce request: a steady, client-independent measure for profiling the broker.

    .venv/bin/python bench/broker_cpu.py [--requests N] [--in-flight K] [--profile FILE]

bench/broker.py answers "how fast against the mock, with confluent-kafka", but its figures move
with whatever else the two cores are doing.  This one replays pre-built ProduceRequest v9
frames (16 KiB batches of 100-byte values, like librdkafka's with batch.size=16384, one
partition per request, acks=1) over one connection with K requests in flight, from a client
that only writes bytes and counts responses, and prints the samsa broker process's CPU time per
request, per codec, and its user part: the rest, system time, is mostly the page-cache write,
whose cost varies with the machine's memory state more than with the broker's code.  Use it to
see whether a broker change costs or saves CPU; use bench/broker.py for the ratios the issue
asks for.  ``--profile FILE`` runs the broker under
py-spy (see bench/broker.py; PYSPY_FLAGS=--gil keeps only samples holding the GIL).

``--baseline REV`` replays the same frames to the broker of git revision REV too (a temporary
worktree, as bench/broker.py), the two brokers alternating for ``--rounds`` rounds (best kept),
and prints new/base CPU per request.  ``--varied`` makes values of 20-180 bytes instead of 100,
the case where records of one batch differ in size.  ``--batch-kib 1024`` replays 1 MiB
batches (about librdkafka's default batch.size) instead of 16 KiB ones.
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import sys
import tempfile
import threading
import time
from contextlib import ExitStack

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from broker import (
    PRODUCE_PARTITIONS,
    Server,
    cpu_times,
    create_topic,
    make_values,
    samsa_broker,
    worktree,
)

from samsa.protocol import ProduceRequest, encode_request
from samsa.records import Compression
from samsa.records.builder import RecordBatchBuilder

TOPIC = "broker-cpu"
BATCH_BYTES = 16 * 1024
PRODUCE_VERSION = 9  # what librdkafka 2.x sends
_SIZE = struct.Struct(">i")


def varied_values(count: int = 1024) -> list[bytes]:
    """Values of 20-180 bytes (hex of random bytes), so that records of a batch differ in size."""
    return [os.urandom(10 + (i * 37) % 81).hex().encode() for i in range(count)]


def build_frames(codec: Compression, count: int, varied: bool = False,
                 batch_bytes: int = BATCH_BYTES) -> list[bytes]:
    """``count`` size-prefixed ProduceRequest frames, one full batch of ``batch_bytes`` each,
    partitions taken in turn."""
    values = varied_values() if varied else make_values()
    frames = []
    now = int(time.time() * 1000)
    for i in range(count):
        builder = RecordBatchBuilder(codec, batch_size_limit=batch_bytes)
        n = 0
        while builder.append(now, None, values[(i * 200 + n) % len(values)]) is not None:
            n += 1
        data = ProduceRequest.PartitionProduceData(
            index=i % PRODUCE_PARTITIONS, records=builder.build())
        request = ProduceRequest(transactional_id=None, acks=1, timeout_ms=30_000, topic_data=[
            ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[data])])
        frames.append(encode_request(request, PRODUCE_VERSION, i, "broker-cpu"))
    return frames


def replay(bootstrap: str, frames: list[bytes], requests: int, in_flight: int) -> float:
    """Send ``requests`` frames (cycling) with at most ``in_flight`` unanswered; seconds taken."""
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    window = threading.Semaphore(in_flight)
    failed: list[BaseException] = []

    def read_responses() -> None:
        try:
            with sock.makefile("rb") as stream:
                for _ in range(requests):
                    head = stream.read(4)
                    if len(head) < 4:
                        raise ConnectionError("the broker closed the connection")
                    stream.read(_SIZE.unpack(head)[0])
                    window.release()
        except Exception as exc:  # noqa: BLE001 - reported by the main thread
            failed.append(exc)
            for _ in range(in_flight):
                window.release()

    reader = threading.Thread(target=read_responses, daemon=True)
    start = time.perf_counter()
    reader.start()
    for i in range(requests):
        window.acquire()
        if failed:
            break
        sock.sendall(frames[i % len(frames)])
    reader.join()
    elapsed = time.perf_counter() - start
    sock.close()
    if failed:
        raise RuntimeError(f"replay failed: {failed[0]!r}")
    return elapsed


def measure(broker: Server, frames: list[bytes], args: argparse.Namespace
            ) -> tuple[float, float]:
    """Broker CPU microseconds per request over one replay (after a warm-up): (user + system,
    user).  The system part is mostly the write into the page cache, whose cost per page
    varies with the machine's memory (a virtual machine's first touch of a page is several
    times a copy); the user part is the broker's own code."""
    replay(broker.bootstrap, frames, 500, args.in_flight)  # warm up
    user0, system0 = cpu_times(broker.proc.pid)
    seconds = replay(broker.bootstrap, frames, args.requests, args.in_flight)
    user1, system1 = cpu_times(broker.proc.pid)
    user = user1 - user0
    cpu = user + system1 - system0
    print(f"  {broker.name:<5} {args.requests:,} requests, {args.in_flight} in flight: "
          f"{args.requests / seconds:>9,.0f} requests/s, broker CPU "
          f"{cpu / args.requests * 1e6:6.1f} us/request (user {user / args.requests * 1e6:.1f}; "
          f"{cpu / seconds:.0%} of a core)", flush=True)
    return cpu / args.requests * 1e6, user / args.requests * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=20_000, help="requests per codec")
    parser.add_argument("--in-flight", type=int, default=8, help="unanswered requests allowed")
    parser.add_argument("--codec", choices=("none", "lz4"), action="append", dest="codecs",
                        help="codecs to run (default: none and lz4)")
    parser.add_argument("--profile", metavar="FILE", default=None,
                        help="profile the samsa broker with py-spy into FILE")
    parser.add_argument("--baseline", metavar="REV", default=None,
                        help="also replay to the samsa broker of git revision REV")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per codec (best kept)")
    parser.add_argument("--varied", action="store_true", help="values of 20-180 bytes")
    parser.add_argument("--batch-kib", type=int, choices=(16, 1024), default=16,
                        help="batch size: 16 KiB (Java's default) or 1 MiB (librdkafka's)")
    args = parser.parse_args()
    codecs = [Compression[c.upper()] for c in (args.codecs or ("none", "lz4"))]
    with ExitStack() as stack:
        data_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="samsa-bench-"))
        brokers = [stack.enter_context(samsa_broker(data_dir + "/new", args.profile))]
        if args.baseline:
            source = stack.enter_context(worktree(args.baseline))
            brokers.append(stack.enter_context(samsa_broker(data_dir + "/base", None,
                                                            name="base", source=source)))
        for broker in brokers:
            create_topic(broker.bootstrap, TOPIC, PRODUCE_PARTITIONS)
        for codec in codecs:
            frames = build_frames(codec, 64 if args.batch_kib == 16 else 8, args.varied,
                                  args.batch_kib * 1024)
            best: dict[str, float] = {}
            best_user: dict[str, float] = {}
            for _ in range(args.rounds):
                for broker in brokers:
                    total, user = measure(broker, frames, args)
                    best[broker.name] = min(best.get(broker.name, float("inf")), total)
                    best_user[broker.name] = min(best_user.get(broker.name, float("inf")), user)
            line = " ".join(f"{name} {us:6.1f} us/request (user {best_user[name]:.1f})"
                            for name, us in best.items())
            if "base" in best:
                line += (f"  new/base {best['samsa'] / best['base']:.3f}"
                         f" (user {best_user['samsa'] / best_user['base']:.3f})")
            print(f"{codec.name.lower():<5}{' varied' if args.varied else ''}: {line}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
