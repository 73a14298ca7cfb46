"""The `samsa` command: one click group; each subcommand lives in its own module here.

Subcommand modules register themselves on ``main`` when imported; ``_SUBCOMMANDS`` lists them.
A module that fails to import (an optional dependency missing) is reported, not hidden.
"""

from __future__ import annotations

import importlib

import click

_SUBCOMMANDS = [
    "samsa.cli.broker_cmd",
    "samsa.cli.topics_cmd",
    "samsa.cli.configs_cmd",
    "samsa.cli.produce_cmd",
    "samsa.cli.perf_cmd",
    "samsa.cli.pipeline_cmd",
    "samsa.cli.consume_cmd",
    "samsa.cli.groups_cmd",
    "samsa.cli.perf_consume_cmd",
    "samsa.cli.users_cmd",
    "samsa.cli.acls_cmd",
]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="samsa")
def main() -> None:
    """Samsa: Kafka producer, consumer, embedded broker and Spark pipeline, in Python."""


def _load_subcommands() -> None:
    for name in _SUBCOMMANDS:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name != name:
                raise


_load_subcommands()
