"""Bugs the fuzzer found that are not fixed yet, outside the fuzzer's remit (a part of the
broker another change owns).  Each has a regression case in test_regressions.py (an input in
corpus/ named like the entry, or a test naming it) that is expected to fail, strictly, and a
text its log record carries: while the bug is open the fuzzer counts such records instead of
failing on them, so the suite does not fail at random on a known bug.  Fixing the bug turns its
regression test red until its entry here goes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OpenBug:
    reason: str
    log_signature: str  # a text of the broker's log record that shows this bug


OPEN_BUGS: dict[str, OpenBug] = {}


def open_bug_of(record: str) -> str | None:
    """The name of the open bug a log record shows, if any."""
    for name, bug in OPEN_BUGS.items():
        if bug.log_signature in record:
            return name
    return None
