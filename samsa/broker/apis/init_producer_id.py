"""InitProducerId (key 22), versions 0-5: producer ids for idempotent producers.

Ids come from ProducerIdManager (unique across restarts).  KIP-360 (v3+): a producer that hit
an unrecoverable sequence error passes its current id and epoch and gets the same id with the
next epoch (a fresh id once the epoch would overflow); the partitions then accept sequence 0
from it again.  Kafka itself hands idempotent producers a fresh id here, which clients accept
just the same.

Transactions are not implemented yet: a transactional.id is refused with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which Java and librdkafka treat as fatal at once (a
retriable error would leave them retrying until their timeout).
"""

from __future__ import annotations

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.error_codes import code_for
from samsa.broker.apis.services import BrokerServices
from samsa.errors import KafkaError, TransactionalIdAuthorizationFailedError
from samsa.protocol import InitProducerIdResponse

MAX_EPOCH = 32767  # Short.MAX_VALUE; Kafka never hands it out (it marks "no epoch" on the wire)


def handle_init_producer_id(services: BrokerServices,
                            ctx: RequestContext) -> InitProducerIdResponse:
    req = ctx.body
    if req.transactional_id is not None:
        return InitProducerIdResponse(
            throttle_time_ms=0, error_code=TransactionalIdAuthorizationFailedError.code,
            producer_id=-1, producer_epoch=-1)
    version = ctx.header.request_api_version
    try:
        if (version >= 3 and req.producer_id >= 0 and req.producer_epoch >= 0
                and req.producer_epoch + 1 < MAX_EPOCH
                and services.producer_ids.was_allocated(req.producer_id)):
            producer_id, epoch = req.producer_id, req.producer_epoch + 1
        else:
            producer_id, epoch = services.producer_ids.generate(), 0
    except KafkaError as exc:
        return InitProducerIdResponse(throttle_time_ms=0,
                                      error_code=code_for(exc, "InitProducerId"),
                                      producer_id=-1, producer_epoch=-1)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=producer_id,
                                  producer_epoch=epoch)
