"""Heartbeat (API key 12): request and response layouts, versions 0-4.

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=12,
    name='Heartbeat',
    versions='0-4',
    flexible='4+',
    request=[
        F('group_id', 'string', '0+'),
        F('generation_id', 'int32', '0+'),
        F('member_id', 'string', '0+'),
        F('group_instance_id', 'string', '3+', nullable='3+', default=None),
    ],
    response=[
        F('throttle_time_ms', 'int32', '1+', ignorable=True),
        F('error_code', 'int16', '0+'),
    ],
)
