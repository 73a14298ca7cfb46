"""SASL/OAUTHBEARER (KIP-255, RFC 7628) as Kafka runs it: the client's initial response, and
Kafka's *unsecured* JSON Web Tokens (``alg: none``, no signature) with their validator, meant for
tests and development, as in Kafka (OAuthBearerUnsecuredJws, OAuthBearerUnsecuredValidator
CallbackHandler, OAuthBearerUnsecuredLoginCallbackHandler).

Client initial response: ``n,[a=<authzid>],\\x01auth=Bearer <token>\\x01[<key>=<value>\\x01...]\\x01``.
A failed validation is answered with a JSON challenge (``{"status":"invalid_token"}``), the client
answers ``\\x01``, and the exchange fails with that JSON as the error message.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "OAuthBearerToken",
    "OAuthBearerValidationError",
    "UnsecuredValidatorOptions",
    "client_initial_response",
    "parse_client_initial_response",
    "unsecured_token",
    "validate_unsecured_token",
]

_SEP = "\x01"
_TOKEN = re.compile(r"^[-_~+/.a-zA-Z0-9]+=*$")
_EXTENSION_KEY = re.compile(r"^[A-Za-z]+$")
_EXTENSION_VALUE = re.compile(r"^[\x21-\x7E \t\r\n]+$")


class OAuthBearerValidationError(ValueError):
    """A token the validator refuses: ``status`` (invalid_token, insufficient_scope) and the
    JSON challenge the server sends for it (RFC 7628 §3.2.2)."""

    def __init__(self, reason: str, status: str = "invalid_token", scope: str | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.scope = scope

    @property
    def challenge(self) -> str:
        body: dict[str, str] = {"status": self.status}
        if self.scope is not None:
            body["scope"] = self.scope
        return json.dumps(body, separators=(",", ":"))


@dataclass(frozen=True)
class OAuthBearerToken:
    value: str
    principal: str
    lifetime_ms: int  # expiry, milliseconds since the epoch
    scopes: frozenset[str] = frozenset()
    start_ms: int | None = None


# -- the client's message -----------------------------------------------------------------------

def client_initial_response(token: str, authzid: str = "",
                            extensions: Mapping[str, str] | None = None) -> bytes:
    for key, value in (extensions or {}).items():
        if key == "auth" or not _EXTENSION_KEY.match(key) or not _EXTENSION_VALUE.match(value):
            raise ValueError(f"invalid SASL extension {key!r}")
    pairs = "".join(f"{k}={v}{_SEP}" for k, v in (extensions or {}).items())
    gs2 = f"n,a={authzid}," if authzid else "n,,"
    return f"{gs2}{_SEP}auth=Bearer {token}{_SEP}{pairs}{_SEP}".encode()


def parse_client_initial_response(data: bytes) -> tuple[str, str, dict[str, str]]:
    """(token, authzid, extensions) of a client's message; ValueError if malformed (Kafka's
    OAuthBearerClientInitialResponse)."""
    text = data.decode("utf-8")
    gs2, sep, rest = text.partition(_SEP)
    if not sep:
        raise ValueError("no key-value separator after the GS2 header")
    parts = gs2.split(",")
    if len(parts) != 3 or parts[0] != "n" or parts[2] != "":
        raise ValueError("invalid GS2 header (channel binding is not supported)")
    authzid = parts[1][2:] if parts[1].startswith("a=") else ""
    if parts[1] and not parts[1].startswith("a="):
        raise ValueError("invalid authorization id field")
    # Every pair ends with the separator, and one more closes the message.
    if not rest.endswith(_SEP) or (rest[:-1] and not rest[:-1].endswith(_SEP)):
        raise ValueError("the message does not end with the key-value separators")
    pairs: dict[str, str] = {}
    for item in rest[:-1].split(_SEP):
        if not item:
            continue
        key, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"invalid key-value pair {key!r}")
        pairs[key] = value
    auth = pairs.pop("auth", None)
    if auth is None:
        raise ValueError("no auth key")
    scheme, _, token = auth.partition(" ")
    if scheme.lower() != "bearer" or not _TOKEN.match(token):
        raise ValueError("invalid auth value: expected 'Bearer <token>'")
    for key, value in pairs.items():
        if not _EXTENSION_KEY.match(key) or not _EXTENSION_VALUE.match(value):
            raise ValueError(f"invalid SASL extension {key!r}")
    return token, authzid, pairs


# -- unsecured tokens ---------------------------------------------------------------------------

def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _b64url_json(part: str, what: str) -> Any:
    try:
        padded = part + "=" * (-len(part) % 4)
        # Kafka before 4.2 decoded with the standard alphabet (KAFKA-17089); both are accepted.
        raw = base64.urlsafe_b64decode(padded.replace("+", "-").replace("/", "_"))
        return json.loads(raw)
    except (binascii.Error, ValueError) as exc:
        raise OAuthBearerValidationError(f"malformed {what}: {exc}") from None


def unsecured_token(principal: str, *, lifetime_s: float = 3600.0,
                    scopes: tuple[str, ...] = (), claims: Mapping[str, Any] | None = None,
                    principal_claim: str = "sub", scope_claim: str = "scope",
                    now: float | None = None) -> OAuthBearerToken:
    """A token as Kafka's OAuthBearerUnsecuredLoginCallbackHandler makes it (tests only: it is
    not signed, anyone can forge one)."""
    issued = time.time() if now is None else now
    body: dict[str, Any] = {**(claims or {}), principal_claim: principal, "iat": issued,
                            "exp": issued + lifetime_s}
    if scopes:
        body[scope_claim] = list(scopes)
    value = ".".join((_b64url(b'{"alg":"none"}'),
                      _b64url(json.dumps(body, separators=(",", ":")).encode()), ""))
    return OAuthBearerToken(value, principal, int((issued + lifetime_s) * 1000),
                            frozenset(scopes), int(issued * 1000))


@dataclass(frozen=True)
class UnsecuredValidatorOptions:
    """The broker's OAuthBearerLoginModule JAAS options for the unsecured validator."""

    principal_claim: str = "sub"
    scope_claim: str = "scope"
    required_scopes: tuple[str, ...] = ()
    clock_skew_ms: int = 0
    extra: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_jaas_options(cls, options: Mapping[str, str]) -> UnsecuredValidatorOptions:
        skew = options.get("unsecuredValidatorAllowableClockSkewMs", "0")
        if not skew.isdigit():
            raise ValueError("unsecuredValidatorAllowableClockSkewMs must be an integer >= 0")
        return cls(options.get("unsecuredValidatorPrincipalClaimName", "sub"),
                   options.get("unsecuredValidatorScopeClaimName", "scope"),
                   tuple(options.get("unsecuredValidatorRequiredScope", "").split()),
                   int(skew))


