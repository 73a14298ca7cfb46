"""SASL/PLAIN (RFC 4616) as Kafka runs it: one client token, ``authzid NUL user NUL password``,
answered by an empty token (Kafka's ``PlainSaslServer``). Only over TLS does it keep the
password from the network."""

from __future__ import annotations

import hmac
from collections.abc import Callable

from samsa.errors import SaslAuthenticationFailedError

__all__ = ["plain_authenticate", "plain_client_token"]


def plain_client_token(username: str, password: str, authzid: str = "") -> bytes:
    """The client's only message; an empty authzid means "act as the user"."""
    for what, value in (("username", username), ("password", password), ("authzid", authzid)):
        if "\0" in value:
            raise ValueError(f"a SASL/PLAIN {what} cannot hold a NUL character")
    return f"{authzid}\0{username}\0{password}".encode()


def plain_authenticate(token: bytes, password_of: Callable[[str], str | None]) -> str:
    """Checks a client's token as Kafka's PlainSaslServer does; returns the user name.

    ``password_of(user)`` is the expected password (a broker's ``user_<name>`` JAAS option) or
    None for an unknown user. Failures name the user, never a password."""
    try:
        parts = token.decode().split("\0")
    except UnicodeDecodeError:
        raise SaslAuthenticationFailedError("Invalid SASL/PLAIN response: not UTF-8") from None
    if len(parts) != 3:
        raise SaslAuthenticationFailedError(
            f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
    authzid, username, password = parts
    if not username:
        raise SaslAuthenticationFailedError("Authentication failed: username not specified")
    if not password:
        raise SaslAuthenticationFailedError("Authentication failed: password not specified")
    expected = password_of(username)
    # Compared in constant time whatever the user, so that timing tells nothing about either.
    matches = hmac.compare_digest(password.encode(), (expected if expected is not None else "").encode())
    if expected is None or not matches:
        raise SaslAuthenticationFailedError(
            f"Authentication failed: invalid username or password (PLAIN, user {username!r})")
    if authzid and authzid != username:
        raise SaslAuthenticationFailedError(
            "Authentication failed: Client requested an authorization id that is different from username")
    return username
