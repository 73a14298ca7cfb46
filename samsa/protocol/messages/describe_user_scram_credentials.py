"""DescribeUserScramCredentials (API key 50): request and response layouts, version 0 (KIP-554).

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=50,
    name='DescribeUserScramCredentials',
    versions='0',
    flexible='0+',
    request=[
        F('users', '[]UserName', '0+', nullable='0+', fields=[
            F('name', 'string', '0+'),
        ]),
    ],
    response=[
        F('throttle_time_ms', 'int32', '0+'),
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '0+', nullable='0+'),
        F('results', '[]DescribeUserScramCredentialsResult', '0+', fields=[
            F('user', 'string', '0+'),
            F('error_code', 'int16', '0+'),
            F('error_message', 'string', '0+', nullable='0+'),
            F('credential_infos', '[]CredentialInfo', '0+', fields=[
                F('mechanism', 'int8', '0+'),
                F('iterations', 'int32', '0+'),
            ]),
        ]),
    ],
)
