"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka runs them (KIP-84).

Each message is one SaslAuthenticate token: client-first, server-first, client-final,
server-final. What Kafka does differently from the RFC, and so does samsa (Kafka's
``ScramSaslClient``/``ScramSaslServer``/``ScramFormatter``):

- no SASLprep: the password's UTF-8 bytes are salted as they are;
- no channel binding: the GS2 header is ``n,`` with an optional ``a=<authzid>``, and the
  authorization id, when given, must be the user name;
- both sides refuse fewer than 4096 iterations; the server never sends ``e=``, a failure is
  the SaslAuthenticate error SASL_AUTHENTICATION_FAILED (raised here as
  :class:`SaslAuthenticationFailedError`), whose text names the mechanism and the user and never
  a secret.

The broker keeps only a :class:`ScramCredential` (salt, StoredKey, ServerKey, iterations) per user
and mechanism, never the password.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import string
from collections.abc import Callable
from dataclasses import dataclass

from samsa.errors import SaslAuthenticationFailedError

__all__ = [
    "MECHANISMS",
    "MECHANISMS_BY_TYPE",
    "SCRAM_SHA_256",
    "SCRAM_SHA_512",
    "ScramClient",
    "ScramCredential",
    "ScramMechanism",
    "ScramServer",
    "escape_sasl_name",
    "unescape_sasl_name",
]

# RFC 5802 §7: printable = %x21-2B / %x2D-7E, every printable character but the comma.
# RFC 5802 allows any printable character but ','; Kafka's ScramFormatter.secureRandomString
# uses letters and digits only, and kcat's librdkafka 2.0.2 echoes a different nonce when the
# server's holds punctuation (tests/broker/network/test_sasl_peers.py): letters and digits.
_NONCE_ALPHABET = string.ascii_letters + string.digits
_NONCE_LENGTH = 32  # librdkafka's and Java's client nonces are about as long


@dataclass(frozen=True)
class ScramMechanism:
    """One SCRAM mechanism: its SASL name, hash, and Kafka's type code in the user-credential
    APIs (DescribeUserScramCredentials / AlterUserScramCredentials, KIP-554)."""

    name: str
    hash_name: str
    type_code: int
    min_iterations: int = 4096
    max_iterations: int = 16384  # enforced when credentials are created, as Kafka does

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self.hash_name).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        """RFC 5802's Hi(): PBKDF2 with HMAC over the mechanism's hash, one hash-length block."""
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode(), salt, iterations)


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", "sha256", 1)
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", "sha512", 2)
MECHANISMS = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
MECHANISMS_BY_TYPE = {m.type_code: m for m in MECHANISMS.values()}  # the credential APIs' int8


@dataclass(frozen=True)
class ScramCredential:
    """What the server stores for a user (Kafka's ScramCredential): never the password."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(cls, mechanism: ScramMechanism, salted: bytes, salt: bytes,
                             iterations: int) -> ScramCredential:
        """From the salted password, which is what AlterUserScramCredentials carries."""
        client_key = mechanism.hmac(salted, b"Client Key")
        return cls(salt, mechanism.hash(client_key), mechanism.hmac(salted, b"Server Key"), iterations)

    @classmethod
    def from_password(cls, mechanism: ScramMechanism, password: str, *, salt: bytes | None = None,
                      iterations: int = 4096) -> ScramCredential:
        if not mechanism.min_iterations <= iterations <= mechanism.max_iterations:
            raise ValueError(f"{mechanism.name} iterations must be {mechanism.min_iterations}-"
                             f"{mechanism.max_iterations}, not {iterations}")
        salt = secrets.token_bytes(32) if salt is None else salt
        return cls.from_salted_password(mechanism, mechanism.salted_password(password, salt, iterations),
                                        salt, iterations)


def escape_sasl_name(name: str) -> str:
    """RFC 5802 §5.1: ``=`` and ``,`` in a user name travel as ``=3D`` and ``=2C``."""
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_sasl_name(text: str) -> str:
    """The user name of a ``n=`` attribute; any other use of ``=`` is invalid."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] != "=":
            out.append(text[i])
            i += 1
        elif text[i:i + 3] == "=3D":
            out.append("=")
            i += 3
        elif text[i:i + 3] == "=2C":
            out.append(",")
            i += 3
        else:
            raise ValueError(f"invalid escape in SCRAM user name {text!r}")
    return "".join(out)


def _attributes(message: str, what: str) -> list[tuple[str, str]]:
    """``a=value,b=value`` -> [(a, value), (b, value)]; values may hold ``=`` (base64). Keys
    are one letter in the RFC; Kafka's client-first extensions (``tokenauth=true``) are words."""
    pairs: list[tuple[str, str]] = []
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.isascii() or not key.isalnum():
            raise ValueError(f"malformed SCRAM {what}: {message!r}")
        pairs.append((key, value))
    return pairs


