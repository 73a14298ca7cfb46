"""ListTransactions (key 66), versions 0-1 (KIP-664, KIP-994): the transactional ids this
coordinator knows, filtered by state names, producer ids and (v1) how long the transaction
has been running.  State names that are not states come back in ``unknown_state_filters``;
ids the principal may not DESCRIBE are left out (KafkaApis.handleListTransactionsRequest).
"""

from __future__ import annotations

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.services import BrokerServices
from samsa.protocol import ListTransactionsResponse
from samsa.security.acl import AclOperation, ResourceType

R = ListTransactionsResponse


def handle_list_transactions(services: BrokerServices,
                             ctx: RequestContext) -> ListTransactionsResponse:
    req = ctx.body
    listed, unknown = services.transactions.list_transactions(
        req.state_filters, req.producer_id_filters, req.duration_filter)
    return R(throttle_time_ms=0, error_code=0, unknown_state_filters=unknown,
             transaction_states=[
                 R.TransactionState(transactional_id=t.transactional_id,
                                    producer_id=t.producer_id, transaction_state=t.state)
                 for t in listed
                 if services.authorized(ctx, AclOperation.DESCRIBE,
                                        ResourceType.TRANSACTIONAL_ID, t.transactional_id)])
