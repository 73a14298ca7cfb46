"""SCRAM against the RFCs' exchanges (RFC 7677 §3 for SHA-256, RFC 5802 §5 for the same
algorithm over SHA-1), and client against server for SCRAM-SHA-512, which has no published
vector; then every check that makes an exchange fail."""

from __future__ import annotations

import base64

import pytest

from samsa.errors import SaslAuthenticationFailedError
from samsa.security.scram import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramClient,
    ScramCredential,
    ScramMechanism,
    ScramServer,
    escape_sasl_name,
    unescape_sasl_name,
)

# Kafka offers no SCRAM-SHA-1; RFC 5802's own example uses it and checks the same code path.
SCRAM_SHA_1 = ScramMechanism("SCRAM-SHA-1", "sha1", 0)

RFC_EXCHANGES = {
    "rfc7677-sha256": (
        SCRAM_SHA_256,
        "rOprNGfwEbeRWgbNEkqO",
        "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        "W22ZaJ0SNY7soEsUEjb6gQ==",
        b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
        (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
         b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="),
        b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
    ),
    "rfc5802-sha1": (
        SCRAM_SHA_1,
        "fyko+d2lbbFgONRv9qkxdawL",
        "3rfcNHYJY1ZVvWVs7j",
        "QSXCR+Q6sek8bf92",
        b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
        b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
        b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
        b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
    ),
}


@pytest.mark.parametrize("case", list(RFC_EXCHANGES))
def test_client_and_server_reproduce_the_rfc_exchange(case: str) -> None:
    mechanism, client_nonce, server_nonce, salt, first, server_first, final, server_final = RFC_EXCHANGES[case]
    client = ScramClient(mechanism, "user", "pencil", nonce=client_nonce)
    assert client.first_message() == first
    assert client.final_message(server_first) == final
    client.verify_server_final(server_final)

    credential = ScramCredential.from_password(mechanism, "pencil", salt=base64.b64decode(salt))
    server = ScramServer(mechanism, {"user": credential}.get, nonce=server_nonce)
    assert server.server_first(first) == server_first
    assert server.server_final(final) == server_final
    assert (server.username, server.authenticated) == ("user", True)


def test_rfc7677_stored_and_server_keys() -> None:
    credential = ScramCredential.from_password(
        SCRAM_SHA_256, "pencil", salt=base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="))
    assert base64.b64encode(credential.stored_key) == b"WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY="
    assert base64.b64encode(credential.server_key) == b"wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU="
    assert credential.iterations == 4096


def _exchange(client: ScramClient, server: ScramServer) -> None:
    final = client.final_message(server.server_first(client.first_message()))
    client.verify_server_final(server.server_final(final))


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512], ids=lambda m: m.name)
def test_a_user_name_with_separators_and_a_non_ascii_password_authenticate(mechanism: ScramMechanism) -> None:
    # No SASLprep, as Kafka: the password's UTF-8 bytes are salted as they are.
    credential = ScramCredential.from_password(mechanism, "pässwörd", iterations=8192)
    server = ScramServer(mechanism, {"al=ice,x": credential}.get)
    client = ScramClient(mechanism, "al=ice,x", "pässwörd")
    assert client.first_message().startswith(b"n,,n=al=3Dice=2Cx,r=")
    _exchange(client, server)
    assert (server.username, server.authenticated) == ("al=ice,x", True)
    assert len(credential.stored_key) == len(mechanism.hash(b""))


def test_a_wrong_password_fails_naming_mechanism_and_user_never_the_password() -> None:
    server = ScramServer(SCRAM_SHA_512, {"alice": ScramCredential.from_password(SCRAM_SHA_512, "right")}.get)
    client = ScramClient(SCRAM_SHA_512, "alice", "wrong-secret")
    final = client.final_message(server.server_first(client.first_message()))
    with pytest.raises(SaslAuthenticationFailedError) as info:
        server.server_final(final)
    assert str(info.value) == ("SASL_AUTHENTICATION_FAILED (error code 58): SCRAM-SHA-512 authentication "
                               "of user 'alice' failed: invalid user credentials")
    assert "secret" not in str(info.value) and not server.authenticated


