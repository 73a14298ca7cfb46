"""TxnOffsetCommit (API key 28): request and response layouts, versions 0-5 (v5 = v4).

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=28,
    name='TxnOffsetCommit',
    versions='0-5',
    flexible='3+',
    request=[
        F('transactional_id', 'string', '0+'),
        F('group_id', 'string', '0+'),
        F('producer_id', 'int64', '0+'),
        F('producer_epoch', 'int16', '0+'),
        F('generation_id', 'int32', '3+', default=-1),
        F('member_id', 'string', '3+', default=''),
        F('group_instance_id', 'string', '3+', nullable='3+', default=None),
        F('topics', '[]TxnOffsetCommitRequestTopic', '0+', fields=[
            F('name', 'string', '0+'),
            F('partitions', '[]TxnOffsetCommitRequestPartition', '0+', fields=[
                F('partition_index', 'int32', '0+'),
                F('committed_offset', 'int64', '0+'),
                F('committed_leader_epoch', 'int32', '2+', default=-1, ignorable=True),
                F('committed_metadata', 'string', '0+', nullable='0+'),
            ]),
        ]),
    ],
    response=[
        F('throttle_time_ms', 'int32', '0+'),
        F('topics', '[]TxnOffsetCommitResponseTopic', '0+', fields=[
            F('name', 'string', '0+'),
            F('partitions', '[]TxnOffsetCommitResponsePartition', '0+', fields=[
                F('partition_index', 'int32', '0+'),
                F('error_code', 'int16', '0+'),
            ]),
        ]),
    ],
)
