"""DescribeTransactions (API key 65): request and response layouts, version 0.

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=65,
    name='DescribeTransactions',
    versions='0',
    flexible='0+',
    request=[
        F('transactional_ids', '[]string', '0+'),
    ],
    response=[
        F('throttle_time_ms', 'int32', '0+'),
        F('transaction_states', '[]TransactionState', '0+', fields=[
            F('error_code', 'int16', '0+'),
            F('transactional_id', 'string', '0+'),
            F('transaction_state', 'string', '0+'),
            F('transaction_timeout_ms', 'int32', '0+'),
            F('transaction_start_time_ms', 'int64', '0+'),
            F('producer_id', 'int64', '0+'),
            F('producer_epoch', 'int16', '0+'),
            F('topics', '[]TopicData', '0+', fields=[
                F('topic', 'string', '0+'),
                F('partitions', '[]int32', '0+'),
            ]),
        ]),
    ],
)
