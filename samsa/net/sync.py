"""Blocking helpers over a NetworkClient, for one-off requests (admin client, tools, tests).

They poll the client on the calling thread, so that thread must own the client (the producer's
Sender uses the asynchronous ``ready``/``send``/``poll`` path instead).
"""

from __future__ import annotations

from typing import Any

from samsa.errors import AuthenticationError, KafkaConnectionError, KafkaTimeoutError
from samsa.net.client import ClientRequest, ClientResponse, NetworkClient
from samsa.net.cluster import Node
from samsa.protocol import Message

_POLL_SLICE_MS = 1000.0  # re-check the deadline at least this often


def await_ready(client: NetworkClient, node: Node, timeout_ms: float) -> None:
    """Connect to ``node`` (ApiVersions included) or raise.

    Raises KafkaConnectionError as soon as a connect attempt fails, KafkaTimeoutError if the
    node is not ready within ``timeout_ms``.
    """
    clock = client._clock
    start = clock()
    deadline = start + timeout_ms
    while True:
        now = clock()
        if client.ready(node, now):
            return
        # As Java's NetworkClientUtils.awaitReady: a node still disconnected after ready()
        # failed to connect (now, or recently enough to be in backoff).
        if client.connection_failed(node):
            cause = client.last_connection_error(node)
            if isinstance(cause, AuthenticationError):
                raise cause  # not a connection problem: retrying will not help
            raise KafkaConnectionError(f"connection to node {node} failed: {cause}")
        remaining = deadline - now
        if remaining <= 0:
            raise KafkaTimeoutError(f"node {node} to become ready", timeout_ms)
        client.poll(min(remaining, _POLL_SLICE_MS, _ready_poll_ms(client, node, now)), now)


def _ready_poll_ms(client: NetworkClient, node: Node, now: float) -> float:
    delay = client.connection_delay(node, now)
    return delay if delay != float("inf") else _POLL_SLICE_MS


def send_and_wait(client: NetworkClient, node: Node | int, request: Message | ClientRequest,
                  timeout_ms: float = 30000, **request_kwargs: Any) -> Any:
    """Send one request and wait for its response body.

    ``node`` is a Node or the id of a node in the client's current metadata.  Extra keyword
    arguments (``min_version``, ``max_version``, ``expect_response``, ...) go to ClientRequest.
    Raises KafkaTimeoutError, KafkaConnectionError (disconnected before the answer) or
    UnsupportedVersionError (no version both sides support).
    """
    response = send_and_receive(client, node, request, timeout_ms, **request_kwargs)
    return response.body


def send_and_receive(client: NetworkClient, node: Node | int, request: Message | ClientRequest,
                     timeout_ms: float = 30000, **request_kwargs: Any) -> ClientResponse:
    """Like ``send_and_wait`` but returns the whole ClientResponse (version, latency, ...)."""
    clock = client._clock
    start = clock()
    deadline = start + timeout_ms
    target = _resolve_node(client, node)
    await_ready(client, target, timeout_ms)
    if isinstance(request, ClientRequest):
        client_request = request
    else:
        client_request = ClientRequest(target, request, created_ms=clock(), **request_kwargs)
    client.send(client_request)
    while True:
        now = clock()
        for response in client.poll(min(max(deadline - now, 0), _POLL_SLICE_MS), now):
            if response.request is client_request:
                _raise_for(response)
                return response
        if clock() >= deadline and not client_request.done:
            client.close_node(client_request.destination)
            client.poll(0)  # deliver the cancellation
            raise KafkaTimeoutError(
                f"the {client_request.api_name} response from node {target}", timeout_ms)


def _raise_for(response: ClientResponse) -> None:
    if response.version_mismatch is not None:
        raise response.version_mismatch
    if response.disconnected:
        if response.error is not None:
            raise response.error
        raise KafkaConnectionError(
            f"node {response.destination} disconnected before answering "
            f"{response.request.api_name}")


def _resolve_node(client: NetworkClient, node: Node | int) -> Node:
    if isinstance(node, Node):
        return node
    found = client.metadata.fetch().node_by_id(node)
    if found is None:
        raise KafkaConnectionError(
            f"node {node} is not in the client's metadata; known nodes: "
            f"{[n.id for n in client.metadata.fetch().nodes]}")
    return found
