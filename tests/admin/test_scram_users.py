"""samsa's AdminClient manages SCRAM users (KIP-554) on the samsa broker; confluent-kafka reads
what it wrote, and the stored credential admits the password in a SCRAM exchange."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka.admin import AdminClient as ConfluentAdmin

from samsa.admin import (
    AdminClient,
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
)
from samsa.admin.scram import parse_describe
from samsa.broker import Broker
from samsa.broker.scram_credentials import ScramCredentialStore
from samsa.errors import (
    ClusterAuthorizationFailedError,
    ResourceNotFoundError,
    UnacceptableCredentialError,
)
from samsa.protocol import DescribeUserScramCredentialsResponse
from samsa.security.scram import SCRAM_SHA_512, ScramClient, ScramServer


def test_add_describe_and_delete_users_as_confluent_kafka_sees_them(make_broker: Callable[..., Broker]) -> None:
    broker = make_broker()
    with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        upsertion = UserScramCredentialUpsertion("alice", "SCRAM-SHA-512", "alice-secret", iterations=8192)
        assert "alice-secret" not in repr(upsertion)
        assert admin.alter_user_scram_credentials([
            upsertion, UserScramCredentialUpsertion("bob", "scram_sha_256", "bob-secret")]) == {
                "alice": None, "bob": None}
        assert admin.describe_user_scram_credentials() == {
            "alice": UserScramCredentialsDescription("alice", [ScramCredentialInfo("SCRAM-SHA-512", 8192)]),
            "bob": UserScramCredentialsDescription("bob", [ScramCredentialInfo("SCRAM-SHA-256", 4096)]),
        }
        confluent = ConfluentAdmin({"bootstrap.servers": broker.bootstrap_servers})
        theirs = confluent.describe_user_scram_credentials().result(timeout=30)
        assert {u: [(i.mechanism.name, i.iterations) for i in d.scram_credential_infos] for u, d in theirs.items()} == {
            "alice": [("SCRAM_SHA_512", 8192)], "bob": [("SCRAM_SHA_256", 4096)]}

        store = ScramCredentialStore(broker.data_dir)
        server = ScramServer(SCRAM_SHA_512, lambda name: store.get(name, SCRAM_SHA_512))
        client = ScramClient(SCRAM_SHA_512, "alice", "alice-secret")
        client.verify_server_final(server.server_final(client.final_message(server.server_first(client.first_message()))))

        assert admin.alter_user_scram_credentials([UserScramCredentialDeletion("bob", "SCRAM-SHA-256")]) == {"bob": None}
        with pytest.raises(ResourceNotFoundError, match="does not exist: bob"):
            admin.describe_user_scram_credentials(["alice", "bob"])
        found = admin.describe_user_scram_credentials(["alice", "bob"], raise_errors=False)
        assert isinstance(found["bob"], ResourceNotFoundError) and found["alice"] == UserScramCredentialsDescription(
            "alice", [ScramCredentialInfo("SCRAM-SHA-512", 8192)])
        with pytest.raises(UnacceptableCredentialError, match="Too few iterations"):
            admin.alter_user_scram_credentials([UserScramCredentialUpsertion("carol", "SCRAM-SHA-256", "x", 100)])


def test_an_unknown_mechanism_is_refused_before_anything_is_sent(make_broker: Callable[..., Broker]) -> None:
    broker = make_broker()
    with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        with pytest.raises(ValueError, match="unknown SCRAM mechanism 'SCRAM-SHA-1'; use SCRAM-SHA-256 or SCRAM-SHA-512"):
            admin.alter_user_scram_credentials([UserScramCredentialUpsertion("dan", "SCRAM-SHA-1", "x")])
        assert admin.describe_user_scram_credentials() == {}


def test_a_refused_describe_raises_the_brokers_error() -> None:
    # A top-level error (CLUSTER_AUTHORIZATION_FAILED once ACLs run) fails the whole call.
    response = DescribeUserScramCredentialsResponse(throttle_time_ms=0, error_code=31, error_message="denied",
                                                    results=[])
    with pytest.raises(ClusterAuthorizationFailedError, match="denied"):
        parse_describe(response)
