"""InFlightRequests: requests sent (or being sent) and not yet answered, a FIFO per node.

Kafka answers the requests of one connection in order, so a response always belongs to the
*oldest* in-flight request of its node; matching is a ``popleft``, not a lookup.  A node may
take another request only when its newest one has been written completely and fewer than
max.in.flight.requests.per.connection are outstanding.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from samsa.net.request import ClientRequest


class InFlightRequests:
    __slots__ = ("_count", "_requests", "max_per_connection")

    def __init__(self, max_per_connection: int = 5) -> None:
        if max_per_connection < 1:
            raise ValueError(f"max in-flight requests per connection must be >= 1, "
                             f"got {max_per_connection}")
        self.max_per_connection = max_per_connection
        self._requests: dict[int, deque[ClientRequest]] = {}
        self._count = 0

    def add(self, request: ClientRequest) -> None:
        q = self._requests.get(request.destination)
        if q is None:
            q = self._requests[request.destination] = deque()
        q.append(request)
        self._count += 1

    def oldest(self, node_id: int) -> ClientRequest | None:
        q = self._requests.get(node_id)
        return q[0] if q else None

    def complete_next(self, node_id: int) -> ClientRequest:
        """Remove and return the oldest request of a node (the one a response answers)."""
        request = self._requests[node_id].popleft()
        self._count -= 1
        return request

    def remove(self, request: ClientRequest) -> None:
        """Remove one request (a request without a response, once it is written)."""
        self._requests[request.destination].remove(request)
        self._count -= 1

    def can_send_more(self, node_id: int) -> bool:
        q = self._requests.get(node_id)
        if not q:
            return True
        newest = q[-1].send
        return newest is not None and newest.completed and len(q) < self.max_per_connection

    def count(self, node_id: int | None = None) -> int:
        if node_id is None:
            return self._count
        q = self._requests.get(node_id)
        return len(q) if q else 0

    def is_empty(self, node_id: int | None = None) -> bool:
        if node_id is None:
            return self._count == 0
        return not self._requests.get(node_id)

    def clear_all(self, node_id: int) -> list[ClientRequest]:
        """Remove every request of a node, oldest first."""
        q = self._requests.pop(node_id, None)
        if not q:
            return []
        self._count -= len(q)
        return list(q)

    def nodes(self) -> Iterator[int]:
        return (n for n, q in self._requests.items() if q)

    def items(self) -> Iterator[tuple[int, deque[ClientRequest]]]:
        return iter(self._requests.items())

    def queues(self) -> Iterator[deque[ClientRequest]]:
        return iter(self._requests.values())

    def __len__(self) -> int:
        return self._count
