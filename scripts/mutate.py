"""Mutation testing with mutmut, per module group, bounded in time (`make mutate`).

Each group (records, producer, ...) mutates a few core modules and runs only the tests meant for
them. mutmut reads its settings from ./pyproject.toml and works in ./mutants/, so every group
gets a work dir of its own, mutants/<group>/: links to samsa/ and tests/ (but tests/peers/) and
a pyproject.toml that is the project's with [tool.mutmut] extended by the group's only_mutate and
test selection.
mutmut copies the tree into mutants/<group>/mutants/ and runs pytest there, with that copy first
on sys.path (the editable install's finder comes after it), so the source tree is never touched.

A group keeps its mutmut cache between runs: verdicts of unchanged functions stand and a run
stopped by the time bound goes on where it stopped. --recheck retests the survivors and the
mutants no test ran (after new tests), --fresh starts the group over.

Prints a table per module (mutants, killed, survived, no tests, timeout, suspicious, not checked,
kill rate) and writes the surviving mutants with their diffs to mutants-report.txt.

    scripts/mutate.py [--modules records,producer] [--minutes 60] [--max-children N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "mutants"
REPORT = ROOT / "mutants-report.txt"
# mutmut's own command, from the interpreter's environment (the venv of `make mutate`).
MUTMUT = [str(Path(sys.executable).with_name("mutmut"))]
# Per test in a mutation run: well above the slowest selected test under mutmut (the volume
# tests are cut down there), far below the suite's 600 s.
MUTANT_TEST_TIMEOUT_S = 90


@dataclass(frozen=True)
class Group:
    name: str
    mutate: tuple[str, ...]  # mutmut's only_mutate: globs of the files to mutate
    tests: tuple[str, ...]  # pytest arguments that select the group's tests
    # Mutants tested at once per core. The client groups' tests mostly wait (mock-cluster round
    # trips, backoffs, linger): one uses 5-30% of a core, and 10 at once on 2 cores checked the
    # Sender's mutants about 7 times faster than 2. The others are CPU-bound.
    children_per_core: int = 1


# The tests that talk to real peers over the network (kcat, the Java/Node/Go clients) stay out
# where the unit and embedded-broker tests already cover the modules: mutmut reruns, for every
# mutant, each test that ran the mutated function, and a peer process per mutant is too slow.
GROUPS = (
    Group("records", ("samsa/records/*",),
          ("tests/records", "--ignore=tests/records/test_kcat_interop.py")),
    Group("producer", ("samsa/producer/accumulator.py", "samsa/producer/sender.py",
                       "samsa/producer/batch.py"),
          ("tests/producer",), children_per_core=5),
    Group("consumer", ("samsa/consumer/fetcher.py", "samsa/consumer/coordinator.py"),
          ("tests/consumer",), children_per_core=5),
    Group("log", ("samsa/broker/log/*",), ("tests/broker/log",)),
    Group("group", ("samsa/broker/group/*",),
          ("tests/broker/group", "--ignore=tests/broker/group/test_real_clients.py",
           "--ignore=tests/broker/group/test_real_clients_others.py")),
    # The group APIs' handlers are tested with the coordinator, a raising handler's error
    # response with the request loop.
    Group("apis", ("samsa/broker/apis/*",),
          ("tests/broker/apis", "tests/broker/group/test_group_apis.py",
           "tests/broker/test_handler_errors.py")),
)
GROUP_BY_NAME = {g.name: g for g in GROUPS}

# mutmut's verdicts (`mutmut results --all true`), in table order.
STATUSES = ("killed", "survived", "no tests", "timeout", "suspicious", "not checked")
OTHER = "other"  # segfault, skipped, caught by type check, check was interrupted by user
SKIPPED_TESTS = {"peers", "__pycache__"}
RESULT_LINE = re.compile(r"^\s+(?P<name>\S+): (?P<status>.+)$")


@dataclass
class GroupResult:
    group: Group
    status_by_mutant: dict[str, str] = field(default_factory=dict)
    error: str | None = None


def module_of(mutant: str) -> str:
    """samsa.records.batch.xǁRecordBatchǁ__iter____mutmut_3 -> samsa/records/batch.py."""
    module = mutant.rpartition(".")[0].replace(".", "/")
    package = f"{module}/__init__.py"  # mutmut names a package's mutants after the package
    return package if (ROOT / package).exists() else f"{module}.py"


def toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} to TOML")


def group_pyproject(group: Group) -> str:
    """The project's pyproject.toml with [tool.mutmut] set for the group."""
    text = (ROOT / "pyproject.toml").read_text()
    settings = dict(tomllib.loads(text).get("tool", {}).get("mutmut", {}))
    settings["only_mutate"] = list(group.mutate)
    settings["pytest_add_cli_args_test_selection"] = list(group.tests)
    # Drop the project's own [tool.mutmut] table (up to the next table header).
    kept: list[str] = []
    skipping = False
    for line in text.splitlines():
        if line.startswith("["):
            skipping = line.strip() == "[tool.mutmut]"
        if not skipping:
            kept.append(line)
    table = [f"{k} = {toml_value(v)}" for k, v in settings.items()]
    return "\n".join(kept).rstrip() + "\n\n[tool.mutmut]\n" + "\n".join(table) + "\n"


