"""NodeApiVersions: the highest version both sides support, remembered per range."""

from __future__ import annotations

import pytest

from samsa.errors import UnsupportedVersionError
from samsa.net.api_versions import NodeApiVersions
from samsa.protocol import APIS, ApiKey


def test_latest_usable_version_is_the_same_answer_every_time() -> None:
    versions = NodeApiVersions({ApiKey.PRODUCE: (3, 10), ApiKey.METADATA: (0, 4)})
    for _ in range(2):  # the second answers come from the memo
        assert versions.latest_usable_version(ApiKey.PRODUCE, 3, 12) == 10
        assert versions.latest_usable_version(ApiKey.PRODUCE, 3, 7) == 7
        assert versions.latest_usable_version(ApiKey.METADATA) == min(4, APIS[ApiKey.METADATA].max_version)
        with pytest.raises(UnsupportedVersionError):
            versions.latest_usable_version(ApiKey.PRODUCE, 11, 12)  # above the broker's 10
        with pytest.raises(UnsupportedVersionError):
            versions.latest_usable_version(ApiKey.FETCH)  # not offered at all
