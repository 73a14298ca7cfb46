"""Heartbeat (key 12), versions 0-4, and LeaveGroup (key 13), versions 0-5."""

from __future__ import annotations

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.services import BrokerServices
from samsa.protocol import HeartbeatResponse, LeaveGroupResponse


def handle_heartbeat(services: BrokerServices, ctx: RequestContext) -> HeartbeatResponse:
    version = ctx.header.request_api_version
    req = ctx.body
    error = services.groups.heartbeat(
        req.group_id, req.generation_id, req.member_id,
        req.group_instance_id if version >= 3 else None)
    return HeartbeatResponse(throttle_time_ms=0, error_code=error)


def handle_leave_group(services: BrokerServices, ctx: RequestContext) -> LeaveGroupResponse:
    version = ctx.header.request_api_version
    req = ctx.body
    if version < 3:
        members: list[tuple[str, str | None]] = [(req.member_id, None)]
    else:
        members = [(m.member_id, m.group_instance_id) for m in req.members]
    error, member_errors = services.groups.leave_group(req.group_id, members)
    if version < 3:
        # One member, one error code.
        return LeaveGroupResponse(throttle_time_ms=0,
                                  error_code=error or (member_errors[0] if member_errors else 0))
    return LeaveGroupResponse(
        throttle_time_ms=0, error_code=error,
        members=[] if error else [
            LeaveGroupResponse.MemberResponse(member_id=member_id, group_instance_id=instance_id,
                                              error_code=code)
            for (member_id, instance_id), code in zip(members, member_errors, strict=True)])
