"""TLS contexts from Kafka's ``ssl.*`` settings, built with Python's :mod:`ssl` module.

Only PEM stores are supported (KIP-651): a trust store is a PEM file of CA certificates
(``ssl.truststore.location``) or the same text inline (``ssl.truststore.certificates``); a key
store is one PEM file holding the private key and its certificate chain
(``ssl.keystore.location``) or both inline (``ssl.keystore.key`` +
``ssl.keystore.certificate.chain``), the key optionally encrypted with ``ssl.key.password``.
Java's ``JKS``/``PKCS12`` store types are refused with a ConfigError naming the setting.

The helpers (:func:`tls_versions`, :func:`load_trust_store`, :func:`load_key_store`,
:func:`check_pem_store`) serve both sides: :func:`client_ssl_context` builds the clients'
context here, the broker builds its server context from the same helpers. Every failure is a
:class:`~samsa.errors.ConfigError` naming the setting at fault, never a secret.
"""

from __future__ import annotations

import contextlib
import os
import re
import ssl
import tempfile
from collections.abc import Mapping
from typing import Any

from samsa.errors import ConfigError

__all__ = [
    "PEM",
    "check_pem_store",
    "client_ssl_context",
    "hostname_check_enabled",
    "load_cert_and_key_files",
    "load_key_store",
    "load_trust_store",
    "set_cipher_suites",
    "tls_versions",
]

PEM = "PEM"
# Names Java's SSLContext.getInstance takes for ssl.protocol (SslConfigs.SSL_PROTOCOL_DOC);
# Python picks the version within ssl.enabled.protocols, so the name is only checked.
_SSL_PROTOCOLS = ("TLS", "TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3")
_TLS_VERSIONS: dict[str, ssl.TLSVersion] = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
# DefaultSslEngineFactory.PemStore finds entries by these markers and ignores text around them.
_CERT_BLOCK = re.compile(r"-----BEGIN [A-Z0-9 ]*CERTIFICATE-----.*?-----END [A-Z0-9 ]*CERTIFICATE-----",
                         re.DOTALL)
_KEY_BLOCK = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?-----END [A-Z0-9 ]*PRIVATE KEY-----",
                        re.DOTALL)


def tls_versions(enabled_protocols: list[str], setting: str) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    """(minimum, maximum) TLS version of ``enabled_protocols`` (Java names, ``TLSv1.2``).

    Python bounds a range, Java enables a set: the range spans the lowest and highest named.
    """
    if not enabled_protocols:
        raise ConfigError(setting, "must name at least one protocol (TLSv1.2, TLSv1.3)")
    versions = []
    for name in enabled_protocols:
        version = _TLS_VERSIONS.get(name)
        if version is None:
            raise ConfigError(setting, f"unknown protocol {name!r}; known: {', '.join(_TLS_VERSIONS)}")
        versions.append(version)
    return min(versions), max(versions)


def hostname_check_enabled(algorithm: str | None, setting: str = "ssl.endpoint.identification.algorithm") -> bool:
    """Java's ``https`` checks the server's host name (RFC 2818, KIP-294); empty turns it off.
    librdkafka's ``none`` is accepted as off too."""
    if algorithm is None or not algorithm.strip() or algorithm.strip().lower() == "none":
        return False
    if algorithm.strip().lower() == "https":
        return True
    raise ConfigError(setting, f"value {algorithm!r} is not supported: use 'https' (check the broker's "
                               "host name, the default) or '' (no check)")


def check_pem_store(kind: str, store_type: str, *, has_location: bool, has_inline: bool,
                    type_set: bool = True, setting_prefix: str = "ssl.") -> None:
    """Refuse a ``kind`` ("keystore"/"truststore") that is not PEM.

    Java's default type name (JKS) is accepted while nothing is given, and, for inline PEM
    text, while the type was left at its default (inline stores are PEM in any case)."""
    if store_type.upper() == PEM:
        return
    if has_location or (has_inline and type_set):
        raise ConfigError(f"{setting_prefix}{kind}.type",
                          f"{store_type!r} stores are not supported, only PEM is: set "
                          f"{setting_prefix}{kind}.type=PEM and give a PEM file")


def _config_error_text(error: BaseException) -> str:
    if isinstance(error, ssl.SSLError) and error.reason:
        return f"{error.reason} ({error.library or 'ssl'})"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error)


