"""SaslAuthenticate (API key 36): request and response layouts, versions 0-2.

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=36,
    name='SaslAuthenticate',
    versions='0-2',
    flexible='2+',
    request=[
        F('auth_bytes', 'bytes', '0+'),
    ],
    response=[
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '0+', nullable='0+'),
        F('auth_bytes', 'bytes', '0+'),
        F('session_lifetime_ms', 'int64', '1+', default=0, ignorable=True),
    ],
)
