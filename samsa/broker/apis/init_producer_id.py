"""InitProducerId (key 22), versions 0-5: producer ids for idempotent producers.

As Kafka's ``TransactionCoordinator.handleInitProducerId``: without a transactional id every
request gets a FRESH producer id from ProducerIdManager (unique across restarts) with epoch 0,
whatever producer_id/producer_epoch it carries.  The KIP-360 epoch bump (v3+ with the current
id and epoch) belongs to the transactional path only, where the coordinator knows which id and
epoch it last issued for that transactional id; an idempotent producer bumps its epoch locally
(Java's ``TransactionManager.bumpIdempotentEpochAndResetIdIfNeeded``).  Handing a known id
back with "the next epoch" would give two producers the same (id, epoch): clients such as
@platformatic/kafka send {producer_id: 0, producer_epoch: 0} on their first request, and the
partitions would then take their first batches for retries of one another.

As ``KafkaApis.handleInitProducerIdRequest``: an id without an epoch (or an epoch without an
id) is INVALID_REQUEST.

Transactions are not implemented yet: a transactional.id is refused with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED (checked first, as Kafka authorises it first), which Java
and librdkafka treat as fatal at once (a retriable error would leave them retrying until their
timeout).
"""

from __future__ import annotations

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.error_codes import code_for
from samsa.broker.apis.services import BrokerServices
from samsa.errors import (
    InvalidRequestError,
    KafkaError,
    TransactionalIdAuthorizationFailedError,
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
    if req.transactional_id is not None:
        return _error(TransactionalIdAuthorizationFailedError.code)
    # v0-2 have no such fields: the codec gives their defaults (-1, -1).
    if (req.producer_id == NO_PRODUCER_ID) != (req.producer_epoch == NO_PRODUCER_EPOCH):
        return _error(InvalidRequestError.code)
    try:
        producer_id = services.producer_ids.generate()
    except KafkaError as exc:
        return _error(code_for(exc, "InitProducerId"))
    return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=producer_id,
                                  producer_epoch=0)
