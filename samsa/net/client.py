"""NetworkClient: requests and responses over the Selector, with connection management.

Kafka's Java ``NetworkClient``, Kafka 4.x behaviour:

* ``ready(node, now)`` is True when the node can take a request now; otherwise it starts a
  connect if the reconnect backoff allows and returns False.  ``is_ready`` only asks.
  While a metadata update is due, every node reads as not ready so the update goes first.
* Connections go DISCONNECTED -> CONNECTING -> CHECKING_API_VERSIONS -> READY.  The first
  request on a connection is ApiVersions (our highest version, 4).  An UNSUPPORTED_VERSION
  answer is retried on the same connection with the broker's advertised ApiVersions maximum
  (or v0); an error body that does not parse at the request's version is read with the v0
  layout (librdkafka's mock answers v3+ with a malformed body).  The versions are kept per
  node as NodeApiVersions; ``send`` picks each request's version from them, within the
  request's allowed range (``pick_version``).
* ``send(request)`` encodes the request with a fresh correlation id and hands it to the
  Selector; it joins the node's InFlightRequests FIFO.  A response is matched to the node's
  oldest in-flight request; a different correlation id closes the connection with a
  CorrelationIdMismatchError.  A request that expects no response (acks=0) completes once
  written; a response that arrives for it anyway (the librdkafka mock sends one) is dropped.
* ``poll(timeout_ms, now)`` runs the metadata updater, the Selector, then turns the round's
  results into ClientResponses (completed, disconnected, timed out, version mismatch), runs
  their callbacks, and returns them.  Requests older than request.timeout.ms close their
  connection and fail every request on it with ``timed_out``; connects that take longer than
  the connection setup timeout are abandoned.
* Security (security.protocol): over SSL/SASL_SSL the Selector runs the TLS handshake before
  a connection counts as connected; its failures (untrusted certificate, host name mismatch,
  refused client certificate) are SslAuthenticationError.  Over SASL_PLAINTEXT/SASL_SSL the
  ApiVersions answer is followed by SaslHandshake + SaslAuthenticate (state AUTHENTICATING,
  ``samsa.net.sasl``) and only then is the node READY; a refusal is SaslAuthenticationError.
  An authentication failure closes the connection, fails its requests with the error, and is
  recorded in the Metadata (``authentication_failed``), so that calls waiting on the cluster
  fail with it instead of waiting on reconnects (Java: AuthenticationException is fatal for
  the pending calls; NetworkClient keeps reconnecting with backoff).  When the broker gives the
  session a lifetime (KIP-368), the connection re-authenticates at a random point between 85%
  and 95% of it, once no request is in flight on it.
* The metadata updater sends a MetadataRequest (up to v12) to the least loaded node whenever
  ``Metadata.time_to_next_update`` says so, starting from the bootstrap servers (nodes -1,
  -2, ...), and asks for an update after every unexpected disconnect.

Not thread-safe, as in Java: one thread (the Sender, or the caller of ``send_and_wait``) owns a
client; other threads may only call ``wakeup()``.  A client created before ``os.fork()``
raises ForkedClientError when used in the child.
"""

from __future__ import annotations

import logging
import os
import random
import ssl
import struct
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any, Self

from samsa._version import __version__
from samsa.errors import (
    AuthenticationError,
    ConfigError,
    ForkedClientError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    SaslAuthenticationError,
    UnsupportedVersionError,
    for_code,
)
from samsa.net.api_versions import NodeApiVersions, pick_version
from samsa.net.bootstrap import parse_bootstrap_servers
from samsa.net.channel import NetworkSend
from samsa.net.client_config import SECURITY_PROTOCOLS, sasl_credentials
from samsa.net.clock import Clock, monotonic_ms
from samsa.net.cluster import Node
from samsa.net.connection_states import ClusterConnectionStates
from samsa.net.in_flight import InFlightRequests
from samsa.net.metadata import Metadata, MetadataRequestPlan
from samsa.net.request import ClientRequest, ClientResponse
from samsa.net.sasl import SASL_HANDSHAKE_VERSION, SaslClientAuthenticator, unsecured_login_callback
from samsa.net.selector import DEFAULT_MAX_RECEIVE_SIZE, IdleConnectionClosed, Selector
from samsa.protocol import APIS, ApiKey, Message, decode_response, encode_request_buffers
from samsa.protocol.messages.api_versions import API as _API_VERSIONS_API
from samsa.security.tls import client_ssl_context

log = logging.getLogger(__name__)

_UNSUPPORTED_VERSION = UnsupportedVersionError.code
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_INF = float("inf")
_MAX_CORRELATION_ID = 2**31 - 1
# Correlation ids of answered-not-expected requests remembered per node (acks=0 against
# brokers that answer anyway); real brokers never answer, so the memory must stay bounded.
_NO_RESPONSE_MEMORY = 4096
_SOFTWARE_NAME = "samsa"
_SASL_KEYS = frozenset((ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE))
# SaslClientAuthenticator.ReauthInfo: re-authenticate at a random point in this share of the
# session lifetime the broker gave.
_REAUTH_WINDOW = (0.85, 0.95)

class CorrelationIdMismatchError(KafkaConnectionError):
    """A response's correlation id was not the oldest in-flight request's: the connection's
    request/response pairing is lost, so the connection is closed."""

    name = "CORRELATION_ID_MISMATCH"


# -- fork safety ---------------------------------------------------------------------------

_fork_generation = 0


