"""The SASL server side of one connection (Kafka's SaslServerAuthenticator), run by the Processor
before any request of a SASL listener reaches the handlers.

A connection of a SASL listener may send, in order: ApiVersions (optional, first), SaslHandshake
(the mechanism), then SaslAuthenticate frames until the mechanism completes; anything else
before that closes it, as Kafka does ("Unexpected Kafka request of type X during SASL
handshake").  A SaslHandshake v0 (pre-KIP-152 clients) is followed by raw, size-prefixed tokens
instead of SaslAuthenticate requests.  Once authenticated, the connection carries its principal
(``User:<name>``).

Failures answer with the error the protocol defines (UNSUPPORTED_SASL_MECHANISM with the enabled
list; SASL_AUTHENTICATION_FAILED with Kafka's texts, which never say whether the user exists)
and the connection is closed after connection.failed.authentication.delay.ms.  The broker's log
names the user and address, never a secret.

Re-authentication (KIP-368): with connections.max.reauth.ms > 0, SaslAuthenticate v1+ tells the
client its session lifetime; a request other than SaslHandshake after it ends closes the
connection, and a SaslHandshake on an authenticated connection starts re-authentication, which
must keep the mechanism and the principal.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from samsa.errors import SaslAuthenticationFailedError
from samsa.protocol import APIS, ApiKey
from samsa.security.jaas import parse_jaas_config
from samsa.security.oauthbearer import (
    OAuthBearerValidationError,
    UnsecuredValidatorOptions,
    parse_client_initial_response,
    validate_unsecured_token,
)
from samsa.security.plain import plain_authenticate
from samsa.security.scram import MECHANISMS as SCRAM_MECHANISMS
from samsa.security.scram import ScramCredential, ScramMechanism, ScramServer

__all__ = ["AuthOutcome", "SaslAuthenticator", "SaslListenerSettings", "plain_users"]

log = logging.getLogger("samsa.broker.network")

ANONYMOUS = "User:ANONYMOUS"
SERVED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_UNSUPPORTED_SASL_MECHANISM = 33
_ILLEGAL_SASL_STATE = 34
_SASL_AUTHENTICATION_FAILED = 58
_SaslHandshakeResponse: Any = APIS[int(ApiKey.SASL_HANDSHAKE)].response_class
_SaslAuthenticateResponse: Any = APIS[int(ApiKey.SASL_AUTHENTICATE)].response_class


def plain_users(jaas_config: str | None, setting: str) -> dict[str, str]:
    """The ``user_<name>="<password>"`` options of a PlainLoginModule JAAS entry."""
    if jaas_config is None:
        return {}
    entry = parse_jaas_config(jaas_config, setting)
    return {key[len("user_"):]: value for key, value in entry.options.items()
            if key.startswith("user_")}


@dataclass(frozen=True)
class SaslListenerSettings:
    """What a SASL listener serves (built once per listener by the Broker)."""

    listener: str
    mechanisms: Sequence[str]  # enabled, in sasl.enabled.mechanisms order
    plain_users: Mapping[str, str] = field(default_factory=dict, repr=False)
    scram_credential: Callable[[str, ScramMechanism], ScramCredential | None] | None = None
    reauth_ms: Mapping[str, int] = field(default_factory=dict)  # per mechanism; 0 = never
    oauthbearer: UnsecuredValidatorOptions = field(default_factory=UnsecuredValidatorOptions)
    failed_delay_ms: int = 100
    max_receive_bytes: int = 524_288


class _State(enum.Enum):
    HANDSHAKE_OR_VERSIONS = "handshake or ApiVersions"
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


@dataclass(slots=True)
class AuthOutcome:
    """What the Processor does with a frame the authenticator took: send ``response`` (a
    response message, or raw token bytes in the v0 framing); then, if ``close`` is set, close the
    connection (after the failure delay when ``delayed``)."""

    response: Any = None
    raw: bytes | None = None
    close: str | None = None
    delayed: bool = False


class SaslAuthenticator:
    def __init__(self, settings: SaslListenerSettings, client_host: str, connection_id: str) -> None:
        self._settings = settings
        self._client_host = client_host
        self._connection_id = connection_id
        self._state = _State.HANDSHAKE_OR_VERSIONS
        self._mechanism: str | None = None
        self._scram: ScramServer | None = None
        self._raw_tokens = False  # SaslHandshake v0: tokens come without Kafka headers
        self._oauth_challenge: str | None = None  # OAUTHBEARER: the JSON error sent to the client
        self._supports_reauth = False
        self._previous: tuple[str, str] | None = None  # (mechanism, principal) while re-authenticating
        self.principal = ANONYMOUS
        self.session_expires_at: float | None = None  # time.monotonic(); None = never

    # -- what the Processor asks ----------------------------------------------------------------

    @property
    def authenticated(self) -> bool:
        return self._state is _State.COMPLETE

    @property
    def raw_tokens(self) -> bool:
        """The next frame is a raw token (SaslHandshake v0 framing), not a Kafka request."""
        return self._raw_tokens and self._state is _State.AUTHENTICATE

    @property
    def max_frame_bytes(self) -> int | None:
        """sasl.server.max.receive.size until authenticated (None afterwards)."""
        return None if self._state is _State.COMPLETE else self._settings.max_receive_bytes

    def allows_before_auth(self, api_key: int) -> bool:
        """ApiVersions first, before the handshake, is served by the handlers as usual."""
        if api_key == ApiKey.API_VERSIONS and self._state is _State.HANDSHAKE_OR_VERSIONS:
            self._state = _State.HANDSHAKE
            return True
        return False

    def session_expired(self, now: float) -> bool:
        return self.session_expires_at is not None and now >= self.session_expires_at

    # -- requests -------------------------------------------------------------------------------

    def on_request(self, api_key: int, version: int, body: Any) -> AuthOutcome:
        """A Kafka request on a connection that is not (or no longer) authenticated, or a
        SaslHandshake starting re-authentication."""
        state = self._state
        if api_key == ApiKey.SASL_HANDSHAKE and state in (
                _State.HANDSHAKE_OR_VERSIONS, _State.HANDSHAKE, _State.COMPLETE):
            return self._handshake(version, body.mechanism)
        if api_key == ApiKey.SASL_AUTHENTICATE and state is _State.AUTHENTICATE \
                and not self._raw_tokens:
            self._supports_reauth = self._supports_reauth or version > 0
            return self._authenticate(bytes(body.auth_bytes), framed=True)
        name = APIS[api_key].name if api_key in APIS else str(api_key)
        during = "handshake" if state is not _State.AUTHENTICATE else "authentication"
        return self._fail(f"Unexpected Kafka request of type {name} during SASL {during}",
                          user=None, respond=False)

    def on_raw_token(self, token: bytes) -> AuthOutcome:
        return self._authenticate(token, framed=False)

    # -- the steps ------------------------------------------------------------------------------

    def _handshake(self, version: int, mechanism: str) -> AuthOutcome:
        enabled = list(self._settings.mechanisms)
        if self._state is _State.COMPLETE:
            previous_mechanism = self._mechanism or ""
            self._previous = (previous_mechanism, self.principal)
            if mechanism != previous_mechanism:
                return self._fail(
                    f"SASL mechanism '{mechanism}' requested by client is not supported for "
                    f"re-authentication of mechanism '{previous_mechanism}'", user=None,
                    response=_SaslHandshakeResponse(error_code=_UNSUPPORTED_SASL_MECHANISM,
                                                    mechanisms=enabled))
        if mechanism not in enabled:
            return self._fail(f"Unsupported SASL mechanism {mechanism}", user=None,
                              response=_SaslHandshakeResponse(
                                  error_code=_UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled))
        self._mechanism = mechanism
        self._scram = None
        self._oauth_challenge = None
        scram = SCRAM_MECHANISMS.get(mechanism)
        if scram is not None:
            lookup = self._settings.scram_credential
            self._scram = ScramServer(scram, (lambda user: lookup(user, scram))
                                      if lookup is not None else (lambda user: None))
        self._raw_tokens = version == 0
        self._state = _State.AUTHENTICATE
        return AuthOutcome(_SaslHandshakeResponse(error_code=0, mechanisms=enabled))

    def _authenticate(self, token: bytes, *, framed: bool) -> AuthOutcome:
        mechanism = self._mechanism or ""
        scram = self._scram
        expires_ms: int | None = None  # the credential's own expiry (OAUTHBEARER tokens)
        user: str | None = None
        try:
            if mechanism == "OAUTHBEARER":
                step = self._oauthbearer(token)
                if isinstance(step, bytes):
                    return self._reply(step, framed, lifetime_ms=0)
                user, expires_ms = step
                reply = b""
            elif scram is None:
                user = plain_authenticate(token, self._settings.plain_users.get)
                reply = b""
            elif scram.username is None:
                return self._reply(scram.server_first(token), framed, lifetime_ms=0)
            else:
                reply = scram.server_final(token)
                user = scram.username
        except SaslAuthenticationFailedError as exc:
            user_name = scram.username if scram is not None else _plain_user(token, mechanism)
            # SCRAM and OAUTHBEARER failures get Kafka's generic text (it must not tell whether
            # the user exists); PLAIN's texts are Kafka's PlainSaslServer messages.
            again = "re-authentication" if self._previous else "authentication"
            text = str(exc) if mechanism == "PLAIN" else (
                f"Authentication failed during {again} due to invalid credentials with SASL "
                f"mechanism {mechanism}")
            if exc.args and str(exc.args[0]).startswith("{"):
                text = str(exc.args[0])  # OAUTHBEARER after its challenge: the JSON itself
            return self._fail(text, user=user_name, detail=str(exc), framed=framed)
        principal = f"User:{user}"
        if self._previous is not None and self._previous[1] != principal:
            prev = self._previous[1].partition(":")
            now = principal.partition(":")
            return self._fail(f"Cannot change principals during re-authentication from "
                              f"{prev[0]}.{prev[2]}: {now[0]}.{now[2]}", user=user, framed=framed)
        self.principal = principal
        self._state = _State.COMPLETE
        self._raw_tokens = False
        self._previous = None
        lifetime_ms = self._session_lifetime_ms(mechanism, expires_ms)
        self.session_expires_at = (time.monotonic() + lifetime_ms / 1000.0
                                   if lifetime_ms > 0 else None)
        log.debug("%s authenticated as %s with %s on %s", self._client_host, principal,
                  mechanism, self._settings.listener)
        return self._reply(reply, framed, lifetime_ms)

    def _oauthbearer(self, token: bytes) -> bytes | tuple[str, int]:
        """One OAUTHBEARER step: a JSON challenge to send (the token was refused), or the
        token's (principal, expiry ms)."""
        if self._oauth_challenge is not None:
            # The client acknowledged the challenge (RFC 7628 §3.2.3): now fail with it.
            raise SaslAuthenticationFailedError(self._oauth_challenge)
        try:
            value, authzid, _extensions = parse_client_initial_response(token)
        except ValueError as exc:
            raise SaslAuthenticationFailedError(f"invalid OAUTHBEARER initial response: {exc}"
                                                ) from None
        try:
            checked = validate_unsecured_token(value, self._settings.oauthbearer)
        except OAuthBearerValidationError as exc:
            log.info("OAUTHBEARER token from %s refused: %s", self._client_host, exc)
            self._oauth_challenge = exc.challenge
            return exc.challenge.encode()
        if authzid and authzid != checked.principal:
            raise SaslAuthenticationFailedError(
                f"the authorization id {authzid!r} is not the token's principal")
        return checked.principal, checked.lifetime_ms

    def _session_lifetime_ms(self, mechanism: str, expires_ms: int | None) -> int:
        """Kafka's ReauthInfo.calcCompletionTimesAndReturnSessionLifetimeMs: the smaller of
        connections.max.reauth.ms and the credential's remaining life (0 = no limit)."""
        max_reauth = self._settings.reauth_ms.get(mechanism, 0)
        if expires_ms is None:
            return max(max_reauth, 0)
        remaining = max(expires_ms - int(time.time() * 1000), 1)
        return min(remaining, max_reauth) if max_reauth > 0 else remaining

    def _reply(self, token: bytes, framed: bool, lifetime_ms: int) -> AuthOutcome:
        if not framed:
            return AuthOutcome(raw=token)
        return AuthOutcome(_SaslAuthenticateResponse(
            error_code=0, error_message=None, auth_bytes=token, session_lifetime_ms=lifetime_ms))

    def _fail(self, message: str, *, user: str | None, detail: str | None = None,
              response: Any = None, respond: bool = True, framed: bool = True) -> AuthOutcome:
        self._state = _State.FAILED
        who = f"user {user!r}" if user is not None else "client"
        log.info("failed authentication of %s from %s on listener %s (%s): %s",
                 who, self._client_host, self._settings.listener, self._connection_id,
                 detail or message)
        if response is None and respond and framed:
            response = _SaslAuthenticateResponse(
                error_code=_SASL_AUTHENTICATION_FAILED, error_message=message, auth_bytes=b"",
                session_lifetime_ms=0)
        return AuthOutcome(response, close=message, delayed=respond)


def _plain_user(token: bytes, mechanism: str) -> str | None:
    if mechanism != "PLAIN":
        return None
    parts = token.split(b"\0")
    return parts[1].decode("utf-8", "replace") if len(parts) == 3 and parts[1] else None
