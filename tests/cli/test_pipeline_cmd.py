"""``samsa pipeline``: options and help (the run itself is tested in tests/pipeline)."""

from __future__ import annotations

from click.testing import CliRunner

from samsa.cli import main


def test_pipeline_is_a_subcommand_with_its_options() -> None:
    result = CliRunner().invoke(main, ["pipeline", "--help"])
    assert result.exit_code == 0, result.output
    for option in ("--bootstrap-server", "--output", "--partitions", "--watermark-minutes",
                   "--max-offsets-per-trigger", "--month", "--no-progress"):
        assert option in result.output


def test_pipeline_rejects_a_bad_month() -> None:
    result = CliRunner().invoke(main, ["pipeline", "--month", "13"])
    assert result.exit_code == 2
    assert "--month" in result.output
