"""What a broker supports (its ApiVersions response) and version picking against it.

``NodeApiVersions.latest_usable_version(api_key, lo, hi)`` is the highest version in the
intersection of the caller's range, samsa's codec range (``samsa.protocol.APIS``) and the
broker's advertised range, as Java's ``NodeApiVersions.latestUsableVersion``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from samsa.errors import UnsupportedVersionError
from samsa.protocol import APIS


class NodeApiVersions:
    __slots__ = ("_picked", "_versions")

    def __init__(self, versions: Mapping[int, tuple[int, int]]) -> None:
        self._versions = dict(versions)
        # latest_usable_version's answers: every request is sent at one, every Produce request
        # with the same range.
        self._picked: dict[tuple[int, int | None, int | None], int] = {}

    @classmethod
    def from_response(cls, api_keys: Iterable[object]) -> NodeApiVersions:
        return cls({k.api_key: (k.min_version, k.max_version)  # type: ignore[attr-defined]
                    for k in api_keys})

    def version_range(self, api_key: int) -> tuple[int, int] | None:
        return self._versions.get(api_key)

    def latest_usable_version(self, api_key: int, lo: int | None = None,
                              hi: int | None = None) -> int:
        picked = self._picked.get((api_key, lo, hi))
        if picked is None:
            # (Raises UnsupportedVersionError each time for a range with no usable version.)
            picked = pick_version(api_key, lo, hi, self._versions.get(api_key), broker_known=True)
            self._picked[(api_key, lo, hi)] = picked
        return picked

    def __contains__(self, api_key: int) -> bool:
        return api_key in self._versions

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}:{lo}-{hi}" for k, (lo, hi) in sorted(self._versions.items()))
        return f"NodeApiVersions({inner})"


def pick_version(api_key: int, lo: int | None, hi: int | None,
                 broker: tuple[int, int] | None, broker_known: bool) -> int:
    """Highest version allowed by the caller (lo..hi, None = codec bound), samsa's codec and
    the broker (``broker`` range; ``broker_known`` False = no ApiVersions information)."""
    api = APIS.get(api_key)
    if api is None:
        raise UnsupportedVersionError(f"samsa does not implement API key {api_key}")
    low = api.min_version if lo is None else max(lo, api.min_version)
    high = api.max_version if hi is None else min(hi, api.max_version)
    if broker_known:
        if broker is None:
            raise UnsupportedVersionError(
                f"the broker does not support {api.name} (API key {api_key}) at all")
        low = max(low, broker[0])
        high = min(high, broker[1])
    if low > high:
        where = f", broker {broker[0]}-{broker[1]}" if broker is not None else ""
        raise UnsupportedVersionError(
            f"no common version of {api.name} (API key {api_key}): requested "
            f"{lo if lo is not None else api.min_version}-"
            f"{hi if hi is not None else api.max_version}, samsa's codec "
            f"{api.min_version}-{api.max_version}{where}; the broker is too old or too new "
            "for this request")
    return high
