"""IncrementalAlterConfigs (API key 44): request and response layouts, versions 0-1.

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=44,
    name='IncrementalAlterConfigs',
    versions='0-1',
    flexible='1+',
    request=[
        F('resources', '[]AlterConfigsResource', '0+', fields=[
            F('resource_type', 'int8', '0+'),
            F('resource_name', 'string', '0+'),
            F('configs', '[]AlterableConfig', '0+', fields=[
                F('name', 'string', '0+'),
                F('config_operation', 'int8', '0+'),
                F('value', 'string', '0+', nullable='0+'),
            ]),
        ]),
        F('validate_only', 'bool', '0+'),
    ],
    response=[
        F('throttle_time_ms', 'int32', '0+'),
        F('responses', '[]AlterConfigsResourceResponse', '0+', fields=[
            F('error_code', 'int16', '0+'),
            F('error_message', 'string', '0+', nullable='0+'),
            F('resource_type', 'int8', '0+'),
            F('resource_name', 'string', '0+'),
        ]),
    ],
)
