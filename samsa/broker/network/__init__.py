"""The broker's network layer, shaped as Kafka's SocketServer (Acceptor, Processor, RequestChannel).

* ``SocketServer`` (socket_server.py): the listening socket, the ``Acceptor`` thread, the
  ``Processor`` threads (num.network.threads) and the ``RequestChannel``
  (queued.max.requests), started and stopped together.  The handler threads that serve the
  channel (samsa/broker/handler_pool.py) are wired in by samsa/broker/server.py.
* ``Processor`` (processor.py): a selector loop over its connections: size-prefixed frames,
  request decoding, per-connection ordering, partial writes, idle timeouts (stalled
  connections included).
* ``ConnectionQuotas`` (connection_quotas.py): max.connections (broker-wide and per listener)
  and max.connections.per.ip, counted up by the Acceptor and down by the Processors.
* ``Connection`` / ``Outgoing`` (connection.py): frame reading into buffers that grow with the
  bytes that arrived, and response writing (writev for bytes chunks, sendfile for file slices).

The handler side only sees ``RequestContext`` (samsa/broker/request_channel.py).
``probe.api_versions_probe`` is the blocking ApiVersions round trip ``Broker.wait_until_ready``
uses.
"""

from samsa.broker.network.connection import Connection, FrameSizeError, Outgoing
from samsa.broker.network.processor import Processor
from samsa.broker.network.socket_server import Acceptor, SocketServer

__all__ = ["Acceptor", "Connection", "FrameSizeError", "Outgoing", "Processor", "SocketServer"]
