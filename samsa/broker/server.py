"""Broker: one Kafka-compatible node in this process (Kafka's BrokerServer, shrunk to one node).

::

    with Broker("/tmp/samsa-data", port=0) as broker:      # port 0: an ephemeral port
        producer = KafkaProducer({"bootstrap.servers": broker.bootstrap_servers})

``Broker.__init__`` validates the settings, reads (or creates) ``meta.properties``, opens the
logs (``LogManager``, which recovers them) and builds the request handlers (``KafkaApis``) and
the ``SocketServer``; ``start()`` binds the listener, learns the port, fills in the advertised
address and starts serving; ``close()`` stops the network threads, answers parked requests
and closes the logs cleanly (checkpoints and the clean-shutdown marker).

The log and handler modules are imported when a Broker is built, not when this module is,
and can be replaced (``log_manager_factory``, ``apis_factory``) by tests or embedders.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from samsa.broker.config import (
    BrokerConfig,
    Listener,
    advertised_listener,
    parse_listener,
)
from samsa.broker.meta_properties import load_or_create_meta_properties
from samsa.broker.network import SocketServer
from samsa.errors import ConfigError

__all__ = ["DEFAULT_HOST", "Broker"]

log = logging.getLogger("samsa.broker")

DEFAULT_HOST = "127.0.0.1"
_API_VERSIONS_KEY = 18


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
        self._bind = _bind_address(self.config, host, port)
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
        node_class: Callable[..., Any] = _Node
        if apis_factory is None:
            from samsa.broker.apis import BrokerNode, KafkaApis

            apis_factory, node_class = KafkaApis, BrokerNode

        self.log_manager = log_manager_factory(self.data_dir, self.config)
        try:
            # The advertised port is filled in by start(), once the listener is bound.
            self.node = node_class(node_id=self.node_id, host=self._bind.host, port=0,
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
                api_versions_range=_advertised_api_versions(), inline=inline)
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
                _api_versions_roundtrip(host, self.port, max(deadline - time.monotonic(), 0.01))
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


@dataclass(slots=True)
class _Node:
    """This node as clients see it (the apis package's BrokerNode, for injected handlers)."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


def _bind_address(config: BrokerConfig, host: str | None, port: int | None) -> Listener:
    if config["listeners"] is not None:
        listener = parse_listener("listeners", config["listeners"])
    else:
        listener = Listener("PLAINTEXT", DEFAULT_HOST, 0)
    if port is not None and not 0 <= port <= 65535:
        raise ConfigError("port", f"{port} is out of range (0-65535)")
    return Listener("PLAINTEXT", listener.host if host is None else host,
                    listener.port if port is None else port)


def _advertised_api_versions() -> tuple[int, int] | None:
    try:
        from samsa.broker.apis.versions import ADVERTISED
    except ImportError:
        return None
    return ADVERTISED.get(_API_VERSIONS_KEY)


def _api_versions_roundtrip(host: str, port: int, timeout: float) -> None:
    from samsa.protocol import APIS, decode_response, encode_request

    request = APIS[_API_VERSIONS_KEY].request_class()
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(encode_request(request, 0, 1, "samsa-ready-check"))
        data = b""
        size = None
        while size is None or len(data) < size + 4:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
            if size is None and len(data) >= 4:
                size = struct.unpack_from(">i", data)[0]
        decode_response(_API_VERSIONS_KEY, 0, data[4:4 + size])
