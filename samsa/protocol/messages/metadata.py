"""Metadata (API key 3): request and response layouts, versions 0-13.

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=3,
    name='Metadata',
    versions='0-13',
    flexible='9+',
    request=[
        F('topics', '[]MetadataRequestTopic', '0+', nullable='1+', fields=[
            F('topic_id', 'uuid', '10+', ignorable=True),
            F('name', 'string', '0+', nullable='10+'),
        ]),
        F('allow_auto_topic_creation', 'bool', '4+', default=True),
        F('include_cluster_authorized_operations', 'bool', '8-10'),
        F('include_topic_authorized_operations', 'bool', '8+'),
    ],
    response=[
        F('throttle_time_ms', 'int32', '3+', ignorable=True),
        F('brokers', '[]MetadataResponseBroker', '0+', fields=[
            F('node_id', 'int32', '0+'),
            F('host', 'string', '0+'),
            F('port', 'int32', '0+'),
            F('rack', 'string', '1+', nullable='1+', default=None, ignorable=True),
        ]),
        F('cluster_id', 'string', '2+', nullable='2+', default=None, ignorable=True),
        F('controller_id', 'int32', '1+', default=-1, ignorable=True),
        F('topics', '[]MetadataResponseTopic', '0+', fields=[
            F('error_code', 'int16', '0+'),
            F('name', 'string', '0+', nullable='12+'),
            F('topic_id', 'uuid', '10+', ignorable=True),
            F('is_internal', 'bool', '1+', default=False, ignorable=True),
            F('partitions', '[]MetadataResponsePartition', '0+', fields=[
                F('error_code', 'int16', '0+'),
                F('partition_index', 'int32', '0+'),
                F('leader_id', 'int32', '0+'),
                F('leader_epoch', 'int32', '7+', default=-1, ignorable=True),
                F('replica_nodes', '[]int32', '0+'),
                F('isr_nodes', '[]int32', '0+'),
                F('offline_replicas', '[]int32', '5+', ignorable=True),
            ]),
            F('topic_authorized_operations', 'int32', '8+', default=-2147483648),
        ]),
        F('cluster_authorized_operations', 'int32', '8-10', default=-2147483648),
        F('error_code', 'int16', '13+', ignorable=True),
    ],
)
