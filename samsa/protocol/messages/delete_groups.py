"""DeleteGroups (API key 42): request and response layouts, versions 0-2.

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=42,
    name='DeleteGroups',
    versions='0-2',
    flexible='2+',
    request=[
        F('groups_names', '[]string', '0+'),
    ],
    response=[
        F('throttle_time_ms', 'int32', '0+'),
        F('results', '[]DeletableGroupResult', '0+', fields=[
            F('group_id', 'string', '0+'),
            F('error_code', 'int16', '0+'),
        ]),
    ],
)
