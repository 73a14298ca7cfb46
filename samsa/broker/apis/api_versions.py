"""ApiVersions (key 18): what this broker advertises (versions.py)."""

from __future__ import annotations

import re

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.services import BrokerServices
from samsa.broker.apis.versions import ADVERTISED
from samsa.errors import InvalidRequestError, UnsupportedVersionError
from samsa.protocol import ApiKey, ApiVersionsResponse

# KIP-511: what ClientSoftwareName / ClientSoftwareVersion may look like.
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def advertised_keys() -> list[ApiVersionsResponse.ApiVersion]:
    return [ApiVersionsResponse.ApiVersion(api_key=key, min_version=lo, max_version=hi)
            for key, (lo, hi) in sorted(ADVERTISED.items())]


def unsupported_version_response() -> ApiVersionsResponse:
    """For an ApiVersions version this broker does not know: error 35 and (KIP-511) the
    ApiVersions range, in the v0 body layout, so the client retries with a version we serve."""
    lo, hi = ADVERTISED[ApiKey.API_VERSIONS]
    return ApiVersionsResponse(
        error_code=UnsupportedVersionError.code,
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=ApiKey.API_VERSIONS, min_version=lo,
                                                 max_version=hi)],
    )


def handle_api_versions(services: BrokerServices, ctx: RequestContext) -> ApiVersionsResponse:
    if ctx.api_version >= 3:
        req = ctx.body
        if not (_SOFTWARE.fullmatch(req.client_software_name or "")
                and _SOFTWARE.fullmatch(req.client_software_version or "")):
            return ApiVersionsResponse(error_code=InvalidRequestError.code, api_keys=[])
    return ApiVersionsResponse(error_code=0, api_keys=advertised_keys(), throttle_time_ms=0,
                               supported_features=[], finalized_features_epoch=-1,
                               finalized_features=[])
