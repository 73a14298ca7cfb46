"""CreateTopics (API key 19): request and response layouts, versions 0-7.

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=19,
    name='CreateTopics',
    versions='0-7',
    flexible='5+',
    request=[
        F('topics', '[]CreatableTopic', '0+', fields=[
            F('name', 'string', '0+'),
            F('num_partitions', 'int32', '0+'),
            F('replication_factor', 'int16', '0+'),
            F('assignments', '[]CreatableReplicaAssignment', '0+', fields=[
                F('partition_index', 'int32', '0+'),
                F('broker_ids', '[]int32', '0+'),
            ]),
            F('configs', '[]CreatableTopicConfig', '0+', fields=[
                F('name', 'string', '0+'),
                F('value', 'string', '0+', nullable='0+'),
            ]),
        ]),
        F('timeout_ms', 'int32', '0+', default=60000),
        F('validate_only', 'bool', '1+', default=False),
    ],
    response=[
        F('throttle_time_ms', 'int32', '2+', ignorable=True),
        F('topics', '[]CreatableTopicResult', '0+', fields=[
            F('name', 'string', '0+'),
            F('topic_id', 'uuid', '7+', ignorable=True),
            F('error_code', 'int16', '0+'),
            F('error_message', 'string', '1+', nullable='0+', ignorable=True),
            F('topic_config_error_code', 'int16', '5+', ignorable=True, tag=0, tagged='5+'),
            F('num_partitions', 'int32', '5+', default=-1, ignorable=True),
            F('replication_factor', 'int16', '5+', default=-1, ignorable=True),
            F('configs', '[]CreatableTopicConfigs', '5+', nullable='5+', ignorable=True, fields=[
                F('name', 'string', '5+'),
                F('value', 'string', '5+', nullable='5+'),
                F('read_only', 'bool', '5+'),
                F('config_source', 'int8', '5+', default=-1, ignorable=True),
                F('is_sensitive', 'bool', '5+'),
            ]),
        ]),
    ],
)
