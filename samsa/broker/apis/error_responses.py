"""The answer to a request whose handler raised: Kafka's ``AbstractRequest.getErrorResponse``.

Kafka's ``KafkaApis.handle`` catches whatever a handler throws and answers with the request's
error response (``RequestHandlerHelper.handleError``): the error code (UNKNOWN_SERVER_ERROR
for an unexpected exception, with no message so nothing internal leaks: ``ApiError``) in every
error field the response has -- each topic, partition, group or resource the request named,
and the top-level one where the version has it.  Only when there is no response to give
(Produce with acks=0) is the connection closed instead.

One builder per API key, each after its request class's ``getErrorResponse``; fields not
present in the request's version are dropped by the encoder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from samsa.protocol import (
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnResponse,
    AlterConfigsResponse,
    AlterUserScramCredentialsResponse,
    ApiKey,
    ApiVersionsResponse,
    CreateAclsResponse,
    CreatePartitionsResponse,
    CreateTopicsResponse,
    DeleteAclsResponse,
    DeleteGroupsResponse,
    DeleteRecordsResponse,
    DeleteTopicsResponse,
    DescribeAclsResponse,
    DescribeClusterResponse,
    DescribeConfigsResponse,
    DescribeGroupsResponse,
    DescribeLogDirsResponse,
    DescribeProducersResponse,
    DescribeTopicPartitionsResponse,
    DescribeTransactionsResponse,
    DescribeUserScramCredentialsResponse,
    EndTxnResponse,
    FetchResponse,
    FindCoordinatorResponse,
    HeartbeatResponse,
    IncrementalAlterConfigsResponse,
    InitProducerIdResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    ListGroupsResponse,
    ListOffsetsResponse,
    ListTransactionsResponse,
    MetadataResponse,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    OffsetForLeaderEpochResponse,
    ProduceResponse,
    SaslAuthenticateResponse,
    SaslHandshakeResponse,
    SyncGroupResponse,
    TxnOffsetCommitResponse,
)
from samsa.protocol.schema import ZERO_UUID

__all__ = ["error_response"]

INVALID_OFFSET = -1  # ProduceResponse.INVALID_OFFSET, ListOffsetsResponse.UNKNOWN_OFFSET
NO_TIMESTAMP = -1  # RecordBatch.NO_TIMESTAMP, ListOffsetsResponse.UNKNOWN_TIMESTAMP
UNKNOWN_GENERATION_ID = -1  # JoinGroupRequest.UNKNOWN_GENERATION_ID

Builder = Callable[[Any, int, int], Any]


def error_response(api_key: int, version: int, request: Any, code: int) -> Any | None:
    """The response carrying ``code`` for ``request``, or None when none is due (the caller
    closes the connection then, as Kafka's ``sendErrorOrCloseConnection`` does)."""
    build = _BUILDERS.get(api_key)
    return None if build is None else build(request, version, code)


def _produce(req: Any, version: int, code: int) -> Any:
    if req.acks == 0:
        return None  # ProduceRequest.getErrorResponse: the producer wants no response
    R = ProduceResponse
    return R(throttle_time_ms=0, responses=[
        R.TopicProduceResponse(name=t.name, partition_responses=[
            R.PartitionProduceResponse(index=p.index, error_code=code, base_offset=INVALID_OFFSET,
                                       log_append_time_ms=NO_TIMESTAMP,
                                       log_start_offset=INVALID_OFFSET, record_errors=[],
                                       error_message=None)
            for p in t.partition_data])
        for t in req.topic_data])


def _fetch(req: Any, version: int, code: int) -> Any:
    # FetchRequest.getErrorResponse: the top-level code (v7+) and, below v13, the same code in
    # every requested partition (older clients read only those).
    R = FetchResponse
    return R(throttle_time_ms=0, error_code=code, session_id=req.session_id, responses=[
        R.FetchableTopicResponse(topic=t.topic, topic_id=t.topic_id, partitions=[
            R.PartitionData(partition_index=p.partition, error_code=code, high_watermark=-1,
                            last_stable_offset=-1, log_start_offset=-1,
                            aborted_transactions=None, preferred_read_replica=-1, records=b"")
            for p in t.partitions])
        for t in req.topics] if version < 13 else [])


def _list_offsets(req: Any, version: int, code: int) -> Any:
    R = ListOffsetsResponse
    return R(throttle_time_ms=0, topics=[
        R.ListOffsetsTopicResponse(name=t.name, partitions=[
            R.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=code,
                                           old_style_offsets=[], timestamp=NO_TIMESTAMP,
                                           offset=INVALID_OFFSET)
            for p in t.partitions])
        for t in req.topics])


