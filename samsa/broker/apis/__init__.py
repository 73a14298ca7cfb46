"""The broker's API handlers ("KafkaApis"): one small module per API (or per small group).

``KafkaApis(log_manager, node=..., config=...).handle(ctx)`` is the entry point the network
layer calls for every decoded request; ``versions.py`` lists what is advertised and served.
"""

from samsa.broker.apis.context import BrokerNode, RequestContext
from samsa.broker.apis.kafka_apis import HANDLERS, KafkaApis
from samsa.broker.apis.versions import ADVERTISED, SERVED

__all__ = ["ADVERTISED", "HANDLERS", "SERVED", "BrokerNode", "KafkaApis", "RequestContext"]
