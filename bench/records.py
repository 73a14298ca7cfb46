"""Record batch build/read throughput: samsa.records vs kafka-python's pure-Python record code.

    .venv/bin/python bench/records.py [--records N] [--repeat R]

For each codec (none, lz4) and batch size limit (16 KiB as a producer, 1 MiB), builds N records
of 100-byte values (null keys, no headers) into batches the way a producer fills them (append
until the builder refuses, then start a new batch), then reads them back from one concatenated
buffer (as a consumer reads a fetch response) with CRC checks on, touching every value.
Prints records/s for both libraries and samsa's speed-up.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords as KafkaPythonMemoryRecords

from samsa.records import Compression, RecordBatchBuilder, iter_batches

VALUE_SIZE = 100
BASE_TS = 1_700_000_000_000


def make_values(count: int = 1024) -> list[bytes]:
    """Half-random values (hex of random bytes) so compression has something to do."""
    return [os.urandom(VALUE_SIZE // 2).hex().encode() for _ in range(count)]


def samsa_build(n: int, codec: Compression, limit: int, values: list[bytes]) -> list[bytes]:
    batches: list[bytes] = []
    nvalues = len(values)
    builder = RecordBatchBuilder(compression=codec, batch_size_limit=limit)
    append = builder.append
    for i in range(n):
        value = values[i % nvalues]
        if append(BASE_TS + (i >> 10), None, value) is None:
            batches.append(builder.build())
            builder = RecordBatchBuilder(compression=codec, batch_size_limit=limit)
            append = builder.append
            append(BASE_TS + (i >> 10), None, value)
    batches.append(builder.build())
    return batches


def samsa_read(buf: bytes) -> int:
    count = 0
    size = 0
    for batch in iter_batches(buf, check_crcs=True):
        for record in batch:
            size += len(record.value)  # type: ignore[arg-type]
            count += 1
    return count


def kafka_python_build(n: int, codec: Compression, limit: int, values: list[bytes]) -> list[bytes]:
    def new() -> DefaultRecordBatchBuilder:
        return DefaultRecordBatchBuilder(
            magic=2,
            compression_type=int(codec),
            is_transactional=False,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            batch_size=limit,
        )

    batches: list[bytes] = []
    nvalues = len(values)
    builder = new()
    offset = 0
    for i in range(n):
        value = values[i % nvalues]
        if builder.append(offset, BASE_TS + (i >> 10), None, value, []) is None:
            batches.append(bytes(builder.build()))
            builder = new()
            offset = 0
            builder.append(offset, BASE_TS + (i >> 10), None, value, [])
        offset += 1
    batches.append(bytes(builder.build()))
    return batches


def kafka_python_read(buf: bytes) -> int:
    count = 0
    size = 0
    records = KafkaPythonMemoryRecords(buf)
    while records.has_next():
        batch = records.next_batch()
        if not batch.validate_crc():
            raise RuntimeError("kafka-python reports a bad CRC")
        for record in batch:
            size += len(record.value)
            count += 1
    return count


def timed(fn: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - start, result


def run_row(n: int, codec: Compression, limit: int, values: list[bytes], repeat: int) -> dict[str, float]:
    """Best of ``repeat`` runs per library; the libraries alternate so load noise hits both."""
    out: dict[str, float] = {}
    for _ in range(repeat):
        for name, build, read in (
            ("samsa", samsa_build, samsa_read),
            ("kafka-python", kafka_python_build, kafka_python_read),
        ):
            build_s, batches = timed(build, n, codec, limit, values)
            buf = b"".join(batches)
            read_s, count = timed(read, buf)
            if count != n:
                raise RuntimeError(f"{name} read {count} records, expected {n}")
            out[f"{name} build"] = max(out.get(f"{name} build", 0.0), n / build_s)
            out[f"{name} read"] = max(out.get(f"{name} read", 0.0), n / read_s)
            out[f"{name} batches"] = len(batches)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=1, help="best of this many runs per row")
    args = parser.parse_args()
    n = args.records
    values = make_values()
    print(
        f"{n:,} records of {VALUE_SIZE}-byte values, null keys, no headers; CRC checked on read; "
        f"best of {args.repeat}"
    )
    print()
    head = (
        f"{'codec':<6} {'batch':>7} {'recs/batch':>10} {'op':<5} "
        f"{'samsa rec/s':>13} {'kafka-python rec/s':>19} {'ratio':>7}"
    )
    print(head)
    print("-" * len(head))
    for codec in (Compression.NONE, Compression.LZ4):
        for limit in (16 * 1024, 1024 * 1024):
            row = run_row(n, codec, limit, values, args.repeat)
            per_batch = n / row["samsa batches"]
            label = f"{limit // 1024} KiB"
            for op in ("build", "read"):
                ours = row[f"samsa {op}"]
                theirs = row[f"kafka-python {op}"]
                print(
                    f"{codec.name.lower():<6} {label:>7} {per_batch:>10.0f} {op:<5} "
                    f"{ours:>13,.0f} {theirs:>19,.0f} {ours / theirs:>6.2f}x"
                )
    print()
    print("ratio = samsa / kafka-python (higher is better for samsa)")


if __name__ == "__main__":
    main()