def _metadata(req: Any, version: int, code: int) -> Any:
    # MetadataRequest.getErrorResponse: each requested topic with the error, no brokers.
    R = MetadataResponse
    return R(throttle_time_ms=0, brokers=[], controller_id=-1, topics=[
        R.MetadataResponseTopic(error_code=code, name=t.name or "", topic_id=t.topic_id,
                                is_internal=False, partitions=[])
        for t in req.topics or []], error_code=code)


def _txn_offset_commit(req: Any, version: int, code: int) -> Any:
    R = TxnOffsetCommitResponse
    return R(throttle_time_ms=0, topics=[
        R.TxnOffsetCommitResponseTopic(name=t.name, partitions=[
            R.TxnOffsetCommitResponsePartition(partition_index=p.partition_index,
                                               error_code=code)
            for p in t.partitions])
        for t in req.topics])


def _offset_commit(req: Any, version: int, code: int) -> Any:
    R = OffsetCommitResponse
    return R(throttle_time_ms=0, topics=[
        R.OffsetCommitResponseTopic(name=t.name, partitions=[
            R.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
            for p in t.partitions])
        for t in req.topics])


def _offset_fetch(req: Any, version: int, code: int) -> Any:
    R = OffsetFetchResponse
    if version >= 8:
        return R(throttle_time_ms=0, groups=[
            R.OffsetFetchResponseGroup(group_id=g.group_id, topics=[], error_code=code)
            for g in req.groups])
    # v0-1 have no top-level code: each requested partition carries it (v2+ get both).
    return R(throttle_time_ms=0, error_code=code, topics=[
        R.OffsetFetchResponseTopic(name=t.name, partitions=[
            R.OffsetFetchResponsePartition(partition_index=p, committed_offset=INVALID_OFFSET,
                                           committed_leader_epoch=-1, metadata="",
                                           error_code=code)
            for p in t.partition_indexes])
        for t in req.topics or []] if version < 2 else [])


def _find_coordinator(req: Any, version: int, code: int) -> Any:
    R = FindCoordinatorResponse
    if version < 4:  # FindCoordinatorResponse.prepareOldResponse with Node.noNode()
        return R(throttle_time_ms=0, error_code=code, error_message=None, node_id=-1, host="",
                 port=-1)
    return R(throttle_time_ms=0, coordinators=[
        R.Coordinator(key=key, node_id=-1, host="", port=-1, error_code=code, error_message=None)
        for key in req.coordinator_keys])


def _join_group(req: Any, version: int, code: int) -> Any:
    return JoinGroupResponse(throttle_time_ms=0, error_code=code,
                             generation_id=UNKNOWN_GENERATION_ID, protocol_type=None,
                             protocol_name=None if version >= 7 else "", leader="",
                             member_id="", members=[])


def _top_level(response_class: Any) -> Builder:
    """Responses whose only error field is the top-level one."""
    def build(req: Any, version: int, code: int) -> Any:
        return response_class(throttle_time_ms=0, error_code=code)
    return build


def _describe_groups(req: Any, version: int, code: int) -> Any:
    R = DescribeGroupsResponse
    return R(throttle_time_ms=0, groups=[
        R.DescribedGroup(error_code=code, group_id=g, group_state="", protocol_type="",
                         protocol_data="", members=[])
        for g in req.groups])


def _create_topics(req: Any, version: int, code: int) -> Any:
    R = CreateTopicsResponse
    return R(throttle_time_ms=0, topics=[
        R.CreatableTopicResult(name=t.name, topic_id=ZERO_UUID, error_code=code,
                               error_message=None, num_partitions=-1, replication_factor=-1,
                               configs=[])
        for t in req.topics])


def _delete_topics(req: Any, version: int, code: int) -> Any:
    R = DeleteTopicsResponse
    if version >= 6:
        topics = [(t.name, t.topic_id) for t in req.topics]
    else:
        topics = [(name, ZERO_UUID) for name in req.topic_names]
    return R(throttle_time_ms=0, responses=[
        R.DeletableTopicResult(name=name, topic_id=topic_id, error_code=code, error_message=None)
        for name, topic_id in topics])


