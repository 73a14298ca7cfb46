"""AlterUserScramCredentials (API key 51): request and response layouts, version 0 (KIP-554).

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=51,
    name='AlterUserScramCredentials',
    versions='0',
    flexible='0+',
    request=[
        F('deletions', '[]ScramCredentialDeletion', '0+', fields=[
            F('name', 'string', '0+'),
            F('mechanism', 'int8', '0+'),
        ]),
        F('upsertions', '[]ScramCredentialUpsertion', '0+', fields=[
            F('name', 'string', '0+'),
            F('mechanism', 'int8', '0+'),
            F('iterations', 'int32', '0+'),
            F('salt', 'bytes', '0+'),
            F('salted_password', 'bytes', '0+'),
        ]),
    ],
    response=[
        F('throttle_time_ms', 'int32', '0+'),
        F('results', '[]AlterUserScramCredentialsResult', '0+', fields=[
            F('user', 'string', '0+'),
            F('error_code', 'int16', '0+'),
            F('error_message', 'string', '0+', nullable='0+'),
        ]),
    ],
)
