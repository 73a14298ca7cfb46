"""EndTxn (key 26), versions 0-5: commit or abort a producer's transaction.

As Kafka's ``KafkaApis.handleEndTxnRequest``: WRITE on the transactional id, then the
transaction coordinator decides (samsa/broker/txn/coordinator.py); the answer comes once
PREPARE_COMMIT/PREPARE_ABORT is durable, the markers follow.  v5 is KIP-890 part 2: the epoch
is bumped with every transaction and the response carries the producer id and epoch to go on
with.  Before v2 a fenced producer is told INVALID_PRODUCER_EPOCH.
"""

from __future__ import annotations

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.services import BrokerServices
from samsa.errors import (
    InvalidProducerEpochError,
    ProducerFencedError,
    TransactionalIdAuthorizationFailedError,
)
from samsa.protocol import EndTxnResponse
from samsa.security.acl import AclOperation, ResourceType

TV2_VERSION = 5  # EndTxn versions from here on mean a KIP-890 part 2 client


def handle_end_txn(services: BrokerServices, ctx: RequestContext) -> EndTxnResponse:
    req = ctx.body
    if not services.authorized(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                               req.transactional_id):
        return EndTxnResponse(throttle_time_ms=0,
                              error_code=TransactionalIdAuthorizationFailedError.code)
    result = services.transactions.end_transaction(
        req.transactional_id, req.producer_id, req.producer_epoch, req.committed,
        client_tv2=ctx.api_version >= TV2_VERSION)
    code = result.error
    if code == ProducerFencedError.code and ctx.api_version < 2:
        code = InvalidProducerEpochError.code
    return EndTxnResponse(throttle_time_ms=0, error_code=code, producer_id=result.producer_id,
                          producer_epoch=result.producer_epoch)