def _after_fork_in_child() -> None:
    global _fork_generation
    _fork_generation += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# -- the client ---------------------------------------------------------------------------


_CONFIG_KEYS: dict[str, str] = {
    "bootstrap.servers": "bootstrap_servers",
    "client.id": "client_id",
    "max.in.flight.requests.per.connection": "max_in_flight_requests_per_connection",
    "reconnect.backoff.ms": "reconnect_backoff_ms",
    "reconnect.backoff.max.ms": "reconnect_backoff_max_ms",
    "socket.connection.setup.timeout.ms": "socket_connection_setup_timeout_ms",
    "socket.connection.setup.timeout.max.ms": "socket_connection_setup_timeout_max_ms",
    "send.buffer.bytes": "send_buffer_bytes",
    "receive.buffer.bytes": "receive_buffer_bytes",
    "request.timeout.ms": "request_timeout_ms",
    "connections.max.idle.ms": "connections_max_idle_ms",
    "client.dns.lookup": "client_dns_lookup",
    "retry.backoff.ms": "retry_backoff_ms",
    "retry.backoff.max.ms": "retry_backoff_max_ms",
    "metadata.max.age.ms": "metadata_max_age_ms",
    "metadata.max.idle.ms": "metadata_max_idle_ms",
    "allow.auto.create.topics": "allow_auto_topic_creation",
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
}