def test_an_unknown_user_fails_at_the_first_message() -> None:
    server = ScramServer(SCRAM_SHA_256, {}.get)
    with pytest.raises(SaslAuthenticationFailedError, match="user 'bob' failed: invalid user credentials"):
        server.server_first(ScramClient(SCRAM_SHA_256, "bob", "x").first_message())


def test_a_client_refuses_a_server_that_does_not_know_the_credential() -> None:
    # A server with another credential for the same user: the client's proof fails there, and a
    # forged server-final (signature of the wrong key) fails at the client.
    client = ScramClient(SCRAM_SHA_256, "alice", "right")
    honest = ScramServer(SCRAM_SHA_256, {"alice": ScramCredential.from_password(SCRAM_SHA_256, "right")}.get)
    client.final_message(honest.server_first(client.first_message()))
    with pytest.raises(SaslAuthenticationFailedError, match="signature does not match"):
        client.verify_server_final(b"v=" + base64.b64encode(b"\0" * 32))
    with pytest.raises(SaslAuthenticationFailedError, match="broker answered 'other-error'"):
        client.verify_server_final(b"e=other-error")
    for bad in (b"garbage", b"x=1", b"v=not base64!"):
        with pytest.raises(SaslAuthenticationFailedError, match="the broker's final message is invalid"):
            client.verify_server_final(bad)


def test_the_server_final_message_is_checked_only_after_the_client_final() -> None:
    with pytest.raises(RuntimeError, match="final_message"):
        ScramClient(SCRAM_SHA_256, "alice", "pw").verify_server_final(b"v=AAAA")


@pytest.mark.parametrize(("server_first", "why"), [
    (b"r=elsewhere,s=QSXCR+Q6sek8bf92,i=4096", "nonce does not extend the client's"),
    (b"r=abc,s=QSXCR+Q6sek8bf92,i=4096", "nonce does not extend the client's"),  # nothing added
    (b"r=abcdef,s=QSXCR+Q6sek8bf92,i=4095", "4095 iterations, fewer than the minimum of 4096"),
    (b"r=abcdef,s=not base64!,i=4096", "first message is invalid"),
    (b"r=abcdef,i=4096", "first message is invalid"),
    (b"garbage", "first message is invalid"),
], ids=["foreign-nonce", "same-nonce", "few-iterations", "bad-salt", "no-salt", "garbage"])
def test_the_client_checks_the_server_first_message(server_first: bytes, why: str) -> None:
    client = ScramClient(SCRAM_SHA_256, "alice", "pw", nonce="abc")
    with pytest.raises(SaslAuthenticationFailedError, match=why):
        client.final_message(server_first)


@pytest.mark.parametrize(("client_first", "why"), [
    (b"y,,n=alice,r=abc", "channel binding is not supported"),
    (b"p=tls-unique,,n=alice,r=abc", "channel binding is not supported"),
    (b"n,a=mallory,n=alice,r=abc", "authorization id differs from the user name"),
    (b"n,x=1,n=alice,r=abc", "bad authorization id field"),
    (b"n,,r=abc,n=alice", "expected n=<user>,r=<nonce>"),
    (b"n,,n=alice,r=", "expected n=<user>,r=<nonce>"),
    (b"n,,n=al=ice,r=abc", "invalid escape"),
    (b"n,,\xff", "invalid client-first message"),
], ids=["y-binding", "p-binding", "other-authzid", "bad-authz-field", "order", "empty-nonce",
        "bad-escape", "not-utf8"])
def test_the_server_checks_the_client_first_message(client_first: bytes, why: str) -> None:
    server = ScramServer(SCRAM_SHA_256, {"alice": ScramCredential.from_password(SCRAM_SHA_256, "pw")}.get)
    with pytest.raises(SaslAuthenticationFailedError, match=why):
        server.server_first(client_first)


