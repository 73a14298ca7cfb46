"""What the network layer needs to serve one listener: its address and security protocol, the
TLS context of an SSL/SASL_SSL listener, and the SASL settings of a SASL one.

``server_ssl_context`` builds the TLS side from Kafka's ssl.* broker settings (PEM keystores
and truststores only); ``tls_principal`` names a client by its certificate as Kafka's
DefaultKafkaPrincipalBuilder does (``User:`` + the subject in RFC 2253 form, most specific
part first, as Java's X500Principal.getName() writes it).
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from samsa.broker.listeners import Listener
from samsa.broker.network.authenticator import ANONYMOUS, SaslListenerSettings
from samsa.errors import ConfigError

__all__ = ["Endpoint", "server_ssl_context", "tls_principal"]

_TLS_VERSIONS = {
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}
# Attribute keywords Java's X500Principal.getName() (RFC 2253) writes by name.
_RFC2253_KEYWORDS = {
    "commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
    "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
    "domainComponent": "DC", "userId": "UID",
}


@dataclass(frozen=True)
class Endpoint:
    listener: Listener
    ssl_context: ssl.SSLContext | None = None
    sasl: SaslListenerSettings | None = None

    @classmethod
    def plaintext(cls, host: str = "127.0.0.1", port: int = 0) -> Endpoint:
        return cls(Listener("PLAINTEXT", host, port))


def _escape_rfc2253(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (i == 0 and ch in "# ") or (i == len(value) - 1 and ch == " "):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def tls_principal(cert: Any) -> str:
    """``User:CN=client,OU=...,O=...`` for a client certificate; ANONYMOUS without one."""
    if not cert:
        return ANONYMOUS
    parts = []
    for rdn in reversed(cert.get("subject", ())):
        parts.append("+".join(f"{_RFC2253_KEYWORDS.get(k, k)}={_escape_rfc2253(v)}"
                              for k, v in rdn))
    return "User:" + ",".join(parts) if parts else ANONYMOUS


@contextlib.contextmanager
def _pem_file(text: str) -> Iterator[str]:
    """Inline PEM (ssl.keystore.key / ssl.keystore.certificate.chain) as a private temporary
    file, for the ssl module, which loads keys from files only; removed at once."""
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        yield path
    finally:
        os.unlink(path)


def _require_pem(config: Any, listener: str, kind: str) -> None:
    setting = f"ssl.{kind}.type"
    value = str(config.listener_value(listener, setting)).upper()
    if value != "PEM" and config.listener_value(listener, f"ssl.{kind}.location"):
        raise ConfigError(setting, f"{value} {kind}s are not supported: give PEM files and set "
                          f"{setting}=PEM")


def server_ssl_context(config: Any, listener: str) -> ssl.SSLContext:
    """The TLS context of ``listener`` from its ssl.* settings (a BrokerConfig's
    listener_value gives per-listener overrides)."""

    def value(setting: str) -> Any:
        return config.listener_value(listener, setting)

    _require_pem(config, listener, "keystore")
    _require_pem(config, listener, "truststore")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = []
    for name in value("ssl.enabled.protocols"):
        if name not in _TLS_VERSIONS:
            raise ConfigError("ssl.enabled.protocols",
                              f"{name!r} is not served; use TLSv1.2 and/or TLSv1.3")
        versions.append(_TLS_VERSIONS[name])
    if not versions:
        raise ConfigError("ssl.enabled.protocols", "names no TLS version")
    ctx.minimum_version, ctx.maximum_version = min(versions), max(versions)
    password = value("ssl.key.password")
    location, key, chain = (value("ssl.keystore.location"), value("ssl.keystore.key"),
                            value("ssl.keystore.certificate.chain"))
    try:
        if location:
            ctx.load_cert_chain(location, password=password)
        elif key and chain:
            with _pem_file(key + "\n" + chain) as path:
                ctx.load_cert_chain(path, password=password)
        else:
            raise ConfigError("ssl.keystore.location",
                              f"listener {listener} uses TLS: give its PEM key and certificate "
                              "chain (ssl.keystore.location, or ssl.keystore.key with "
                              "ssl.keystore.certificate.chain)")
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError("ssl.keystore.location",
                          f"cannot load the key and certificate chain of listener {listener}: "
                          f"{exc}") from None
    client_auth = value("ssl.client.auth")
    ctx.verify_mode = _CLIENT_AUTH[client_auth]
    trust_location, trust_pem = value("ssl.truststore.location"), value("ssl.truststore.certificates")
    try:
        if trust_location:
            ctx.load_verify_locations(cafile=trust_location)
        elif trust_pem:
            ctx.load_verify_locations(cadata=trust_pem)
        elif client_auth != "none":
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError("ssl.truststore.location",
                          f"cannot load the trusted certificates of listener {listener}: {exc}"
                          ) from None
    ciphers = value("ssl.cipher.suites")
    if ciphers:
        try:
            ctx.set_ciphers(":".join(ciphers))
        except ssl.SSLError:
            raise ConfigError("ssl.cipher.suites", f"OpenSSL knows none of {ciphers}") from None
    return ctx
