"""samsa's AdminClient manages ACLs (Java's Admin.createAcls, describeAcls, deleteAcls) on the
samsa broker with Kafka's StandardAuthorizer configured; confluent-kafka reads what it wrote."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AclBinding as ConfluentBinding
from confluent_kafka.admin import AclBindingFilter as ConfluentFilter
from confluent_kafka.admin import AclOperation as ConfluentOperation
from confluent_kafka.admin import AclPermissionType as ConfluentPermission
from confluent_kafka.admin import AdminClient as ConfluentAdmin
from confluent_kafka.admin import ResourcePatternType as ConfluentPatternType
from confluent_kafka.admin import ResourceType as ConfluentResourceType

from samsa.admin import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    PatternType,
    ResourceType,
)
from samsa.admin.acls import (
    describe_request,
    min_version,
    parse_create,
    parse_delete,
    parse_describe,
)
from samsa.broker import Broker
from samsa.errors import (
    ClusterAuthorizationFailedError,
    InvalidRequestError,
    KafkaError,
    SecurityDisabledError,
    UnknownServerError,
    UnsupportedVersionError,
)
from samsa.protocol import ApiKey, CreateAclsResponse, DeleteAclsResponse, DescribeAclsResponse
from tests.admin.conftest import FaultyApis
from tests.support.broker import start_broker
from tests.support.mock_cluster import MockCluster

# The client is User:ANONYMOUS on the PLAINTEXT listener; with no ACL on the cluster it may
# manage ACLs (allow.everyone.if.no.acl.found).
ACL_BROKER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "allow.everyone.if.no.acl.found": "true"}

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation
EMPTY_NAME = "Invalid empty resource name|Resource name should not be empty"


def acl(rtype: ResourceType, name: str, pattern: PatternType = LIT, principal: str = "User:alice",
        op: AclOperation = Op.READ, permission: AclPermissionType = ALLOW, host: str = "*") -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, permission)


ALICE_READS_ORDERS = acl(T, "orders")
ALICE_READS_PREFIX = acl(T, "ord", PRE)
EVERYONE_READS_ALL = acl(T, "*", principal="User:*", op=Op.DESCRIBE)
BOB_DENIED_WRITE = acl(T, "orders", principal="User:bob", op=Op.WRITE, permission=DENY, host="10.0.0.1")
ALICE_IN_GROUP = acl(G, "billing")
SET = [ALICE_READS_ORDERS, ALICE_READS_PREFIX, EVERYONE_READS_ALL, BOB_DENIED_WRITE, ALICE_IN_GROUP]


def described(admin: AdminClient, acl_filter: AclBindingFilter | None = None) -> set[AclBinding]:
    """The ACLs described, as a set: the broker groups them by resource, in no promised order."""
    found = admin.describe_acls() if acl_filter is None else admin.describe_acls(acl_filter)
    assert len(set(found)) == len(found), found
    return set(found)


@pytest.fixture
def acl_broker(make_broker: Callable[..., Broker]) -> Broker:
    return make_broker(ACL_BROKER, apis_factory=FaultyApis)


@pytest.fixture
def admin(acl_broker: Broker) -> Any:
    with AdminClient(bootstrap_servers=acl_broker.bootstrap_servers) as client:
        yield client


def test_create_describe_with_filters_and_delete(acl_broker: Broker, admin: AdminClient) -> None:
    assert admin.create_acls(SET) == dict.fromkeys(SET)
    assert described(admin) == set(SET)  # the default filter selects everything
    # The highest version both sides have (samsa's broker and codec: 3).
    apis = acl_broker.apis
    assert isinstance(apis, FaultyApis)
    assert apis.versions(ApiKey.CREATE_ACLS) == [3] and apis.versions(ApiKey.DESCRIBE_ACLS) == [3]

    assert described(admin, AclBindingFilter(principal="User:bob")) == {BOB_DENIED_WRITE}
    assert described(admin, AclBindingFilter(G)) == {ALICE_IN_GROUP}
    assert described(admin, AclBindingFilter(host="10.0.0.1", permission=DENY)) == {BOB_DENIED_WRITE}
    assert described(admin, AclBindingFilter(operation=Op.DESCRIBE)) == {EVERYONE_READS_ALL}
    # ANY: any pattern type with exactly that name; LITERAL / PREFIXED: that type only.
    assert described(admin, AclBindingFilter(T, "orders")) == {ALICE_READS_ORDERS, BOB_DENIED_WRITE}
    assert described(admin, AclBindingFilter(T, "ord", PRE)) == {ALICE_READS_PREFIX}
    assert described(admin, AclBindingFilter(T, None, PRE)) == {ALICE_READS_PREFIX}
    assert described(admin, AclBindingFilter(T, "ord", LIT)) == set()
    # MATCH: every ACL that applies to the topic "orders": its literal name, "*" and "ord*".
    assert described(admin, AclBindingFilter(T, "orders", PatternType.MATCH)) == {
        ALICE_READS_ORDERS, ALICE_READS_PREFIX, EVERYONE_READS_ALL, BOB_DENIED_WRITE}
    assert described(admin, AclBindingFilter(T, "other", PatternType.MATCH)) == {EVERYONE_READS_ALL}

    deleted = admin.delete_acls([AclBindingFilter(T, "orders", LIT), AclBindingFilter(G, "nothing-here")])
    assert {f: set(d) for f, d in deleted.items()} == {  # type: ignore[arg-type]
        AclBindingFilter(T, "orders", LIT): {ALICE_READS_ORDERS, BOB_DENIED_WRITE},
        AclBindingFilter(G, "nothing-here"): set()}
    assert described(admin) == {ALICE_READS_PREFIX, EVERYONE_READS_ALL, ALICE_IN_GROUP}
    rest = admin.delete_acls([AclBindingFilter()])[AclBindingFilter()]
    assert set(rest) == {ALICE_READS_PREFIX, EVERYONE_READS_ALL, ALICE_IN_GROUP}  # type: ignore[arg-type]
    assert described(admin) == set()


def test_creating_an_existing_acl_succeeds_and_stores_it_once(admin: AdminClient) -> None:
    assert admin.create_acls([ALICE_READS_ORDERS, ALICE_READS_ORDERS]) == {ALICE_READS_ORDERS: None}
    assert admin.create_acls([ALICE_READS_ORDERS, ALICE_IN_GROUP]) == {ALICE_READS_ORDERS: None,
                                                                        ALICE_IN_GROUP: None}
    assert described(admin) == {ALICE_READS_ORDERS, ALICE_IN_GROUP}


def test_an_invalid_binding_fails_alone_with_the_reason(admin: AdminClient) -> None:
    empty_name = acl(T, "")
    no_colon = acl(T, "orders", principal="alice")
    cluster_misnamed = acl(C, "my-cluster", op=Op.ALTER)
    any_type = acl(ResourceType.ANY, "orders")  # refused before sending, as Java's createAcls
    match_pattern = acl(T, "orders", PatternType.MATCH)
    bindings = [ALICE_READS_ORDERS, empty_name, no_colon, cluster_misnamed, any_type, match_pattern]

    results = admin.create_acls(bindings, raise_errors=False)
    assert results[ALICE_READS_ORDERS] is None
    failed = {b: r for b, r in results.items() if r is not None}
    assert list(failed) == bindings[1:]
    assert all(isinstance(e, InvalidRequestError) for e in failed.values())
    # The broker's own words (Kafka's AclApis says "Invalid empty resource name").
    assert re.fullmatch(r"INVALID_REQUEST \(error code 42\): (Invalid empty resource name|Resource name should not "
                        r"be empty)", str(failed[empty_name]))
    assert "Could not parse principal from `alice`" in str(failed[no_colon])
    assert "The only valid name for the CLUSTER resource is kafka-cluster" in str(failed[cluster_misnamed])
    assert "Resource type is ANY" in str(failed[any_type])
    assert "Resource pattern type is MATCH" in str(failed[match_pattern])
    assert described(admin) == {ALICE_READS_ORDERS}

    # raise_errors (the default): the first failure is raised, carrying all of them.
    with pytest.raises(InvalidRequestError, match=EMPTY_NAME) as raised:
        admin.create_acls([ALICE_IN_GROUP, empty_name, no_colon])
    assert set(raised.value.errors) == {empty_name, no_colon}  # type: ignore[attr-defined]
    assert raised.value.results == {ALICE_IN_GROUP: None}  # type: ignore[attr-defined]
    assert described(admin, AclBindingFilter(G)) == {ALICE_IN_GROUP}


def test_unknown_filter_fields_are_refused(admin: AdminClient) -> None:
    unknown = AclBindingFilter(operation=Op.UNKNOWN)
    with pytest.raises(InvalidRequestError, match="Unknown entryFilter"):
        admin.describe_acls(unknown)  # refused here, as Java's describeAcls
    found = admin.delete_acls([unknown, AclBindingFilter()], raise_errors=False)
    assert isinstance(found[unknown], InvalidRequestError)  # the broker's answer for that filter
    assert found[AclBindingFilter()] == []


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(make_broker: Callable[..., Broker]) -> None:
    broker = make_broker()
    with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        with pytest.raises(SecurityDisabledError, match="No Authorizer is configured"):
            admin.create_acls([ALICE_READS_ORDERS])
        with pytest.raises(SecurityDisabledError):
            admin.describe_acls()
        found = admin.delete_acls([AclBindingFilter()], raise_errors=False)
        assert isinstance(found[AclBindingFilter()], SecurityDisabledError)


def test_an_acl_on_the_cluster_takes_acl_management_away_from_everyone_else(admin: AdminClient) -> None:
    # Once an ACL names the cluster, allow.everyone.if.no.acl.found no longer lets anonymous in.
    admin_alice = acl(C, CLUSTER_NAME, op=Op.ALTER)
    assert admin.create_acls([admin_alice]) == {admin_alice: None}
    with pytest.raises(ClusterAuthorizationFailedError):
        admin.describe_acls()
    with pytest.raises(ClusterAuthorizationFailedError):
        admin.create_acls([ALICE_READS_ORDERS])
    with pytest.raises(ClusterAuthorizationFailedError):
        admin.delete_acls([AclBindingFilter()])


def test_super_users_manage_acls_whatever_the_acls_say(make_broker: Callable[..., Broker]) -> None:
    broker = make_broker({**ACL_BROKER, "allow.everyone.if.no.acl.found": False,
                          "super.users": "User:admin;User:ANONYMOUS"})
    deny_all = acl(C, CLUSTER_NAME, principal="User:*", op=Op.ALL, permission=DENY)
    with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        assert admin.create_acls([deny_all]) == {deny_all: None}
        assert described(admin) == {deny_all}


def test_acls_survive_a_restart(tmp_path: Path) -> None:
    with start_broker(tmp_path / "data", ACL_BROKER) as broker, \
            AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        admin.create_acls(SET)
        admin.delete_acls([AclBindingFilter(G)])
    with start_broker(tmp_path / "data", ACL_BROKER) as broker, \
            AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        assert described(admin) == set(SET[:-1])


def test_confluent_kafka_reads_back_what_samsa_created_and_the_other_way(acl_broker: Broker, admin: AdminClient) -> None:
    admin.create_acls(SET)
    confluent = ConfluentAdmin({"bootstrap.servers": acl_broker.bootstrap_servers})
    theirs = confluent.describe_acls(ConfluentFilter(
        ConfluentResourceType.ANY, None, ConfluentPatternType.ANY, None, None,
        ConfluentOperation.ANY, ConfluentPermission.ANY)).result(timeout=30)
    assert sorted((b.restype.name, b.name, b.resource_pattern_type.name, b.principal, b.host,
                   b.operation.name, b.permission_type.name) for b in theirs) == sorted(
        (b.resource_type.name, b.resource_name, b.pattern_type.name, b.principal, b.host,
         b.operation.name, b.permission.name) for b in SET)
    prefixed = confluent.describe_acls(ConfluentFilter(
        ConfluentResourceType.TOPIC, "orders", ConfluentPatternType.MATCH, "User:alice", None,
        ConfluentOperation.ANY, ConfluentPermission.ALLOW)).result(timeout=30)
    assert sorted((b.name, b.resource_pattern_type.name) for b in prefixed) == [
        ("ord", "PREFIXED"), ("orders", "LITERAL")]

    # And the other way: what confluent-kafka creates, samsa reads.
    carol = ConfluentBinding(ConfluentResourceType.GROUP, "audit", ConfluentPatternType.PREFIXED, "User:carol",
                             "192.168.0.7", ConfluentOperation.DESCRIBE, ConfluentPermission.DENY)
    for future in confluent.create_acls([carol]).values():
        future.result(timeout=30)
    assert described(admin, AclBindingFilter(principal="User:carol")) == {
        acl(G, "audit", PRE, "User:carol", Op.DESCRIBE, DENY, "192.168.0.7")}


def test_a_broker_without_the_acl_apis_is_named() -> None:
    # librdkafka's mock cluster serves none of DescribeAcls, CreateAcls and DeleteAcls.
    with MockCluster(1) as cluster, AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        with pytest.raises(UnsupportedVersionError, match="describing ACLs is not supported by this broker"):
            admin.describe_acls()
        with pytest.raises(UnsupportedVersionError, match="the broker does not support CreateAcls"):
            admin.create_acls([ALICE_READS_ORDERS])
        with pytest.raises(UnsupportedVersionError, match="deleting ACLs is not supported"):
            admin.delete_acls([AclBindingFilter()])


# -- requests and answers (no broker) ------------------------------------------------------------


def test_a_refused_describe_raises_the_brokers_error() -> None:
    response = DescribeAclsResponse(throttle_time_ms=0, error_code=31, error_message="denied", resources=[])
    with pytest.raises(ClusterAuthorizationFailedError, match="denied"):
        parse_describe(response)


def test_unknown_codes_read_as_unknown() -> None:
    R = DescribeAclsResponse
    response = R(throttle_time_ms=0, error_code=0, error_message=None, resources=[R.DescribeAclsResource(
        resource_type=99, resource_name="x", pattern_type=3,
        acls=[R.AclDescription(principal="User:a", host="*", operation=99, permission_type=3)])])
    assert parse_describe(response) == [acl(ResourceType.UNKNOWN, "x", principal="User:a", op=Op.UNKNOWN)]


def test_answers_that_do_not_fit_the_request_are_errors() -> None:
    with pytest.raises(UnknownServerError, match="answered 0 results for 1 ACL creations"):
        parse_create(CreateAclsResponse(throttle_time_ms=0, results=[]), [ALICE_READS_ORDERS])
    R = DeleteAclsResponse
    matching = [R.DeleteAclsMatchingAcl(error_code=0, error_message=None, resource_type=2, resource_name="orders",
                                        pattern_type=3, principal="User:alice", host="*", operation=3,
                                        permission_type=3),
                R.DeleteAclsMatchingAcl(error_code=31, error_message="not yours", resource_type=3,
                                        resource_name="billing", pattern_type=3, principal="User:alice", host="*",
                                        operation=3, permission_type=3)]
    everything = AclBindingFilter()
    found = parse_delete(R(throttle_time_ms=0, filter_results=[
        R.DeleteAclsFilterResult(error_code=0, error_message=None, matching_acls=matching)]), [everything])
    error = found[everything]
    assert isinstance(error, ClusterAuthorizationFailedError) and isinstance(error, KafkaError)
    assert "deleting ACL not yours: (pattern=ResourcePattern(resourceType=GROUP, name=billing" in str(error)


def test_version_0_knows_only_literal_names() -> None:
    assert min_version([LIT, PatternType.ANY]) == 0  # v0 reads ANY as LITERAL, as Java does
    assert min_version([LIT, PRE]) == 1 and min_version([PatternType.MATCH]) == 1
    assert describe_request(0, AclBindingFilter()).pattern_type_filter == LIT
    assert describe_request(1, AclBindingFilter()).pattern_type_filter == PatternType.ANY
