"""The seed corpus is what the fuzzer needs: a valid frame for every API key and version the
broker serves, Produce batches of every codec, and the broker answers each one."""

from __future__ import annotations

import socket

from samsa.broker.apis.versions import SERVED
from samsa.protocol import ApiKey, decode_response
from tests.broker.conftest import HOST
from tests.broker.fuzz.seeds import ALL_CODECS, SEEDS
from tests.broker.fuzz.target import FuzzTarget


def test_every_served_api_version_has_a_seed() -> None:
    covered = {(s.api_key, s.version) for s in SEEDS}
    wanted = {(int(k), v) for k, (low, high) in SERVED.items() for v in range(low, high + 1)}
    assert wanted <= covered, sorted(wanted - covered)
    labels = {s.label for s in SEEDS if s.api_key == ApiKey.PRODUCE}
    assert {f"v2-{c.name.lower()}" for c in ALL_CODECS} <= labels
    assert {f"magic{m}-gzip" for m in (0, 1)} <= labels


def _answer(port: int, frame: bytes) -> bytes:
    with socket.create_connection((HOST, port), timeout=30) as sock:
        sock.sendall(frame)
        sock.shutdown(socket.SHUT_WR)
        data = bytearray()
        while chunk := sock.recv(65536):
            data += chunk
    return bytes(data)


def test_the_broker_answers_every_seed(fuzz_target: FuzzTarget) -> None:
    unanswered = []
    for seed in SEEDS:
        data = _answer(fuzz_target.port, seed.frame)
        if not data:
            unanswered.append(seed.name)
            continue
        correlation_id, _ = decode_response(seed.api_key, seed.version, data[4:])
        assert correlation_id == int.from_bytes(seed.frame[8:12], "big"), seed.name
    # SASL requests on a PLAINTEXT listener are answered (ILLEGAL_SASL_STATE) like any other.
    assert not unanswered, f"closed without an answer: {unanswered}"
    assert fuzz_target.uncaught(fuzz_target.new_log()) == []
