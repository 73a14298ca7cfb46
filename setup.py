"""Compiles the per-record hot loops with mypyc when it can; pyproject.toml has the rest.

samsa.broker.log.validator parses every record of every produced batch (as Kafka's
LogValidator does); samsa.records.record_loops reads fetched records for the consumer (poll()
and poll_arrow()); samsa.records.builder encodes, samsa.producer.future makes a future
for, and samsa.producer.record_queue queues, every record send() takes.  Compiled, they cost a fraction of the CPU.  The source stays
the typed Python file, which is also the fallback: without mypyc or a C compiler, or if the build
fails, the package installs as pure Python with a warning (``pip install -v`` shows it) and the
broker logs at start which one it runs.  SAMSA_COMPILE=0 skips compiling.
"""

from __future__ import annotations

import glob
import os
import sys
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

# Kept small: only loops that run once per record.
COMPILED = ["samsa/broker/log/validator.py", "samsa/records/record_loops.py",
            "samsa/records/builder.py", "samsa/producer/future.py", "samsa/producer/record_queue.py"]


def _warn(message: str) -> None:
    print(f"WARNING: samsa: {message}; the record loops stay pure Python (slower produce "
          "and consume, same checks)", file=sys.stderr)


def _remove_compiled() -> None:
    """Remove the compiled modules an earlier in-place (editable) build left next to the
    sources: Python imports an extension module before the .py of the same name."""
    for source in COMPILED:
        stem = source.removesuffix(".py")
        for path in glob.glob(f"{stem}.*.so") + glob.glob(f"{stem}__mypyc.*.so") \
                + glob.glob(f"{stem}.*.pyd") + glob.glob(f"{stem}__mypyc.*.pyd"):
            os.remove(path)


class OptionalBuildExt(build_ext):
    """build_ext that falls back to the pure-Python module instead of failing the install."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 -- no compiler, no headers, ...: fall back
            _warn(f"compiling failed ({exc})")
            # A shim without its library (or the reverse) would not import: remove them all.
            for ext in self.extensions:
                for path in (self.get_ext_fullpath(ext.name),
                             os.path.join(self.build_lib, self.get_ext_filename(ext.name))):
                    if os.path.exists(path):
                        os.remove(path)
            _remove_compiled()


def ext_modules() -> list[Any]:
    if os.environ.get("SAMSA_COMPILE", "1").strip() == "0":
        print("samsa: SAMSA_COMPILE=0, not compiling the record loops", file=sys.stderr)
        _remove_compiled()
        return []
    try:
        from mypyc.build import mypycify
    except ImportError as exc:
        _warn(f"mypyc is not available ({exc})")
        _remove_compiled()
        return []
    try:
        # --no-warn-unused-configs: pyproject's mypy overrides name modules this build does
        # not check, and that note would fail it.
        # separate=True: each module gets its own shared library next to it (stem__mypyc),
        # rather than one library named by a hash at the project root.
        return list(mypycify(["--no-warn-unused-configs", *COMPILED], opt_level="3",
                             separate=True))
    except BaseException as exc:  # noqa: BLE001 -- mypy exits (SystemExit) on a type error
        _warn(f"mypyc could not translate {', '.join(COMPILED)} ({exc!r})")
        _remove_compiled()
        return []


setup(ext_modules=ext_modules(), cmdclass={"build_ext": OptionalBuildExt})
