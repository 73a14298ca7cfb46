"""OffsetForLeaderEpoch (API key 23): request and response layouts, versions 0-4.

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=23,
    name='OffsetForLeaderEpoch',
    versions='0-4',
    flexible='4+',
    request=[
        F('replica_id', 'int32', '3+', default=-2, ignorable=True),
        F('topics', '[]OffsetForLeaderTopic', '0+', fields=[
            F('topic', 'string', '0+'),
            F('partitions', '[]OffsetForLeaderPartition', '0+', fields=[
                F('partition', 'int32', '0+'),
                F('current_leader_epoch', 'int32', '2+', default=-1, ignorable=True),
                F('leader_epoch', 'int32', '0+'),
            ]),
        ]),
    ],
    response=[
        F('throttle_time_ms', 'int32', '2+', ignorable=True),
        F('topics', '[]OffsetForLeaderTopicResult', '0+', fields=[
            F('topic', 'string', '0+'),
            F('partitions', '[]EpochEndOffset', '0+', fields=[
                F('error_code', 'int16', '0+'),
                F('partition', 'int32', '0+'),
                F('leader_epoch', 'int32', '1+', default=-1, ignorable=True),
                F('end_offset', 'int64', '0+', default=-1),
            ]),
        ]),
    ],
)
