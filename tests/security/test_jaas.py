"""Java's JAAS syntax in sasl.jaas.config values, as Kafka's JaasConfig reads them."""

from __future__ import annotations

import pytest

from samsa.security.jaas import PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE, parse_jaas_config


def test_a_client_plain_login_module() -> None:
    entry = parse_jaas_config(
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
        'password="alice-secret";')
    assert (entry.login_module, entry.flag) == (PLAIN_LOGIN_MODULE, "required")
    assert entry.options == {"username": "alice", "password": "alice-secret"}
    assert "alice-secret" not in repr(entry)


def test_broker_users_comments_bare_words_escapes_and_case_of_the_flag() -> None:
    entry = parse_jaas_config(
        "org.apache.kafka.common.security.scram.ScramLoginModule REQUIRED\n"
        "  // the broker's own user\n"
        '  username=admin password="a \\"quoted\\" pass;word" /* users: */\n'
        '  user_alice="alice-secret" tokenauth=false ;  ')
    assert (entry.login_module, entry.flag) == (SCRAM_LOGIN_MODULE, "required")
    assert entry.options == {"username": "admin", "password": 'a "quoted" pass;word',
                             "user_alice": "alice-secret", "tokenauth": "false"}


@pytest.mark.parametrize(("value", "why"), [
    ('org.Module required username="a"', "must end with ';'"),
    ('a.B required; c.D required;', "exactly one login module"),
    ('a.B maybe username="a";', "flag must be one of required, requisite, sufficient, optional, not 'maybe'"),
    ('a.B required username;', "name=value pairs"),
    ('a.B required username="a" = "b";', "name=value pairs"),
    ('a.B required "quoted"="b";', "name=value pairs (near 'quoted')"),
    ('a.B required user@="a";', "unexpected character '@'"),
    (";", "must start with '<LoginModuleClass> <flag>'"),
    ("", "must end with ';'"),
], ids=["no-semicolon", "two-modules", "bad-flag", "no-value", "stray-equals", "quoted-name", "bad-character",
        "empty-entry", "empty"])
def test_malformed_values_name_the_setting_and_the_problem(value: str, why: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_jaas_config(value)
    assert str(info.value).startswith("sasl.jaas.config")
    assert why in str(info.value)
