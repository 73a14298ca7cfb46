"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51), version 0
(KIP-554): the SCRAM users of the broker, answered as Kafka's ScramImage.describe and
ScramControlManager.alterCredentials answer, error texts included.

The client salts the password (SaltedPassword = Hi(password, salt, iterations)); the broker
derives StoredKey and ServerKey from it and keeps those. No authorizer runs yet, so no
CLUSTER_AUTHORIZATION_FAILED is answered."""

from __future__ import annotations

from typing import Any

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.services import BrokerServices
from samsa.errors import (
    DuplicateResourceError,
    ResourceNotFoundError,
    UnacceptableCredentialError,
    UnsupportedSaslMechanismError,
)
from samsa.protocol import AlterUserScramCredentialsResponse, DescribeUserScramCredentialsResponse
from samsa.security.scram import MECHANISMS, MECHANISMS_BY_TYPE, ScramCredential, ScramMechanism

DescribeResult = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
CredentialInfo = DescribeUserScramCredentialsResponse.CredentialInfo
AlterResult = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult

_TWICE = "A user credential cannot be altered twice in the same request"


def handle_describe_user_scram_credentials(
        services: BrokerServices, ctx: RequestContext) -> DescribeUserScramCredentialsResponse:
    users = services.scram_credentials.users()
    named = ctx.body.users
    duplicate: dict[str, bool] = {}  # asked for, in order -> asked more than once
    if not named:
        duplicate = dict.fromkeys(sorted(users), False)
    else:
        for user in named:
            duplicate[user.name] = user.name in duplicate
    results = []
    for name, twice in duplicate.items():
        if twice:
            results.append(DescribeResult(
                user=name, error_code=DuplicateResourceError.code, credential_infos=[],
                error_message=f"Cannot describe SCRAM credentials for the same user twice in a "
                              f"single request: {name}"))
        elif name not in users:
            results.append(DescribeResult(
                user=name, error_code=ResourceNotFoundError.code, credential_infos=[],
                error_message=f"Attempt to describe a user credential that does not exist: {name}"))
        else:
            results.append(DescribeResult(user=name, error_code=0, error_message=None, credential_infos=[
                CredentialInfo(mechanism=MECHANISMS[m].type_code, iterations=c.iterations)
                for m, c in sorted(users[name].items(), key=lambda mc: MECHANISMS[mc[0]].type_code)]))
    return DescribeUserScramCredentialsResponse(throttle_time_ms=0, error_code=0, error_message=None,
                                                results=results)


def _check(name: str, mechanism_type: int) -> tuple[ScramMechanism | None, tuple[int, str] | None]:
    if not name:
        return None, (UnacceptableCredentialError.code, "Username must not be empty")
    mechanism = MECHANISMS_BY_TYPE.get(mechanism_type)
    if mechanism is None:
        return None, (UnsupportedSaslMechanismError.code, "Unknown SCRAM mechanism")
    return mechanism, None


def handle_alter_user_scram_credentials(
        services: BrokerServices, ctx: RequestContext) -> AlterUserScramCredentialsResponse:
    store = services.scram_credentials
    body = ctx.body
    deletions: dict[str, tuple[ScramMechanism, Any]] = {}
    upserts: dict[str, tuple[ScramMechanism, Any]] = {}
    errors: dict[str, tuple[int, str]] = {}
    # As ScramControlManager.alterCredentials: a user named twice (a deletion or an upsertion
    # each time) is refused whole; each entry is checked on its own.
    for deletion in body.deletions:
        name = deletion.name
        if name in errors:
            continue
        if deletions.pop(name, None) is not None:
            errors[name] = (DuplicateResourceError.code, _TWICE)
            continue
        mechanism, error = _check(name, deletion.mechanism)
        if error is None and mechanism is not None and store.get(name, mechanism) is None:
            error = (ResourceNotFoundError.code, "Attempt to delete a user credential that does not exist")
        if error is not None:
            errors[name] = error
        else:
            assert mechanism is not None
            deletions[name] = (mechanism, deletion)
    for upsertion in body.upsertions:
        name = upsertion.name
        if name in errors:
            continue
        if deletions.pop(name, None) is not None or upserts.pop(name, None) is not None:
            errors[name] = (DuplicateResourceError.code, _TWICE)
            continue
        mechanism, error = _check(name, upsertion.mechanism)
        if error is None and mechanism is not None:
            if upsertion.iterations < mechanism.min_iterations:
                error = (UnacceptableCredentialError.code, "Too few iterations")
            elif upsertion.iterations > mechanism.max_iterations:
                error = (UnacceptableCredentialError.code, "Too many iterations")
        if error is not None:
            errors[name] = error
        else:
            assert mechanism is not None
            upserts[name] = (mechanism, upsertion)
    store.apply(
        [(name, mechanism, ScramCredential.from_salted_password(
            mechanism, u.salted_password, u.salt, u.iterations))
         for name, (mechanism, u) in upserts.items()],
        [(name, mechanism) for name, (mechanism, _d) in deletions.items()])
    results = [AlterResult(user=name, error_code=0, error_message=None) for name in [*deletions, *upserts]]
    results += [AlterResult(user=name, error_code=code, error_message=message)
                for name, (code, message) in errors.items()]
    return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=results)
