"""OAUTHBEARER messages and Kafka's unsecured tokens (RFC 7628, KIP-255)."""

from __future__ import annotations

import base64
import json

import pytest

from samsa.security.oauthbearer import (
    OAuthBearerValidationError,
    UnsecuredValidatorOptions,
    client_initial_response,
    parse_client_initial_response,
    unsecured_token,
    validate_unsecured_token,
)

NOW_S = 1_700_000_000.0
NOW_MS = int(NOW_S * 1000)


def test_the_initial_response_layout() -> None:
    assert client_initial_response("abc.def.") == b"n,,\x01auth=Bearer abc.def.\x01\x01"
    message = client_initial_response("t.c.", "alice", {"traceId": "42"})
    assert message == b"n,a=alice,\x01auth=Bearer t.c.\x01traceId=42\x01\x01"
    assert parse_client_initial_response(message) == ("t.c.", "alice", {"traceId": "42"})


@pytest.mark.parametrize("bad", [
    b"n,,auth=Bearer x\x01\x01",  # no separator after the header
    b"y,,\x01auth=Bearer x\x01\x01",  # channel binding
    b"n,,\x01auth=Basic x\x01\x01",
    b"n,,\x01auth=Bearer x y\x01\x01",
    b"n,,\x01other=1\x01\x01",
    b"n,,\x01auth=Bearer x\x01",  # the last separator missing
])
def test_malformed_initial_responses(bad: bytes) -> None:
    with pytest.raises(ValueError):
        parse_client_initial_response(bad)


def test_a_token_made_here_validates() -> None:
    token = unsecured_token("alice", lifetime_s=60, scopes=("kafka",), now=NOW_S)
    header, _claims, signature = token.value.split(".")
    assert signature == ""
    assert json.loads(base64.urlsafe_b64decode(header + "==")) == {"alg": "none"}
    checked = validate_unsecured_token(token.value, now_ms=NOW_MS + 1000)
    assert (checked.principal, checked.lifetime_ms, checked.scopes) == \
        ("alice", NOW_MS + 60_000, frozenset({"kafka"}))


def _token(claims: dict[str, object], header: dict[str, object] | None = None) -> str:
    def enc(obj: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    return f"{enc(header or {'alg': 'none'})}.{enc(claims)}."


@pytest.mark.parametrize("value,why", [
    (_token({"sub": "a", "exp": NOW_S - 1}), "expired"),
    (_token({"sub": "a"}), "exp"),
    (_token({"exp": NOW_S + 60}), "sub"),
    (_token({"sub": "a", "exp": NOW_S + 60}, {"alg": "HS256"}), "alg"),
    (_token({"sub": "a", "exp": NOW_S + 60, "iat": NOW_S + 30}), "future"),
    (_token({"sub": "a", "exp": NOW_S + 60}) + "signature", "signature"),
    ("only.two", "three parts"),
])
def test_refused_tokens(value: str, why: str) -> None:
    with pytest.raises(OAuthBearerValidationError, match=why) as info:
        validate_unsecured_token(value, now_ms=NOW_MS)
    assert info.value.challenge == '{"status":"invalid_token"}'


def test_required_scope_and_clock_skew() -> None:
    options = UnsecuredValidatorOptions.from_jaas_options({
        "unsecuredValidatorRequiredScope": "kafka write",
        "unsecuredValidatorAllowableClockSkewMs": "5000"})
    token = unsecured_token("bob", scopes=("kafka",), now=NOW_S)
    with pytest.raises(OAuthBearerValidationError) as info:
        validate_unsecured_token(token.value, options, now_ms=NOW_MS)
    assert json.loads(info.value.challenge) == {"status": "insufficient_scope",
                                                "scope": "kafka write"}
    ok = unsecured_token("bob", scopes=("kafka", "write"), now=NOW_S + 4)  # issued 4 s ahead
    assert validate_unsecured_token(ok.value, options, now_ms=NOW_MS).principal == "bob"
