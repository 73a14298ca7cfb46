from __future__ import annotations

from typing import Any

import pytest

from samsa.broker.apis import ADVERTISED, SERVED
from samsa.protocol import APIS, ApiVersionsRequest, MetadataRequest, ProduceRequest

# The advertised ranges of the APIs first implemented: Kafka 4.0's minimums (KIP-896), Produce
# from v0 as Kafka advertises it since KAFKA-18659 (librdkafka's compression check).
EXPECTED = {0: (0, 12), 1: (4, 12), 2: (1, 9), 3: (0, 12), 8: (2, 9), 9: (1, 9), 10: (0, 6),
            11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 5), 16: (0, 5),
            18: (0, 4), 19: (2, 7), 20: (1, 6), 21: (0, 2), 22: (0, 5), 23: (2, 4),
            32: (1, 4), 37: (0, 3), 42: (0, 2), 60: (0, 1)}
# The admin calls, at Kafka 3.9's ranges.
EXPECTED.update({33: (0, 2), 35: (0, 4), 44: (0, 1), 47: (0, 0), 50: (0, 0), 51: (0, 0),
                 61: (0, 0), 75: (0, 0)})
# SASL (the network layer serves them on SASL listeners), at Kafka 4.1's ranges.
EXPECTED.update({17: (0, 1), 36: (0, 2)})
# ACLs, at Kafka 3.9's ranges.
EXPECTED.update({29: (0, 3), 30: (0, 3), 31: (0, 3)})
# The old versions Kafka 3.9 still serves (KIP-896 removed them in 4.0).
EXPECTED.update({0: (0, 12), 1: (0, 12), 2: (0, 9), 8: (0, 9), 9: (0, 9), 19: (0, 7),
                 20: (0, 6), 23: (0, 4), 32: (0, 4)})
# Kafka 3.9.1's valid request versions (clients/src/main/resources/common/message/*Request.json)
# for the APIs samsa implements.
KAFKA_3_9 = {0: (0, 11), 1: (0, 17), 2: (0, 9), 3: (0, 12), 8: (0, 9), 9: (0, 9), 10: (0, 6),
             11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 5), 16: (0, 5), 18: (0, 4),
             19: (0, 7), 20: (0, 6), 21: (0, 2), 22: (0, 5), 23: (0, 4), 32: (0, 4), 33: (0, 2),
             35: (0, 4), 37: (0, 3), 42: (0, 2), 44: (0, 1), 47: (0, 0), 50: (0, 0), 51: (0, 0),
             60: (0, 1), 61: (0, 0), 75: (0, 0), 17: (0, 1), 36: (0, 2),
             29: (0, 3), 30: (0, 3), 31: (0, 3)}
# TxnOffsetCommit at Kafka 4.1's range (v5: the group's partition joins the transaction).
EXPECTED.update({28: (0, 5)})
KAFKA_3_9.update({28: (0, 4)})
# The transaction coordinator's APIs at Kafka 4.1's ranges (EndTxn v5: KIP-890 part 2).
EXPECTED.update({24: (0, 5), 25: (0, 4), 26: (0, 5), 65: (0, 0), 66: (0, 1)})
KAFKA_3_9.update({24: (0, 5), 25: (0, 4), 26: (0, 4), 65: (0, 0), 66: (0, 1)})


def test_every_version_kafka_3_9_serves_is_served() -> None:
    """Old clients (kafka-python pinned to 0.9/0.10.1, sarama 1.22, kafka-go 0.2) need the low
    versions; the high end may differ (Fetch stops at 12 until topic ids are served)."""
    for key, (lo, hi) in SERVED.items():
        assert lo == KAFKA_3_9[key][0], APIS[key].name
        assert ADVERTISED[key] == (lo, hi)


def _ranges(response) -> dict[int, tuple[int, int]]:  # type: ignore[no-untyped-def]
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def test_advertised_ranges_match_the_table(client: Any) -> None:
    for version in range(5):
        request = ApiVersionsRequest(client_software_name="samsa-test",
                                     client_software_version="1.0")
        response = client.call(request, version)
        assert response.error_code == 0
        assert _ranges(response) == EXPECTED
    assert dict(ADVERTISED) == EXPECTED


def test_librdkafka_2_0_2_feature_checks_pass(client: Any) -> None:
    """librdkafka <= 2.11.0 enables features only if the range contains these exact versions."""
    ranges = _ranges(client.call(ApiVersionsRequest(), 0))

    def has(key: int, version: int) -> bool:
        lo, hi = ranges[key]
        return lo <= version <= hi

    assert has(0, 0) and has(0, 3) and has(0, 7)  # compression, MsgVer2, zstd
    assert has(1, 4) and has(1, 10)  # MsgVer2, zstd
    assert has(10, 0)  # BrokerGroupCoordinator, LZ4
    # BrokerBalancedConsumer: OffsetCommit 1..2, OffsetFetch 1, JoinGroup/SyncGroup/Heartbeat/
    # LeaveGroup 0.
    assert has(8, 2) and has(9, 1) and all(has(k, 0) for k in (11, 12, 13, 14))
    assert has(22, 0)  # IdempotentProducer
    assert has(2, 1)  # OffsetTime
    assert has(18, 0)  # ApiVersion


def test_advertised_versions_are_known_to_the_codec() -> None:
    for key, (lo, hi) in ADVERTISED.items():
        assert APIS[key].min_version <= lo and hi <= APIS[key].max_version
        served_lo, served_hi = SERVED[key]
        assert lo <= served_lo and served_hi == hi


def test_invalid_client_software_name_is_invalid_request(client: Any) -> None:
    response = client.call(ApiVersionsRequest(client_software_name="bad name!",
                                              client_software_version="1.0"), 3)
    assert response.error_code == 42
    assert response.api_keys == []
    response = client.call(ApiVersionsRequest(client_software_name="librdkafka",
                                              client_software_version="2.0.2-"), 4)
    assert response.error_code == 42


def test_unknown_api_versions_version_answers_v0_unsupported(client: Any) -> None:
    ctx = client.send(ApiVersionsRequest(), 0, raw_version=7)
    assert ctx.outcome == "respond"
    assert ctx.response.error_code == 35
    assert _ranges(ctx.response) == {18: (0, 4)}


def test_unserved_versions_close_the_connection(client: Any) -> None:
    # Declared by the codec, not served (Produce/Fetch 13+ address topics by id).
    assert client.send(ProduceRequest(acks=1, timeout_ms=1000), 12,
                       raw_version=13).outcome == "close"
    assert client.send(MetadataRequest(topics=[]), 0, raw_version=13).outcome == "close"


def test_unserved_versions_are_logged_once_per_client_and_version(
        client: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG", logger="samsa.broker.apis.kafka_apis")
    for _ in range(3):
        assert client.send(MetadataRequest(topics=[]), 0, raw_version=14,
                           client_id="once").outcome == "close"
    client.send(MetadataRequest(topics=[]), 0, raw_version=15, client_id="once")
    client.send(MetadataRequest(topics=[]), 0, raw_version=14, client_id="another")
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 3, warned  # (once, 14), (once, 15), (another, 14)
    assert sum("version 14" in m for m in warned) == 2
    assert len([r for r in caplog.records if r.levelname == "DEBUG"
                and "not supported" in r.getMessage()]) == 2


def test_unknown_api_key_closes_the_connection(client: Any) -> None:
    from samsa.protocol import WriteTxnMarkersRequest  # not served: markers are local

    ctx = client.send(WriteTxnMarkersRequest(markers=[]), 1)
    assert ctx.outcome == "close"
