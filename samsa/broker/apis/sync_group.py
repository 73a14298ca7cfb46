"""SyncGroup (key 14), versions 0-5: the leader's assignments out to every member.

Followers that arrive before the leader are parked in the coordinator and answered when the
leader's assignments have been stored.
"""

from __future__ import annotations

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.services import BrokerServices
from samsa.broker.group import SyncRequest, SyncResult
from samsa.protocol import SyncGroupResponse


def sync_response(version: int, result: SyncResult) -> SyncGroupResponse:
    v5 = version >= 5
    return SyncGroupResponse(
        throttle_time_ms=0, error_code=result.error_code,
        protocol_type=result.protocol_type if v5 else None,
        protocol_name=result.protocol_name if v5 else None,
        assignment=result.assignment)


def handle_sync_group(services: BrokerServices, ctx: RequestContext) -> None:
    version = ctx.header.request_api_version
    req = ctx.body
    sync = SyncRequest(
        group_id=req.group_id,
        generation_id=req.generation_id,
        member_id=req.member_id,
        group_instance_id=req.group_instance_id if version >= 3 else None,
        protocol_type=req.protocol_type if version >= 5 else None,
        protocol_name=req.protocol_name if version >= 5 else None,
        assignments={a.member_id: bytes(a.assignment) for a in req.assignments},
    )
    services.groups.sync_group(sync, lambda result: ctx.respond(sync_response(version, result)))
