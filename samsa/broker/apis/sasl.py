"""SaslHandshake (17) and SaslAuthenticate (36) that reach the handlers.

On a SASL listener the network layer authenticates a connection before any request reaches
KafkaApis (samsa/broker/network/authenticator.py), so these two arrive here only on a listener
without SASL, or after authentication: Kafka's KafkaApis answers both ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from samsa.broker.apis.services import BrokerServices
from samsa.broker.request_channel import RequestContext
from samsa.errors import IllegalSaslStateError
from samsa.protocol import SaslAuthenticateResponse, SaslHandshakeResponse

__all__ = ["handle_sasl_authenticate", "handle_sasl_handshake"]


def handle_sasl_handshake(services: BrokerServices, ctx: RequestContext) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=IllegalSaslStateError.code, mechanisms=[])


def handle_sasl_authenticate(services: BrokerServices,
                             ctx: RequestContext) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=IllegalSaslStateError.code,
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"", session_lifetime_ms=0)
