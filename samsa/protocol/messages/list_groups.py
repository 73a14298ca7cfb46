"""ListGroups (API key 16): request and response layouts, versions 0-5.

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=16,
    name='ListGroups',
    versions='0-5',
    flexible='3+',
    request=[
        F('states_filter', '[]string', '4+'),
        F('types_filter', '[]string', '5+'),
    ],
    response=[
        F('throttle_time_ms', 'int32', '1+', ignorable=True),
        F('error_code', 'int16', '0+'),
        F('groups', '[]ListedGroup', '0+', fields=[
            F('group_id', 'string', '0+'),
            F('protocol_type', 'string', '0+'),
            F('group_state', 'string', '4+', ignorable=True),
            F('group_type', 'string', '5+', ignorable=True),
        ]),
    ],
)
