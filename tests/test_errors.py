"""Tests for samsa.errors: the wire error registry, flags checked against Kafka's Java
client, and the client-side errors."""

from __future__ import annotations

import pickle

import pytest

from samsa import errors
from samsa.errors import (
    BrokerResponseError,
    ClientError,
    ConfigError,
    CorruptRecordError,
    ForkedClientError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    MessageTooLargeError,
    NotLeaderOrFollowerError,
    ProducerClosedError,
    SerializationError,
    UnknownServerError,
    UnrecognizedBrokerError,
    UnsupportedVersionError,
    for_code,
    raise_for_code,
)

# Highest code in Kafka's Errors enum (trunk, 2024-10).
MAX_CODE = 128

# Codes whose Java exception extends RetriableException (directly or via a subclass).
JAVA_RETRIABLE = {
    2, 3, 5, 6, 7, 9, 13, 14, 15, 16, 19, 20, 41, 51, 56, 70, 71, 72, 74, 75, 78, 80,
    83, 84, 88, 89, 100, 103, 106, 122, 123,
}  # fmt: skip
# Codes whose Java exception extends InvalidMetadataException (metadata refresh).
JAVA_INVALID_METADATA = {3, 5, 6, 9, 13, 56, 72, 74, 80, 83, 84, 100, 103}

# kafka-python keeps older names for a few codes; Kafka's current names are ours.
KAFKA_PYTHON_LEGACY_NAMES = {
    -1: "UNKNOWN",
    6: "NOT_LEADER_FOR_PARTITION",
    10: "MESSAGE_SIZE_TOO_LARGE",
    17: "INVALID_TOPIC",
    39: "INVALID_REPLICATION_ASSIGNMENT",
}


def expected_class_name(kafka_name: str) -> str:
    """The naming rule: CamelCase of the Kafka name without _ERROR/_EXCEPTION, + Error."""
    for suffix in ("_ERROR", "_EXCEPTION"):
        kafka_name = kafka_name.removesuffix(suffix)
    return "".join(part.capitalize() for part in kafka_name.split("_")) + "Error"


def test_every_code_from_minus_one_to_max_is_present() -> None:
    assert sorted(errors.ERRORS_BY_CODE) == [-1, *range(1, MAX_CODE + 1)]


def test_codes_and_names_are_unique_and_consistent() -> None:
    classes = list(errors.ERRORS_BY_CODE.values())
    assert len({cls.name for cls in classes}) == len(classes)
    assert len({cls.__name__ for cls in classes}) == len(classes)
    for code, cls in errors.ERRORS_BY_CODE.items():
        assert cls.code == code
        assert errors.ERRORS_BY_NAME[cls.name] is cls
        assert issubclass(cls, BrokerResponseError)
        assert cls.name.isupper() and cls.message.endswith((".", ".)"))


def test_class_names_follow_the_naming_rule() -> None:
    for cls in errors.ERRORS_BY_CODE.values():
        # Every code is reachable under the rule's name (CORRUPT_MESSAGE via an alias).
        assert getattr(errors, expected_class_name(cls.name)) is cls
    assert errors.ERRORS_BY_NAME["CORRUPT_MESSAGE"] is CorruptRecordError
    assert errors.ERRORS_BY_NAME["NOT_LEADER_OR_FOLLOWER"] is NotLeaderOrFollowerError
    assert errors.UnknownTopicOrPartitionError.code == 3
    assert errors.KafkaStorageError.code == 56
    assert errors.InvalidTopicError.name == "INVALID_TOPIC_EXCEPTION"
    assert errors.NetworkError.name == "NETWORK_EXCEPTION"


def test_existing_base_classes_keep_their_codes() -> None:
    assert CorruptRecordError.code == 2 and CorruptRecordError.retriable
    assert UnsupportedVersionError.code == 35 and not UnsupportedVersionError.retriable
    assert (
        UnknownServerError.code == -1
        and UnknownServerError.name == "UNKNOWN_SERVER_ERROR"
    )
    assert errors.RecordTooLargeError is MessageTooLargeError


def test_retriable_flags_match_java() -> None:
    retriable = {code for code, cls in errors.ERRORS_BY_CODE.items() if cls.retriable}
    assert retriable == JAVA_RETRIABLE


@pytest.mark.parametrize(
    ("name", "retriable"),
    [
        ("NOT_LEADER_OR_FOLLOWER", True),
        ("CORRUPT_MESSAGE", True),
        ("MESSAGE_TOO_LARGE", False),
        ("OUT_OF_ORDER_SEQUENCE_NUMBER", False),
        ("REQUEST_TIMED_OUT", True),
        ("NOT_ENOUGH_REPLICAS", True),
        ("NOT_ENOUGH_REPLICAS_AFTER_APPEND", True),
        ("UNKNOWN_PRODUCER_ID", False),
        ("REBALANCE_IN_PROGRESS", False),
        ("UNKNOWN_SERVER_ERROR", False),
        ("TOPIC_AUTHORIZATION_FAILED", False),
    ],
)
def test_retriable_spot_checks(name: str, retriable: bool) -> None:
    assert errors.ERRORS_BY_NAME[name].retriable is retriable


def test_invalid_metadata_flags_match_java() -> None:
    flagged = {
        code for code, cls in errors.ERRORS_BY_CODE.items() if cls.invalid_metadata
    }
    assert flagged == JAVA_INVALID_METADATA
    # In Java every InvalidMetadataException is also a RetriableException.
    assert flagged <= JAVA_RETRIABLE
    # Retried, but the Java client does not refresh metadata for it.
    assert not errors.UnknownLeaderEpochError.invalid_metadata


