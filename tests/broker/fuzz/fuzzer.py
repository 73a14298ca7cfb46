"""The fuzzing loop: hypothesis draws seeds and mutations (mutations.py), a Sender delivers them
to the broker subprocess on several connections at once, and after every example the broker
must be alive and must have logged no uncaught exception; every few examples its RSS and
descriptors are sampled and checked against bounds.

Hypothesis runs in chunks of ``CHUNK`` examples, each with its own seed, until the time budget
is spent, so a run is bounded in time but reproducible chunk by chunk (the first seed is
printed).  Only the generate phase runs: a failure is not shrunk against a live broker whose
state the earlier inputs changed; instead the failing example's inputs and the ones before it
are written to the findings directory, to be replayed (and kept in tests/broker/fuzz/corpus/
once understood, see test_regressions.py).
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from tests.broker.fuzz.mutations import Input, mutate
from tests.broker.fuzz.open_bugs import open_bug_of
from tests.broker.fuzz.seeds import SEEDS
from tests.broker.fuzz.target import FuzzTarget, Resources, Sender, tcp_states

CHUNK = 25  # examples per hypothesis run: the time budget is checked between runs
SAMPLE_EVERY = 10  # examples between resource samples
HISTORY = 50  # inputs kept to write out with a finding
SETTLE_POLLS = 300  # x 0.1 s: how long the broker may take to close what we closed, at the end
_CONNECTIONS = st.integers(1, 3)  # inputs per example, each on its own connection
_SEED_INDEX = st.integers(0, len(SEEDS) - 1)
# Bounds.  RSS: what the broker may grow by over the whole run (its own caches, created
# topics' logs); a frame or batch that makes it allocate what it claims passes these at once.
# Sockets: ours still open (parked), plus the healthy client's and a slack for connections the
# broker has not noticed closing yet.
RSS_GROWTH_KB = 200 * 1024
RSS_PER_PARTITION_KB = 32  # a created partition's log objects (about 10 kB measured)
SOCKET_SLACK = 16
FILES_PER_PARTITION = 4  # a segment's .log, .index, .timeindex (+ a spare while rolling)
FILE_SLACK = 16


@dataclass
class FuzzReport:
    seconds: float = 0.0
    examples: int = 0
    inputs: int = 0
    first_seed: int = 0
    baseline: Resources | None = None
    peak_rss_kb: int = 0
    peak_fds: int = 0
    partitions_created: int = 0
    samples: list[Resources] = field(default_factory=list)
    send: dict[str, int] = field(default_factory=dict)
    slowest: list[tuple[float, list[tuple[int, str]]]] = field(default_factory=list)
    open_bugs: dict[str, int] = field(default_factory=dict)  # open_bugs.py: records seen

    @property
    def inputs_per_second(self) -> float:
        return self.inputs / self.seconds if self.seconds else 0.0

    def summary(self) -> str:
        base = self.baseline
        assert base is not None
        n = len(self.samples)
        quarters = [self.samples[min(n * q // 4, n - 1)].rss_kb // 1024 for q in (1, 2, 3, 4)
                    ] if n else []
        return (f"fuzz: {self.inputs} inputs ({self.examples} examples) in {self.seconds:.1f} s"
                f" = {self.inputs_per_second:.0f} inputs/s; first hypothesis seed "
                f"{self.first_seed}; outcomes {self.send}; RSS {base.rss_kb // 1024} -> peak "
                f"{self.peak_rss_kb // 1024} MiB (by quarter of the run: {quarters} MiB); fds "
                f"{base.fds} -> peak {self.peak_fds}; "
                f"{self.partitions_created} partitions created; open bugs hit: "
                f"{self.open_bugs}; examples over 1 s: {sorted(self.slowest, reverse=True)[:5]}")


class FuzzFailure(AssertionError):
    pass


class Fuzzer:
    def __init__(self, target: FuzzTarget, findings: Path, *, healthy: Any = None) -> None:
        self.target = target
        self.findings = findings
        self.healthy = healthy
        self.sender = Sender(target.port)
        self.history: collections.deque[Input] = collections.deque(maxlen=HISTORY)
        self.report = FuzzReport()
        self.failure: FuzzFailure | None = None
        self._base_partitions = 0

    # -- checks ------------------------------------------------------------------------------

    def fail(self, what: str, current: list[Input], *, stalled: bool = False) -> None:
        if stalled:
            what += "\nThe broker's threads:\n" + self.target.dump_stacks()
        self.findings.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        paths = []
        for i, item in enumerate([*self.history, *current]):
            path = self.findings / f"{stamp}-{i:03d}.bin"
            path.write_bytes(item.data)
            path.with_suffix(".txt").write_text(f"{item.how}\nframed={item.framed}\n")
            paths.append(path)
        self.failure = FuzzFailure(
            f"{what}\nThe last {len(current)} input(s) (what the broker got just before) and "
            f"the {len(self.history)} before them are in {self.findings} ({paths[-1].name} is "
            f"the last); replay them with tests/broker/fuzz/test_regressions.py by copying "
            f"the culprit to tests/broker/fuzz/corpus/.\nLast mutations: "
            f"{[i.how for i in current]}")
        raise self.failure

    def check(self, current: list[Input], sample: bool) -> None:
        target = self.target
        if not target.alive():
            assert target.process.proc is not None
            self.fail(f"the broker died (exit code {target.process.proc.poll()}); its stderr "
                      f"ends with:\n{target.process.stderr_text()[-3000:]}", current)
        log = target.new_log()
        records = target.uncaught(log)
        if any(open_bug_of(r) is None for r in records):
            # The broker's stderr is line-buffered: a traceback's last lines (where an open
            # bug's signature is) may not be written yet.
            time.sleep(0.5)
            records = target.uncaught(log + target.new_log())
        uncaught = []
        for record in records:
            bug = open_bug_of(record)
            if bug is None:
                uncaught.append(record)
            else:
                self.report.open_bugs[bug] = self.report.open_bugs.get(bug, 0) + 1
        if uncaught:
            self.fail("the broker logged an uncaught exception:\n" + "\n".join(uncaught)[-6000:],
                      current)
        if self.healthy is not None and self.healthy.errors:
            self.fail(f"the healthy client was not served: {self.healthy.errors}", current,
                      stalled=True)
        if sample:
            self.check_resources(current)

    def check_resources(self, current: list[Input]) -> None:
        base = self.report.baseline
        assert base is not None
        now = self.target.resources()
        self.report.samples.append(now)
        self.report.peak_rss_kb = max(self.report.peak_rss_kb, now.rss_kb)
        self.report.peak_fds = max(self.report.peak_fds, now.fds)
        created = self.target.partitions() - self._base_partitions
        self.report.partitions_created = created
        rss_allowed = base.rss_kb + RSS_GROWTH_KB + RSS_PER_PARTITION_KB * max(created, 0)
        if now.rss_kb > rss_allowed:
            self.fail(f"the broker's RSS grew from {base.rss_kb} kB to {now.rss_kb} kB (bound: "
                      f"{rss_allowed} kB with {created} partitions created)", current)
        stats = self.sender.stats
        # Abandoned: connections we closed while their request was still parked; the broker
        # closes its side when the request completes or connections.max.idle.ms passes.
        sockets_allowed = base.sockets + stats.open_now + stats.abandoned + SOCKET_SLACK
        if now.sockets > sockets_allowed:
            self.fail(f"the broker holds {now.sockets} sockets (it started with {base.sockets});"
                      f" we have {stats.open_now} open and abandoned {stats.abandoned}; its TCP "
                      f"sockets by state: {tcp_states(self.target.port)}", current)
        files_allowed = base.files + FILES_PER_PARTITION * max(created, 0) + FILE_SLACK
        if now.files > files_allowed:
            self.fail(f"the broker holds {now.files} files open for {created} partitions "
                      f"created (it started with {base.files})", current)

    # -- the loop ------------------------------------------------------------------------------

    def run(self, seconds: float, first_seed: int) -> FuzzReport:
        report = self.report
        report.first_seed = first_seed
        report.baseline = self.target.resources()
        self._base_partitions = self.target.partitions()
        self.target.new_log()  # what startup logged is not ours
        examples = 0

        @settings(max_examples=CHUNK, deadline=None, database=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck), report_multiple_bugs=False)
        @given(st.data())
        def one(data: st.DataObject) -> None:
            nonlocal examples
            began = time.monotonic()
            current = []
            for _ in range(data.draw(_CONNECTIONS)):
                current.append(mutate(data.draw, SEEDS[data.draw(_SEED_INDEX)]))
            if self.failure is not None:
                # Hypothesis replays the failing example (same draws): report it once, with
                # the broker as the failure left it.
                raise self.failure
            self.sender.send(current)
            examples += 1
            took = time.monotonic() - began
            if took > 1.0:
                report.slowest.append((round(took, 1), [(len(i.data), i.how) for i in current]))
            self.check(current, sample=examples % SAMPLE_EVERY == 0)
            self.history.extend(current)

        start = time.monotonic()
        stop_at = start + seconds
        chunk_seed = first_seed
        try:
            while time.monotonic() < stop_at:
                hypothesis_seed(chunk_seed)(one)()
                chunk_seed += 1
        finally:
            report.seconds = time.monotonic() - start
            report.examples = examples
            report.inputs = self.sender.stats.inputs
            self.sender.close()
            report.send = {k: v for k, v in vars(self.sender.stats).items() if k != "inputs"}
        self.check([], sample=True)
        self.check_settled()
        return report

    def check_settled(self) -> None:
        """Once we have closed everything, the broker's sockets go back to where they were,
        but for those it keeps for abandoned parked requests, and no deleted file stays open."""
        base = self.report.baseline
        assert base is not None
        allowed = base.sockets + self.sender.stats.abandoned + 2  # + the healthy client's
        now = self.target.resources()
        for _ in range(SETTLE_POLLS):
            if now.sockets <= allowed and not now.deleted:
                return
            time.sleep(0.1)
            now = self.target.resources()
        if now.sockets > allowed:
            self.fail(f"after the run the broker holds {now.sockets} sockets (it started with "
                      f"{base.sockets}; {self.sender.stats.abandoned} requests abandoned); its "
                      f"TCP sockets by state: {tcp_states(self.target.port)}", [])
        self.fail(f"after the run the broker holds deleted files open: {now.deleted[:10]}", [])
