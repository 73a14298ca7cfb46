"""What the network layer needs to serve one listener: its address and security protocol, the
TLS context of an SSL/SASL_SSL listener, and the SASL settings of a SASL one.

``server_ssl_context`` builds the TLS side from Kafka's ssl.* broker settings (PEM keystores
and truststores only); ``tls_principal`` names a client by its certificate as Kafka's
DefaultKafkaPrincipalBuilder does (``User:`` + the subject in RFC 2253 form, most specific
part first, as Java's X500Principal.getName() writes it).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any

from samsa.broker.listeners import Listener
from samsa.broker.network.authenticator import ANONYMOUS, SaslListenerSettings
from samsa.errors import ConfigError
from samsa.security.tls import (
    check_pem_store,
    load_key_store,
    load_trust_store,
    set_cipher_suites,
    tls_versions,
)

__all__ = ["Endpoint", "server_ssl_context", "tls_principal"]

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


def server_ssl_context(config: Any, listener: str) -> ssl.SSLContext:
    """The TLS context of ``listener`` from its ssl.* settings (a BrokerConfig's
    listener_value gives per-listener overrides); the PEM and version rules are the clients'
    (samsa/security/tls.py)."""

    def value(setting: str) -> Any:
        return config.listener_value(listener, setting)

    key, chain = value("ssl.keystore.key"), value("ssl.keystore.certificate.chain")
    location = value("ssl.keystore.location")
    trust_location, trust_pem = value("ssl.truststore.location"), value("ssl.truststore.certificates")
    check_pem_store("keystore", str(value("ssl.keystore.type")), has_location=bool(location),
                    has_inline=bool(key or chain),
                    type_set=config.is_set("ssl.keystore.type"))
    check_pem_store("truststore", str(value("ssl.truststore.type")),
                    has_location=bool(trust_location), has_inline=bool(trust_pem),
                    type_set=config.is_set("ssl.truststore.type"))
    if not location and not (key and chain):
        raise ConfigError("ssl.keystore.location",
                          f"listener {listener} uses TLS: give its PEM key and certificate chain "
                          "(ssl.keystore.location, or ssl.keystore.key with "
                          "ssl.keystore.certificate.chain)")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version, ctx.maximum_version = tls_versions(
        list(value("ssl.enabled.protocols")), "ssl.enabled.protocols")
    load_key_store(ctx, location=location, key_pem=key, chain_pem=chain,
                   key_password=value("ssl.key.password"))
    client_auth = value("ssl.client.auth")
    ctx.verify_mode = _CLIENT_AUTH[client_auth]
    if trust_location or trust_pem or client_auth != "none":
        load_trust_store(ctx, location=trust_location, certificates_pem=trust_pem)
    set_cipher_suites(ctx, list(value("ssl.cipher.suites")))
    return ctx