def test_for_code_round_trips() -> None:
    for code, cls in errors.ERRORS_BY_CODE.items():
        assert for_code(code) is cls
        assert for_code(cls.code).name == cls.name


def test_for_code_zero_is_a_caller_bug() -> None:
    with pytest.raises(ValueError, match="NONE"):
        for_code(0)


@pytest.mark.parametrize("code", [MAX_CODE + 1, 9999, -2])
def test_unknown_code_gets_a_generic_class_naming_the_code(code: int) -> None:
    cls = for_code(code)
    assert issubclass(cls, UnrecognizedBrokerError)
    assert issubclass(cls, BrokerResponseError)
    assert cls.code == code and not cls.retriable
    assert str(code) in cls.message
    assert for_code(code) is cls  # cached, so `except for_code(n)` works
    assert code not in errors.ERRORS_BY_CODE
    with pytest.raises(UnrecognizedBrokerError) as info:
        raise_for_code(code)
    assert str(code) in str(info.value)


def test_raise_for_code() -> None:
    raise_for_code(0)
    raise_for_code(0, "ignored")
    with pytest.raises(NotLeaderOrFollowerError) as info:
        raise_for_code(6, "partition t-0 on broker 1")
    err = info.value
    assert err.detail == "partition t-0 on broker 1"
    assert (
        str(err) == "NOT_LEADER_OR_FOLLOWER (error code 6): partition t-0 on broker 1"
    )
    with pytest.raises(KafkaError):
        raise_for_code(35)


def test_message_used_when_no_detail() -> None:
    err = CorruptRecordError()
    assert err.detail is None
    assert str(err) == f"CORRUPT_MESSAGE (error code 2): {CorruptRecordError.message}"


def test_errors_pickle() -> None:
    samples: list[KafkaError] = [
        NotLeaderOrFollowerError("t-0"),
        CorruptRecordError(),
        for_code(4242)("odd"),
        KafkaTimeoutError("metadata for topic 'orders'", 60000),
        ConfigError("linger.ms", "must be >= 0, got -1"),
        ForkedClientError(),
    ]
    for err in samples:
        copy = pickle.loads(pickle.dumps(err))
        assert type(copy).__name__ == type(err).__name__
        assert (copy.code, copy.name, copy.detail) == (err.code, err.name, err.detail)
        assert str(copy) == str(err)


def test_client_errors() -> None:
    for cls in (
        KafkaTimeoutError,
        KafkaConnectionError,
        ConfigError,
        IllegalStateError,
        ForkedClientError,
        SerializationError,
        ProducerClosedError,
    ):
        assert issubclass(cls, ClientError) and issubclass(cls, KafkaError)
        assert not issubclass(cls, BrokerResponseError)
        assert cls.name not in errors.ERRORS_BY_NAME
    assert issubclass(ProducerClosedError, IllegalStateError)
    assert issubclass(ForkedClientError, IllegalStateError)
    assert KafkaTimeoutError.retriable and KafkaConnectionError.retriable
    assert not ConfigError.retriable

    timeout = KafkaTimeoutError("metadata for topic 'orders'", 60000)
    assert (
        str(timeout)
        == "Timed out after 60000 ms waiting for metadata for topic 'orders'."
    )
    assert (timeout.waited_for, timeout.timeout_ms) == (
        "metadata for topic 'orders'",
        60000,
    )
    assert str(KafkaTimeoutError("the flush")) == "Timed out waiting for the flush."

    config = ConfigError("acks", "must be one of 0, 1, -1, 'all'; got 2")
    assert isinstance(config, ValueError)
    assert (
        str(config) == "Invalid setting 'acks': must be one of 0, 1, -1, 'all'; got 2"
    )
    assert config.setting == "acks"

    assert "os.fork()" in str(ForkedClientError())
    assert (
        str(KafkaConnectionError("127.0.0.1:9092 refused")) == "127.0.0.1:9092 refused"
    )


# Importing kafka-python emits importlib.resources deprecation warnings; not ours.
KP_WARNINGS = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@KP_WARNINGS
def test_names_agree_with_kafka_python() -> None:
    import kafka.errors as kp  # a test dependency; must be installed

    theirs = {
        code: cls.message
        for code, cls in kp.kafka_errors.items()
        if code not in (None, 0)
    }
    common = set(theirs) & set(errors.ERRORS_BY_CODE)
    assert len(common) > 100
    differing = {
        code: theirs[code]
        for code in common
        if theirs[code] != errors.ERRORS_BY_CODE[code].name
    }
    # Any other difference is a mistake on one side; check it against Kafka's Errors.java.
    assert differing == KAFKA_PYTHON_LEGACY_NAMES


@KP_WARNINGS
def test_retriable_agrees_with_kafka_python_except_known_cases() -> None:
    import kafka.errors as kp

    differing = {
        code
        for code, cls in kp.kafka_errors.items()
        if code in errors.ERRORS_BY_CODE
        and cls.retriable != errors.ERRORS_BY_CODE[code].retriable
    }
    # kafka-python treats CORRUPT_MESSAGE as fatal; Java's CorruptRecordException is retriable.
    assert differing == {2}


def test_authentication_errors_are_client_errors_not_retried() -> None:
    for cls in (errors.AuthenticationError, errors.SaslAuthenticationError, errors.SslAuthenticationError):
        assert issubclass(cls, errors.AuthenticationError) and issubclass(cls, ClientError)
        assert not cls.retriable
        assert cls.name not in errors.ERRORS_BY_NAME
        err = cls("node 1 (b:9093): why")
        assert str(err) == "node 1 (b:9093): why"
        assert str(pickle.loads(pickle.dumps(err))) == str(err)
