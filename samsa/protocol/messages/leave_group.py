"""LeaveGroup (API key 13): request and response layouts, versions 0-5.

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=13,
    name='LeaveGroup',
    versions='0-5',
    flexible='4+',
    request=[
        F('group_id', 'string', '0+'),
        F('member_id', 'string', '0-2'),
        F('members', '[]MemberIdentity', '3+', fields=[
            F('member_id', 'string', '3+'),
            F('group_instance_id', 'string', '3+', nullable='3+', default=None),
            F('reason', 'string', '5+', nullable='5+', default=None, ignorable=True),
        ]),
    ],
    response=[
        F('throttle_time_ms', 'int32', '1+', ignorable=True),
        F('error_code', 'int16', '0+'),
        F('members', '[]MemberResponse', '3+', fields=[
            F('member_id', 'string', '3+'),
            F('group_instance_id', 'string', '3+', nullable='3+'),
            F('error_code', 'int16', '3+'),
        ]),
    ],
)
