"""For the tests of a module setup.py compiles with mypyc (its COMPILED list): they run against
the installed module (the compiled build where one could be made) and against its typed source
loaded under another name, and one test fails if a compiler is present but the installed
module is not compiled, or is older than its source (a stale build shadows an edit)."""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import sysconfig
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import pytest

__all__ = ["both_builds", "check_compiled_in_use", "compiler_present", "is_compiled"]


def source_of(module: ModuleType) -> Path:
    return Path(module.__file__ or "").with_name(module.__name__.rsplit(".", 1)[-1] + ".py")


def is_compiled(module: ModuleType) -> bool:
    return not (module.__file__ or "").endswith(".py")


def compiler_present() -> bool:
    try:
        import mypyc  # noqa: F401
    except ImportError:
        return False
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return shutil.which(shlex.split(cc)[0]) is not None


def load_source(module: ModuleType) -> ModuleType:
    """The module's .py source as a separate module (``<package>._<name>_source``)."""
    package, _, name = module.__name__.rpartition(".")
    spec = importlib.util.spec_from_file_location(f"{package}._{name}_source", source_of(module))
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


@contextmanager
def both_builds(request: pytest.FixtureRequest, module: ModuleType) -> Iterator[ModuleType]:
    """For a fixture with params ["installed", "source"]: the module to test (skips "source"
    where the installed module is that source already)."""
    if request.param == "installed":
        yield module
    elif is_compiled(module):
        yield load_source(module)
    else:
        pytest.skip(f"the installed {module.__name__} is its pure-Python source (not compiled)")


def check_compiled_in_use(module: ModuleType) -> None:
    if os.environ.get("SAMSA_COMPILE", "1").strip() == "0":
        pytest.skip(f"SAMSA_COMPILE=0: the pure-Python {module.__name__} is expected")
    if not compiler_present():
        pytest.skip(f"no mypyc or no C compiler: the pure-Python {module.__name__} is expected")
    source = source_of(module)
    assert is_compiled(module), (f"{module.__name__} runs from {module.__file__}, not compiled: "
                                 "reinstall (pip install -e . / make) and read setup.py's warning")
    assert Path(module.__file__ or "").stat().st_mtime >= source.stat().st_mtime, (
        f"{module.__file__} is older than {source}: a stale build shadows the source; "
        "reinstall (pip install -e . / make)")
