"""AddOffsetsToTxn (API key 25): request and response layouts, versions 0-4.

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=25,
    name='AddOffsetsToTxn',
    versions='0-4',
    flexible='3+',
    request=[
        F('transactional_id', 'string', '0+'),
        F('producer_id', 'int64', '0+'),
        F('producer_epoch', 'int16', '0+'),
        F('group_id', 'string', '0+'),
    ],
    response=[
        F('throttle_time_ms', 'int32', '0+'),
        F('error_code', 'int16', '0+'),
    ],
)
