"""Broker: one Kafka-compatible node in this process (Kafka's BrokerServer, shrunk to one node).

::

    with Broker("samsa-data", port=0) as broker:      # port 0: an ephemeral port
        producer = KafkaProducer({"bootstrap.servers": broker.bootstrap_servers})

``Broker.__init__`` validates the settings, reads (or creates) ``meta.properties``, opens the
logs (``LogManager``, which recovers them) and builds the request handlers (``KafkaApis``), the
``SocketServer`` and the ``RequestHandlerPool`` serving its RequestChannel; ``start()`` binds
the listener, learns the port, fills in the advertised address and starts serving; ``close()``
stops the network and handler threads, answers parked requests and closes the logs cleanly
(checkpoints and the clean-shutdown marker).  This module only wires: each part's logic lives
in its own module.

The log and handler modules are imported when a Broker is built, not when this module is,
and can be replaced (``log_manager_factory``, ``apis_factory``) by tests or embedders.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from samsa.broker.config import BrokerConfig
from samsa.broker.handler_pool import RequestHandlerPool
from samsa.broker.listeners import Listener, advertised_listeners, served_listeners
from samsa.broker.meta_properties import load_or_create_meta_properties
from samsa.broker.network import SocketServer
from samsa.broker.network.authenticator import SERVED_MECHANISMS, SaslListenerSettings, plain_users
from samsa.broker.network.endpoint import Endpoint, server_ssl_context
from samsa.broker.network.probe import api_versions_probe
from samsa.broker.node import BrokerNode
from samsa.broker.open_files_limit import raise_open_files_limit
from samsa.broker.scram_credentials import ScramCredentialStore
from samsa.errors import ConfigError
from samsa.security.jaas import parse_jaas_config
from samsa.security.oauthbearer import UnsecuredValidatorOptions

__all__ = ["DEFAULT_HOST", "Broker"]

log = logging.getLogger("samsa.broker")


def _validator_build() -> str:
    """Which record validator produce runs: mypyc-compiled (setup.py) or its pure-Python
    source, a few times the CPU for batches of records of varied sizes."""
    from samsa.broker.log import validator

    if validator.__file__ is None or validator.__file__.endswith(".py"):
        return (f"pure Python ({validator.__file__}; reinstall with a C compiler and without "
                "SAMSA_COMPILE=0 for the compiled one)")
    return f"compiled with mypyc ({validator.__file__})"

DEFAULT_HOST = "127.0.0.1"


class Broker:
    """A single-node broker serving Kafka clients on each of its listeners.

    ``host``/``port`` replace the first listener's address; with neither and no ``listeners``,
    it listens (PLAINTEXT) on 127.0.0.1 on an ephemeral port.  ``data_dir`` overrides ``log.dirs``; one of them is required.
    ``config`` takes Kafka broker settings (see samsa/broker/config.py); unknown names raise
    ConfigError.
    """

    def __init__(self, data_dir: str | os.PathLike[str] | None = None, port: int | None = None,
                 host: str | None = None, config: Mapping[str, Any] | None = None, *,
                 log_manager_factory: Callable[..., Any] | None = None,
                 apis_factory: Callable[..., Any] | None = None) -> None:
        self.config = config if isinstance(config, BrokerConfig) else BrokerConfig(config)
        directory = data_dir if data_dir is not None else self.config.data_dir
        if directory is None:
            raise ConfigError("log.dirs", "no data directory: pass data_dir (--data-dir) or "
                              "set log.dirs")
        self.data_dir = Path(directory)
        self._served = served_listeners(self.config, host, port, DEFAULT_HOST)
        self._bind = self._served[0]
        self.node_id: int = self.config["node.id"]
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.meta = load_or_create_meta_properties(self.data_dir, self.node_id)
        self.cluster_id: str = self.meta.cluster_id
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._closed = False
        self._started = False

        if log_manager_factory is None:
            from samsa.broker.log import LogManager

            log_manager_factory = LogManager
        if apis_factory is None:
            from samsa.broker.apis import KafkaApis

            apis_factory = KafkaApis

        # Before the logs open: the segment handle cache is sized from this limit.
        raise_open_files_limit(bool(self.config["samsa.open.files.limit.raise.enable"]))
        self.log_manager = log_manager_factory(self.data_dir, self.config)
        try:
            # The advertised port is filled in by start(), once the listener is bound.
            self.node = BrokerNode(node_id=self.node_id, host=self._bind.host, port=0,
                                   rack=self.config["broker.rack"])
            self.apis = apis_factory(self.log_manager, node=self.node, config=self.config,
                                     cluster_id=self.cluster_id, data_dir=self.data_dir)
        except BaseException:
            self.log_manager.close()
            raise
        try:
            # Dispatchers that cannot say which requests never block get none run inline.
            inline = (getattr(self.apis, "runs_inline", None)
                      if self.config["samsa.inline.dispatch.enable"] else None)
            self.socket_server = SocketServer.from_config(
                self.config, self.apis.handle, [self._endpoint(lst) for lst in self._served],
                inline=inline, answer=getattr(self.apis, "answer_frame", None))
            self.handler_pool = RequestHandlerPool(
                self.socket_server.request_channel, self.apis.handle,
                int(self.config["num.io.threads"]), self.node_id)
        except BaseException:
            try:
                self.apis.close()
            finally:
                self.log_manager.close()
            raise

    def _endpoint(self, listener: Listener) -> Endpoint:
        ssl_context = server_ssl_context(self.config, listener.name) if listener.uses_tls else None
        sasl = self._sasl_settings(listener.name) if listener.uses_sasl else None
        return Endpoint(listener, ssl_context, sasl)

    def _sasl_settings(self, name: str) -> SaslListenerSettings:
        config = self.config
        mechanisms = [m.strip().upper() for m in config.listener_value(name, "sasl.enabled.mechanisms")]
        for mechanism in mechanisms:
            if mechanism not in SERVED_MECHANISMS:
                raise ConfigError("sasl.enabled.mechanisms",
                                  f"{mechanism} is not served on listener {name}; enable some of "
                                  f"{', '.join(SERVED_MECHANISMS)}")
        if not mechanisms:
            raise ConfigError("sasl.enabled.mechanisms", f"SASL listener {name} enables none")
        users: dict[str, str] = {}
        if "PLAIN" in mechanisms:
            setting = f"listener.name.{name.lower()}.plain.sasl.jaas.config"
            jaas = config.jaas_config(name, "PLAIN")
            if jaas is None:
                raise ConfigError(setting, f"PLAIN on listener {name} needs its users: set "
                                  f"{setting} to org.apache.kafka.common.security.plain."
                                  'PlainLoginModule required user_<name>="<password>";')
            try:
                users = plain_users(jaas, setting)
            except ValueError as exc:
                raise ConfigError(setting, str(exc)) from None
        oauth = UnsecuredValidatorOptions()
        if "OAUTHBEARER" in mechanisms:
            setting = f"listener.name.{name.lower()}.oauthbearer.sasl.jaas.config"
            jaas = config.jaas_config(name, "OAUTHBEARER")
            try:
                options = parse_jaas_config(jaas, setting).options if jaas else {}
                oauth = UnsecuredValidatorOptions.from_jaas_options(options)
            except ValueError as exc:
                raise ConfigError(setting, str(exc)) from None
        store = self._scram_store()
        return SaslListenerSettings(
            listener=name, mechanisms=mechanisms, plain_users=users,
            scram_credential=store.get,
            reauth_ms={m: int(config.mechanism_value(name, m, "connections.max.reauth.ms"))
                       for m in mechanisms},
            failed_delay_ms=int(config.listener_value(
                name, "connection.failed.authentication.delay.ms")),
            max_receive_bytes=int(config.listener_value(name, "sasl.server.max.receive.size")),
            oauthbearer=oauth)

    def _scram_store(self) -> ScramCredentialStore:
        # The handlers' store, so that users AlterUserScramCredentials adds can log in at once.
        services = getattr(self.apis, "services", None)
        store = getattr(services, "scram_credentials", None)
        if not isinstance(store, ScramCredentialStore):
            store = ScramCredentialStore(self.data_dir)
        return store

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> Self:
        """Bind the listener and start serving; returns self."""
        with self._lock:
            if self._closed:
                raise RuntimeError("this broker was closed; build a new one")
            if self._started:
                return self
            self.socket_server.bind()
            self._advertised_by_name = advertised_listeners(
                self.config, self.socket_server.bound_listeners)
            advertised = next(iter(self._advertised_by_name.values()))
            self.node.host, self.node.port = advertised.host, advertised.port
            self.node.endpoints = {name: (a.host, a.port)
                                   for name, a in self._advertised_by_name.items()}
            self._advertised = advertised
            start_background = getattr(self.log_manager, "start_background", None)
            if start_background is not None:
                start_background()
            self.handler_pool.start()
            self.socket_server.start()
            self._started = True
            self._ready.set()
        log.info("broker %d (cluster %s) listening on %s, advertised as %s, data in %s",
                 self.node_id, self.cluster_id,
                 ", ".join(f"{lst.address} ({lst.name})" for lst in self.listeners),
                 ", ".join(a.address for a in self._advertised_by_name.values()), self.data_dir)
        log.info("record validation: %s", _validator_build())
        return self

    def close(self, timeout: float = 10.0) -> None:
        """Stop serving and close the logs cleanly; safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self.socket_server.stop(timeout)
            if self._started:
                self.handler_pool.shutdown(timeout)
        finally:
            try:
                self.apis.close()
            finally:
                self.log_manager.close()
        log.info("broker %d stopped", self.node_id)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def wait_until_ready(self, timeout: float = 10.0) -> None:
        """Block until the broker answers an ApiVersions request; TimeoutError otherwise."""
        deadline = time.monotonic() + timeout
        if not self._ready.wait(timeout):
            raise TimeoutError(f"the broker was not started within {timeout} s (call start())")
        host = self._bind.host if self._bind.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            try:
                api_versions_probe(host, self.port, max(deadline - time.monotonic(), 0.01),
                                   tls=self._bind.uses_tls)
                return
            except ssl.SSLError:
                return  # a TLS listener that wants a client certificate: it is up and talking
            except OSError as exc:
                last_error = exc
                time.sleep(0.01)
        raise TimeoutError(f"the broker on port {self.port} did not answer ApiVersions within "
                           f"{timeout} s: {last_error}")

    # -- addresses ------------------------------------------------------------------------------

    @property
    def host(self) -> str:
        """The host the listener is bound to."""
        return self._bind.host

    @property
    def port(self) -> int:
        """The bound port (known after start())."""
        return self.socket_server.port

    @property
    def listeners(self) -> list[Listener]:
        """Every listener with its bound address (after start()), in the order of
        ``listeners``."""
        return self.socket_server.bound_listeners

    @property
    def advertised_listeners(self) -> dict[str, Listener]:
        """Listener name -> the address its clients are told (after start())."""
        if not self._started:
            raise RuntimeError("the broker is not started yet: call start()")
        return dict(self._advertised_by_name)

    def bootstrap_servers_for(self, listener: str) -> str:
        """``host:port`` for clients of ``listener`` (its advertised address)."""
        try:
            return self.advertised_listeners[listener.upper()].address
        except KeyError:
            raise KeyError(f"no listener named {listener!r}; this broker has "
                           f"{', '.join(self._advertised_by_name)}") from None

    @property
    def advertised_host(self) -> str:
        return str(self.node.host)

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` clients should use (the advertised address)."""
        if not self._started:
            raise RuntimeError("the broker is not started yet: call start()")
        return self._advertised.address

    def __repr__(self) -> str:
        where = f"{self._bind.host}:{self.socket_server.port}" if self._started else "not started"
        return f"Broker(node_id={self.node_id}, {where}, data_dir={str(self.data_dir)!r})"
