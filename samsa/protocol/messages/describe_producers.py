"""DescribeProducers (API key 61): request and response layouts, version 0.

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=61,
    name='DescribeProducers',
    versions='0',
    flexible='0+',
    request=[
        F('topics', '[]TopicRequest', '0+', fields=[
            F('name', 'string', '0+'),
            F('partition_indexes', '[]int32', '0+'),
        ]),
    ],
    response=[
        F('throttle_time_ms', 'int32', '0+'),
        F('topics', '[]TopicResponse', '0+', fields=[
            F('name', 'string', '0+'),
            F('partitions', '[]PartitionResponse', '0+', fields=[
                F('partition_index', 'int32', '0+'),
                F('error_code', 'int16', '0+'),
                F('error_message', 'string', '0+', nullable='0+', default=None),
                F('active_producers', '[]ProducerState', '0+', fields=[
                    F('producer_id', 'int64', '0+'),
                    F('producer_epoch', 'int32', '0+'),
                    F('last_sequence', 'int32', '0+', default=-1),
                    F('last_timestamp', 'int64', '0+', default=-1),
                    F('coordinator_epoch', 'int32', '0+'),
                    F('current_txn_start_offset', 'int64', '0+', default=-1),
                ]),
            ]),
        ]),
    ],
)
