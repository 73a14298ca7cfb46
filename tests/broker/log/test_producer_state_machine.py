"""The Log's idempotent-producer checks against a small independent model of Kafka's rules.

Real v2 batches go through ``Log.append_as_leader``; every outcome (appended at an offset,
duplicate answered with the original offsets and timestamp, INVALID_PRODUCER_EPOCH,
OUT_OF_ORDER_SEQUENCE_NUMBER) must be what the model says.  The model follows Kafka's
ProducerAppendInfo.checkProducerEpoch / checkSequence, ProducerStateEntry.findDuplicateBatch
(NUM_BATCHES_TO_RETAIN = 5, same epoch and same first and last sequence) and
UnifiedLog.append (a duplicate answers NONE with the original first/last offset and
logAppendTime = the original batch's max timestamp):

* a batch at an epoch below the partition's is fenced (INVALID_PRODUCER_EPOCH);
* a higher epoch must start at sequence 0 (OUT_OF_ORDER_SEQUENCE_NUMBER), unless the partition
  knows no epoch of the producer (new or expired: any sequence, any epoch);
* at the same epoch the first sequence must follow the last one, wrapping Int32.MAX -> 0;
  a duplicate of an older batch than the last five is out of order too;
* UNKNOWN_PRODUCER_ID is never answered (Kafka dropped it with KIP-360, 2.5).

Producers restart their epochs, retry any batch they sent, skip sequences and wrap; the log is
restarted cleanly (snapshot at the log end), after a crash (an older snapshot plus replay) and
with no snapshot at all (rebuilt from the log), and producers expire.  The model keeps its
state as of every producer snapshot the log writes; after a crash it rebuilds from the one the
log will load, replaying the batches after it (one rule beyond Kafka's: a replayed batch that
does not follow its producer's last one drops the older batches, as the live state had
forgotten them -- else a new batch reusing their sequences would be dropped as a "retry").
"""

from __future__ import annotations

import copy
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from samsa.broker.log import Log, LogConfig
from samsa.errors import InvalidProducerEpochError, OutOfOrderSequenceNumberError
from samsa.records import RecordBatchBuilder, iter_batches
from tests.support.mutation_budget import examples

INT32_MAX = 2**31 - 1
RETAINED = 5  # ProducerStateEntry.NUM_BATCHES_TO_RETAIN
EXPIRATION_MS = 3_600_000
PIDS = (1000, 1001)
START_MS = 1_700_000_000_000


def wrap(sequence: int) -> int:
    return sequence - INT32_MAX - 1 if sequence > INT32_MAX else sequence


@dataclass(frozen=True)
class Sent:
    """A batch as the model appended it."""

    pid: int
    epoch: int
    first_seq: int
    count: int
    first_offset: int
    max_timestamp: int
    era: int  # expiries before it: a rebuilt producer is expired again unless it is current

    @property
    def last_seq(self) -> int:
        return wrap(self.first_seq + self.count - 1)


def in_sequence(last: int, first: int) -> bool:
    return first == last + 1 or (first == 0 and last == INT32_MAX)


@dataclass
class Entry:
    epoch: int
    era: int
    batches: list[Sent] = field(default_factory=list)  # the last RETAINED, oldest first


class KafkaModel:
    """Kafka's per-partition producer state, written from its rules, not from samsa's code."""

    def __init__(self) -> None:
        self.producers: dict[int, Entry] = {}
        self.log_end = 0
        self.era = 0

    def append(self, pid: int, epoch: int, first_seq: int, count: int, max_ts: int
               ) -> tuple[str, Sent | None]:
        """("appended" | "duplicate", batch) or ("fenced" | "out_of_order", None)."""
        last_seq = wrap(first_seq + count - 1)
        entry = self.producers.get(pid)
        if entry is not None and entry.epoch == epoch:
            for batch in entry.batches:
                if (batch.first_seq, batch.last_seq) == (first_seq, last_seq):
                    return "duplicate", batch
        current = entry.epoch if entry is not None else -1
        if epoch < current:
            return "fenced", None
        if epoch != current:
            if first_seq != 0 and current != -1:
                return "out_of_order", None
        else:
            assert entry is not None
            last = entry.batches[-1].last_seq if entry.batches else -1
            if not in_sequence(last, first_seq):
                return "out_of_order", None
        sent = Sent(pid, epoch, first_seq, count, self.log_end, max_ts, self.era)
        self.log_end += count
        self.replay(sent)
        return "appended", sent

    def replay(self, sent: Sent) -> None:
        entry = self.producers.get(sent.pid)
        if entry is None or entry.epoch != sent.epoch:
            entry = self.producers[sent.pid] = Entry(sent.epoch, sent.era)
        elif entry.batches and not in_sequence(entry.batches[-1].last_seq, sent.first_seq):
            entry.batches = []
        entry.era = sent.era
        entry.batches = [*entry.batches, sent][-RETAINED:]

    def expire(self) -> None:
        self.producers.clear()
        self.era += 1

    def recover(self, snapshot: dict[int, Entry], written: list[Sent], from_offset: int) -> None:
        """After a crash: the snapshot's state, the batches after it replayed, then the
        producers idle since an earlier expiry expired again."""
        self.producers = copy.deepcopy(snapshot)
        for sent in written:
            if sent.first_offset >= from_offset:
                self.replay(sent)
        self.producers = {pid: e for pid, e in self.producers.items() if e.era == self.era}