def link(path: Path, target: Path) -> None:
    if path.is_symlink() and not path.exists():
        path.unlink()  # its target is gone
    if not path.is_symlink():
        path.symlink_to(target)


def prepare(group: Group, *, fresh: bool) -> Path:
    work = WORK / group.name
    if fresh and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    link(work / "samsa", Path("..") / ".." / "samsa")
    # tests/ but for peers/ (the Node.js clients' node_modules: mutmut would copy 200 MB of them
    # into every group's mutants/), one link per entry.
    tests = work / "tests"
    if tests.is_symlink():
        tests.unlink()  # a link to all of tests/
    tests.mkdir(exist_ok=True)
    for entry in (ROOT / "tests").iterdir():
        if entry.name not in SKIPPED_TESTS:
            link(tests / entry.name, Path("..") / ".." / ".." / "tests" / entry.name)
    for entry in tests.iterdir():
        if entry.is_symlink() and not entry.exists():
            entry.unlink()  # a test file removed since the last run
    pyproject = work / "pyproject.toml"
    text = group_pyproject(group)
    if not pyproject.exists() or pyproject.read_text() != text:
        pyproject.write_text(text)
    return work


def run_mutmut(work: Path, args: Sequence[str], deadline: float) -> int | None:
    """`mutmut <args>` in work until it ends or the deadline passes (then stopped as by ^C:
    mutmut keeps the verdicts so far). Returns its exit code, None when it was stopped."""
    # SAMSA_MUTATION_RUN: the slowest tests do less (tests/support/mutation_budget.py).
    # PYTEST_TIMEOUT: a mutant that makes a test hang (a Sender that never wakes, a lost
    # callback) fails it after MUTANT_TEST_TIMEOUT_S instead of the suite's 600 s; mutmut's own
    # limit counts CPU time, which a blocked test does not use.
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", SAMSA_MUTATION_RUN="1",
               PYTEST_TIMEOUT=str(MUTANT_TEST_TIMEOUT_S))
    env.pop("PYTHONPATH", None)  # nothing but mutmut's own sys.path: the mutated copy first
    proc = subprocess.Popen([*MUTMUT, *args], cwd=work, env=env, start_new_session=True)
    try:
        return proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pass
    except KeyboardInterrupt:  # mutmut runs in a session of its own: ^C reaches this script only
        stop(proc)
        raise
    print(f"\n  time is up for {work.name}: stopping mutmut", flush=True)
    stop(proc)
    return None


def stop(proc: subprocess.Popen[bytes]) -> None:
    """^C to mutmut alone (it stops its workers, which would otherwise report the mutants they
    were testing as interrupted), then SIGKILL to its process group: mutmut and its workers."""
    try:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # leftover workers, or mutmut itself if it hung
    except ProcessLookupError:
        pass
    proc.wait()


