"""The broker's SCRAM users (KIP-554): per user and mechanism a salt, StoredKey, ServerKey and
iteration count, never a password.

Kafka keeps them in its metadata log (UserScramCredentialRecord); samsa keeps them in
``<data_dir>/scram-credentials.json``, written atomically (the old file or the new one survives
a crash) and read on start. A file that does not parse stops the broker with its path: serving
without the users it held would lock them out, or let in ones deleted since.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
from collections.abc import Iterable
from pathlib import Path

from samsa.broker.log.files import atomic_write
from samsa.security.scram import MECHANISMS, ScramCredential, ScramMechanism

__all__ = ["SCRAM_CREDENTIALS_FILE", "ScramCredentialStore"]

SCRAM_CREDENTIALS_FILE = "scram-credentials.json"


class ScramCredentialStore:
    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / SCRAM_CREDENTIALS_FILE
        self._lock = threading.Lock()
        # user -> mechanism name -> credential
        self._users: dict[str, dict[str, ScramCredential]] = {}
        if self._path.exists():
            self._users = self._load()

    def _load(self) -> dict[str, dict[str, ScramCredential]]:
        try:
            stored = json.loads(self._path.read_text())
            return {
                user: {name: ScramCredential(
                    salt=base64.b64decode(c["salt"], validate=True),
                    stored_key=base64.b64decode(c["stored_key"], validate=True),
                    server_key=base64.b64decode(c["server_key"], validate=True),
                    iterations=int(c["iterations"]))
                    for name, c in by_mechanism.items() if _known(name)}
                for user, by_mechanism in stored["users"].items()
            }
        except (OSError, ValueError, KeyError, TypeError, AttributeError, binascii.Error) as exc:
            raise ValueError(
                f"{self._path} is not a valid SCRAM credential file ({exc!r}); restore it from a "
                "backup, or move it away to start without SCRAM users") from None

    def get(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism.name)

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        """A copy: user -> mechanism name -> credential."""
        with self._lock:
            return {user: dict(by_mechanism) for user, by_mechanism in self._users.items()}

    def apply(self, upserts: Iterable[tuple[str, ScramMechanism, ScramCredential]],
              deletions: Iterable[tuple[str, ScramMechanism]]) -> None:
        """All the changes at once, durable when this returns."""
        with self._lock:
            users = {user: dict(by_mechanism) for user, by_mechanism in self._users.items()}
            for user, mechanism in deletions:
                users.get(user, {}).pop(mechanism.name, None)
            for user, mechanism, credential in upserts:
                users.setdefault(user, {})[mechanism.name] = credential
            users = {user: by_mechanism for user, by_mechanism in users.items() if by_mechanism}
            atomic_write(self._path, json.dumps({"version": 0, "users": {
                user: {name: {"salt": _b64(c.salt), "stored_key": _b64(c.stored_key),
                              "server_key": _b64(c.server_key), "iterations": c.iterations}
                       for name, c in sorted(by_mechanism.items())}
                for user, by_mechanism in sorted(users.items())}}, indent=1).encode())
            self._users = users


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _known(name: str) -> bool:
    if name not in MECHANISMS:
        raise ValueError(f"unknown SCRAM mechanism {name!r}")
    return True
