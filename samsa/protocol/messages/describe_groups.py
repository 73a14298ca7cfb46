"""DescribeGroups (API key 15): request and response layouts, versions 0-5.

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=15,
    name='DescribeGroups',
    versions='0-5',
    flexible='5+',
    request=[
        F('groups', '[]string', '0+'),
        F('include_authorized_operations', 'bool', '3+'),
    ],
    response=[
        F('throttle_time_ms', 'int32', '1+', ignorable=True),
        F('groups', '[]DescribedGroup', '0+', fields=[
            F('error_code', 'int16', '0+'),
            F('group_id', 'string', '0+'),
            F('group_state', 'string', '0+'),
            F('protocol_type', 'string', '0+'),
            F('protocol_data', 'string', '0+'),
            F('members', '[]DescribedGroupMember', '0+', fields=[
                F('member_id', 'string', '0+'),
                F('group_instance_id', 'string', '4+', nullable='4+', default=None, ignorable=True),
                F('client_id', 'string', '0+'),
                F('client_host', 'string', '0+'),
                F('member_metadata', 'bytes', '0+'),
                F('member_assignment', 'bytes', '0+'),
            ]),
            F('authorized_operations', 'int32', '3+', default=-2147483648),
        ]),
    ],
)