def _delete_records(req: Any, version: int, code: int) -> Any:
    R = DeleteRecordsResponse
    return R(throttle_time_ms=0, topics=[
        R.DeleteRecordsTopicResult(name=t.name, partitions=[
            R.DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=-1,
                                           error_code=code)
            for p in t.partitions])
        for t in req.topics])


def _add_partitions_to_txn(req: Any, version: int, code: int) -> Any:
    # AddPartitionsToTxnRequest.getErrorResponse: every partition (v0-3), else the top level.
    R = AddPartitionsToTxnResponse
    if version >= 4:
        return R(throttle_time_ms=0, error_code=code, results_by_transaction=[])
    return R(throttle_time_ms=0, results_by_topic_v3_and_below=[
        R.AddPartitionsToTxnTopicResult(name=t.name, results_by_partition=[
            R.AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=code)
            for p in t.partitions])
        for t in req.v3_and_below_topics])


def _describe_transactions(req: Any, version: int, code: int) -> Any:
    R = DescribeTransactionsResponse
    return R(throttle_time_ms=0, transaction_states=[
        R.TransactionState(error_code=code, transactional_id=i, transaction_state="",
                           transaction_timeout_ms=0, transaction_start_time_ms=-1,
                           producer_id=-1, producer_epoch=-1, topics=[])
        for i in req.transactional_ids])


def _init_producer_id(req: Any, version: int, code: int) -> Any:
    return InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=-1,
                                  producer_epoch=-1)


def _offset_for_leader_epoch(req: Any, version: int, code: int) -> Any:
    R = OffsetForLeaderEpochResponse
    return R(throttle_time_ms=0, topics=[
        R.OffsetForLeaderTopicResult(topic=t.topic, partitions=[
            R.EpochEndOffset(error_code=code, partition=p.partition, leader_epoch=-1,
                             end_offset=-1)
            for p in t.partitions])
        for t in req.topics])


def _describe_configs(req: Any, version: int, code: int) -> Any:
    R = DescribeConfigsResponse
    return R(throttle_time_ms=0, results=[
        R.DescribeConfigsResult(error_code=code, error_message=None,
                                resource_type=r.resource_type, resource_name=r.resource_name,
                                configs=[])
        for r in req.resources])


def _create_partitions(req: Any, version: int, code: int) -> Any:
    R = CreatePartitionsResponse
    return R(throttle_time_ms=0, results=[
        R.CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=None)
        for t in req.topics])


def _delete_groups(req: Any, version: int, code: int) -> Any:
    R = DeleteGroupsResponse
    return R(throttle_time_ms=0, results=[
        R.DeletableGroupResult(group_id=g, error_code=code) for g in req.groups_names])


def _describe_cluster(req: Any, version: int, code: int) -> Any:
    return DescribeClusterResponse(throttle_time_ms=0, error_code=code, error_message=None,
                                   endpoint_type=req.endpoint_type, brokers=[])


def _alter_configs(response_class: Any) -> Builder:
    def build(req: Any, version: int, code: int) -> Any:
        R = response_class
        return R(throttle_time_ms=0, responses=[
            R.AlterConfigsResourceResponse(error_code=code, error_message=None,
                                           resource_type=r.resource_type,
                                           resource_name=r.resource_name)
            for r in req.resources])
    return build


def _describe_log_dirs(req: Any, version: int, code: int) -> Any:
    # DescribeLogDirsRequest.getErrorResponse: the top-level code only (v3+), no results.
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=code, results=[])


def _offset_delete(req: Any, version: int, code: int) -> Any:
    return OffsetDeleteResponse(error_code=code, throttle_time_ms=0, topics=[])


def _describe_producers(req: Any, version: int, code: int) -> Any:
    R = DescribeProducersResponse
    return R(throttle_time_ms=0, topics=[
        R.TopicResponse(name=t.name, partitions=[
            R.PartitionResponse(partition_index=p, error_code=code, error_message=None,
                                active_producers=[])
            for p in t.partition_indexes])
        for t in req.topics])


def _describe_user_scram_credentials(req: Any, version: int, code: int) -> Any:
    # DescribeUserScramCredentialsRequest.getErrorResponse: the top-level code, and one result
    # (with no user name) per user asked about.
    R = DescribeUserScramCredentialsResponse
    return R(throttle_time_ms=0, error_code=code, error_message=None, results=[
        R.DescribeUserScramCredentialsResult(user="", error_code=code, error_message=None,
                                             credential_infos=[])
        for _ in req.users or ()])


