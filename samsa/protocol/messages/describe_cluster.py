"""DescribeCluster (API key 60): request and response layouts, versions 0-1.

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=60,
    name='DescribeCluster',
    versions='0-1',
    flexible='0+',
    request=[
        F('include_cluster_authorized_operations', 'bool', '0+'),
        F('endpoint_type', 'int8', '1+', default=1),
    ],
    response=[
        F('throttle_time_ms', 'int32', '0+'),
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '0+', nullable='0+', default=None),
        F('endpoint_type', 'int8', '1+', default=1),
        F('cluster_id', 'string', '0+'),
        F('controller_id', 'int32', '0+', default=-1),
        F('brokers', '[]DescribeClusterBroker', '0+', fields=[
            F('broker_id', 'int32', '0+'),
            F('host', 'string', '0+'),
            F('port', 'int32', '0+'),
            F('rack', 'string', '0+', nullable='0+', default=None),
        ]),
        F('cluster_authorized_operations', 'int32', '0+', default=-2147483648),
    ],
)
