"""InitProducerId (key 22), versions 0-5: producer ids for idempotent and transactional
producers.

Without a transactional id, as Kafka's ``TransactionCoordinator.handleInitProducerId``: every
request gets a FRESH producer id from ProducerIdManager (unique across restarts) with epoch 0,
whatever producer_id/producer_epoch it carries.  The KIP-360 epoch bump (v3+ with the current
id and epoch) belongs to the transactional path only, where the coordinator knows which id and
epoch it last issued for that transactional id; an idempotent producer bumps its epoch locally
(Java's ``TransactionManager.bumpIdempotentEpochAndResetIdIfNeeded``).  Handing a known id
back with "the next epoch" would give two producers the same (id, epoch): clients such as
@platformatic/kafka send {producer_id: 0, producer_epoch: 0} on their first request, and the
partitions would then take their first batches for retries of one another.

With a transactional id the transaction coordinator answers (samsa/broker/txn): the id's
producer id with its next epoch, fencing an older producer of the same id (an open transaction
of it is aborted and the caller told CONCURRENT_TRANSACTIONS, to retry).  WRITE on the
transactional id is checked before (samsa/broker/apis/authorization.py).

As ``KafkaApis.handleInitProducerIdRequest``: an id without an epoch (or an epoch without an
id) is INVALID_REQUEST; clients before v4 know INVALID_PRODUCER_EPOCH, not PRODUCER_FENCED.
"""

from __future__ import annotations

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.error_codes import code_for
from samsa.broker.apis.services import BrokerServices
from samsa.errors import (
    InvalidProducerEpochError,
    InvalidRequestError,
    KafkaError,
    ProducerFencedError,
)
from samsa.protocol import InitProducerIdResponse

NO_PRODUCER_ID = -1  # RecordBatch.NO_PRODUCER_ID
NO_PRODUCER_EPOCH = -1  # RecordBatch.NO_PRODUCER_EPOCH


def _error(code: int) -> InitProducerIdResponse:
    # InitProducerIdRequest.getErrorResponse: no id, no epoch.
    return InitProducerIdResponse(throttle_time_ms=0, error_code=code,
                                  producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH)


def handle_init_producer_id(services: BrokerServices,
                            ctx: RequestContext) -> InitProducerIdResponse:
    req = ctx.body
    # v0-2 have no such fields: the codec gives their defaults (-1, -1).
    if (req.producer_id == NO_PRODUCER_ID) != (req.producer_epoch == NO_PRODUCER_EPOCH):
        return _error(InvalidRequestError.code)
    if req.transactional_id is not None:
        result = services.transactions.init_producer_id(
            req.transactional_id, req.transaction_timeout_ms, req.producer_id,
            req.producer_epoch)
        if result.error == ProducerFencedError.code and ctx.api_version < 4:
            return _error(InvalidProducerEpochError.code)
        if result.error:
            return _error(result.error)
        return InitProducerIdResponse(throttle_time_ms=0, error_code=0,
                                      producer_id=result.producer_id,
                                      producer_epoch=result.producer_epoch)
    try:
        producer_id = services.producer_ids.generate()
    except KafkaError as exc:
        return _error(code_for(exc, "InitProducerId"))
    return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=producer_id,
                                  producer_epoch=0)
