"""Which versions of the group APIs the consumer sends to a coordinator.

The highest version both samsa's codec and the broker support, as Java's client picks, with
one exception: a broker that cannot answer ApiVersions v3+ (KIP-511, Kafka 2.4, the same
release that made the group APIs flexible) gets the non-flexible versions below.  Real
pre-2.4 brokers never advertise more than these anyway; the cap is for librdkafka's mock
cluster, which advertises ApiVersions 0-2 yet JoinGroup 0-6, SyncGroup 0-4 and LeaveGroup 0-4
while its handlers parse only the older layouts (it reads JoinGroup v6's compact protocol
array and SyncGroup v4's compact assignment array as int32 counts and closes the connection,
and reads LeaveGroup v3+ as a single MemberId).  librdkafka's own client never sends those
versions, so its mock was never exercised with them.
"""

from __future__ import annotations

from samsa.net.api_versions import NodeApiVersions, pick_version
from samsa.protocol import ApiKey

__all__ = ["LEGACY_CAPS", "group_api_version"]

# Lowest versions the coordinator code builds requests for (older ones lack fields it needs:
# OffsetCommit v2 drops nothing we use but v0-1 carry timestamps; OffsetFetch v0 reads ZooKeeper).
MIN_VERSIONS: dict[int, int] = {ApiKey.OFFSET_COMMIT: 2, ApiKey.OFFSET_FETCH: 1}

# Non-flexible ceilings for brokers without flexible ApiVersions (see the module docstring).
LEGACY_CAPS: dict[int, int] = {
    ApiKey.FIND_COORDINATOR: 2,
    ApiKey.JOIN_GROUP: 5,
    ApiKey.SYNC_GROUP: 3,
    ApiKey.HEARTBEAT: 3,
    ApiKey.LEAVE_GROUP: 2,
    ApiKey.OFFSET_COMMIT: 7,
    ApiKey.OFFSET_FETCH: 5,
}


def group_api_version(versions: NodeApiVersions | None, api_key: int) -> int:
    """The version of ``api_key`` to send to a broker that advertised ``versions``.

    Raises UnsupportedVersionError when the broker's range and ours do not meet."""
    lo = MIN_VERSIONS.get(api_key)
    hi: int | None = None
    if versions is None:
        return pick_version(api_key, lo, LEGACY_CAPS.get(api_key), None, broker_known=False)
    own = versions.version_range(ApiKey.API_VERSIONS)
    if own is None or own[1] < 3:
        hi = LEGACY_CAPS.get(api_key)
    return versions.latest_usable_version(api_key, lo, hi)
