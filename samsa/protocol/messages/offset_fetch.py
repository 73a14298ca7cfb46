"""OffsetFetch (API key 9): request and response layouts, versions 0-9.

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=9,
    name='OffsetFetch',
    versions='0-9',
    flexible='6+',
    request=[
        F('group_id', 'string', '0-7'),
        F('topics', '[]OffsetFetchRequestTopic', '0-7', nullable='2-7', fields=[
            F('name', 'string', '0-7'),
            F('partition_indexes', '[]int32', '0-7'),
        ]),
        F('groups', '[]OffsetFetchRequestGroup', '8+', fields=[
            F('group_id', 'string', '8+'),
            F('member_id', 'string', '9+', nullable='9+', default=None, ignorable=True),
            F('member_epoch', 'int32', '9+', default=-1, ignorable=True),
            F('topics', '[]OffsetFetchRequestTopics', '8+', nullable='8+', fields=[
                F('name', 'string', '8+'),
                F('partition_indexes', '[]int32', '8+'),
            ]),
        ]),
        F('require_stable', 'bool', '7+', default=False),
    ],
    response=[
        F('throttle_time_ms', 'int32', '3+', ignorable=True),
        F('topics', '[]OffsetFetchResponseTopic', '0-7', fields=[
            F('name', 'string', '0-7'),
            F('partitions', '[]OffsetFetchResponsePartition', '0-7', fields=[
                F('partition_index', 'int32', '0-7'),
                F('committed_offset', 'int64', '0-7'),
                F('committed_leader_epoch', 'int32', '5-7', default=-1, ignorable=True),
                F('metadata', 'string', '0-7', nullable='0-7'),
                F('error_code', 'int16', '0-7'),
            ]),
        ]),
        F('error_code', 'int16', '2-7', default=0, ignorable=True),
        F('groups', '[]OffsetFetchResponseGroup', '8+', fields=[
            F('group_id', 'string', '8+'),
            F('topics', '[]OffsetFetchResponseTopics', '8+', fields=[
                F('name', 'string', '8+'),
                F('partitions', '[]OffsetFetchResponsePartitions', '8+', fields=[
                    F('partition_index', 'int32', '8+'),
                    F('committed_offset', 'int64', '8+'),
                    F('committed_leader_epoch', 'int32', '8+', default=-1, ignorable=True),
                    F('metadata', 'string', '8+', nullable='8+'),
                    F('error_code', 'int16', '8+'),
                ]),
            ]),
            F('error_code', 'int16', '8+', default=0),
        ]),
    ],
)