def results(work: Path) -> dict[str, str]:
    out = subprocess.run([*MUTMUT, "results", "--all", "true"], cwd=work, check=True,
                         capture_output=True, text=True).stdout
    status_by_mutant: dict[str, str] = {}
    for line in out.splitlines():
        m = RESULT_LINE.match(line)
        if m:
            status_by_mutant[m["name"]] = m["status"]
    return status_by_mutant


# What `mutmut show NAME` prints, for many mutants in one process (`mutmut show` takes a second
# or more per mutant to start).
SHOW_MANY = """
import json, sys
from mutmut.mutation.diff_apply import get_diff_for_mutant
shown = {}
for name, path in json.load(sys.stdin):
    try:
        shown[name] = get_diff_for_mutant(name, path=path)
    except Exception as e:
        shown[name] = f"(no diff: {e!r})"
json.dump(shown, sys.stdout)
"""


def diffs(work: Path, mutants: Sequence[str]) -> dict[str, str]:
    if not mutants:
        return {}
    todo = json.dumps([(name, module_of(name)) for name in mutants])
    proc = subprocess.run([sys.executable, "-c", SHOW_MANY], check=False, cwd=work,
                          input=todo, capture_output=True, text=True)
    if proc.returncode == 0:
        shown: dict[str, str] = json.loads(proc.stdout)
        return shown
    # mutmut moved its internals: one `mutmut show` per mutant.
    shown = {}
    for name in mutants:
        show = subprocess.run([*MUTMUT, "show", name], check=False, cwd=work,
                              capture_output=True, text=True)
        shown[name] = show.stdout.partition("\n")[2] if show.returncode == 0 else show.stderr
    return shown


def group_results(group: Group, error: str | None = None) -> GroupResult:
    work = WORK / group.name
    return GroupResult(group, results(work) if (work / "mutants").exists() else {}, error)


def run_group(group: Group, *, deadline: float, max_children: int, fresh: bool,
              recheck: bool, only: Sequence[str]) -> GroupResult:
    work = prepare(group, fresh=fresh)
    error = None
    print(f"\n=== {group.name}: mutating {' '.join(group.mutate)} against {' '.join(group.tests)}",
          flush=True)
    # mutmut retests every mutant it is given by name, so give it only those left to test.
    names: list[str] = []
    todo = {"not checked", *(("survived", "no tests", "timeout", "suspicious") if recheck else ())}
    if (work / "mutants").exists() and (only or recheck):
        names = [n for n, s in results(work).items()
                 if s in todo and (not only or any(fnmatch(n, p) for p in only))]
        if not names:
            print("  nothing left to test", flush=True)
    elif only:
        names = list(only)  # a first run: all of them are new
    if names or not (only or recheck):
        code = run_mutmut(work, ["run", "--max-children", str(max_children), *names], deadline)
        if code not in (0, None):
            error = f"mutmut run exited with {code}"
    return group_results(group, error)


def rate(counts: Counter[str]) -> str:
    killed = counts["killed"] + counts["timeout"]
    checked = sum(counts.values()) - counts["not checked"]
    return f"{100 * killed / checked:.0f}%" if checked else "-"


def table(results_: Sequence[GroupResult]) -> str:
    header = ("module", "mutants", *STATUSES, OTHER, "kill rate")
    rows: list[tuple[str, ...]] = []
    for r in results_:
        by_module: dict[str, Counter[str]] = {}
        for name, status in r.status_by_mutant.items():
            key = status if status in STATUSES else OTHER
            by_module.setdefault(module_of(name), Counter())[key] += 1
        total: Counter[str] = Counter()
        for module in sorted(by_module):
            counts = by_module[module]
            total.update(counts)
            rows.append((module, str(sum(counts.values())),
                         *(str(counts[s]) for s in (*STATUSES, OTHER)), rate(counts)))
        label = f"[{r.group.name}]" + (f" ({r.error})" if r.error else "")
        rows.append((label, str(sum(total.values())),
                     *(str(total[s]) for s in (*STATUSES, OTHER)), rate(total)))
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(row, widths, strict=True)))

    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def one_line(diff: str) -> str:
    """The lines a mutant changes, as `old => new`."""
    lines = diff.splitlines()[2:]  # after the ---/+++ file names
    old = " / ".join(ln[1:].strip() for ln in lines if ln.startswith("-"))
    new = " / ".join(ln[1:].strip() for ln in lines if ln.startswith("+"))
    return f"{old} => {new}"


