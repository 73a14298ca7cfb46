import re

from samsa.protocol import APIS
from samsa.protocol.api_keys import ApiKey


def _kafka_name(camel: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).upper()


def test_every_declared_api_has_its_named_key_and_nothing_else() -> None:
    declared = {_kafka_name(api.name): key for key, api in APIS.items()}
    assert {member.name: member.value for member in ApiKey} == declared


def test_keys_are_plain_ints_on_the_wire() -> None:
    assert ApiKey.API_VERSIONS == 18 and int(ApiKey.PRODUCE) == 0
    assert APIS[ApiKey.FETCH].name == "Fetch"
