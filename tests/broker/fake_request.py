"""What the tests' stand-in request contexts share with samsa's RequestContext."""

from __future__ import annotations

from typing import Any


class RequestFromHeader:
    """``api_key`` and ``api_version`` as samsa.broker.request_channel.RequestContext gives them
    to handlers (read from the header)."""

    header: Any

    @property
    def api_key(self) -> int:
        return int(self.header.request_api_key)

    @property
    def api_version(self) -> int:
        return int(self.header.request_api_version)
