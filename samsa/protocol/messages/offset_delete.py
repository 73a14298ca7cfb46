"""OffsetDelete (API key 47): request and response layouts, version 0.

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=47,
    name='OffsetDelete',
    versions='0',
    flexible='none',
    request=[
        F('group_id', 'string', '0+'),
        F('topics', '[]OffsetDeleteRequestTopic', '0+', fields=[
            F('name', 'string', '0+'),
            F('partitions', '[]OffsetDeleteRequestPartition', '0+', fields=[
                F('partition_index', 'int32', '0+'),
            ]),
        ]),
    ],
    response=[
        F('error_code', 'int16', '0+'),
        F('throttle_time_ms', 'int32', '0+', ignorable=True),
        F('topics', '[]OffsetDeleteResponseTopic', '0+', fields=[
            F('name', 'string', '0+'),
            F('partitions', '[]OffsetDeleteResponsePartition', '0+', fields=[
                F('partition_index', 'int32', '0+'),
                F('error_code', 'int16', '0+'),
            ]),
        ]),
    ],
)
