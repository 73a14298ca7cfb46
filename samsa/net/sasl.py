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
    ConfigError,
    SaslAuthenticationError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
    for_code,
)
from samsa.protocol import APIS, ApiKey, Message
from samsa.security.jaas import OAUTHBEARER_LOGIN_MODULE, parse_jaas_config
from samsa.security.oauthbearer import client_initial_response, unsecured_token
from samsa.security.plain import plain_client_token
from samsa.security.scram import MECHANISMS, ScramClient

__all__ = ["SASL_HANDSHAKE_VERSION", "SaslClientAuthenticator", "TokenCallback", "unsecured_login_callback"]

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
        try:
            return client_initial_response(token)
        except ValueError as e:
            raise SaslAuthenticationError(f"{self._what()} failed: the token callback's token: {e}") from None

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


_UNSECURED = "unsecuredLogin"


def unsecured_login_callback(jaas_config: str, setting: str = "sasl.jaas.config") -> TokenCallback:
    """Java's default OAUTHBEARER login (OAuthBearerUnsecuredLoginCallbackHandler): a token
    callback making unsigned tokens from the JAAS options ``unsecuredLoginStringClaim_<name>``,
    ``unsecuredLoginNumberClaim_<name>``, ``unsecuredLoginListClaim_<name>`` (first character:
    the separator), ``unsecuredLoginPrincipalClaimName`` (``sub``), ``unsecuredLoginScopeClaimName``
    (``scope``) and ``unsecuredLoginLifetimeSeconds`` (3600).  For tests and development only:
    anyone can forge such a token.  ConfigError naming ``setting`` when the options are wrong."""
    try:
        entry = parse_jaas_config(jaas_config, setting)
    except ValueError as e:
        raise ConfigError(setting, str(e)) from None
    if entry.login_module != OAUTHBEARER_LOGIN_MODULE:
        raise ConfigError(setting, f"names the login module {entry.login_module}, but "
                                   f"sasl.mechanism=OAUTHBEARER takes {OAUTHBEARER_LOGIN_MODULE}")
    options = entry.options
    principal_claim = options.get(f"{_UNSECURED}PrincipalClaimName", "sub")
    scope_claim = options.get(f"{_UNSECURED}ScopeClaimName", "scope")
    try:
        lifetime_s = float(options.get(f"{_UNSECURED}LifetimeSeconds", "3600"))
    except ValueError:
        raise ConfigError(setting, f"{_UNSECURED}LifetimeSeconds must be a number") from None
    claims: dict[str, Any] = {}
    for name, value in options.items():
        kind, _, claim = name.partition("_")
        if kind == f"{_UNSECURED}StringClaim":
            claims[claim] = value
        elif kind == f"{_UNSECURED}NumberClaim":
            try:
                claims[claim] = float(value) if "." in value else int(value)
            except ValueError:
                raise ConfigError(setting, f"{name} must be a number") from None
        elif kind == f"{_UNSECURED}ListClaim":
            claims[claim] = [item for item in value[1:].split(value[:1])] if value else []
        elif kind == f"{_UNSECURED}Extension":
            raise ConfigError(setting, f"{name}: SASL extensions are not supported")
        else:
            continue
        if claim in ("iat", "exp"):
            raise ConfigError(setting, f"{name}: the {claim} claim is set automatically")
    principal = claims.pop(principal_claim, None)
    if not isinstance(principal, str) or not principal.strip():
        raise ConfigError(setting, f"needs {_UNSECURED}StringClaim_{principal_claim}=\"<principal>\" "
                                   "(the token's principal)")
    scope = claims.get(scope_claim)
    scopes: tuple[str, ...] = ()
    if isinstance(scope, list):
        scopes = tuple(claims.pop(scope_claim))

    def callback() -> tuple[str, float]:
        token = unsecured_token(principal, lifetime_s=lifetime_s, scopes=scopes, claims=claims,
                                principal_claim=principal_claim, scope_claim=scope_claim)
        return token.value, token.lifetime_ms / 1000.0

    return callback
