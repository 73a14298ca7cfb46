"""AddPartitionsToTxn (API key 24): request and response layouts, versions 0-5.

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=24,
    name='AddPartitionsToTxn',
    versions='0-5',
    flexible='3+',
    request=[
        F('transactions', '[]AddPartitionsToTxnTransaction', '4+', fields=[
            F('transactional_id', 'string', '4+'),
            F('producer_id', 'int64', '4+'),
            F('producer_epoch', 'int16', '4+'),
            F('verify_only', 'bool', '4+', default=False),
            F('topics', '[]AddPartitionsToTxnTopic', '4+'),
        ]),
        F('v3_and_below_transactional_id', 'string', '0-3'),
        F('v3_and_below_producer_id', 'int64', '0-3'),
        F('v3_and_below_producer_epoch', 'int16', '0-3'),
        F('v3_and_below_topics', '[]AddPartitionsToTxnTopic', '0-3'),
    ],
    request_structs={
        'AddPartitionsToTxnTopic': [
            F('name', 'string', '0+'),
            F('partitions', '[]int32', '0+'),
        ],
    },
    response=[
        F('throttle_time_ms', 'int32', '0+'),
        F('error_code', 'int16', '4+', ignorable=True),
        F('results_by_transaction', '[]AddPartitionsToTxnResult', '4+', fields=[
            F('transactional_id', 'string', '4+'),
            F('topic_results', '[]AddPartitionsToTxnTopicResult', '4+'),
        ]),
        F('results_by_topic_v3_and_below', '[]AddPartitionsToTxnTopicResult', '0-3'),
    ],
    response_structs={
        'AddPartitionsToTxnTopicResult': [
            F('name', 'string', '0+'),
            F('results_by_partition', '[]AddPartitionsToTxnPartitionResult', '0+'),
        ],
        'AddPartitionsToTxnPartitionResult': [
            F('partition_index', 'int32', '0+'),
            F('partition_error_code', 'int16', '0+'),
        ],
    },
)