def test_the_server_accepts_the_user_as_its_own_authorization_id_and_extensions() -> None:
    server = ScramServer(SCRAM_SHA_256, {"alice": ScramCredential.from_password(SCRAM_SHA_256, "pw")}.get,
                         nonce="SERVER")
    assert server.server_first(b"n,a=alice,n=alice,r=abc,tokenauth=false").startswith(b"r=abcSERVER,s=")


def _server_after_first(nonce: str = "SERVER") -> tuple[ScramClient, ScramServer, bytes]:
    server = ScramServer(SCRAM_SHA_256, {"alice": ScramCredential.from_password(SCRAM_SHA_256, "pw")}.get,
                         nonce=nonce)
    client = ScramClient(SCRAM_SHA_256, "alice", "pw", nonce="abc")
    final = client.final_message(server.server_first(client.first_message()))
    return client, server, final


@pytest.mark.parametrize(("mangle", "why"), [
    (lambda f: f.replace(b"r=abcSERVER", b"r=abcOTHER"), "nonce does not match"),
    (lambda f: f.replace(b"c=biws", b"c=" + base64.b64encode(b"n,a=alice,")), "channel binding does not match"),
    (lambda f: f.rpartition(b",p=")[0], "no proof"),
    (lambda f: f.rpartition(b",p=")[0] + b",p=AAAA", "invalid user credentials"),
    (lambda f: f.replace(b"c=biws,", b""), "invalid client-final message"),
], ids=["nonce", "channel-binding", "no-proof", "short-proof", "no-binding"])
def test_the_server_checks_the_client_final_message(mangle: object, why: str) -> None:
    _client, server, final = _server_after_first()
    with pytest.raises(SaslAuthenticationFailedError, match=why):
        server.server_final(mangle(final))  # type: ignore[operator]
    assert not server.authenticated


def test_librdkafkas_repeated_client_nonce_is_accepted_as_kafka_3_9_accepts_it() -> None:
    """librdkafka < 2.6.1 sends r=<client nonce><client nonce><server nonce> (librdkafka#4895);
    Kafka 3.8.1-3.9 accept a nonce that ends with the combined one, and so does this server."""
    mechanism = SCRAM_SHA_256
    salt = b"0123456789abcdef"
    server = ScramServer(mechanism, {"alice": ScramCredential.from_password(
        mechanism, "pw", salt=salt)}.get, nonce="SERVER")
    server_first = server.server_first(b"n,,n=alice,r=abc").decode()
    without_proof = "c=biws,r=abcabcSERVER"  # as librdkafka 2.0 writes it
    salted = mechanism.salted_password("pw", salt, 4096)
    client_key = mechanism.hmac(salted, b"Client Key")
    auth_message = f"n=alice,r=abc,{server_first},{without_proof}".encode()
    signature = mechanism.hmac(mechanism.hash(client_key), auth_message)
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True)))
    assert server.server_final(f"{without_proof},p=".encode() + proof).startswith(b"v=")
    assert server.authenticated


def test_a_client_final_before_the_first_is_refused() -> None:
    server = ScramServer(SCRAM_SHA_256, {}.get)
    with pytest.raises(SaslAuthenticationFailedError, match="before the client-first"):
        server.server_final(b"c=biws,r=x,p=AAAA")


def test_credentials_keep_iterations_within_kafkas_bounds() -> None:
    with pytest.raises(ValueError, match="4096-16384, not 4095"):
        ScramCredential.from_password(SCRAM_SHA_256, "pw", iterations=4095)
    with pytest.raises(ValueError, match="not 16385"):
        ScramCredential.from_password(SCRAM_SHA_512, "pw", iterations=16385)
    weak = ScramCredential.from_salted_password(SCRAM_SHA_256, b"\1" * 32, b"salt", 1000)
    server = ScramServer(SCRAM_SHA_256, {"alice": weak}.get)
    with pytest.raises(SaslAuthenticationFailedError, match="too few iterations"):
        server.server_first(b"n,,n=alice,r=abc")


@pytest.mark.parametrize(("name", "escaped"), [("alice", "alice"), ("a=b", "a=3Db"), ("a,b", "a=2Cb"),
                                                ("=,=", "=3D=2C=3D")])
