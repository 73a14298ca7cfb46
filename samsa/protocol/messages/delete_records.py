"""DeleteRecords (API key 21): request and response layouts, versions 0-2.

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=21,
    name='DeleteRecords',
    versions='0-2',
    flexible='2+',
    request=[
        F('topics', '[]DeleteRecordsTopic', '0+', fields=[
            F('name', 'string', '0+'),
            F('partitions', '[]DeleteRecordsPartition', '0+', fields=[
                F('partition_index', 'int32', '0+'),
                F('offset', 'int64', '0+'),
            ]),
        ]),
        F('timeout_ms', 'int32', '0+'),
    ],
    response=[
        F('throttle_time_ms', 'int32', '0+'),
        F('topics', '[]DeleteRecordsTopicResult', '0+', fields=[
            F('name', 'string', '0+'),
            F('partitions', '[]DeleteRecordsPartitionResult', '0+', fields=[
                F('partition_index', 'int32', '0+'),
                F('low_watermark', 'int64', '0+'),
                F('error_code', 'int16', '0+'),
            ]),
        ]),
    ],
)