def build(pid: int, epoch: int, first_seq: int, count: int, ts: int) -> bytes:
    builder = RecordBatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=first_seq,
                                 batch_size_limit=1 << 20)
    for i in range(count):
        builder.append(ts + i, b"k", b"%d-%d-%d-%d" % (pid, epoch, first_seq, i))
    return builder.build()


class ProducerStateMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="samsa-pstate-"))
        self.generation = 0
        self.model = KafkaModel()
        self.written: list[Sent] = []  # every batch the log should hold, in offset order
        self.history: dict[int, list[Sent]] = {pid: [] for pid in PIDS}
        self.clock = START_MS
        self.log_append_time = False
        self.log: Log | None = None
        # The model's producers as of each snapshot file the log wrote, by offset.
        self.snapshots: dict[int, dict[int, Entry]] = {}

    def _config(self) -> LogConfig:
        # Small segments: rolls write producer snapshots every few batches.
        return LogConfig(segment_bytes=600, log_append_time=self.log_append_time,
                         producer_id_expiration_ms=EXPIRATION_MS)

    def _open(self, directory: Path, clean: bool) -> None:
        self.log = Log(directory, self._config(), topic="t", partition=0,
                       clean_shutdown=clean, recovery_point=0, now_ms=self.clock)
        # The broker's periodic expiry would forget producers idle since before a restart.
        self.log.remove_expired_producers(self.clock)

    @initialize(log_append_time=st.booleans())
    def start(self, log_append_time: bool) -> None:
        self.log_append_time = log_append_time
        self._open(self.root / "g0" / "t-0", clean=True)

    def _snapshot_files(self) -> dict[int, int]:
        assert self.log is not None
        return {int(p.name.split(".")[0]): p.stat().st_ino
                for p in self.log.dir.glob("*.snapshot")}

    def _note_snapshots(self, before: dict[int, int], state: dict[int, Entry]) -> None:
        """Remember ``state`` for every snapshot file written since ``before`` was listed."""
        for offset, inode in self._snapshot_files().items():
            if before.get(offset) != inode:
                self.snapshots[offset] = copy.deepcopy(state)

    def teardown(self) -> None:
        if self.log is not None:
            self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    # --- producers ----------------------------------------------------------------------

    @rule(pid=st.sampled_from(PIDS),
          kind=st.sampled_from(["next", "next", "next", "retry", "retry", "bump", "zero", "zero",
                                "gap", "older_epoch", "wrap", "anywhere"]),
          pick=st.integers(0, 12), count=st.integers(1, 3))
    def produce(self, pid: int, kind: str, pick: int, count: int) -> None:
        entry = self.model.producers.get(pid)
        epoch = entry.epoch if entry is not None else 0
        next_seq = 0
        if entry is not None and entry.batches:
            next_seq = wrap(entry.batches[-1].last_seq + 1)
        if kind == "retry":
            sent = self.history[pid]
            if not sent:
                return
            # Any earlier batch, byte for byte the same sequences and epoch: within the last
            # five it is a duplicate, older ones are out of order.
            old = sent[-1 - pick % len(sent)]
            epoch, first_seq, count = old.epoch, old.first_seq, old.count
        elif kind == "bump":
            epoch, first_seq = epoch + 1 + pick % 2, 0 if pick % 3 else pick
        elif kind == "zero":
            first_seq = 0
        elif kind == "gap":
            first_seq = wrap(next_seq + 1 + pick)
        elif kind == "older_epoch":
            epoch, first_seq = max(epoch - 1, 0), next_seq
        elif kind == "wrap":
            first_seq = INT32_MAX - pick % 3
        elif kind == "anywhere":
            first_seq = pick * 1000 + 1
        else:
            first_seq = next_seq
        self._send(pid, epoch, first_seq, count)

    def _send(self, pid: int, epoch: int, first_seq: int, count: int) -> None:
        assert self.log is not None
        self.clock += 7
        now = self.clock
        create_ts = now - 1000
        max_ts = now if self.log_append_time else create_ts + count - 1
        state_before = copy.deepcopy(self.model.producers)
        files_before = self._snapshot_files()
        expected, batch = self.model.append(pid, epoch, first_seq, count, max_ts)
        event(expected)
        if batch is not None and batch.last_seq < batch.first_seq:
            event("wrapped within a batch")
        data = build(pid, epoch, first_seq, count, create_ts)
        try:
            result = self.log.append_as_leader(data, leader_epoch=0, now_ms=now)
            # A roll before the append snapshots the state before it.
            self._note_snapshots(files_before, state_before)
        except InvalidProducerEpochError:
            assert expected == "fenced", (expected, pid, epoch, first_seq, count)
            return
        except OutOfOrderSequenceNumberError:
            assert expected == "out_of_order", (expected, pid, epoch, first_seq, count)
            return
        assert batch is not None, (f"appended/duplicate, model says {expected}",
                                   pid, epoch, first_seq, count)
        got = (result.duplicate, result.base_offset, result.last_offset)
        want = (expected == "duplicate", batch.first_offset, batch.first_offset + batch.count - 1)
        assert got == want, (pid, epoch, first_seq, count)
        if expected == "duplicate":
            assert result.log_append_time_ms == batch.max_timestamp
        else:
            assert result.log_append_time_ms == (now if self.log_append_time else -1)
            self.written.append(batch)
            self.history[pid].append(batch)

    # --- the broker -----------------------------------------------------------------------

    @rule(kind=st.sampled_from(["clean", "crash", "crash_without_snapshots"]))
    def restart(self, kind: str) -> None:
        assert self.log is not None
        old_dir = self.log.dir
        if kind == "clean":
            self.log.close()  # writes a snapshot at the log end
            self.snapshots[self.model.log_end] = copy.deepcopy(self.model.producers)
            self._open(old_dir, clean=True)
            return
        self.generation += 1
        new_dir = self.root / f"g{self.generation}" / "t-0"
        shutil.copytree(old_dir, new_dir)  # the files as a crash would leave them
        self.log.close()
        if kind == "crash_without_snapshots":
            for snapshot in new_dir.glob("*.snapshot"):
                snapshot.unlink()
        else:
            # The snapshot at the log end (if a roll just wrote one) goes: replay from older.
            newest = sorted(new_dir.glob("*.snapshot"))[-1:]
            for snapshot in newest:
                snapshot.unlink()
        self._open(new_dir, clean=False)
        loaded = [offset for offset in self._snapshot_files() if offset <= self.model.log_end]
        start = max(loaded, default=0)
        self.model.recover(self.snapshots[start] if loaded else {}, self.written, start)

    @rule()
    def roll(self) -> None:
        assert self.log is not None
        before = self._snapshot_files()
        self.log.roll(self.clock)
        self._note_snapshots(before, self.model.producers)

    @rule()
    def expire_producers(self) -> None:
        assert self.log is not None
        self.clock += EXPIRATION_MS
        removed = self.log.remove_expired_producers(self.clock)
        assert removed == len(self.model.producers)
        self.model.expire()

    @invariant()
    def log_end_matches(self) -> None:
        if self.log is not None:
            assert self.log.log_end_offset == self.model.log_end

    def check_contents(self) -> None:
        assert self.log is not None
        stored: list[tuple[int, int, int, int]] = []
        offset = 0
        while offset < self.log.log_end_offset:  # a read stays within one segment
            data = self.log.read(offset, 1 << 30).records
            batches = list(iter_batches(data if isinstance(data, bytes) else data.read()))
            assert batches, f"nothing read at offset {offset}"
            stored += [(b.producer_id, b.producer_epoch, b.base_sequence, b.base_offset)
                       for b in batches]
            offset = batches[-1].last_offset + 1
        assert stored == [(s.pid, s.epoch, s.first_seq, s.first_offset) for s in self.written]

    @rule()
    def read_back(self) -> None:
        self.check_contents()


ProducerStateMachine.TestCase.settings = settings(
    max_examples=examples(150), stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
TestProducerState = ProducerStateMachine.TestCase