def test_sasl_names_escape_and_unescape(name: str, escaped: str) -> None:
    assert escape_sasl_name(name) == escaped
    assert unescape_sasl_name(escaped) == name


def test_client_nonces_are_printable_without_commas_and_differ() -> None:
    first = [ScramClient(SCRAM_SHA_256, "u", "p").first_message() for _ in range(2)]
    nonces = [f.decode().partition(",r=")[2] for f in first]
    assert nonces[0] != nonces[1]
    assert all(len(n) == 32 and "," not in n and all(0x21 <= ord(c) <= 0x7E for c in n) for n in nonces)


# Exchanges recorded from librdkafka 2.16.0 (confluent-kafka) logging in to the samsa broker as
# user "librdkafka", password "recorded-password", salt b"samsa-recorded-salt", 4096 iterations.
LIBRDKAFKA_EXCHANGES = {
    "SCRAM-SHA-512": (
        b"n,,n=librdkafka,r=3zfa@1tlvAY]-k/lzRgd\\ONEOE<I]<^z",
        (b"r=3zfa@1tlvAY]-k/lzRgd\\ONEOE<I]<^zebAhFbFDsA19PJBniCOmfnkQPLaS9LQC,"
        b"s=c2Ftc2EtcmVjb3JkZWQtc2FsdA==,i=4096"),
        (b"c=biws,r=3zfa@1tlvAY]-k/lzRgd\\ONEOE<I]<^zebAhFbFDsA19PJBniCOmfnkQPLaS9LQC,"
        b"p=9PLpGsApXjVam2OdrA82moOK+/k6qZQSH0KpPmo1GjUYgY+pT6VZIaugIMdTWwU9ybRSlg9uZc25dkmtH6qxZA=="),
        b"v=WGhQ4myjo0xmhcFtzTW4EpG+yVBT4moiKoTuniP367rJ96fAWMCul7w+l0weiWvZjD1aag6hJIT8VEbPQP+O2Q==",
    ),
    "SCRAM-SHA-256": (
        b"n,,n=librdkafka,r=zAipAjeWJx3OWn3w5f@rv0-dRB\\iQw}t",
        (b"r=zAipAjeWJx3OWn3w5f@rv0-dRB\\iQw}tDxDmJzFfZQUcqQKfa5gSUEww9FcGLDBz,"
        b"s=c2Ftc2EtcmVjb3JkZWQtc2FsdA==,i=4096"),
        (b"c=biws,r=zAipAjeWJx3OWn3w5f@rv0-dRB\\iQw}tDxDmJzFfZQUcqQKfa5gSUEww9FcGLDBz,"
        b"p=OyDrMO57pyq9wYSn5vSVGeHs6Ma76SGjw+/8m16WiLQ="),
        b"v=rwcP6vRHB+a5IrEO4lhLv7Is1JgnElnDKLbstJVNDmo=",
    ),
}


@pytest.mark.parametrize("name", list(LIBRDKAFKA_EXCHANGES))
def test_the_client_writes_what_librdkafka_wrote(name: str) -> None:
    client_first, server_first, client_final, server_final = LIBRDKAFKA_EXCHANGES[name]
    mechanism = {"SCRAM-SHA-256": SCRAM_SHA_256, "SCRAM-SHA-512": SCRAM_SHA_512}[name]
    nonce = client_first.decode().partition(",r=")[2]
    client = ScramClient(mechanism, "librdkafka", "recorded-password", nonce=nonce)
    assert client.first_message() == client_first
    assert client.final_message(server_first) == client_final
    client.verify_server_final(server_final)
    # And the server side answers librdkafka's messages with the recorded signature.
    credential = ScramCredential.from_password(mechanism, "recorded-password",
                                               salt=b"samsa-recorded-salt")
    server_nonce = server_first.decode().partition(",")[0][len("r=") + len(nonce):]
    server = ScramServer(mechanism, {"librdkafka": credential}.get, nonce=server_nonce)
    assert server.server_first(client_first) == server_first
    assert server.server_final(client_final) == server_final
