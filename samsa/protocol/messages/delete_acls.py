"""DeleteAcls (API key 31): request and response layouts, versions 0-3.

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=31,
    name='DeleteAcls',
    versions='0-3',
    flexible='2+',
    request=[
        F('filters', '[]DeleteAclsFilter', '0+', fields=[
            F('resource_type_filter', 'int8', '0+'),
            F('resource_name_filter', 'string', '0+', nullable='0+'),
            F('pattern_type_filter', 'int8', '1+', default=3),
            F('principal_filter', 'string', '0+', nullable='0+'),
            F('host_filter', 'string', '0+', nullable='0+'),
            F('operation', 'int8', '0+'),
            F('permission_type', 'int8', '0+'),
        ]),
    ],
    response=[
        F('throttle_time_ms', 'int32', '0+'),
        F('filter_results', '[]DeleteAclsFilterResult', '0+', fields=[
            F('error_code', 'int16', '0+'),
            F('error_message', 'string', '0+', nullable='0+'),
            F('matching_acls', '[]DeleteAclsMatchingAcl', '0+', fields=[
                F('error_code', 'int16', '0+'),
                F('error_message', 'string', '0+', nullable='0+'),
                F('resource_type', 'int8', '0+'),
                F('resource_name', 'string', '0+'),
                F('pattern_type', 'int8', '1+', default=3),
                F('principal', 'string', '0+'),
                F('host', 'string', '0+'),
                F('operation', 'int8', '0+'),
                F('permission_type', 'int8', '0+'),
            ]),
        ]),
    ],
)
