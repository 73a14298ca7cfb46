"""ApiVersions (API key 18): request and response layouts, versions 0-4.

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=18,
    name='ApiVersions',
    versions='0-4',
    flexible='3+',
    request=[
        F('client_software_name', 'string', '3+', ignorable=True),
        F('client_software_version', 'string', '3+', ignorable=True),
    ],
    response=[
        F('error_code', 'int16', '0+'),
        F('api_keys', '[]ApiVersion', '0+', fields=[
            F('api_key', 'int16', '0+'),
            F('min_version', 'int16', '0+'),
            F('max_version', 'int16', '0+'),
        ]),
        F('throttle_time_ms', 'int32', '1+', ignorable=True),
        F('supported_features', '[]SupportedFeatureKey', '3+', ignorable=True, tag=0, tagged='3+', fields=[
            F('name', 'string', '3+'),
            F('min_version', 'int16', '3+'),
            F('max_version', 'int16', '3+'),
        ]),
        F('finalized_features_epoch', 'int64', '3+', default=-1, ignorable=True, tag=1, tagged='3+'),
        F('finalized_features', '[]FinalizedFeatureKey', '3+', ignorable=True, tag=2, tagged='3+', fields=[
            F('name', 'string', '3+'),
            F('max_version_level', 'int16', '3+'),
            F('min_version_level', 'int16', '3+'),
        ]),
        F('zk_migration_ready', 'bool', '3+', default=False, ignorable=True, tag=3, tagged='3+'),
    ],
)
