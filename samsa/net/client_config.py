"""The settings every client shares, declared once (Java's ``CommonClientConfigs``).

The producer, consumer and admin client build their :class:`~samsa.config.ConfigDef` with
:func:`client_config_def`: :data:`COMMON_CLIENT_SETTINGS` first, then the client's own
settings.  Where Kafka's clients give a common setting different defaults (Java's
``ProducerConfig`` takes a 32 KiB receive buffer, ``AdminClientConfig`` closes idle
connections after 5 minutes), the client says so in its ``defaults`` argument, so each
difference is written in one visible place.  :data:`RETRIES` and :data:`DEFAULT_API_TIMEOUT_MS`
are common to two of the three clients, as in Java.

:class:`ClientConfig` runs the cross-checks Java runs for every client
(``CommonClientConfigs.postProcessReconnectBackoffConfigs`` and
``warnDisablingExponentialBackoff``) and the security checks: every client connects the same
way, so :data:`SECURITY_SETTINGS` (Java's ``ssl.*``/``sasl.*`` names and defaults, with
librdkafka's ``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location``,
``sasl.mechanisms``, ``sasl.username`` and ``sasl.password``) are common settings; after
parsing, ``ssl.truststore.location`` and ``sasl.mechanism`` hold the alias's value and
``sasl.username``/``sasl.password`` the credentials, whichever way they were given.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from samsa.config import (
    Config,
    ConfigDef,
    ConfigEntry,
    Type,
    ValidChoice,
    at_least,
    between,
)
from samsa.errors import ConfigError
from samsa.security.jaas import (
    OAUTHBEARER_LOGIN_MODULE,
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    parse_jaas_config,
)
from samsa.security.tls import PEM, check_pem_store, hostname_check_enabled, tls_versions

__all__ = [
    "BOOTSTRAP_SERVERS",
    "CLIENT_DNS_LOOKUP",
    "CLIENT_ID",
    "COMMON_CLIENT_SETTINGS",
    "CONNECTIONS_MAX_IDLE_MS",
    "DEFAULT_API_TIMEOUT_MS",
    "METADATA_MAX_AGE_MS",
    "RECEIVE_BUFFER_BYTES",
    "RECONNECT_BACKOFF_MAX_MS",
    "RECONNECT_BACKOFF_MS",
    "REQUEST_TIMEOUT_MS",
    "RETRIES",
    "RETRY_BACKOFF_MAX_MS",
    "RETRY_BACKOFF_MS",
    "SASL_MECHANISMS",
    "SECRET_SETTINGS",
    "SECURITY_PROTOCOL",
    "SECURITY_PROTOCOLS",
    "SECURITY_SETTINGS",
    "SEND_BUFFER_BYTES",
    "SOCKET_CONNECTION_SETUP_TIMEOUT_MAX_MS",
    "SOCKET_CONNECTION_SETUP_TIMEOUT_MS",
    "ClientConfig",
    "client_config_def",
    "sasl_credentials",
]

log = logging.getLogger(__name__)

_INT_MAX = 2**31 - 1
E = ConfigEntry

# -- connecting ---------------------------------------------------------------------------------
BOOTSTRAP_SERVERS = E("bootstrap.servers", Type.LIST, [], None,
                      "host:port pairs used to discover the cluster.")
CLIENT_ID = E("client.id", Type.STRING, "", None,
              "Name sent to brokers with every request (default producer-N, "
              "consumer-<group>-N or adminclient-N).")
CLIENT_DNS_LOOKUP = E("client.dns.lookup", Type.STRING, "use_all_dns_ips",
                      ValidChoice(("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only")),
                      "How to use the addresses a host name resolves to.")
SOCKET_CONNECTION_SETUP_TIMEOUT_MS = E(
    "socket.connection.setup.timeout.ms", Type.LONG, 10_000, None,
    "First timeout for establishing a connection.")
SOCKET_CONNECTION_SETUP_TIMEOUT_MAX_MS = E(
    "socket.connection.setup.timeout.max.ms", Type.LONG, 30_000, None,
    "Upper bound of the connection setup timeout as it grows after failures.")
RECONNECT_BACKOFF_MS = E("reconnect.backoff.ms", Type.LONG, 50, at_least(0),
                         "First wait before reconnecting to a broker; doubles per failure "
                         "up to reconnect.backoff.max.ms.")
RECONNECT_BACKOFF_MAX_MS = E("reconnect.backoff.max.ms", Type.LONG, 1000, at_least(0),
                             "Upper bound of the reconnect backoff.")
CONNECTIONS_MAX_IDLE_MS = E("connections.max.idle.ms", Type.LONG, 9 * 60_000, None,
                            "Close connections idle for this long.")
SEND_BUFFER_BYTES = E("send.buffer.bytes", Type.INT, 128 * 1024, at_least(-1),
                      "Socket SO_SNDBUF (-1: the OS default).")
RECEIVE_BUFFER_BYTES = E("receive.buffer.bytes", Type.INT, 64 * 1024, at_least(-1),
                         "Socket SO_RCVBUF (-1: the OS default).")

# -- requests and metadata ----------------------------------------------------------------------
REQUEST_TIMEOUT_MS = E("request.timeout.ms", Type.INT, 30_000, at_least(0),
                       "How long to wait for a response to a request.")
RETRY_BACKOFF_MS = E("retry.backoff.ms", Type.LONG, 100, at_least(0),
                     "First wait before retrying a failed request; doubles per attempt up to "
                     "retry.backoff.max.ms.")
RETRY_BACKOFF_MAX_MS = E("retry.backoff.max.ms", Type.LONG, 1000, at_least(0),
                         "Upper bound of the exponential retry backoff.")
METADATA_MAX_AGE_MS = E("metadata.max.age.ms", Type.LONG, 5 * 60_000, at_least(0),
                        "Refresh metadata at least this often.")

# -- security (CommonClientConfigs, SslConfigs, SaslConfigs; librdkafka's names as aliases) -------
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
SECURITY_PROTOCOL = E("security.protocol", Type.STRING, "PLAINTEXT",
                      ValidChoice(SECURITY_PROTOCOLS, case_insensitive=True),
                      "How to talk to brokers: PLAINTEXT, SSL (TLS), SASL_PLAINTEXT or SASL_SSL "
                      "(SASL over TLS).")
SSL_PROTOCOL = E("ssl.protocol", Type.STRING, "TLSv1.3", None,
                 "Java's SSLContext protocol name (TLS, TLSv1.2, TLSv1.3); the versions used are "
                 "those of ssl.enabled.protocols.")
SSL_ENABLED_PROTOCOLS = E("ssl.enabled.protocols", Type.LIST, ["TLSv1.2", "TLSv1.3"], None,
                          "TLS versions the client may use.")
SSL_CIPHER_SUITES = E("ssl.cipher.suites", Type.LIST, None, None,
                      "TLS 1.2 cipher suites (OpenSSL names); unset = the library's defaults.")
SSL_ENDPOINT_IDENTIFICATION_ALGORITHM = E(
    "ssl.endpoint.identification.algorithm", Type.STRING, "https", None,
    "'https' checks that the broker's certificate is for its host name; '' turns the check off.")
SSL_TRUSTSTORE_TYPE = E("ssl.truststore.type", Type.STRING, "JKS", None,
                        "Trust store format: only PEM is supported (Java's default name JKS is "
                        "accepted while no trust store is given).")
SSL_TRUSTSTORE_LOCATION = E("ssl.truststore.location", Type.STRING, None, None,
                            "PEM file of the CA certificates that sign the brokers' certificates "
                            "(unset: the system's CAs).")
SSL_TRUSTSTORE_CERTIFICATES = E("ssl.truststore.certificates", Type.STRING, None, None,
                                "The trusted CA certificates as PEM text.")
SSL_TRUSTSTORE_PASSWORD = E("ssl.truststore.password", Type.STRING, None, None,
                            "Refused: PEM trust stores have no password.")
SSL_KEYSTORE_TYPE = E("ssl.keystore.type", Type.STRING, "JKS", None,
                      "Key store format: only PEM is supported (Java's default name JKS is "
                      "accepted while no key store is given).")
SSL_KEYSTORE_LOCATION = E("ssl.keystore.location", Type.STRING, None, None,
                          "PEM file with the client's private key and certificate chain, for "
                          "mutual TLS.")
SSL_KEYSTORE_KEY = E("ssl.keystore.key", Type.STRING, None, None,
                     "The client's private key as PEM text (with ssl.keystore.certificate.chain).")
SSL_KEYSTORE_CERTIFICATE_CHAIN = E("ssl.keystore.certificate.chain", Type.STRING, None, None,
                                   "The client's certificate chain as PEM text.")
SSL_KEYSTORE_PASSWORD = E("ssl.keystore.password", Type.STRING, None, None,
                          "Refused: PEM key stores have no password (see ssl.key.password).")
SSL_KEY_PASSWORD = E("ssl.key.password", Type.STRING, None, None,
                     "Password of an encrypted private key.")
SSL_CA_LOCATION = E("ssl.ca.location", Type.STRING, None, None,
                    "librdkafka's name of ssl.truststore.location (a PEM file or directory).")
SSL_CERTIFICATE_LOCATION = E("ssl.certificate.location", Type.STRING, None, None,
                             "librdkafka's client certificate chain file (PEM), with "
                             "ssl.key.location.")
SSL_KEY_LOCATION = E("ssl.key.location", Type.STRING, None, None,
                     "librdkafka's client private key file (PEM), with ssl.certificate.location.")
SASL_MECHANISM = E("sasl.mechanism", Type.STRING, "GSSAPI", None,
                   "SASL mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (Kafka's "
                   "default, GSSAPI, is not supported).")
SASL_MECHANISMS_ALIAS = E("sasl.mechanisms", Type.STRING, None, None,
                          "librdkafka's name of sasl.mechanism.")
SASL_JAAS_CONFIG = E("sasl.jaas.config", Type.STRING, None, None,
                     "Java JAAS login module with the credentials, e.g. org.apache.kafka.common."
                     "security.plain.PlainLoginModule required username=\"u\" password=\"p\";")
SASL_USERNAME = E("sasl.username", Type.STRING, None, None,
                  "librdkafka's SASL user name (PLAIN, SCRAM), instead of sasl.jaas.config.")
SASL_PASSWORD = E("sasl.password", Type.STRING, None, None,
                  "librdkafka's SASL password (PLAIN, SCRAM).")
SASL_OAUTHBEARER_TOKEN_CALLBACK = E(
    "sasl.oauthbearer.token.callback", Type.CLASS, None, None,
    "OAUTHBEARER: a callable (or 'module:name') returning (token, expiry in seconds since the "
    "epoch); called for every (re-)authentication.")

SECURITY_SETTINGS: tuple[ConfigEntry, ...] = (
    SECURITY_PROTOCOL,
    SSL_PROTOCOL,
    SSL_ENABLED_PROTOCOLS,
    SSL_CIPHER_SUITES,
    SSL_ENDPOINT_IDENTIFICATION_ALGORITHM,
    SSL_TRUSTSTORE_TYPE,
    SSL_TRUSTSTORE_LOCATION,
    SSL_TRUSTSTORE_CERTIFICATES,
    SSL_TRUSTSTORE_PASSWORD,
    SSL_KEYSTORE_TYPE,
    SSL_KEYSTORE_LOCATION,
    SSL_KEYSTORE_KEY,
    SSL_KEYSTORE_CERTIFICATE_CHAIN,
    SSL_KEYSTORE_PASSWORD,
    SSL_KEY_PASSWORD,
    SSL_CA_LOCATION,
    SSL_CERTIFICATE_LOCATION,
    SSL_KEY_LOCATION,
    SASL_MECHANISM,
    SASL_MECHANISMS_ALIAS,
    SASL_JAAS_CONFIG,
    SASL_USERNAME,
    SASL_PASSWORD,
    SASL_OAUTHBEARER_TOKEN_CALLBACK,
)
"""The security settings, shared by every client (part of COMMON_CLIENT_SETTINGS)."""

# Never shown by repr() (Java's Type.PASSWORD values print as [hidden]).
SECRET_SETTINGS = frozenset(("sasl.password", "sasl.jaas.config", "ssl.key.password",
                             "ssl.keystore.key", "ssl.keystore.password",
                             "ssl.truststore.password"))

COMMON_CLIENT_SETTINGS: tuple[ConfigEntry, ...] = (
    BOOTSTRAP_SERVERS,
    CLIENT_ID,
    CLIENT_DNS_LOOKUP,
    SOCKET_CONNECTION_SETUP_TIMEOUT_MS,
    SOCKET_CONNECTION_SETUP_TIMEOUT_MAX_MS,
    RECONNECT_BACKOFF_MS,
    RECONNECT_BACKOFF_MAX_MS,
    CONNECTIONS_MAX_IDLE_MS,
    SEND_BUFFER_BYTES,
    RECEIVE_BUFFER_BYTES,
    REQUEST_TIMEOUT_MS,
    RETRY_BACKOFF_MS,
    RETRY_BACKOFF_MAX_MS,
    METADATA_MAX_AGE_MS,
    *SECURITY_SETTINGS,
)
"""Settings of every client: each client's ConfigDef holds these (defaults possibly changed)."""