class NetworkClient:
    """See the module docstring.  Defaults are the Java producer's."""

    def __init__(
        self,
        metadata: Metadata | None = None,
        *,
        bootstrap_servers: str | Iterable[str] | None = None,
        client_id: str | None = "samsa",
        max_in_flight_requests_per_connection: int = 5,
        reconnect_backoff_ms: float = 50,
        reconnect_backoff_max_ms: float = 1000,
        socket_connection_setup_timeout_ms: float = 10000,
        socket_connection_setup_timeout_max_ms: float = 30000,
        send_buffer_bytes: int = 131072,
        receive_buffer_bytes: int = 32768,
        request_timeout_ms: float = 30000,
        connections_max_idle_ms: float = 540000,
        client_dns_lookup: str = "use_all_dns_ips",
        retry_backoff_ms: float = 100,
        retry_backoff_max_ms: float = 1000,
        metadata_max_age_ms: float = 300000,
        metadata_max_idle_ms: float | None = 300000,
        allow_auto_topic_creation: bool = True,
        metadata_max_version: int = 12,
        discover_broker_versions: bool = True,
        max_receive_size: int = DEFAULT_MAX_RECEIVE_SIZE,
        security_protocol: str = "PLAINTEXT",
        ssl_context: ssl.SSLContext | None = None,
        sasl_mechanism: str | None = None,
        sasl_username: str | None = None,
        sasl_password: str | None = None,
        sasl_oauthbearer_token_callback: Any = None,
        clock: Clock = monotonic_ms,
    ) -> None:
        if client_dns_lookup not in ("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only"):
            raise ConfigError("client.dns.lookup", f"{client_dns_lookup!r} is not one of "
                              "'use_all_dns_ips', 'resolve_canonical_bootstrap_servers_only'")
        protocol = security_protocol.strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError("security.protocol", f"value {security_protocol!r} is not one of: "
                                                   f"{', '.join(SECURITY_PROTOCOLS)}")
        self.security_protocol = protocol
        self._ssl_context: ssl.SSLContext | None = None
        if protocol in ("SSL", "SASL_SSL"):
            self._ssl_context = ssl_context if ssl_context is not None else client_ssl_context({})
        self._sasl: tuple[str, str, str] | None = None  # mechanism, user, password
        if protocol.startswith("SASL_"):
            mechanism = sasl_mechanism or "GSSAPI"
            user, password = sasl_credentials(mechanism, jaas_config=None, username=sasl_username,
                                              password=sasl_password,
                                              token_callback=sasl_oauthbearer_token_callback,
                                              protocol=protocol)
            self._sasl = (mechanism, user, password)
        self._sasl_token_callback = sasl_oauthbearer_token_callback
        self._pid = os.getpid()
        self._fork_generation = _fork_generation
        self._clock = clock
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.reconnect_backoff_ms = reconnect_backoff_ms
        self.send_buffer_bytes = send_buffer_bytes
        self.receive_buffer_bytes = receive_buffer_bytes
        self.discover_broker_versions = discover_broker_versions
        self.metadata_max_version = metadata_max_version

        if metadata is None:
            metadata = Metadata(
                retry_backoff_ms=retry_backoff_ms, retry_backoff_max_ms=retry_backoff_max_ms,
                metadata_max_age_ms=metadata_max_age_ms,
                metadata_max_idle_ms=metadata_max_idle_ms,
                allow_auto_topic_creation=allow_auto_topic_creation, clock=clock)
        self.metadata = metadata
        if bootstrap_servers is not None:
            metadata.bootstrap(parse_bootstrap_servers(bootstrap_servers))

        self.selector = Selector(connections_max_idle_ms=connections_max_idle_ms,
                                 max_receive_size=max_receive_size, clock=clock)
        self.connection_states = ClusterConnectionStates(
            reconnect_backoff_ms, reconnect_backoff_max_ms,
            socket_connection_setup_timeout_ms, socket_connection_setup_timeout_max_ms,
            use_all_dns_ips=client_dns_lookup == "use_all_dns_ips")
        self.in_flight_requests = InFlightRequests(max_in_flight_requests_per_connection)
        self._api_versions: dict[int, NodeApiVersions] = {}
        self._nodes_needing_api_versions: dict[int, int] = {}  # node -> ApiVersions version
        self._no_response_ids: dict[int, deque[int]] = {}
        self._aborted: list[ClientResponse] = []
        self._correlation = 0
        self._next_request_deadline = _INF
        self._metadata_in_progress: ClientRequest | None = None
        self._metadata_plan: MetadataRequestPlan | None = None
        self._last_no_node_ms = -_INF
        self._authenticators: dict[int, SaslClientAuthenticator] = {}
        self._reauth_at: dict[int, float] = {}  # node -> when to re-authenticate (KIP-368)
        self._next_reauth_ms = _INF
        # Authentication failures so far and the latest (the producer's Sender fails its
        # queued batches on a new one).
        self.authentication_failures = 0
        self.last_authentication_error: AuthenticationError | None = None
        self._closed = False

    @classmethod
    def from_config(cls, config: Mapping[str, Any], metadata: Metadata | None = None,
                    **overrides: Any) -> NetworkClient:
        """Build from Kafka's dotted settings; keys the network layer does not use are
        ignored (so a whole producer or consumer config can be passed)."""
        kwargs: dict[str, Any] = {}
        for dotted, kw in _CONFIG_KEYS.items():
            if dotted in config:
                kwargs[kw] = config[dotted]
        protocol = str(config.get("security.protocol") or "PLAINTEXT").strip().upper()
        if protocol in ("SSL", "SASL_SSL"):
            kwargs["ssl_context"] = client_ssl_context(config)
        if protocol.startswith("SASL_"):
            # A parsed client config holds the credentials in sasl.username/sasl.password
            # (ClientConfig resolves sasl.jaas.config); a plain mapping may hold either.
            user, password = config.get("sasl.username"), config.get("sasl.password")
            mechanism = config.get("sasl.mechanism") or config.get("sasl.mechanisms")
            if config.get("sasl.jaas.config") is not None and not (user and password) \
                    and mechanism != "OAUTHBEARER":
                user, password = sasl_credentials(
                    config.get("sasl.mechanism") or config.get("sasl.mechanisms") or "GSSAPI",
                    jaas_config=config["sasl.jaas.config"], username=None, password=None,
                    protocol=protocol)
            kwargs["sasl_mechanism"] = config.get("sasl.mechanism") or config.get("sasl.mechanisms")
            kwargs["sasl_username"], kwargs["sasl_password"] = user, password
            callback = config.get("sasl.oauthbearer.token.callback")
            if mechanism == "OAUTHBEARER" and callback is None and config.get("sasl.jaas.config"):
                callback = unsecured_login_callback(config["sasl.jaas.config"])
            kwargs["sasl_oauthbearer_token_callback"] = callback
        kwargs.update(overrides)
        return cls(metadata, **kwargs)

    # -- guards ----------------------------------------------------------------------------

    def _ensure_usable(self) -> None:
        if self._fork_generation != _fork_generation:
            raise ForkedClientError(
                f"this client was created in process {self._pid} and is being used in "
                f"process {os.getpid()} after os.fork(); its sockets are shared with the "
                "parent. Create clients after fork (in the child process).")
        if self._closed:
            raise IllegalStateError("the NetworkClient is closed; create a new client")

    # -- readiness -------------------------------------------------------------------------

    def ready(self, node: Node, now: float) -> bool:
        """True if a request can be sent to ``node`` now; otherwise start connecting if allowed."""
        if self.is_ready(node, now):
            return True
        self._ensure_usable()
        if self.connection_states.can_connect(node.id, now):
            self._initiate_connect(node, now)
        return False

    def is_ready(self, node: Node, now: float) -> bool:
        # A due metadata update goes first: nothing else is sent until it is under way.
        if self._metadata_update_due(now):
            return False
        return self._can_send_request(node.id)

    def _metadata_update_due(self, now: float) -> bool:
        return (self._metadata_in_progress is None
                and self.metadata.time_to_next_update(now) == 0.0
                and bool(self.metadata.fetch().nodes))

    def _can_send_request(self, node_id: int) -> bool:
        return (self.connection_states.is_ready(node_id)
                and self.selector.is_channel_ready(node_id)
                and self.in_flight_requests.can_send_more(node_id))

    def connection_delay(self, node: Node, now: float) -> float:
        """Ms to wait before ``ready`` could start a connect to ``node`` (see Java)."""
        return self.connection_states.connection_delay(node.id, now)

    def connection_failed(self, node: Node) -> bool:
        return self.connection_states.is_disconnected(node.id)

    def last_connection_error(self, node: Node) -> BaseException | None:
        return self.connection_states.last_error(node.id)

    def authentication_error(self, node: Node) -> AuthenticationError | None:
        """The error of the node's last connection if it failed to authenticate (TLS or SASL)
        and has not connected since (Java's NetworkClient.authenticationException)."""
        if not self.connection_states.is_disconnected(node.id):
            return None
        error = self.connection_states.last_error(node.id)
        return error if isinstance(error, AuthenticationError) else None

    def is_connected(self, node_id: int) -> bool:
        return self.connection_states.is_connected(node_id)

    def api_versions(self, node_id: int) -> NodeApiVersions | None:
        return self._api_versions.get(node_id)

    def pick_version(self, node: Node | int, api_key: int, our_min: int | None = None,
                     our_max: int | None = None) -> int:
        """The version to use for ``api_key`` with ``node``: highest in our range, the codec's
        and the broker's.  Raises UnsupportedVersionError if they do not overlap."""
        node_id = node.id if isinstance(node, Node) else node
        versions = self._api_versions.get(node_id)
        if versions is None:
            return pick_version(api_key, our_min, our_max, None, broker_known=False)
        return versions.latest_usable_version(api_key, our_min, our_max)

    def in_flight_request_count(self, node_id: int | None = None) -> int:
        return self.in_flight_requests.count(node_id)

    def least_loaded_node(self, now: float) -> Node | None:
        """The node with the fewest in-flight requests among those ready; else one that is
        connecting; else one we may connect to (honouring backoff); else None."""
        nodes = self.metadata.fetch().nodes
        if not nodes:
            return None
        n = len(nodes)
        offset = random.randrange(n)
        best_inflight = _INF
        found_ready = found_connecting = found_can_connect = None
        states = self.connection_states
        for i in range(n):
            node = nodes[(offset + i) % n]
            nid = node.id
            if self._can_send_request(nid):
                count = self.in_flight_requests.count(nid)
                if count == 0:
                    return node
                if count < best_inflight:
                    best_inflight = count
                    found_ready = node
            elif states.is_preparing_connection(nid):
                found_connecting = node
            elif states.can_connect(nid, now) and (
                    found_can_connect is None or states.last_connect_attempt_ms(
                        found_can_connect.id) > states.last_connect_attempt_ms(nid)):
                found_can_connect = node  # the one tried longest ago
        return found_ready or found_connecting or found_can_connect

    # -- sending ---------------------------------------------------------------------------

    def send(self, request: ClientRequest, now: float | None = None) -> None:
        """Queue a request for a node that ``ready`` said yes to."""
        self._ensure_usable()
        node_id = request.destination
        if not self._can_send_request(node_id):
            raise IllegalStateError(
                f"attempt to send a request to node {node_id}, which is not ready; call "
                "ready(node, now) until it returns True first")
        self._do_send(request, self._clock() if now is None else now)

    def _do_send(self, request: ClientRequest, now: float) -> None:
        node_id = request.destination
        try:
            versions = self._api_versions.get(node_id)
            if versions is None:
                version = pick_version(request.api_key, request.min_version,
                                       request.max_version, None, broker_known=False)
            else:
                version = versions.latest_usable_version(request.api_key, request.min_version,
                                                         request.max_version)
        except UnsupportedVersionError as e:
            log.debug("Version mismatch sending %s to node %s: %s", request, node_id, e)
            request.done = True
            self._aborted.append(ClientResponse(request, received_ms=now, version_mismatch=e))
            return
        request.api_version = version
        corr = self._correlation
        self._correlation = 0 if corr >= _MAX_CORRELATION_ID else corr + 1
        request.correlation_id = corr
        # Large records values (a Produce request's batches) stay separate buffers: the
        # channel writes them with the frame in one gather call instead of copying them.
        buffers = encode_request_buffers(request.request, version, corr, self.client_id)
        request.send_time_ms = now
        timeout = request.request_timeout_ms
        deadline = now + (self.request_timeout_ms if timeout is None else timeout)
        self._next_request_deadline = min(self._next_request_deadline, deadline)
        send = NetworkSend(node_id, buffers[0] if len(buffers) == 1 else buffers, request,
                           urgent=not request.expect_response)
        request.send = send
        self.in_flight_requests.add(request)
        self.selector.send(send)

    # -- polling ---------------------------------------------------------------------------

    def poll(self, timeout_ms: float, now: float | None = None) -> list[ClientResponse]:
        """Do network I/O for at most ``timeout_ms`` and return what completed (callbacks
        already run)."""
        self._ensure_usable()
        clock = self._clock
        if now is None:
            now = clock()
        if self._aborted:
            # Version mismatches and cancelled requests: report them without waiting.
            aborted = self._aborted
            self._aborted = []
            return self._complete(aborted)

        metadata_timeout = self._maybe_update_metadata(now)
        timeout = min(timeout_ms, metadata_timeout, self._next_request_deadline - now,
                      self._next_reauth_ms - now)
        if self.connection_states.connecting_nodes:
            timeout = min(timeout, self.connection_states.next_setup_deadline() - now)
        selector = self.selector
        selector.poll(max(0, timeout))

        now = clock()
        responses: list[ClientResponse] = []
        if selector.completed_sends:
            self._handle_completed_sends(responses, now)
        if selector.completed_receives:
            self._handle_completed_receives(responses, now)
        if selector.disconnected:
            self._handle_disconnections(responses, now)
        if selector.connected:
            self._handle_connections()
        if self._nodes_needing_api_versions:
            self._handle_initiate_api_version_requests(now)
        if now >= self._next_reauth_ms:
            self._maybe_reauthenticate(now)
        if self.connection_states.connecting_nodes:
            self._handle_timed_out_connections(responses, now)
        if now >= self._next_request_deadline:
            self._handle_timed_out_requests(responses, now)
        if self._aborted:  # requests that failed while being sent this round
            responses.extend(self._aborted)
            self._aborted = []
        return self._complete(responses) if responses else responses

    def _complete(self, responses: list[ClientResponse]) -> list[ClientResponse]:
        internal = False
        for response in responses:
            request = response.request
            if request.internal:
                internal = True
            callback = request.callback
            if callback is not None:
                try:
                    callback(response)
                except Exception:
                    log.exception("Uncaught error in the completion callback of %s", request)
        if internal:
            return [r for r in responses if not r.request.internal]
        return responses

    def _handle_completed_sends(self, responses: list[ClientResponse], now: float) -> None:
        for send in self.selector.completed_sends:
            request = send.request
            # Reported once: dropping the handle breaks the ClientRequest.send <->
            # NetworkSend.request cycle, so that a request and its batches are freed by
            # reference counting when answered, not left to the cyclic garbage collector.
            send.request = None
            if request is None or request.expect_response or request.done:
                continue
            # No response will come (acks=0): the request is complete once written.
            request.done = True
            self.in_flight_requests.remove(request)
            ids = self._no_response_ids.get(request.destination)
            if ids is None:
                ids = self._no_response_ids[request.destination] = deque(
                    maxlen=_NO_RESPONSE_MEMORY)
            ids.append(request.correlation_id)
            responses.append(ClientResponse(request, None, received_ms=now))

    def _handle_completed_receives(self, responses: list[ClientResponse], now: float) -> None:
        in_flight = self.in_flight_requests
        broken: set[int] = set()
        for receive in self.selector.completed_receives:
            node_id = receive.source
            if node_id in broken:
                continue
            payload = receive.payload
            corr = _INT32.unpack_from(payload, 0)[0] if len(payload) >= 4 else None
            request = in_flight.oldest(node_id)
            if request is None or request.correlation_id != corr:
                if corr is not None and self._is_unwanted_response(node_id, corr):
                    continue
                expected = request.correlation_id if request is not None else None
                mismatch = CorrelationIdMismatchError(
                    f"node {node_id} sent a response with correlation id {corr}, but the "
                    f"oldest in-flight request has {expected}; closing the connection")
                log.error("%s", mismatch)
                self._fail_connection(node_id, mismatch, responses, now)
                broken.add(node_id)
                continue
            in_flight.complete_next(node_id)
            request.done = True
            if request.internal and request.api_key == ApiKey.API_VERSIONS:
                if not self._handle_api_versions_response(request, payload, responses, now):
                    broken.add(node_id)
                continue
            try:
                _, body = decode_response(request.api_key, request.api_version, payload)
            except Exception as e:  # noqa: BLE001 -- any decode failure ends the connection
                decode_error = KafkaConnectionError(
                    f"could not parse the {request.api_name} v{request.api_version} response "
                    f"from node {node_id} (correlation id {corr}): {e}; closing the connection")
                log.error("%s", decode_error)
                responses.append(ClientResponse(request, received_ms=now, disconnected=True,
                                                error=decode_error))
                self._fail_connection(node_id, decode_error, responses, now)
                broken.add(node_id)
                continue
            if request.api_key in _SASL_KEYS and request.internal:
                if not self._handle_sasl_response(request, body, responses, now):
                    broken.add(node_id)
                continue
            responses.append(ClientResponse(request, body, received_ms=now))

    def _is_unwanted_response(self, node_id: int, corr: int) -> bool:
        """True (and forgets it) if ``corr`` belongs to a request that expected no response."""
        ids = self._no_response_ids.get(node_id)
        if not ids:
            return False
        # Responses come in request order, so older unanswered ids will never be answered.
        while ids and _before(ids[0], corr):
            ids.popleft()
        if ids and ids[0] == corr:
            ids.popleft()
            log.debug("Dropping a response from node %s to request %d, which expected none",
                      node_id, corr)
            return True
        return False

    def _handle_disconnections(self, responses: list[ClientResponse], now: float) -> None:
        unexpected = False
        states = self.connection_states
        for node_id, error in self.selector.disconnected.items():
            if states.is_disconnected(node_id):
                continue  # already failed this round (a refused SASL answer, a bad response)
            if not isinstance(error, IdleConnectionClosed):
                unexpected = True
                log.info("Node %s disconnected: %s", node_id, error)
            reason = error if isinstance(error, KafkaError) else KafkaConnectionError(
                f"connection to node {node_id} lost: {error!r}")
            self._process_disconnection(responses, node_id, now, reason)
        if unexpected:
            # The broker may be gone for good; find out who leads its partitions now.
            self.metadata.request_update()

    def _handle_connections(self) -> None:
        states = self.connection_states
        for node_id in self.selector.connected:
            if states.get(node_id) is None:
                continue
            if self.discover_broker_versions:
                states.checking_api_versions(node_id)
                self._nodes_needing_api_versions[node_id] = _API_VERSIONS_API.max_version
            else:
                states.ready(node_id)
            log.debug("Connected to node %s", node_id)

    def _handle_initiate_api_version_requests(self, now: float) -> None:
        for node_id, version in list(self._nodes_needing_api_versions.items()):
            if self.selector.is_channel_ready(node_id) and \
                    self.in_flight_requests.can_send_more(node_id):
                del self._nodes_needing_api_versions[node_id]
                body = APIS[ApiKey.API_VERSIONS].request_class(
                    client_software_name=_SOFTWARE_NAME,
                    client_software_version=__version__)
                request = ClientRequest(node_id, body, created_ms=now, min_version=version,
                                        max_version=version)
                request.internal = True
                self._do_send(request, now)

    def _handle_api_versions_response(self, request: ClientRequest, payload: Any,
                                      responses: list[ClientResponse], now: float) -> bool:
        """Apply an ApiVersions answer; returns False if the connection was closed."""
        node_id = request.destination
        version = request.api_version
        body = _parse_api_versions(version, payload)
        error_code = body.error_code if body is not None else None
        if (error_code == _UNSUPPORTED_VERSION or body is None) and version > 0:
            advertised = _advertised_api_versions_max(body)
            if advertised is None and version > 0 and body is not None:
                advertised = _advertised_api_versions_max(_parse_api_versions(0, payload))
            retry = min(advertised, version - 1) if advertised is not None else 0
            log.debug("Node %s does not support ApiVersions v%d; retrying with v%d",
                      node_id, version, retry)
            self._nodes_needing_api_versions[node_id] = max(retry, 0)
            return True
        if body is None or error_code:
            detail = "an unparseable body" if body is None else \
                f"error {for_code(error_code).name}"  # type: ignore[arg-type]
            error = KafkaConnectionError(
                f"ApiVersions v{version} to node {node_id} failed with {detail}; closing the "
                "connection")
            log.warning("%s", error)
            self._fail_connection(node_id, error, responses, now)
            return False
        self._api_versions[node_id] = NodeApiVersions.from_response(body.api_keys)
        if self._sasl is not None:
            log.debug("Node %s answered ApiVersions v%d: %s; authenticating", node_id, version,
                      self._api_versions[node_id])
            return self._start_sasl(node_id, now, responses, reauthentication=False)
        self.connection_states.ready(node_id)
        log.debug("Node %s is ready; ApiVersions v%d: %s", node_id, version,
                  self._api_versions[node_id])
        return True

    # -- SASL (Java's SaslClientAuthenticator) ---------------------------------------------

    def _peer(self, node_id: int) -> str:
        s = self.connection_states.get(node_id)
        return f"node {node_id} ({s.host}:{s.port})" if s is not None else f"node {node_id}"

    def _start_sasl(self, node_id: int, now: float, responses: list[ClientResponse], *,
                    reauthentication: bool) -> bool:
        """Send SaslHandshake; returns False if the connection was closed instead."""
        assert self._sasl is not None
        mechanism, user, password = self._sasl
        try:
            authenticator = SaslClientAuthenticator(mechanism, user, password, self._peer(node_id),
                                                    reauthentication=reauthentication,
                                                    token_callback=self._sasl_token_callback)
        except SaslAuthenticationError as e:  # the OAUTHBEARER token callback failed
            self._authentication_failed(node_id, e, responses, now)
            return False
        versions = self._api_versions.get(node_id)
        handshake = versions.version_range(ApiKey.SASL_HANDSHAKE) if versions is not None else None
        if handshake is None or not handshake[0] <= SASL_HANDSHAKE_VERSION <= handshake[1]:
            self._authentication_failed(node_id, SaslAuthenticationError(
                f"SASL authentication with {authenticator.peer} failed: the broker does not "
                f"offer SaslHandshake v{SASL_HANDSHAKE_VERSION} (its ApiVersions answer); is it a "
                "Kafka broker's SASL listener?"), responses, now)
            return False
        self.connection_states.authenticating(node_id)
        self._authenticators[node_id] = authenticator
        self._send_sasl(node_id, authenticator.handshake_request(), now,
                        SASL_HANDSHAKE_VERSION, SASL_HANDSHAKE_VERSION)
        return True

    def _send_sasl(self, node_id: int, body: Message, now: float, min_version: int | None = None,
                   max_version: int | None = None) -> None:
        request = ClientRequest(node_id, body, created_ms=now, min_version=min_version,
                                max_version=max_version)
        request.internal = True
        self._do_send(request, now)

    def _handle_sasl_response(self, request: ClientRequest, body: Any,
                              responses: list[ClientResponse], now: float) -> bool:
        """Next step of the node's SASL exchange; False if the connection was closed."""
        node_id = request.destination
        authenticator = self._authenticators.get(node_id)
        if authenticator is None:
            return True  # the connection was reset meanwhile
        try:
            if request.api_key == ApiKey.SASL_HANDSHAKE:
                following: Message | None = authenticator.authenticate_request(body)
            else:
                following = authenticator.next_request(body)
        except AuthenticationError as e:
            self._authentication_failed(node_id, e, responses, now)
            return False
        if following is not None:
            self._send_sasl(node_id, following, now)
            return True
        del self._authenticators[node_id]
        lifetime = authenticator.session_lifetime_ms
        if lifetime > 0:
            at = now + lifetime * random.uniform(*_REAUTH_WINDOW)
            self._reauth_at[node_id] = at
            self._next_reauth_ms = min(self._next_reauth_ms, at)
        else:
            self._reauth_at.pop(node_id, None)
        self.connection_states.ready(node_id)
        log.debug("Node %s is ready: %s as %r done%s", node_id, authenticator.mechanism,
                  authenticator.username,
                  f"; session lifetime {lifetime} ms" if lifetime > 0 else "")
        return True

    def _maybe_reauthenticate(self, now: float) -> None:
        """KIP-368: re-authenticate connections whose time has come, each once no request is
        in flight on it (a busy one is tried again at the next poll)."""
        due = [node_id for node_id, at in self._reauth_at.items() if at <= now]
        for node_id in due:
            if not (self.connection_states.is_ready(node_id)
                    and self.selector.is_channel_ready(node_id)):
                del self._reauth_at[node_id]  # gone; a new connection authenticates anew
                continue
            if not self.in_flight_requests.is_empty(node_id):
                continue
            del self._reauth_at[node_id]
            log.debug("Re-authenticating with node %s (KIP-368)", node_id)
            self._start_sasl(node_id, now, self._aborted, reauthentication=True)
        self._next_reauth_ms = min(self._reauth_at.values(), default=_INF)
        if self._next_reauth_ms <= now:
            # A due connection is busy: look again soon rather than at once.
            self._next_reauth_ms = now + min(self.reconnect_backoff_ms, 50)

    def _authentication_failed(self, node_id: int, error: AuthenticationError,
                               responses: list[ClientResponse], now: float) -> None:
        self._fail_connection(node_id, error, responses, now)

    def _handle_timed_out_connections(self, responses: list[ClientResponse],
                                      now: float) -> None:
        for node_id in self.connection_states.nodes_with_connection_setup_timeout(now):
            s = self.connection_states.get(node_id)
            timeout = s.connection_setup_timeout_ms if s is not None else 0
            error = KafkaConnectionError(
                f"connecting to node {node_id} timed out after {timeout:.0f} ms "
                "(socket.connection.setup.timeout.ms)")
            log.info("%s", error)
            self.selector.close(node_id)
            self._process_disconnection(responses, node_id, now, error, timed_out=True)
            self.metadata.request_update()

    def _handle_timed_out_requests(self, responses: list[ClientResponse], now: float) -> None:
        expired: list[tuple[int, ClientRequest]] = []
        next_deadline = _INF
        default = self.request_timeout_ms
        for node_id, q in self.in_flight_requests.items():
            for request in q:
                t = request.request_timeout_ms
                deadline = request.send_time_ms + (default if t is None else t)
                if deadline <= now:
                    expired.append((node_id, request))
                    break
                next_deadline = min(next_deadline, deadline)
        self._next_request_deadline = next_deadline
        for node_id, request in expired:
            t = request.request_timeout_ms
            timeout = default if t is None else t
            error = KafkaTimeoutError(
                f"a response from node {node_id} to {request.api_name} (correlation id "
                f"{request.correlation_id}); disconnecting (request.timeout.ms)", timeout)
            log.info("Disconnecting from node %s due to request timeout (%s)", node_id, error)
            self.selector.close(node_id)
            self._process_disconnection(responses, node_id, now, error, timed_out=True)
        if expired:
            self.metadata.request_update()
            self._recompute_request_deadline()

    def _recompute_request_deadline(self) -> None:
        best = _INF
        default = self.request_timeout_ms
        for q in self.in_flight_requests.queues():
            for request in q:
                t = request.request_timeout_ms
                best = min(best, request.send_time_ms + (default if t is None else t))
        self._next_request_deadline = best

    def _fail_connection(self, node_id: int, error: KafkaError,
                         responses: list[ClientResponse], now: float) -> None:
        self.selector.close(node_id)
        self._process_disconnection(responses, node_id, now, error)
        self.metadata.request_update()

    def _process_disconnection(self, responses: list[ClientResponse], node_id: int, now: float,
                               error: KafkaError, timed_out: bool = False) -> None:
        self.connection_states.disconnected(node_id, now, error)
        self._authenticators.pop(node_id, None)
        self._reauth_at.pop(node_id, None)
        if isinstance(error, AuthenticationError):
            # Java's DefaultMetadataUpdater.handleServerDisconnect -> Metadata.fatalError.
            log.error("%s", error)
            self.authentication_failures += 1
            self.last_authentication_error = error
            self.metadata.authentication_failed(error)
        self._api_versions.pop(node_id, None)
        self._nodes_needing_api_versions.pop(node_id, None)
        self._no_response_ids.pop(node_id, None)
        for request in self.in_flight_requests.clear_all(node_id):
            request.done = True
            responses.append(ClientResponse(request, received_ms=now, disconnected=True,
                                            timed_out=timed_out, error=error))

    def _initiate_connect(self, node: Node, now: float) -> None:
        node_id = node.id
        try:
            family, address = self.connection_states.connecting(node_id, now, node.host,
                                                                node.port)
            log.debug("Connecting to node %s at %s", node, address)
            context = self._ssl_context
            self.selector.connect(node_id, address, family,
                                  send_buffer_bytes=self.send_buffer_bytes,
                                  receive_buffer_bytes=self.receive_buffer_bytes,
                                  ssl_context=context,
                                  server_hostname=node.host if context is not None
                                  and context.check_hostname else None,
                                  peer=f"{node.host}:{node.port}")
        except OSError as e:
            error = KafkaConnectionError(f"cannot connect to node {node}: {e}")
            log.debug("%s", error)
            self.connection_states.disconnected(node_id, now, error)
            self.metadata.request_update()  # maybe our metadata is stale

    # -- metadata updater ------------------------------------------------------------------

    def _maybe_update_metadata(self, now: float) -> float:
        """Send a MetadataRequest if one is due; returns ms until the updater needs a poll."""
        metadata = self.metadata
        if self._metadata_in_progress is not None:
            return self.request_timeout_ms
        timeout = metadata.time_to_next_update(now)
        if timeout > 0:
            return timeout
        if not metadata.fetch().nodes:
            return _INF  # nothing to ask (no bootstrap servers yet)
        node = self.least_loaded_node(now)
        if node is None:
            log.debug("No node available for a metadata request")
            return self.reconnect_backoff_ms
        return self._maybe_update_metadata_from(node, now)

    def _maybe_update_metadata_from(self, node: Node, now: float) -> float:
        if self._can_send_request(node.id):
            try:
                version = self.pick_version(node, ApiKey.METADATA, 0, self.metadata_max_version)
            except UnsupportedVersionError as e:
                self.metadata.failed_update(now, e, fatal=True)
                return self.request_timeout_ms
            plan = self.metadata.new_request_plan(now)
            body = _metadata_request(plan, version)
            request = ClientRequest(node.id, body, created_ms=now, min_version=version,
                                    max_version=version, callback=self._on_metadata_response)
            request.internal = True
            self._metadata_in_progress = request
            self._metadata_plan = plan
            log.debug("Sending metadata request (v%d, topics %s) to node %s", version,
                      "all" if plan.topics is None else plan.topics, node)
            self._do_send(request, now)
            return self.request_timeout_ms
        states = self.connection_states
        if states.connecting_nodes or any(
                states.is_preparing_connection(n.id) for n in self.metadata.fetch().nodes):
            return self.reconnect_backoff_ms  # wait for a connection being set up
        if states.can_connect(node.id, now):
            self._initiate_connect(node, now)
            return self.reconnect_backoff_ms
        return _INF  # connected but busy: a completed request will wake the poll

    def _on_metadata_response(self, response: ClientResponse) -> None:
        if response.request is not self._metadata_in_progress:
            return
        plan = self._metadata_plan
        self._metadata_in_progress = None
        self._metadata_plan = None
        now = response.received_ms
        if response.version_mismatch is not None:
            self.metadata.failed_update(now, response.version_mismatch, fatal=True)
            return
        body = response.body
        if body is None:
            self.metadata.failed_update(now, response.error)
            return
        if not body.brokers:
            log.warning("Ignoring a metadata response with no brokers from node %s",
                        response.destination)
            self.metadata.failed_update(now)
            return
        assert plan is not None
        self.metadata.update(body, plan, now)
        self._close_bootstrap_connections()

    def _close_bootstrap_connections(self) -> None:
        """Bootstrap connections (negative ids) have served their purpose once real nodes are
        known; close the idle ones."""
        for channel in self.selector.channels:
            node_id = channel.id
            if node_id < 0 and self.in_flight_requests.is_empty(node_id):
                self.selector.close(node_id)
                self.connection_states.remove(node_id)
                self._api_versions.pop(node_id, None)
                self._nodes_needing_api_versions.pop(node_id, None)
                self._reauth_at.pop(node_id, None)

    # -- closing ---------------------------------------------------------------------------

    def close_node(self, node_id: int) -> None:
        """Close the connection to a node; its in-flight requests complete as disconnected
        at the next poll.  No reconnect backoff applies afterwards."""
        self._ensure_usable()
        self.selector.close(node_id)
        now = self._clock()
        for request in self.in_flight_requests.clear_all(node_id):
            request.done = True
            self._aborted.append(ClientResponse(
                request, received_ms=now, disconnected=True,
                error=KafkaConnectionError(f"the client closed the connection to node {node_id}")))
        self.connection_states.remove(node_id)
        self._api_versions.pop(node_id, None)
        self._nodes_needing_api_versions.pop(node_id, None)
        self._no_response_ids.pop(node_id, None)
        self._authenticators.pop(node_id, None)
        self._reauth_at.pop(node_id, None)

    def wakeup(self) -> None:
        """Interrupt a blocked poll; safe from any thread."""
        self.selector.wakeup()

    def close(self, node_id: int | None = None) -> None:
        """With a node id, the same as ``close_node``.  Without, close every connection and
        the metadata (waiters wake with an error).  Safe to call twice, and in a forked child
        (it only releases this process's copies of the sockets)."""
        if node_id is not None:
            self.close_node(node_id)
            return
        if self._closed:
            return
        self._closed = True
        self.selector.close()
        self.metadata.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"NetworkClient(client_id={self.client_id!r}, "
                f"in_flight={self.in_flight_requests.count()}, {self.selector})")


