"""RLIMIT_NOFILE at broker start: raised from the soft to the hard limit.

Kafka's documentation asks operators to give the broker a large descriptor limit (its segments
and connections hold descriptors); a process usually inherits a soft limit of 1024 under a hard
one far higher.  The broker raises its own soft limit, as far as the hard one allows, so that
connections and the segment handle cache (log/handle_cache.py, sized from this limit) have room.
"""

from __future__ import annotations

import logging
import resource
from pathlib import Path

__all__ = ["raise_open_files_limit"]

log = logging.getLogger("samsa.broker")

_NR_OPEN = Path("/proc/sys/fs/nr_open")  # Linux's ceiling for an "unlimited" hard limit


def _ceiling(hard: int) -> int:
    if hard != resource.RLIM_INFINITY:
        return hard
    try:
        return int(_NR_OPEN.read_text())
    except (OSError, ValueError):
        return 1 << 20


def raise_open_files_limit(enabled: bool = True) -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit (if ``enabled``); log and return the
    soft limit the broker runs with."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if not enabled:
        log.info("descriptor limit (RLIMIT_NOFILE) kept at %d, hard limit %s "
                 "(samsa.open.files.limit.raise.enable=false)", soft, hard)
        return soft
    target = _ceiling(hard)
    if soft == resource.RLIM_INFINITY or soft >= target:
        log.info("descriptor limit (RLIMIT_NOFILE) is %s, the hard limit", soft)
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (OSError, ValueError) as exc:
        log.warning("descriptor limit (RLIMIT_NOFILE) stays at %d: raising it to the hard limit "
                    "%d failed (%s)", soft, target, exc)
        return soft
    log.info("descriptor limit (RLIMIT_NOFILE) raised from %d to the hard limit %d", soft, target)
    return target
