"""ListOffsets (API key 2): request and response layouts, versions 0-10.

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=2,
    name='ListOffsets',
    versions='0-10',
    flexible='6+',
    request=[
        F('replica_id', 'int32', '0+'),
        F('isolation_level', 'int8', '2+'),
        F('topics', '[]ListOffsetsTopic', '0+', fields=[
            F('name', 'string', '0+'),
            F('partitions', '[]ListOffsetsPartition', '0+', fields=[
                F('partition_index', 'int32', '0+'),
                F('current_leader_epoch', 'int32', '4+', default=-1, ignorable=True),
                F('timestamp', 'int64', '0+'),
                F('max_num_offsets', 'int32', '0', default=1),
            ]),
        ]),
        F('timeout_ms', 'int32', '10+', ignorable=True),
    ],
    response=[
        F('throttle_time_ms', 'int32', '2+', ignorable=True),
        F('topics', '[]ListOffsetsTopicResponse', '0+', fields=[
            F('name', 'string', '0+'),
            F('partitions', '[]ListOffsetsPartitionResponse', '0+', fields=[
                F('partition_index', 'int32', '0+'),
                F('error_code', 'int16', '0+'),
                F('old_style_offsets', '[]int64', '0'),
                F('timestamp', 'int64', '1+', default=-1),
                F('offset', 'int64', '1+', default=-1),
                F('leader_epoch', 'int32', '4+', default=-1),
            ]),
        ]),
    ],
)