# -- helpers ---------------------------------------------------------------------------------


def _before(a: int, b: int) -> bool:
    """``a`` was issued before ``b``, allowing for the wrap of correlation ids at 2**31."""
    return a != b and ((b - a) % (_MAX_CORRELATION_ID + 1)) < 2**30


def _parse_api_versions(version: int, payload: Any) -> Any:
    """An ApiVersions response body, or None if it does not parse at ``version`` (nor, for
    an error reply, with the v0 layout Kafka uses for UNSUPPORTED_VERSION)."""
    try:
        return decode_response(ApiKey.API_VERSIONS, version, payload)[1]
    except Exception:  # noqa: BLE001 -- malformed bodies are expected here (mock cluster)
        if version == 0:
            return None
    try:
        return decode_response(ApiKey.API_VERSIONS, 0, payload)[1]
    except Exception:  # noqa: BLE001
        return None


def _advertised_api_versions_max(body: Any) -> int | None:
    if body is None:
        return None
    for k in body.api_keys or ():
        if k.api_key == ApiKey.API_VERSIONS:
            return k.max_version
    return None


def _metadata_request(plan: MetadataRequestPlan, version: int) -> Message:
    cls = APIS[ApiKey.METADATA].request_class
    topic_cls = cls.MetadataRequestTopic
    topics: list[Any] | None
    if plan.topics is None:
        topics = [] if version == 0 else None  # v0: an empty list means all topics
    else:
        topics = [topic_cls(name=t) for t in plan.topics]
    auto_create = plan.allow_auto_topic_creation if version >= 4 else True
    return cls(topics=topics, allow_auto_topic_creation=auto_create)
