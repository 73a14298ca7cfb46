"""JoinGroup (key 11), versions 0-9: hand the join to the group coordinator, answer later.

The request is parked in the coordinator (no handler thread waits); its callback answers the
connection from whichever thread completes the rebalance.  v4+ clients get the
MEMBER_ID_REQUIRED handshake; v5+ may be static members (group.instance.id).
"""

from __future__ import annotations

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.services import BrokerServices
from samsa.broker.group import JoinRequest, JoinResult
from samsa.protocol import JoinGroupResponse


def join_response(version: int, result: JoinResult) -> JoinGroupResponse:
    # Before v7 the protocol name is not nullable: an error answer carries "".
    name = result.protocol_name if version >= 7 else (result.protocol_name or "")
    return JoinGroupResponse(
        throttle_time_ms=0, error_code=result.error_code, generation_id=result.generation_id,
        protocol_type=result.protocol_type if version >= 7 else None,
        protocol_name=name, leader=result.leader,
        skip_assignment=result.skip_assignment if version >= 9 else False,
        member_id=result.member_id,
        members=[JoinGroupResponse.JoinGroupResponseMember(
            member_id=member_id, group_instance_id=instance_id if version >= 5 else None,
            metadata=metadata) for member_id, instance_id, metadata in result.members],
    )


def handle_join_group(services: BrokerServices, ctx: RequestContext) -> None:
    version = ctx.header.request_api_version
    req = ctx.body
    join = JoinRequest(
        group_id=req.group_id,
        member_id=req.member_id,
        group_instance_id=req.group_instance_id if version >= 5 else None,
        client_id=ctx.header.client_id or "",
        client_host="/" + ctx.client_host,
        session_timeout_ms=req.session_timeout_ms,
        # v0 has no rebalance timeout: the session timeout bounds the rebalance.
        rebalance_timeout_ms=req.rebalance_timeout_ms if version >= 1 else req.session_timeout_ms,
        protocol_type=req.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
        require_known_member_id=version >= 4,
        supports_skip_assignment=version >= 9,
    )
    services.groups.join_group(join, lambda result: ctx.respond(join_response(version, result)))
