"""What a handler sees: the request context from the network layer, and this broker's identity.

``RequestContext`` is the one type the network layer builds and every handler receives
(samsa/broker/request_channel.py); ``BrokerNode`` is this node's advertised address
(samsa/broker/node.py).  Both are re-exported here so handlers import from their own package.
"""

from samsa.broker.node import BrokerNode
from samsa.broker.request_channel import RequestContext

__all__ = ["BrokerNode", "RequestContext"]