def validate_unsecured_token(value: str, options: UnsecuredValidatorOptions | None = None,
                             now_ms: float | None = None) -> OAuthBearerToken:
    """Checks a token as Kafka's unsecured validator does; OAuthBearerValidationError if not."""
    opts = options or UnsecuredValidatorOptions()
    # Not rounded to whole milliseconds: a token issued a fraction of one ago is not "future".
    now = time.time() * 1000 if now_ms is None else now_ms
    parts = value.split(".")
    if len(parts) != 3 or not parts[0] or not parts[1]:
        raise OAuthBearerValidationError("an unsecured token has three parts, header.claims.")
    if parts[2]:
        raise OAuthBearerValidationError("an unsecured token must not carry a signature")
    header = _b64url_json(parts[0], "header")
    if not isinstance(header, dict) or header.get("alg") != "none":
        raise OAuthBearerValidationError('the header must say "alg":"none"')
    claims = _b64url_json(parts[1], "claims")
    if not isinstance(claims, dict):
        raise OAuthBearerValidationError("the claims are not a JSON object")
    exp = claims.get("exp")
    if not isinstance(exp, (int, float)) or isinstance(exp, bool):
        raise OAuthBearerValidationError("the token has no numeric exp claim")
    principal = claims.get(opts.principal_claim)
    if not isinstance(principal, str) or not principal.strip():
        raise OAuthBearerValidationError(f"the token has no {opts.principal_claim!r} claim")
    iat = claims.get("iat")
    if iat is not None:
        if not isinstance(iat, (int, float)) or iat * 1000 > now + opts.clock_skew_ms:
            raise OAuthBearerValidationError("the token was issued in the future")
        if exp <= iat:
            raise OAuthBearerValidationError("the token expires before it was issued")
    if now - opts.clock_skew_ms >= exp * 1000:
        raise OAuthBearerValidationError("the token has expired")
    raw_scope = claims.get(opts.scope_claim)
    scopes = frozenset([raw_scope] if isinstance(raw_scope, str) else
                       [s for s in raw_scope if isinstance(s, str)]
                       if isinstance(raw_scope, list) else [])
    missing = [s for s in opts.required_scopes if s not in scopes]
    if missing:
        raise OAuthBearerValidationError(f"the token lacks the scope(s) {missing}",
                                         "insufficient_scope", " ".join(opts.required_scopes))
    return OAuthBearerToken(value, principal, int(exp * 1000), scopes,
                            int(iat * 1000) if iat is not None else None)
