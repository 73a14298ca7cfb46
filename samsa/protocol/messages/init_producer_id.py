"""InitProducerId (API key 22): request and response layouts, versions 0-5.

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=22,
    name='InitProducerId',
    versions='0-5',
    flexible='2+',
    request=[
        F('transactional_id', 'string', '0+', nullable='0+'),
        F('transaction_timeout_ms', 'int32', '0+'),
        F('producer_id', 'int64', '3+', default=-1),
        F('producer_epoch', 'int16', '3+', default=-1),
    ],
    response=[
        F('throttle_time_ms', 'int32', '0+', ignorable=True),
        F('error_code', 'int16', '0+'),
        F('producer_id', 'int64', '0+', default=-1),
        F('producer_epoch', 'int16', '0+'),
    ],
)
