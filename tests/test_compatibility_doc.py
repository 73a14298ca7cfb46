"""docs/compatibility.md matches the code's tables, and samsa/kips.py matches the code's KIPs."""

from __future__ import annotations

import difflib
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from samsa.kips import KIPS
from samsa.protocol.api_keys import ApiKey

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_compatibility", ROOT / "scripts" / "gen_compatibility.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_page_is_current(generator: ModuleType) -> None:
    page = ROOT / "docs" / "compatibility.md"
    current = page.read_text(encoding="utf-8") if page.exists() else ""
    wanted = generator.render()
    if current != wanted:
        diff = difflib.unified_diff(current.splitlines(), wanted.splitlines(),
                                    "docs/compatibility.md", "generated", lineterm="", n=0)
        pytest.fail(f"docs/compatibility.md is out of date: run `{generator.COMMAND}` and "
                    "commit the result\n" + "\n".join(list(diff)[:40]), pytrace=False)


def test_check_command_agrees(generator: ModuleType) -> None:
    assert generator.main(["--check"]) == 0


def test_page_follows_the_broker_table(generator: ModuleType,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    before = generator.render()
    monkeypatch.setattr(generator, "ADVERTISED", {**generator.ADVERTISED, ApiKey.PRODUCE: (3, 7)})
    after = generator.render()
    assert "| 0 | Produce | 3-7 |" in after and "| 0 | Produce | 3-7 |" not in before


def test_every_cited_kip_is_listed() -> None:
    cited: dict[int, set[str]] = {}
    for path in (ROOT / "samsa").rglob("*.py"):
        for number in re.findall(r"KIP-(\d+)", path.read_text(encoding="utf-8")):
            cited.setdefault(int(number), set()).add(str(path.relative_to(ROOT)))
    listed = {kip.number for kip in KIPS}
    missing = {n: sorted(paths) for n, paths in cited.items() if n not in listed}
    assert not missing, f"KIPs the code cites but samsa/kips.py does not list: {missing}"


def test_kip_table_is_well_formed() -> None:
    numbers = [kip.number for kip in KIPS]
    assert len(numbers) == len(set(numbers)), "a KIP is listed twice in samsa/kips.py"
    absent = [(kip.number, p) for kip in KIPS for p in kip.where if not (ROOT / p).is_file()]
    assert not absent, f"samsa/kips.py names files that do not exist: {absent}"
