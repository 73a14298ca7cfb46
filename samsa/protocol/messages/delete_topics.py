"""DeleteTopics (API key 20): request and response layouts, versions 0-6.

Declared from Apache Kafka's message definitions (field names, types and versions are protocol
facts); see samsa/protocol/schema.py for the form."""

from samsa.protocol.schema import Api, F

API = Api(
    key=20,
    name='DeleteTopics',
    versions='0-6',
    flexible='4+',
    request=[
        F('topics', '[]DeleteTopicState', '6+', fields=[
            F('name', 'string', '6+', nullable='6+', default=None),
            F('topic_id', 'uuid', '6+'),
        ]),
        F('topic_names', '[]string', '0-5', ignorable=True),
        F('timeout_ms', 'int32', '0+'),
    ],
    response=[
        F('throttle_time_ms', 'int32', '1+', ignorable=True),
        F('responses', '[]DeletableTopicResult', '0+', fields=[
            F('name', 'string', '0+', nullable='6+'),
            F('topic_id', 'uuid', '6+', ignorable=True),
            F('error_code', 'int16', '0+'),
            F('error_message', 'string', '5+', nullable='5+', default=None, ignorable=True),
        ]),
    ],
)
