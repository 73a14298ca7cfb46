"""SaslHandshake (API key 17): request and response layouts, versions 0-1.

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=17,
    name='SaslHandshake',
    versions='0-1',
    flexible='none',
    request=[
        F('mechanism', 'string', '0+'),
    ],
    response=[
        F('error_code', 'int16', '0+'),
        F('mechanisms', '[]string', '0+'),
    ],
)
