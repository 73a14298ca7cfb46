"""WriteTxnMarkers (API key 27): request and response layouts, versions 0-1.

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=27,
    name='WriteTxnMarkers',
    versions='0-1',
    flexible='1+',
    request=[
        F('markers', '[]WritableTxnMarker', '0+', fields=[
            F('producer_id', 'int64', '0+'),
            F('producer_epoch', 'int16', '0+'),
            F('transaction_result', 'bool', '0+'),
            F('topics', '[]WritableTxnMarkerTopic', '0+', fields=[
                F('name', 'string', '0+'),
                F('partition_indexes', '[]int32', '0+'),
            ]),
            F('coordinator_epoch', 'int32', '0+'),
        ]),
    ],
    response=[
        F('markers', '[]WritableTxnMarkerResult', '0+', fields=[
            F('producer_id', 'int64', '0+'),
            F('topics', '[]WritableTxnMarkerTopicResult', '0+', fields=[
                F('name', 'string', '0+'),
                F('partitions', '[]WritableTxnMarkerPartitionResult', '0+', fields=[
                    F('partition_index', 'int32', '0+'),
                    F('error_code', 'int16', '0+'),
                ]),
            ]),
        ]),
    ],
)
