"""ListTransactions (API key 66): request and response layouts, versions 0-2.

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=66,
    name='ListTransactions',
    versions='0-2',
    flexible='0+',
    request=[
        F('state_filters', '[]string', '0+'),
        F('producer_id_filters', '[]int64', '0+'),
        F('duration_filter', 'int64', '1+', default=-1, ignorable=True),
        F('transactional_id_pattern', 'string', '2+', nullable='2+', default=None,
          ignorable=True),
    ],
    response=[
        F('throttle_time_ms', 'int32', '0+'),
        F('error_code', 'int16', '0+'),
        F('unknown_state_filters', '[]string', '0+'),
        F('transaction_states', '[]TransactionState', '0+', fields=[
            F('transactional_id', 'string', '0+'),
            F('producer_id', 'int64', '0+'),
            F('transaction_state', 'string', '0+'),
        ]),
    ],
)