def load_trust_store(ctx: ssl.SSLContext, *, location: str | None, certificates_pem: str | None,
                     setting_prefix: str = "ssl.") -> None:
    """Trust the CA certificates of a PEM file, a directory of them (librdkafka's
    ``ssl.ca.location`` may be one), or inline PEM text; with none given, the system's default
    CAs, as Java falls back to the JVM's default trust store."""
    location_setting = f"{setting_prefix}truststore.location"
    inline_setting = f"{setting_prefix}truststore.certificates"
    if location and certificates_pem:
        raise ConfigError(inline_setting, f"give either {location_setting} or {inline_setting}, not both")
    if location:
        try:
            if os.path.isdir(location):
                ctx.load_verify_locations(capath=location)
            else:
                ctx.load_verify_locations(cafile=location)
        except (OSError, ValueError) as e:
            raise ConfigError(location_setting, f"cannot load CA certificates from {location!r}: "
                                                f"{_config_error_text(e)}") from None
        return
    if certificates_pem:
        blocks = _CERT_BLOCK.findall(certificates_pem)
        if not blocks:
            raise ConfigError(inline_setting, "holds no '-----BEGIN CERTIFICATE-----' block")
        try:
            ctx.load_verify_locations(cadata="\n".join(blocks) + "\n")
        except (OSError, ValueError) as e:
            raise ConfigError(inline_setting, f"cannot load CA certificates: {_config_error_text(e)}") from None
        return
    ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH if _is_server(ctx) else ssl.Purpose.SERVER_AUTH)


def _is_server(ctx: ssl.SSLContext) -> bool:
    return ctx.protocol == ssl.PROTOCOL_TLS_SERVER


def _check_key_store_text(text: str, setting: str, key_password: str | None, password_setting: str) -> bool:
    """Java's PemStore rules (one key, some certificates); True if the key is encrypted."""
    keys = _KEY_BLOCK.findall(text)
    if len(keys) != 1:
        raise ConfigError(setting, f"must hold exactly one private key ('-----BEGIN PRIVATE KEY-----' "
                                   f"block), found {len(keys)}")
    if not _CERT_BLOCK.search(text):
        raise ConfigError(setting, "holds no certificate ('-----BEGIN CERTIFICATE-----' block)")
    encrypted = "ENCRYPTED" in keys[0].split("\n", 1)[0] or "Proc-Type: 4,ENCRYPTED" in keys[0]
    if encrypted and key_password is None:
        raise ConfigError(password_setting, f"is required: the private key in {setting} is encrypted")
    return encrypted


def load_key_store(ctx: ssl.SSLContext, *, location: str | None, key_pem: str | None,
                   chain_pem: str | None, key_password: str | None, setting_prefix: str = "ssl.") -> None:
    """Load our certificate chain and private key: one PEM file (``<prefix>keystore.location``)
    or inline PEM (``<prefix>keystore.key`` + ``<prefix>keystore.certificate.chain``, written
    to a private temporary file for :meth:`ssl.SSLContext.load_cert_chain` and removed at
    once). Nothing given: nothing loaded."""
    location_setting = f"{setting_prefix}keystore.location"
    key_setting = f"{setting_prefix}keystore.key"
    chain_setting = f"{setting_prefix}keystore.certificate.chain"
    password_setting = f"{setting_prefix}key.password"
    if location and (key_pem or chain_pem):
        raise ConfigError(key_setting if key_pem else chain_setting,
                          f"cannot be given together with {location_setting}")
    if bool(key_pem) != bool(chain_pem):
        given, missing = (key_setting, chain_setting) if key_pem else (chain_setting, key_setting)
        raise ConfigError(missing, f"is required when {given} is given")
    if location:
        try:
            with open(location, encoding="ascii", errors="replace") as f:
                text = f.read()
        except OSError as e:
            raise ConfigError(location_setting, f"cannot read {location!r}: {_config_error_text(e)}") from None
        encrypted = _check_key_store_text(text, location_setting, key_password, password_setting)
        _load_cert_chain(ctx, location, None, key_password, location_setting, password_setting, encrypted)
        return
    if key_pem and chain_pem:
        encrypted = _check_key_store_text(key_pem + "\n" + chain_pem, key_setting, key_password, password_setting)
        if not _CERT_BLOCK.search(chain_pem):
            raise ConfigError(chain_setting, "holds no certificate ('-----BEGIN CERTIFICATE-----' block)")
        key_block = _KEY_BLOCK.findall(key_pem)[0]
        with _private_pem_file(key_block + "\n" + "\n".join(_CERT_BLOCK.findall(chain_pem)) + "\n") as path:
            _load_cert_chain(ctx, path, None, key_password, key_setting, password_setting, encrypted)


def load_cert_and_key_files(ctx: ssl.SSLContext, *, certificate_location: str | None,
                            key_location: str | None, key_password: str | None) -> None:
    """librdkafka's form: the certificate chain and the key in two PEM files
    (``ssl.certificate.location``, ``ssl.key.location``)."""
    if not certificate_location and not key_location:
        return
    if not certificate_location or not key_location:
        missing = "ssl.certificate.location" if not certificate_location else "ssl.key.location"
        given = "ssl.key.location" if not certificate_location else "ssl.certificate.location"
        raise ConfigError(missing, f"is required when {given} is given")
    try:
        with open(key_location, encoding="ascii", errors="replace") as f:
            key_text = f.read()
    except OSError as e:
        raise ConfigError("ssl.key.location", f"cannot read {key_location!r}: {_config_error_text(e)}") from None
    encrypted = "ENCRYPTED" in key_text
    if encrypted and key_password is None:
        raise ConfigError("ssl.key.password", "is required: the private key in ssl.key.location is encrypted")
    _load_cert_chain(ctx, certificate_location, key_location, key_password, "ssl.certificate.location",
                     "ssl.key.password", encrypted)


