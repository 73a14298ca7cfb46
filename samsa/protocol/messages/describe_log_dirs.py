"""DescribeLogDirs (API key 35): request and response layouts, versions 0-4.

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=35,
    name='DescribeLogDirs',
    versions='0-4',
    flexible='2+',
    request=[
        # null: every topic.
        F('topics', '[]DescribableLogDirTopic', '0+', nullable='0+', fields=[
            F('topic', 'string', '0+'),
            F('partitions', '[]int32', '0+'),
        ]),
    ],
    response=[
        F('throttle_time_ms', 'int32', '0+'),
        F('error_code', 'int16', '3+', ignorable=True),
        F('results', '[]DescribeLogDirsResult', '0+', fields=[
            F('error_code', 'int16', '0+'),
            F('log_dir', 'string', '0+'),
            F('topics', '[]DescribeLogDirsTopic', '0+', fields=[
                F('name', 'string', '0+'),
                F('partitions', '[]DescribeLogDirsPartition', '0+', fields=[
                    F('partition_index', 'int32', '0+'),
                    F('partition_size', 'int64', '0+'),
                    F('offset_lag', 'int64', '0+'),
                    F('is_future_key', 'bool', '0+'),
                ]),
            ]),
            F('total_bytes', 'int64', '4+', ignorable=True, default=-1),
            F('usable_bytes', 'int64', '4+', ignorable=True, default=-1),
        ]),
    ],
)