def _alter_user_scram_credentials(req: Any, version: int, code: int) -> Any:
    # AlterUserScramCredentialsRequest.getErrorResponse: every user named, once, sorted.
    R = AlterUserScramCredentialsResponse
    users = sorted({d.name for d in req.deletions} | {u.name for u in req.upsertions})
    return R(throttle_time_ms=0, results=[
        R.AlterUserScramCredentialsResult(user=u, error_code=code, error_message=None) for u in users])


def _describe_topic_partitions(req: Any, version: int, code: int) -> Any:
    R = DescribeTopicPartitionsResponse
    return R(throttle_time_ms=0, topics=[
        R.DescribeTopicPartitionsResponseTopic(error_code=code, name=t.name, topic_id=ZERO_UUID,
                                               is_internal=False, partitions=[])
        for t in req.topics], next_cursor=None)


_BUILDERS: dict[int, Builder] = {int(key): build for key, build in {
    ApiKey.PRODUCE: _produce,
    ApiKey.FETCH: _fetch,
    ApiKey.LIST_OFFSETS: _list_offsets,
    ApiKey.METADATA: _metadata,
    ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.TXN_OFFSET_COMMIT: _txn_offset_commit,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.JOIN_GROUP: _join_group,
    ApiKey.HEARTBEAT: _top_level(HeartbeatResponse),
    ApiKey.LEAVE_GROUP: _top_level(LeaveGroupResponse),
    ApiKey.SYNC_GROUP: _top_level(SyncGroupResponse),
    ApiKey.DESCRIBE_GROUPS: _describe_groups,
    ApiKey.LIST_GROUPS: _top_level(ListGroupsResponse),
    ApiKey.API_VERSIONS: _top_level(ApiVersionsResponse),
    ApiKey.CREATE_TOPICS: _create_topics,
    ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.DELETE_RECORDS: _delete_records,
    ApiKey.INIT_PRODUCER_ID: _init_producer_id,
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: _top_level(AddOffsetsToTxnResponse),
    ApiKey.END_TXN: lambda req, version, code: EndTxnResponse(
        throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1),
    ApiKey.DESCRIBE_TRANSACTIONS: _describe_transactions,
    ApiKey.LIST_TRANSACTIONS: lambda req, version, code: ListTransactionsResponse(
        throttle_time_ms=0, error_code=code, unknown_state_filters=[], transaction_states=[]),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _offset_for_leader_epoch,
    ApiKey.DESCRIBE_CONFIGS: _describe_configs,
    ApiKey.CREATE_PARTITIONS: _create_partitions,
    ApiKey.DELETE_GROUPS: _delete_groups,
    ApiKey.DESCRIBE_CLUSTER: _describe_cluster,
    ApiKey.ALTER_CONFIGS: _alter_configs(AlterConfigsResponse),
    ApiKey.DESCRIBE_LOG_DIRS: _describe_log_dirs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _alter_configs(IncrementalAlterConfigsResponse),
    ApiKey.OFFSET_DELETE: _offset_delete,
    ApiKey.DESCRIBE_PRODUCERS: _describe_producers,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: _describe_topic_partitions,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: _describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _alter_user_scram_credentials,
    ApiKey.DESCRIBE_ACLS: lambda req, version, code: DescribeAclsResponse(
        throttle_time_ms=0, error_code=code, error_message=None, resources=[]),
    ApiKey.CREATE_ACLS: lambda req, version, code: CreateAclsResponse(
        throttle_time_ms=0, results=[CreateAclsResponse.AclCreationResult(
            error_code=code, error_message=None) for _ in req.creations]),
    ApiKey.DELETE_ACLS: lambda req, version, code: DeleteAclsResponse(
        throttle_time_ms=0, filter_results=[DeleteAclsResponse.DeleteAclsFilterResult(
            error_code=code, error_message=None, matching_acls=[]) for _ in req.filters]),
    ApiKey.SASL_HANDSHAKE: lambda req, version, code: SaslHandshakeResponse(
        error_code=code, mechanisms=[]),
    ApiKey.SASL_AUTHENTICATE: lambda req, version, code: SaslAuthenticateResponse(
        error_code=code, error_message=None, auth_bytes=b"", session_lifetime_ms=0),
}.items()}
