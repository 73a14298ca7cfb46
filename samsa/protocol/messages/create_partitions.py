"""CreatePartitions (API key 37): request and response layouts, versions 0-3.

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=37,
    name='CreatePartitions',
    versions='0-3',
    flexible='2+',
    request=[
        F('topics', '[]CreatePartitionsTopic', '0+', fields=[
            F('name', 'string', '0+'),
            F('count', 'int32', '0+'),
            F('assignments', '[]CreatePartitionsAssignment', '0+', nullable='0+', fields=[
                F('broker_ids', '[]int32', '0+'),
            ]),
        ]),
        F('timeout_ms', 'int32', '0+'),
        F('validate_only', 'bool', '0+'),
    ],
    response=[
        F('throttle_time_ms', 'int32', '0+'),
        F('results', '[]CreatePartitionsTopicResult', '0+', fields=[
            F('name', 'string', '0+'),
            F('error_code', 'int16', '0+'),
            F('error_message', 'string', '0+', nullable='0+', default=None),
        ]),
    ],
)
