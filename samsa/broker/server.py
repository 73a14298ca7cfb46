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
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from samsa.broker.config import BrokerConfig, advertised_listener, bind_listener
from samsa.broker.handler_pool import RequestHandlerPool
from samsa.broker.meta_properties import load_or_create_meta_properties
from samsa.broker.network import SocketServer
from samsa.broker.network.probe import api_versions_probe
from samsa.broker.node import BrokerNode
from samsa.errors import ConfigError

__all__ = ["DEFAULT_HOST", "Broker"]

log = logging.getLogger("samsa.broker")

DEFAULT_HOST = "127.0.0.1"


class Broker:
    """A single-node broker serving Kafka clients on ``host:port``.

    ``host``/``port`` override ``listeners``; with neither, it listens on 127.0.0.1 on an
    ephemeral port.  ``data_dir`` overrides ``log.dirs``; one of them is required.
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
        self._bind = bind_listener(self.config, host, port, DEFAULT_HOST)
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
                self.config, self.apis.handle, self._bind.host, self._bind.port,
                inline=inline)
            self.handler_pool = RequestHandlerPool(
                self.socket_server.request_channel, self.apis.handle,
                int(self.config["num.io.threads"]), self.node_id)
        except BaseException:
            try:
                self.apis.close()
            finally:
                self.log_manager.close()
            raise

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> Self:
        """Bind the listener and start serving; returns self."""
        with self._lock:
            if self._closed:
                raise RuntimeError("this broker was closed; build a new one")
            if self._started:
                return self
            bound_port = self.socket_server.bind()
            advertised = advertised_listener(self.config, self._bind.host, bound_port)
            self.node.host, self.node.port = advertised.host, advertised.port
            self._advertised = advertised
            start_background = getattr(self.log_manager, "start_background", None)
            if start_background is not None:
                start_background()
            self.handler_pool.start()
            self.socket_server.start()
            self._started = True
            self._ready.set()
        log.info("broker %d (cluster %s) listening on %s:%d, advertised as %s, data in %s",
                 self.node_id, self.cluster_id, self._bind.host, bound_port,
                 self.bootstrap_servers, self.data_dir)
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
                api_versions_probe(host, self.port, max(deadline - time.monotonic(), 0.01))
                return
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
    def advertised_host(self) -> str:
        return str(self.node.host)

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` clients should use (the advertised address)."""
        if not self._started:
            raise RuntimeError("the broker is not started yet: call start()")
        host = self._advertised.host
        if ":" in host:
            host = f"[{host}]"
        return f"{host}:{self._advertised.port}"

    def __repr__(self) -> str:
        where = f"{self._bind.host}:{self.socket_server.port}" if self._started else "not started"
        return f"Broker(node_id={self.node_id}, {where}, data_dir={str(self.data_dir)!r})"
