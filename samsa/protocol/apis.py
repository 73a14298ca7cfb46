"""The registry of APIs: key -> Api, with request/response classes built from the declarations."""

from __future__ import annotations

from samsa.errors import UnsupportedVersionError
from samsa.protocol.message import bind_api
from samsa.protocol.messages import DECLARED
from samsa.protocol.schema import Api

APIS: dict[int, Api] = {api.key: bind_api(api) for api in DECLARED}
APIS_BY_NAME: dict[str, Api] = {api.name: api for api in APIS.values()}


def api_for(api_key: int, api_version: int | None = None) -> Api:
    """The Api for a key; with a version, also checks that samsa's codec knows that version.

    Raises UnsupportedVersionError naming the key and the version.
    """
    api = APIS.get(api_key)
    if api is None:
        raise UnsupportedVersionError(
            f"unknown API key {api_key} (version {api_version}): samsa does not implement it"
        )
    if api_version is not None and not api.supports(api_version):
        raise UnsupportedVersionError(
            f"{api.name} (API key {api_key}) version {api_version} is not supported: "
            f"samsa knows versions {api.min_version}-{api.max_version}"
        )
    return api