def write_report(results_: Sequence[GroupResult], summary: str) -> None:
    parts = ["Mutation testing (scripts/mutate.py). Kill rate: (killed + timeout) / checked;",
             "'no tests' mutants (no selected test runs the function) count as not killed.",
             "", summary, ""]
    for r in results_:
        work = WORK / r.group.name
        survivors = sorted(n for n, s in r.status_by_mutant.items() if s == "survived")
        untested = sorted(n for n, s in r.status_by_mutant.items() if s == "no tests")
        shown = diffs(work, survivors)
        parts.append(f"=== {r.group.name}: {len(survivors)} survived "
                     f"(`cd mutants/{r.group.name} && mutmut show NAME`, `mutmut browse`)")
        parts += [f"{name}: {one_line(shown[name])}" for name in survivors]
        parts.append("")
        for name in survivors:
            parts += [f"--- {name}", shown[name].rstrip(), ""]
        if untested:
            parts.append(f"=== {r.group.name}: {len(untested)} with no tests")
            parts += untested
        parts.append("")
    REPORT.write_text("\n".join(parts))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modules", default="all",
                        help=f"comma-separated groups, or all: {', '.join(GROUP_BY_NAME)}")
    parser.add_argument("--minutes", type=float, default=60.0,
                        help="time bound for the whole run, shared out among the groups")
    parser.add_argument("--max-children", type=int, default=None,
                        help="mutants tested at once (default: per group, from the cores)")
    parser.add_argument("--fresh", action="store_true", help="drop the groups' mutmut caches")
    parser.add_argument("--recheck", action="store_true",
                        help="retest the survivors, timeouts and suspicious mutants")
    parser.add_argument("--only", default="",
                        help="comma-separated globs of the mutants to test, e.g. "
                             "'samsa.producer.sender.*' (the table shows the whole group)")
    parser.add_argument("--report-only", action="store_true",
                        help="no mutmut run: table and report from the last runs")
    args = parser.parse_args(argv)

    names = list(GROUP_BY_NAME) if args.modules in ("", "all") else args.modules.split(",")
    unknown = [n for n in names if n not in GROUP_BY_NAME]
    if unknown:
        parser.error(f"unknown group(s) {', '.join(unknown)}; groups: {', '.join(GROUP_BY_NAME)}")
    groups = [GROUP_BY_NAME[n] for n in names]
    only = [p for p in args.only.split(",") if p]

    end = time.monotonic() + args.minutes * 60
    done: list[GroupResult] = []
    for i, group in enumerate(groups):
        if args.report_only:
            done.append(group_results(group))
            continue
        # An equal share of what is left: time a quick group did not need goes to the next.
        deadline = time.monotonic() + (end - time.monotonic()) / (len(groups) - i)
        children = args.max_children or group.children_per_core * (os.cpu_count() or 1)
        try:
            done.append(run_group(group, deadline=deadline, max_children=children,
                                  fresh=args.fresh, recheck=args.recheck, only=only))
        except KeyboardInterrupt:
            done.append(group_results(group, "interrupted"))
            break
    summary = table(done)
    print("\n" + summary)
    write_report(done, summary)
    print(f"\nsurviving mutants and their diffs: {REPORT.relative_to(ROOT)}")
    return 1 if any(r.error for r in done) else 0


if __name__ == "__main__":
    sys.exit(main())
