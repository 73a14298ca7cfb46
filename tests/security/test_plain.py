"""SASL/PLAIN tokens (RFC 4616) and the checks of Kafka's PlainSaslServer, with its messages."""

from __future__ import annotations

import pytest

from samsa.errors import SaslAuthenticationFailedError
from samsa.security.plain import plain_authenticate, plain_client_token

USERS = {"alice": "alice-secret", "admin": "admin-secret"}


def test_the_client_token_and_its_check() -> None:
    assert plain_client_token("alice", "alice-secret") == b"\0alice\0alice-secret"
    assert plain_client_token("alice", "pw", authzid="alice") == b"alice\0alice\0pw"
    assert plain_authenticate(plain_client_token("alice", "alice-secret"), USERS.get) == "alice"
    assert plain_authenticate(b"alice\0alice\0alice-secret", USERS.get) == "alice"


@pytest.mark.parametrize(("token", "message"), [
    (b"\0alice\0wrong-pw", "invalid username or password (PLAIN, user 'alice')"),
    (b"\0mallory\0x", "invalid username or password (PLAIN, user 'mallory')"),
    (b"alice\0alice-secret", "expected 3 tokens, got 2"),
    (b"\0alice\0alice-secret\0", "expected 3 tokens, got 4"),
    (b"\0\0pw", "username not specified"),
    (b"\0alice\0", "password not specified"),
    (b"admin\0alice\0alice-secret", "authorization id that is different from username"),
    (b"\0al\xffice\0pw", "not UTF-8"),
], ids=["wrong-password", "unknown-user", "two-tokens", "four-tokens", "no-user", "no-password",
        "other-authzid", "not-utf8"])
def test_refused_tokens_say_why_and_never_show_a_password(token: bytes, message: str) -> None:
    with pytest.raises(SaslAuthenticationFailedError) as info:
        plain_authenticate(token, USERS.get)
    assert message in str(info.value)
    assert "secret" not in str(info.value) and "wrong-pw" not in str(info.value)


def test_a_nul_cannot_be_smuggled_into_a_field() -> None:
    with pytest.raises(ValueError, match="password cannot hold a NUL"):
        plain_client_token("alice", "pw\0admin")