def _load_cert_chain(ctx: ssl.SSLContext, certfile: str, keyfile: str | None, key_password: str | None,
                     setting: str, password_setting: str, encrypted: bool) -> None:
    def no_password() -> str:
        # Without a callable OpenSSL would prompt on the terminal for an encrypted key.
        raise ConfigError(password_setting, f"is required: the private key in {setting} is encrypted")

    try:
        ctx.load_cert_chain(certfile, keyfile, key_password if key_password is not None else no_password)
    except ConfigError:
        raise
    except ssl.SSLError as e:
        # OpenSSL reports a wrong password as a generic PEM error.
        if encrypted and key_password is not None:
            raise ConfigError(password_setting, f"does not decrypt the private key in {setting}") from None
        raise ConfigError(setting, f"cannot load the key and certificate chain: {_config_error_text(e)} "
                                   "(the key must match the first certificate)") from None
    except OSError as e:
        raise ConfigError(setting, f"cannot load {certfile!r}: {_config_error_text(e)}") from None


@contextlib.contextmanager
def _private_pem_file(text: str) -> Any:
    fd, path = tempfile.mkstemp(prefix="samsa-keystore-", suffix=".pem")  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(text)
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _check_ssl_protocol(value: str | None, setting: str = "ssl.protocol") -> None:
    if value and value not in _SSL_PROTOCOLS:
        raise ConfigError(setting, f"value {value!r} is not one of: {', '.join(_SSL_PROTOCOLS)}")


def set_cipher_suites(ctx: ssl.SSLContext, suites: list[str] | None, setting: str = "ssl.cipher.suites") -> None:
    """Restrict the TLS 1.2 cipher suites (OpenSSL names, ``ECDHE-RSA-AES128-GCM-SHA256``);
    Python's ssl module cannot restrict TLS 1.3 suites."""
    if not suites:
        return
    try:
        ctx.set_ciphers(":".join(suites))
    except ssl.SSLError:
        raise ConfigError(setting, f"OpenSSL accepts none of {suites!r} (use OpenSSL cipher names "
                                   "such as ECDHE-RSA-AES128-GCM-SHA256)") from None


def client_ssl_context(config: Mapping[str, Any]) -> ssl.SSLContext:
    """The clients' context from Kafka's dotted ``ssl.*`` settings (a parsed client config).

    The broker's certificate is always verified, against ``ssl.truststore.*`` (or the system's
    CAs); its host name too unless ``ssl.endpoint.identification.algorithm`` is empty; a key
    store (``ssl.keystore.*``, or ``ssl.certificate.location`` + ``ssl.key.location``) gives our
    certificate for mutual TLS."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.check_hostname = hostname_check_enabled(config.get("ssl.endpoint.identification.algorithm", "https"))
    _check_ssl_protocol(config.get("ssl.protocol"))
    enabled = config.get("ssl.enabled.protocols") or ["TLSv1.2", "TLSv1.3"]
    ctx.minimum_version, ctx.maximum_version = tls_versions(list(enabled), "ssl.enabled.protocols")
    set_cipher_suites(ctx, config.get("ssl.cipher.suites"))
    truststore_location = config.get("ssl.truststore.location")
    truststore_pem = config.get("ssl.truststore.certificates")
    # ClientConfig already refused explicit non-PEM types; inline text is PEM whatever the type.
    check_pem_store("truststore", config.get("ssl.truststore.type") or PEM,
                    has_location=bool(truststore_location), has_inline=bool(truststore_pem), type_set=False)
    load_trust_store(ctx, location=truststore_location, certificates_pem=truststore_pem)
    keystore_location = config.get("ssl.keystore.location")
    key_pem = config.get("ssl.keystore.key")
    chain_pem = config.get("ssl.keystore.certificate.chain")
    check_pem_store("keystore", config.get("ssl.keystore.type") or PEM,
                    has_location=bool(keystore_location), has_inline=bool(key_pem or chain_pem), type_set=False)
    key_password = config.get("ssl.key.password")
    cert_location = config.get("ssl.certificate.location")
    key_location = config.get("ssl.key.location")
    if (cert_location or key_location) and (keystore_location or key_pem or chain_pem):
        raise ConfigError("ssl.certificate.location", "give either ssl.keystore.* or ssl.certificate.location "
                                                      "+ ssl.key.location, not both")
    load_key_store(ctx, location=keystore_location, key_pem=key_pem, chain_pem=chain_pem,
                   key_password=key_password)
    load_cert_and_key_files(ctx, certificate_location=cert_location, key_location=key_location,
                            key_password=key_password)
    return ctx
