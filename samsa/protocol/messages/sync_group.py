"""SyncGroup (API key 14): request and response layouts, versions 0-5.

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=14,
    name='SyncGroup',
    versions='0-5',
    flexible='4+',
    request=[
        F('group_id', 'string', '0+'),
        F('generation_id', 'int32', '0+'),
        F('member_id', 'string', '0+'),
        F('group_instance_id', 'string', '3+', nullable='3+', default=None),
        F('protocol_type', 'string', '5+', nullable='5+', default=None, ignorable=True),
        F('protocol_name', 'string', '5+', nullable='5+', default=None, ignorable=True),
        F('assignments', '[]SyncGroupRequestAssignment', '0+', fields=[
            F('member_id', 'string', '0+'),
            F('assignment', 'bytes', '0+'),
        ]),
    ],
    response=[
        F('throttle_time_ms', 'int32', '1+', ignorable=True),
        F('error_code', 'int16', '0+'),
        F('protocol_type', 'string', '5+', nullable='5+', default=None, ignorable=True),
        F('protocol_name', 'string', '5+', nullable='5+', default=None, ignorable=True),
        F('assignment', 'bytes', '0+'),
    ],
)
