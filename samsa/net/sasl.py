"""The client side of SASL on one connection (Java's SaslClientAuthenticator, KIP-43, KIP-152).

After ApiVersions the NetworkClient sends SaslHandshake v1 naming the mechanism, then the
mechanism's tokens each in a SaslAuthenticate request, until the mechanism is done; only then
is the connection ready for other requests.  :class:`SaslClientAuthenticator` holds one such
exchange: it makes the requests and reads the answers; the NetworkClient sends them.

Mechanisms: PLAIN (one token, RFC 4616), SCRAM-SHA-256/512 (client-first, client-final, then
the server's signature is checked, RFC 5802) and OAUTHBEARER (KIP-255, RFC 7628: one token
``n,,^Aauth=Bearer <token>^A^A`` from the user's token callback; a refusal comes as a JSON
challenge the client acknowledges with ``^A`` before the broker's error).  Failures are :class:`SaslAuthenticationError`
naming the broker, the mechanism and the user, never the password.  The broker's session
lifetime (SaslAuthenticate v1+, KIP-368) says when the connection must authenticate again.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from samsa.errors import (
    SaslAuthenticationError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
    for_code,
)
from samsa.protocol import APIS, ApiKey, Message
from samsa.security.plain import plain_client_token
from samsa.security.scram import MECHANISMS, ScramClient

__all__ = ["SASL_HANDSHAKE_VERSION", "SaslClientAuthenticator"]

# v0 sends the tokens as raw frames, v1 wraps them in SaslAuthenticate (KIP-152); v1 only.
SASL_HANDSHAKE_VERSION = 1
_KVSEP = b"\x01"  # RFC 7628 key-value separator

TokenCallback = Callable[[], tuple[str, float]]


class SaslClientAuthenticator:
    """One authentication of one connection: ``handshake_request()``, then
    ``authenticate_request(handshake_answer)`` and ``next_request(authenticate_answer)`` until it
    returns None (done); each raises SaslAuthenticationError on a refusal."""

    def __init__(self, mechanism: str, username: str, password: str, peer: str,
                 *, reauthentication: bool = False, token_callback: TokenCallback | None = None) -> None:
        self.mechanism = mechanism
        self.username = username
        self.peer = peer
        self.reauthentication = reauthentication
        self.session_lifetime_ms = 0
        self.token_expiry_s: float | None = None
        self._scram: ScramClient | None = None
        self._scram_step = 0
        self._oauth_challenge: str | None = None
        if mechanism == "PLAIN":
            self._first_token = plain_client_token(username, password)
        elif mechanism == "OAUTHBEARER":
            self._first_token = self._oauthbearer_token(token_callback)
        else:
            scram_mechanism = MECHANISMS.get(mechanism)
            if scram_mechanism is None:
                raise SaslAuthenticationError(f"SASL mechanism {mechanism} is not supported by this client")
            self._scram = ScramClient(scram_mechanism, username, password)
            self._first_token = self._scram.first_message()

    def _oauthbearer_token(self, token_callback: TokenCallback | None) -> bytes:
        if token_callback is None:
            raise SaslAuthenticationError(f"{self._what()} failed: no sasl.oauthbearer.token.callback")
        try:
            token, expiry_s = token_callback()
        except Exception as e:  # the user's callback: any failure is reported
            raise SaslAuthenticationError(f"{self._what()} failed: the token callback raised {e!r}") from e
        if not isinstance(token, str) or not token or not isinstance(expiry_s, (int, float)) \
                or not math.isfinite(expiry_s):
            raise SaslAuthenticationError(
                f"{self._what()} failed: the token callback must return (token, expiry in seconds "
                f"since the epoch), not ({type(token).__name__}, {type(expiry_s).__name__})")
        self.token_expiry_s = float(expiry_s)
        return b"n,," + _KVSEP + f"auth=Bearer {token}".encode() + _KVSEP + _KVSEP

    def _what(self) -> str:
        again = "re-authentication" if self.reauthentication else "authentication"
        who = "" if self.mechanism == "OAUTHBEARER" else f", user {self.username!r}"
        return f"SASL {again} with {self.peer} ({self.mechanism}{who})"

    def handshake_request(self) -> Message:
        return APIS[ApiKey.SASL_HANDSHAKE].request_class(mechanism=self.mechanism)

    def _authenticate(self, token: bytes) -> Message:
        return APIS[ApiKey.SASL_AUTHENTICATE].request_class(auth_bytes=token)

    def authenticate_request(self, handshake: Any) -> Message:
        """The first SaslAuthenticate, once the broker accepted the mechanism."""
        code = handshake.error_code
        if code:
            enabled = ", ".join(handshake.mechanisms or ()) or "none"
            if code == UnsupportedSaslMechanismError.code:
                raise SaslAuthenticationError(
                    f"{self._what()} failed: the broker does not enable SASL mechanism "
                    f"{self.mechanism}; its enabled mechanisms: {enabled}")
            raise SaslAuthenticationError(
                f"{self._what()} failed: SaslHandshake answered {for_code(code).name}; the broker's "
                f"enabled mechanisms: {enabled} (is it a SASL listener?)")
        return self._authenticate(self._first_token)

    def next_request(self, answer: Any) -> Message | None:
        """The next SaslAuthenticate, or None once authenticated."""
        code = answer.error_code
        if code:
            name = for_code(code).name
            text = answer.error_message or for_code(code).message
            if code == SaslAuthenticationFailedError.code:
                if self._oauth_challenge is not None and not answer.error_message:
                    text = self._oauth_challenge
                raise SaslAuthenticationError(f"{self._what()} failed: {text}")
            raise SaslAuthenticationError(f"{self._what()} failed: {name}: {text}")
        token = answer.auth_bytes or b""
        scram = self._scram
        if self.mechanism == "OAUTHBEARER":
            if self._oauth_challenge is not None:
                # RFC 7628 §3.2.3: the exchange after a challenge must end in failure.
                raise SaslAuthenticationError(f"{self._what()} failed: {self._oauth_challenge}")
            if token:
                # A JSON error ({"status": "invalid_token", ...}): acknowledged with ^A, after
                # which the broker answers SASL_AUTHENTICATION_FAILED (OAuthBearerSaslClient).
                self._oauth_challenge = bytes(token).decode("utf-8", "replace")
                return self._authenticate(_KVSEP)
            self._done(answer)
            return None
        try:
            if scram is None:  # PLAIN: the broker's empty answer ends it
                self._done(answer)
                return None
            self._scram_step += 1
            if self._scram_step == 1:
                return self._authenticate(scram.final_message(bytes(token)))
            scram.verify_server_final(bytes(token))
        except SaslAuthenticationFailedError as e:
            raise SaslAuthenticationError(f"{self._what()} failed: {e.detail}") from None
        self._done(answer)
        return None

    def _done(self, answer: Any) -> None:
        self.session_lifetime_ms = getattr(answer, "session_lifetime_ms", 0) or 0