def _b64decode(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except ValueError:
        raise ValueError(f"SCRAM {what} is not base64: {value!r}") from None


def _nonce() -> str:
    return "".join(secrets.choice(_NONCE_ALPHABET) for _ in range(_NONCE_LENGTH))


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


class ScramClient:
    """The client side: ``first_message()``, ``final_message(server_first)``, then
    ``verify_server_final(server_final)``."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str, *,
                 nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self.username = username
        self._password = password
        self._nonce = _nonce() if nonce is None else nonce
        self._client_first_bare = f"n={escape_sasl_name(username)},r={self._nonce}"
        self._server_signature: bytes | None = None

    def _failed(self, why: str) -> SaslAuthenticationFailedError:
        return SaslAuthenticationFailedError(
            f"{self.mechanism.name} authentication of user {self.username!r} failed: {why}")

    def first_message(self) -> bytes:
        return ("n,," + self._client_first_bare).encode()

    def final_message(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8", "replace")
        try:
            attrs = dict(_attributes(text, "server-first message"))
            nonce, salt_b64, iterations_text = attrs["r"], attrs["s"], attrs["i"]
            salt = _b64decode(salt_b64, "salt")
            iterations = int(iterations_text)
        except (KeyError, ValueError) as e:
            raise self._failed(f"the broker's first message is invalid ({e})") from None
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise self._failed("the broker's nonce does not extend the client's")
        if iterations < self.mechanism.min_iterations:
            raise self._failed(f"the broker asks for {iterations} iterations, fewer than the "
                               f"minimum of {self.mechanism.min_iterations}")
        mechanism = self.mechanism
        salted = mechanism.salted_password(self._password, salt, iterations)
        client_key = mechanism.hmac(salted, b"Client Key")
        without_proof = f"c=biws,r={nonce}"  # biws = base64("n,,"): no channel binding
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        signature = mechanism.hmac(mechanism.hash(client_key), auth_message)
        proof = base64.b64encode(_xor(client_key, signature)).decode()
        self._server_signature = mechanism.hmac(mechanism.hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={proof}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        """Checks the broker's signature: it proves the broker knows the user's credential."""
        if self._server_signature is None:
            raise RuntimeError("final_message() comes before verify_server_final()")
        text = server_final.decode("utf-8", "replace")
        try:
            attrs = dict(_attributes(text, "server-final message"))
        except ValueError as e:
            raise self._failed(f"the broker's final message is invalid ({e})") from None
        if "e" in attrs:
            raise self._failed(f"the broker answered {attrs['e']!r}")
        try:
            signature = _b64decode(attrs["v"], "server signature")
        except (KeyError, ValueError) as e:
            raise self._failed(f"the broker's final message is invalid ({e})") from None
        if not hmac.compare_digest(signature, self._server_signature):
            raise self._failed("the broker's signature does not match: it does not hold this "
                               "user's credential")


class ScramServer:
    """The server side: ``server_first(client_first)``, then ``server_final(client_final)``;
    ``username`` is the authenticated user once ``server_final`` returned."""

    def __init__(self, mechanism: ScramMechanism,
                 credential_of: Callable[[str], ScramCredential | None], *,
                 nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._credential_of = credential_of
        self._server_nonce = _nonce() if nonce is None else nonce
        self.username: str | None = None
        self._credential: ScramCredential | None = None
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self.authenticated = False

    def _failed(self, why: str) -> SaslAuthenticationFailedError:
        who = f" of user {self.username!r}" if self.username is not None else ""
        return SaslAuthenticationFailedError(f"{self.mechanism.name} authentication{who} failed: {why}")

    def server_first(self, client_first: bytes) -> bytes:
        try:
            text = client_first.decode()
            cbind, authz, bare = text.split(",", 2)
            if cbind != "n":
                raise ValueError("channel binding is not supported")
            authzid = ""
            if authz:
                if not authz.startswith("a="):
                    raise ValueError(f"bad authorization id field {authz!r}")
                authzid = unescape_sasl_name(authz[2:])
            attrs = _attributes(bare, "client-first message")
            if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r" or not attrs[1][1]:
                raise ValueError("expected n=<user>,r=<nonce>")
            username = unescape_sasl_name(attrs[0][1])
        except ValueError as e:  # UnicodeDecodeError is a ValueError
            raise self._failed(f"invalid client-first message ({e})") from None
        self.username = username
        if authzid and authzid != username:
            raise self._failed("the authorization id differs from the user name")
        credential = self._credential_of(username)
        if credential is None:
            raise self._failed("invalid user credentials")
        if credential.iterations < self.mechanism.min_iterations:
            raise self._failed("the stored credential has too few iterations")
        self._credential = credential
        self._gs2_header = f"{cbind},{authz},"
        self._client_first_bare = bare
        self._nonce = attrs[1][1] + self._server_nonce
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        return self._server_first.encode()

    def server_final(self, client_final: bytes) -> bytes:
        credential = self._credential
        if credential is None:
            raise self._failed("client-final message before the client-first message")
        try:
            text = client_final.decode()
            without_proof, sep, proof_b64 = text.rpartition(",p=")
            if not sep:
                raise ValueError("no proof")
            attrs = dict(_attributes(without_proof, "client-final message"))
            channel_binding = _b64decode(attrs["c"], "channel binding")
            nonce = attrs["r"]
            proof = _b64decode(proof_b64, "proof")
        except (KeyError, ValueError) as e:
            raise self._failed(f"invalid client-final message ({e})") from None
        # As Kafka 3.8.1-3.9 (ScramSaslServer): the nonce must *end with* the combined nonce.
        # librdkafka before 2.6.1 (kcat 1.7, Debian's librdkafka 2.0) sends its own nonce once
        # more in front (librdkafka#4895); Kafka 4.0 compares for equality and locks those
        # clients out. The server's part must still be there, so a replayed message fails.
        if not nonce.endswith(self._nonce):
            raise self._failed("the nonce does not match the server's")
        if channel_binding != self._gs2_header.encode():
            raise self._failed("the channel binding does not match the client-first message")
        mechanism = self.mechanism
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = mechanism.hmac(credential.stored_key, auth_message)
        if len(proof) != len(signature) or not hmac.compare_digest(
                mechanism.hash(_xor(proof, signature)), credential.stored_key):
            raise self._failed("invalid user credentials")
        self.authenticated = True
        server_signature = mechanism.hmac(credential.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)