# Common to two clients, as in Java: the producer and admin client retry (the consumer does
# not), the consumer and admin client bound blocking calls (the producer has max.block.ms).
RETRIES = E("retries", Type.INT, _INT_MAX, between(0, _INT_MAX),
            "How often a request failing with a retriable error is retried (the producer's "
            "delivery.timeout.ms or the call's time limit bounds the total time).")
DEFAULT_API_TIMEOUT_MS = E("default.api.timeout.ms", Type.INT, 60_000, at_least(0),
                           "Time limit of a blocking call (retries included) that gives none.")


def client_config_def(owner: str, own: Iterable[ConfigEntry], *,
                      defaults: Mapping[str, Any] | None = None) -> ConfigDef:
    """``owner``'s settings: the common ones, with ``defaults`` (name -> this client's Kafka
    default where it differs from the common one), then ``own``."""
    changed = dict(defaults or {})
    unknown = set(changed) - {entry.name for entry in COMMON_CLIENT_SETTINGS}
    if unknown:
        raise ValueError(f"not common client settings: {sorted(unknown)}")
    definition = ConfigDef(owner)
    for entry in COMMON_CLIENT_SETTINGS:
        if entry.name in changed:
            entry = dataclasses.replace(entry, default=changed[entry.name])
        definition.add(entry)
    for entry in own:
        definition.add(entry)
    return definition


