"""SCRAM users through the admin API (KIP-554; Java's Admin.describeUserScramCredentials and
alterUserScramCredentials): the values, the requests built from them and the answers read back.

The client salts: an upsertion carries Hi(password, salt, iterations), never the password, so
a broker (or anyone reading its traffic or its credential store) never sees the password."""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from samsa.errors import KafkaError, for_code
from samsa.protocol import AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest
from samsa.security.scram import MECHANISMS, MECHANISMS_BY_TYPE, ScramMechanism

__all__ = [
    "ScramCredentialInfo",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
    "UserScramCredentialsDescription",
]

def mechanism_named(name: str) -> ScramMechanism:
    """``SCRAM-SHA-256`` / ``SCRAM-SHA-512`` (also with ``_``) -> the mechanism; ValueError
    naming the choices otherwise."""
    mechanism = MECHANISMS.get(name.upper().replace("_", "-"))
    if mechanism is None:
        raise ValueError(f"unknown SCRAM mechanism {name!r}; use {' or '.join(MECHANISMS)}")
    return mechanism


@dataclass(frozen=True)
class ScramCredentialInfo:
    mechanism: str  # "SCRAM-SHA-256" or "SCRAM-SHA-512"
    iterations: int


@dataclass(frozen=True)
class UserScramCredentialsDescription:
    user: str
    credential_infos: list[ScramCredentialInfo]


@dataclass(frozen=True)
class UserScramCredentialUpsertion:
    """Create or replace ``user``'s credential for ``mechanism``; the salt is random unless
    given. ``repr`` never shows the password."""

    user: str
    mechanism: str
    password: str
    iterations: int = 4096
    salt: bytes | None = None

    def __repr__(self) -> str:
        return (f"UserScramCredentialUpsertion(user={self.user!r}, mechanism={self.mechanism!r}, "
                f"iterations={self.iterations})")


@dataclass(frozen=True)
class UserScramCredentialDeletion:
    user: str
    mechanism: str


def alter_request(version: int, alterations: Iterable[UserScramCredentialUpsertion | UserScramCredentialDeletion]) -> Any:
    R = AlterUserScramCredentialsRequest
    upsertions, deletions = [], []
    for a in alterations:
        mechanism = mechanism_named(a.mechanism)
        if isinstance(a, UserScramCredentialDeletion):
            deletions.append(R.ScramCredentialDeletion(name=a.user, mechanism=mechanism.type_code))
            continue
        salt = secrets.token_bytes(32) if a.salt is None else a.salt
        upsertions.append(R.ScramCredentialUpsertion(
            name=a.user, mechanism=mechanism.type_code, iterations=a.iterations, salt=salt,
            salted_password=mechanism.salted_password(a.password, salt, a.iterations)))
    return R(deletions=deletions, upsertions=upsertions)


def parse_alter(response: Any) -> dict[str, None | KafkaError]:
    return {r.user: (for_code(r.error_code)(r.error_message) if r.error_code else None)
            for r in response.results}


def describe_request(version: int, users: list[str] | None) -> Any:
    R = DescribeUserScramCredentialsRequest
    return R(users=None if users is None else [R.UserName(name=u) for u in users])


def parse_describe(response: Any) -> dict[str, UserScramCredentialsDescription | KafkaError]:
    if response.error_code:
        raise for_code(response.error_code)(response.error_message)
    out: dict[str, UserScramCredentialsDescription | KafkaError] = {}
    for r in response.results:
        if r.error_code:
            out[r.user] = for_code(r.error_code)(r.error_message)
            continue
        out[r.user] = UserScramCredentialsDescription(r.user, [
            ScramCredentialInfo(MECHANISMS_BY_TYPE[c.mechanism].name if c.mechanism in MECHANISMS_BY_TYPE
                                else f"UNKNOWN({c.mechanism})",
                                c.iterations)
            for c in r.credential_infos])
    return out
