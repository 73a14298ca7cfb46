"""AddOffsetsToTxn (key 25), versions 0-4: the consumer group's offsets join a transaction.

As Kafka's ``KafkaApis.handleAddOffsetsToTxnRequest``: WRITE on the transactional id, READ on
the group (GROUP_AUTHORIZATION_FAILED), then the group's ``__consumer_offsets`` partition is
added to the transaction as AddPartitionsToTxn would add it; EndTxn then writes its marker
through the group coordinator, which commits or drops the offsets TxnOffsetCommit left
pending.  Before v2 a fenced producer is told INVALID_PRODUCER_EPOCH.
"""

from __future__ import annotations

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.services import BrokerServices
from samsa.broker.apis.topic_names import GROUP_METADATA_TOPIC
from samsa.errors import (
    GroupAuthorizationFailedError,
    InvalidProducerEpochError,
    ProducerFencedError,
    TransactionalIdAuthorizationFailedError,
)
from samsa.protocol import AddOffsetsToTxnResponse
from samsa.security.acl import AclOperation, ResourceType


def handle_add_offsets_to_txn(services: BrokerServices,
                              ctx: RequestContext) -> AddOffsetsToTxnResponse:
    req = ctx.body
    if not services.authorized(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                               req.transactional_id):
        code = TransactionalIdAuthorizationFailedError.code
    elif not services.authorized(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
        code = GroupAuthorizationFailedError.code
    else:
        partition = services.groups.partition_for(req.group_id)
        code = services.transactions.add_partitions(
            req.transactional_id, req.producer_id, req.producer_epoch,
            [(GROUP_METADATA_TOPIC, partition)])
        if code == ProducerFencedError.code and ctx.api_version < 2:
            code = InvalidProducerEpochError.code
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=code)