def sasl_credentials(mechanism: str, *, jaas_config: str | None, username: str | None,
                     password: str | None, token_callback: Any = None,
                     protocol: str = "SASL_PLAINTEXT") -> tuple[str, str]:
    """(user, password) for ``mechanism``, from ``sasl.jaas.config`` (Java) or ``sasl.username``
    + ``sasl.password`` (librdkafka); a ConfigError naming what to set otherwise. Messages never
    hold a password.  OAUTHBEARER takes no password but ``token_callback`` (checked here; the
    user and password returned are empty)."""
    if mechanism == "GSSAPI":
        raise ConfigError("sasl.mechanism", f"GSSAPI (Kerberos, Kafka's default) is not supported; with "
                                            f"security.protocol={protocol} set sasl.mechanism to one of "
                                            f"{', '.join(SASL_MECHANISMS)}")
    if mechanism == "OAUTHBEARER":
        # Java's OAuthBearerLoginModule gets its token from a login callback handler; here the
        # callable itself (confluent-kafka's oauth_cb takes the same shape).
        if token_callback is None:
            raise ConfigError("sasl.oauthbearer.token.callback",
                              "is required with sasl.mechanism=OAUTHBEARER: a callable returning "
                              "(token, expiry in seconds since the epoch), or, for unsigned test "
                              f"tokens, sasl.jaas.config={OAUTHBEARER_LOGIN_MODULE} required "
                              'unsecuredLoginStringClaim_sub="<principal>";')
        if not callable(token_callback):
            raise ConfigError("sasl.oauthbearer.token.callback",
                              f"must be callable, not {type(token_callback).__name__}")
        return "", ""
    if mechanism not in SASL_MECHANISMS:
        raise ConfigError("sasl.mechanism", f"value {mechanism!r} is not one of: {', '.join(SASL_MECHANISMS)} "
                                            "(mechanism names are case-sensitive, as in Kafka)")
    module = PLAIN_LOGIN_MODULE if mechanism == "PLAIN" else SCRAM_LOGIN_MODULE
    if jaas_config is not None:
        if username is not None or password is not None:
            raise ConfigError("sasl.jaas.config", "give the credentials either in sasl.jaas.config or as "
                                                  "sasl.username and sasl.password, not both")
        try:
            entry = parse_jaas_config(jaas_config)
        except ValueError as e:
            raise ConfigError("sasl.jaas.config", str(e)) from None
        if entry.login_module != module:
            raise ConfigError("sasl.jaas.config", f"names the login module {entry.login_module}, but "
                                                  f"sasl.mechanism={mechanism} takes {module}")
        missing = [name for name in ("username", "password") if not entry.options.get(name)]
        if missing:
            raise ConfigError("sasl.jaas.config", f"{module} needs the option(s) {' and '.join(missing)}")
        return entry.options["username"], entry.options["password"]
    if username and password:
        return username, password
    if username or password:
        raise ConfigError("sasl.password" if username else "sasl.username",
                          f"is required with {'sasl.username' if username else 'sasl.password'}")
    raise ConfigError("sasl.jaas.config", f"security.protocol={protocol} with sasl.mechanism={mechanism} "
                                          f"needs credentials: set sasl.jaas.config ('{module} required "
                                          'username="..." password="...";\') or sasl.username and '
                                          "sasl.password")


