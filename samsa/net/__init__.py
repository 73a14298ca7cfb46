"""The client-side network layer: Selector, KafkaChannel, NetworkClient, Metadata, Cluster.

Layering, bottom up (the names of Kafka's Java client classes)::

    KafkaChannel   one non-blocking socket: 4-byte size framing, partial reads and writes
                   (SslKafkaChannel: the same over TLS, with a non-blocking handshake)
    Selector       all channels, one poll(): connected / completed_sends /
                   completed_receives / disconnected per round; LRU idle close; wakeup()
    NetworkClient  connection states + reconnect backoff, ApiVersions negotiation, SASL
                   (samsa.net.sasl), InFlightRequests (FIFO per node), request timeouts,
                   metadata updater
    Metadata       versioned cache of the cluster (Cluster snapshots), await_update()

Using the NetworkClient (what the producer's Sender, the consumer and the admin client do)::

    from samsa.net import NetworkClient, ClientRequest, Metadata
    from samsa.protocol import MetadataRequest

    client = NetworkClient(bootstrap_servers="127.0.0.1:9092", client_id="me")
    # or NetworkClient.from_config(producer_config, metadata=Metadata(...))
    now = monotonic_ms()                       # all times are monotonic ms (float)
    if client.ready(node, now):                # False: connecting/backing off; poll and retry
        client.send(ClientRequest(node, produce_request, callback=on_response,
                                  expect_response=acks != 0, max_version=12), now)
    for response in client.poll(timeout_ms, now):   # callbacks already ran
        response.body / .disconnected / .timed_out / .version_mismatch / .error / .latency_ms

Main entry points:

* ``NetworkClient(metadata=None, *, bootstrap_servers=..., client_id=..., request_timeout_ms,
  max_in_flight_requests_per_connection, reconnect_backoff_ms/_max_ms,
  socket_connection_setup_timeout_ms/_max_ms, send_buffer_bytes, receive_buffer_bytes,
  connections_max_idle_ms, retry_backoff_ms/_max_ms, metadata_max_age_ms,
  metadata_max_idle_ms, allow_auto_topic_creation, metadata_max_version=12,
  security_protocol="PLAINTEXT", ssl_context, sasl_mechanism, sasl_username, sasl_password,
  sasl_oauthbearer_token_callback, clock)``;
  ``NetworkClient.from_config(mapping_of_dotted_kafka_settings, metadata)`` (builds the TLS
  context from the ``ssl.*`` settings with ``samsa.security.tls.client_ssl_context``).
* ``ready(node, now)``, ``is_ready(node, now)``, ``connection_delay(node, now)``,
  ``connection_failed(node)``, ``send(ClientRequest, now)``, ``poll(timeout_ms, now)``,
  ``authentication_error(node)`` (TLS/SASL failure of its last connection),
  ``least_loaded_node(now)``, ``pick_version(node, api_key, our_min, our_max)``,
  ``api_versions(node_id)``, ``in_flight_request_count(node_id=None)``,
  ``close_node(node_id)`` (= ``close(node_id)``), ``wakeup()`` (any thread), ``close()``.
* ``ClientRequest(destination, message, *, expect_response=True, callback=None,
  created_ms=None, min_version=None, max_version=None, request_timeout_ms=None,
  context=None)``: the version is picked at send time from the node's ApiVersions within
  ``min_version..max_version``; ``api_version`` and ``correlation_id`` are set then.
* ``ClientResponse``: ``request``, ``body`` (decoded response; None for acks=0),
  ``disconnected``, ``timed_out``, ``version_mismatch`` (UnsupportedVersionError; nothing was
  sent), ``error`` (why it failed), ``received_ms``, ``latency_ms``, ``destination``,
  ``api_key``, ``api_version``, ``correlation_id``.
* ``Metadata``: ``fetch() -> Cluster``, ``add(topic, now)`` (producer: topic in use; expires
  after metadata.max.idle.ms), ``set_topics(topics)`` / ``need_all_topics`` (consumer),
  ``request_update()``, ``request_update_for_topic(topic)`` (both return the version for
  ``await_update(version, timeout_ms)``), ``topic_error(topic)``,
  ``maybe_throw_for_topic(topic)`` (invalid or unauthorized topic -> fatal error; a failed
  authentication until an update succeeds), ``maybe_throw_any_exception()``,
  ``update_version``.  The client's updater keeps it fresh.
* ``Cluster`` (immutable): ``nodes``, ``node_by_id``, ``partition(tp)``, ``leader_for(tp)``
  (None when unknown, including a leader id missing from the broker list),
  ``partitions_for_topic``, ``available_partitions_for_topic``, ``partitions_for_node``,
  ``topic_ids``, ``unauthorized_topics``, ``invalid_topics``, ``controller``, ``cluster_id``.
  ``Node(id, host, port, rack)``, ``TopicPartition(topic, partition)``, ``PartitionInfo``.
* ``send_and_wait(client, node, message, timeout_ms) -> body`` and ``send_and_receive``
  (whole ClientResponse), ``await_ready(client, node, timeout_ms)``: blocking one-off
  requests on the calling thread (admin client, tools, tests).

Threading: a NetworkClient (and its Selector) belongs to one thread; other threads may call
``wakeup()`` only.  Metadata is thread-safe: any thread may read ``fetch()``, add topics, ask
for updates and wait.  A client used in a process forked after its creation raises
``samsa.errors.ForkedClientError``; create clients after fork.
"""

from samsa.net.api_versions import NodeApiVersions
from samsa.net.bootstrap import parse_bootstrap_servers
from samsa.net.channel import (
    InvalidReceiveError,
    KafkaChannel,
    NetworkReceive,
    NetworkSend,
    SslKafkaChannel,
)
from samsa.net.client import (
    ClientRequest,
    ClientResponse,
    CorrelationIdMismatchError,
    NetworkClient,
)
from samsa.net.clock import monotonic_ms
from samsa.net.cluster import Cluster, Node, PartitionInfo, TopicPartition
from samsa.net.connection_states import ClusterConnectionStates, ConnectionState
from samsa.net.in_flight import InFlightRequests
from samsa.net.metadata import Metadata
from samsa.net.selector import IdleConnectionClosed, Selector
from samsa.net.sync import await_ready, send_and_receive, send_and_wait

__all__ = [
    "ClientRequest", "ClientResponse", "Cluster", "ClusterConnectionStates",
    "ConnectionState", "CorrelationIdMismatchError", "IdleConnectionClosed",
    "InFlightRequests", "InvalidReceiveError", "KafkaChannel", "Metadata", "NetworkClient",
    "NetworkReceive", "NetworkSend", "Node", "NodeApiVersions", "PartitionInfo", "Selector",
    "SslKafkaChannel",
    "TopicPartition", "await_ready", "monotonic_ms", "parse_bootstrap_servers",
    "send_and_receive", "send_and_wait",
]
