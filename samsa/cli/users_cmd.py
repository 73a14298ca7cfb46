"""``samsa users``: the broker's SCRAM users (KIP-554), as ``kafka-configs.sh --entity-type
users`` manages them.

::

    samsa users add -b HOST:PORT --user alice --mechanism SCRAM-SHA-512 [--iterations 8192]
    samsa users delete -b HOST:PORT --user alice --mechanism SCRAM-SHA-512
    samsa users list -b HOST:PORT [--user alice ...]

``add`` asks for the password (twice, hidden) unless ``--password`` gives it; it is salted here
and never sent. ``list`` prints kafka-configs.sh's line per user: ``SCRAM credential configs for
user-principal 'alice' are SCRAM-SHA-256=iterations=8192``. Failures print ``Error: ...`` on
stderr and exit with status 1.
"""

from __future__ import annotations

import click

from samsa.cli import main
from samsa.cli.topics_cmd import _admin, _common
from samsa.security.scram import MECHANISMS

_MECHANISM = click.option("--mechanism", required=True, type=click.Choice(list(MECHANISMS), case_sensitive=False),
                          help="The SCRAM mechanism the credential is for.")


@main.group("users")
def users_group() -> None:
    """Add, delete and list SCRAM users of the broker."""


@users_group.command("add")
@_common
@click.option("--user", "-u", required=True, help="The user name.")
@_MECHANISM
@click.option("--iterations", type=click.IntRange(4096, 16384), default=4096, show_default=True,
              help="PBKDF2 iterations (Kafka accepts 4096-16384).")
@click.option("--password", prompt=True, hide_input=True, confirmation_prompt=True,
              help="The password (asked for when not given).")
def add_cmd(bootstrap_server: str, admin_properties: tuple[str, ...], timeout: float, user: str,
            mechanism: str, iterations: int, password: str) -> None:
    """Create or replace a user's credential for one mechanism."""
    from samsa.admin import UserScramCredentialUpsertion

    with _admin(bootstrap_server, admin_properties, timeout) as admin:
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            user, mechanism.upper(), password, iterations)])
    click.echo(f"Set the {mechanism.upper()} credential of user {user}.")


@users_group.command("delete")
@_common
@click.option("--user", "-u", required=True, help="The user name.")
@_MECHANISM
def delete_cmd(bootstrap_server: str, admin_properties: tuple[str, ...], timeout: float, user: str,
               mechanism: str) -> None:
    """Delete a user's credential for one mechanism."""
    from samsa.admin import UserScramCredentialDeletion

    with _admin(bootstrap_server, admin_properties, timeout) as admin:
        admin.alter_user_scram_credentials([UserScramCredentialDeletion(user, mechanism.upper())])
    click.echo(f"Deleted the {mechanism.upper()} credential of user {user}.")


@users_group.command("list")
@_common
@click.option("--user", "-u", "users", multiple=True, help="A user to show (repeatable; default: all).")
def list_cmd(bootstrap_server: str, admin_properties: tuple[str, ...], timeout: float,
             users: tuple[str, ...]) -> None:
    """Each user's SCRAM mechanisms and iterations (never a secret)."""
    with _admin(bootstrap_server, admin_properties, timeout) as admin:
        found = admin.describe_user_scram_credentials(list(users) or None)
    for user, description in found.items():
        infos = ",".join(f"{i.mechanism}=iterations={i.iterations}" for i in description.credential_infos)  # type: ignore[union-attr]
        click.echo(f"SCRAM credential configs for user-principal '{user}' are {infos}")