class ClientConfig(Config):
    """Parsed client settings with the cross-checks every Kafka client runs; each client's
    own checks go in :meth:`_post_process_client`."""

    def _post_process(self) -> None:
        # CommonClientConfigs.postProcessReconnectBackoffConfigs: reconnect.backoff.max.ms
        # follows reconnect.backoff.ms when only the latter is set.
        if self.is_set("reconnect.backoff.ms") and not self.is_set("reconnect.backoff.max.ms"):
            self._set("reconnect.backoff.max.ms", self["reconnect.backoff.ms"])
        # CommonClientConfigs.warnDisablingExponentialBackoff.
        for first, bound, what in (("retry.backoff.ms", "retry.backoff.max.ms", "backoff"),
                                   ("socket.connection.setup.timeout.ms",
                                    "socket.connection.setup.timeout.max.ms",
                                    "connection setup timeout")):
            if self[first] > self[bound]:
                log.warning("%s=%d is greater than %s=%d; a static %s of %d ms applies",
                            first, self[first], bound, self[bound], what, self[bound])
        self._post_process_security()
        self._post_process_client()

    def _post_process_security(self) -> None:
        """librdkafka's aliases folded into Java's names, then the checks Java's clients make
        when they build their channel (ChannelBuilders, JaasContext, DefaultSslEngineFactory),
        made here so that a bad setting fails when the client is created."""
        for alias, name in (("ssl.ca.location", "ssl.truststore.location"),
                            ("sasl.mechanisms", "sasl.mechanism")):
            if self.is_set(alias):
                if self.is_set(name) and self[name] != self[alias]:
                    raise ConfigError(alias, f"is another name of {name}; give one of them")
                self._set(name, self[alias])
        if self.is_set("ssl.ca.location"):
            if self.is_set("ssl.truststore.type") and self["ssl.truststore.type"].upper() != PEM:
                raise ConfigError("ssl.truststore.type", "only PEM is supported (ssl.ca.location is a "
                                                         "PEM file)")
            self._set("ssl.truststore.type", PEM)  # librdkafka's CA files are PEM
        check_pem_store("truststore", self["ssl.truststore.type"],
                        has_location=self["ssl.truststore.location"] is not None,
                        has_inline=self["ssl.truststore.certificates"] is not None,
                        type_set=self.is_set("ssl.truststore.type"))
        check_pem_store("keystore", self["ssl.keystore.type"],
                        has_location=self["ssl.keystore.location"] is not None,
                        has_inline=(self["ssl.keystore.key"] or self["ssl.keystore.certificate.chain"])
                        is not None,
                        type_set=self.is_set("ssl.keystore.type"))
        for store in ("truststore", "keystore"):
            if self[f"ssl.{store}.password"] is not None:
                raise ConfigError(f"ssl.{store}.password", "PEM stores have no password; an encrypted "
                                                          "private key takes ssl.key.password")
        protocol = self["security.protocol"]
        if protocol in ("SSL", "SASL_SSL"):
            hostname_check_enabled(self["ssl.endpoint.identification.algorithm"])
            tls_versions(self["ssl.enabled.protocols"], "ssl.enabled.protocols")
        if protocol.startswith("SASL_"):
            if self["sasl.mechanism"] == "OAUTHBEARER" and self["sasl.oauthbearer.token.callback"] is None \
                    and self["sasl.jaas.config"] is not None:
                # Java's default login for OAUTHBEARER: unsecured tokens from the JAAS options.
                from samsa.net.sasl import unsecured_login_callback

                self._set("sasl.oauthbearer.token.callback", unsecured_login_callback(self["sasl.jaas.config"]))
            username, password = sasl_credentials(
                self["sasl.mechanism"], jaas_config=self["sasl.jaas.config"],
                username=self["sasl.username"], password=self["sasl.password"],
                token_callback=self["sasl.oauthbearer.token.callback"], protocol=protocol)
            if self["sasl.mechanism"] != "OAUTHBEARER":
                self._set("sasl.username", username)
                self._set("sasl.password", password)

    def __repr__(self) -> str:
        changed = {name: "[hidden]" if name in SECRET_SETTINGS else self[name]
                   for name in sorted(self.originals)}
        return f"{type(self).__name__}({changed!r})"

    def _post_process_client(self) -> None:
        """The client's own cross-checks (Java's ``postProcessParsedConfig``)."""
