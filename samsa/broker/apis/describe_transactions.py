"""DescribeTransactions (key 65), version 0 (KIP-664): the state of transactional ids.

As Kafka's ``KafkaApis.handleDescribeTransactionsRequest``: an id the principal may not
DESCRIBE gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED; an unknown one TRANSACTIONAL_ID_NOT_FOUND;
only partitions of topics the principal may DESCRIBE are listed.
"""

from __future__ import annotations

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.services import BrokerServices
from samsa.errors import TransactionalIdAuthorizationFailedError
from samsa.protocol import DescribeTransactionsResponse
from samsa.security.acl import AclOperation, ResourceType

R = DescribeTransactionsResponse


def handle_describe_transactions(services: BrokerServices,
                                 ctx: RequestContext) -> DescribeTransactionsResponse:
    states = []
    for transactional_id in ctx.body.transactional_ids:
        if not services.authorized(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                   transactional_id):
            states.append(R.TransactionState(
                error_code=TransactionalIdAuthorizationFailedError.code,
                transactional_id=transactional_id, transaction_state="",
                transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1,
                producer_epoch=-1, topics=[]))
            continue
        d = services.transactions.describe(transactional_id)
        visible = services.authorized_topics(ctx, AclOperation.DESCRIBE,
                                             {t for t, _ in d.partitions})
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(d.partitions):
            if topic in visible:
                by_topic.setdefault(topic, []).append(partition)
        states.append(R.TransactionState(
            error_code=d.error, transactional_id=transactional_id, transaction_state=d.state,
            transaction_timeout_ms=d.timeout_ms, transaction_start_time_ms=d.start_time_ms,
            producer_id=d.producer_id, producer_epoch=d.producer_epoch,
            topics=[R.TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()]))
    return R(throttle_time_ms=0, transaction_states=states)
