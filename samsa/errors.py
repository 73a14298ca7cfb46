"""Kafka error codes as exceptions, one class per code, as in the Java client.

Every wire error class carries ``code`` (the error code on the wire), ``name``
(Kafka's upper-case name), ``message`` (what the code means), ``retriable`` (the Java
exception extends RetriableException) and ``invalid_metadata`` (it extends
InvalidMetadataException, so the client refreshes cluster metadata before retrying).
``for_code(n)`` maps a wire code to its class and ``raise_for_code(n)`` raises it;
``ERRORS_BY_CODE`` and ``ERRORS_BY_NAME`` are the registries.

Errors the client raises on its own (timeouts, bad settings, closed producer, ...)
derive from ``ClientError`` instead; they have no wire code.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any


class KafkaError(Exception):
    """Base of every error Samsa raises."""

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"
    message: str = "The broker hit an unexpected error while handling the request."
    retriable: bool = False
    # Only wire errors set this; it implies retriable.
    invalid_metadata: bool = False

    def __init__(self, detail: str | None = None) -> None:
        self.detail = detail
        super().__init__(detail if detail is not None else self.message)

    def __reduce__(self) -> tuple[Any, ...]:
        # Errors cross process boundaries (Spark executors, workers); rebuild them.
        return (type(self), (self.detail,))


class BrokerResponseError(KafkaError):
    """An error code returned by a broker."""

    def __str__(self) -> str:
        text = self.detail if self.detail is not None else self.message
        return f"{self.name} (error code {self.code}): {text}"


# --- Errors raised by the client itself -----------------------------------------------


class ClientError(KafkaError):
    """An error the client detects itself rather than one a broker returned.

    ``code`` stays -1: these errors have no wire code and are not in ``ERRORS_BY_CODE``.
    """

    name = "CLIENT_ERROR"
    message = "The client failed to complete the operation."


class KafkaTimeoutError(ClientError):
    """A wait ran out of time; the message names what was waited for, and how long."""

    name = "KAFKA_TIMEOUT"
    message = "Timed out waiting for an operation to complete."
    retriable = True

    def __init__(self, waited_for: str, timeout_ms: float | None = None) -> None:
        self.waited_for = waited_for
        self.timeout_ms = timeout_ms
        after = f" after {timeout_ms:g} ms" if timeout_ms is not None else ""
        super().__init__(f"Timed out{after} waiting for {waited_for}.")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.waited_for, self.timeout_ms))


class KafkaConnectionError(ClientError):
    """A broker connection failed or was lost; the detail names the broker."""

    name = "CONNECTION_ERROR"
    message = "Could not connect to the broker, or the connection was lost."
    retriable = True


class ConfigError(ClientError, ValueError):
    """A setting is unknown or has an invalid value; the message names the setting."""

    name = "CONFIG_ERROR"
    message = "Invalid configuration."

    def __init__(self, setting: str, problem: str) -> None:
        self.setting = setting
        self.problem = problem
        super().__init__(f"Invalid setting {setting!r}: {problem}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.setting, self.problem))


class IllegalStateError(ClientError):
    """An operation was called when the client's state does not allow it."""

    name = "ILLEGAL_STATE"
    message = "The operation is not allowed in the client's current state."


class ForkedClientError(IllegalStateError):
    """A client was used in a process forked after it was created."""

    name = "FORKED_CLIENT"
    message = (
        "This client was created in a parent process and cannot be used after "
        "os.fork(); create a new client in the child process."
    )


class ProducerClosedError(IllegalStateError):
    """send() or flush() was called on a closed producer."""

    name = "PRODUCER_CLOSED"
    message = "The producer is closed; create a new producer to send more records."


class TransactionAbortedError(ClientError):
    """A record of a transaction that was aborted before the record was sent (Java's
    TransactionAbortedException): it was never written; send it again in a new transaction."""

    name = "TRANSACTION_ABORTED"
    message = (
        "The transaction was aborted before this record was sent, so it was not written; "
        "send it again in a new transaction."
    )


class SerializationError(ClientError):
    """A key, value or header could not be serialized or deserialized."""

    name = "SERIALIZATION_ERROR"
    message = "Could not serialize or deserialize a record's key, value or headers."


class AuthenticationError(ClientError):
    """A connection could not authenticate (Java's AuthenticationException): fatal for the
    calls waiting on it, not retried on their behalf; the detail names the broker and why."""

    name = "AUTHENTICATION"  # librdkafka's local _AUTHENTICATION; not a wire error name
    message = "Authentication with the broker failed."
    retriable = False


class SaslAuthenticationError(AuthenticationError):
    """SASL authentication failed (Java's SaslAuthenticationException): the broker refused
    the mechanism (UNSUPPORTED_SASL_MECHANISM) or the credentials (SASL_AUTHENTICATION_FAILED),
    or the exchange broke. The detail names the mechanism and the user, never a password."""

    name = "SASL_AUTHENTICATION"
    message = "SASL authentication with the broker failed."


class SslAuthenticationError(AuthenticationError):
    """The TLS handshake failed (Java's SslAuthenticationException): the broker's certificate
    is not trusted or not for its host name, or the broker refused ours."""

    name = "SSL_AUTHENTICATION"
    message = "The TLS handshake with the broker failed."


# --- Errors returned by brokers, in code order (facts from Kafka's Errors enum) -------


class UnknownServerError(BrokerResponseError):
    code = -1
    name = "UNKNOWN_SERVER_ERROR"
    message = "The broker hit an unexpected error while handling the request."
    retriable = False


class OffsetOutOfRangeError(BrokerResponseError):
    code = 1
    name = "OFFSET_OUT_OF_RANGE"
    message = (
        "The requested offset is outside the range of offsets the broker holds for "
        "this partition."
    )
    retriable = False


class CorruptRecordError(BrokerResponseError):
    """A record batch failed validation (bad CRC, size, magic or structure); names
    offset and reason.
    """

    code = 2
    name = "CORRUPT_MESSAGE"
    message = (
        "The record batch failed its CRC check, exceeds the allowed size, has a null "
        "key on a compacted topic, or is otherwise corrupt."
    )
    retriable = True


class UnknownTopicOrPartitionError(BrokerResponseError):
    code = 3
    name = "UNKNOWN_TOPIC_OR_PARTITION"
    message = "This broker does not host the requested topic-partition."
    retriable = True
    invalid_metadata = True


class InvalidFetchSizeError(BrokerResponseError):
    code = 4
    name = "INVALID_FETCH_SIZE"
    message = "The requested fetch size is not valid."
    retriable = False


class LeaderNotAvailableError(BrokerResponseError):
    code = 5
    name = "LEADER_NOT_AVAILABLE"
    message = (
        "The topic-partition has no leader right now because a leader election is in "
        "progress."
    )
    retriable = True
    invalid_metadata = True


class NotLeaderOrFollowerError(BrokerResponseError):
    code = 6
    name = "NOT_LEADER_OR_FOLLOWER"
    message = (
        "The broker is not the leader of this partition (for requests only the leader"
        " may serve) or not a replica of it (for requests any replica may serve)."
    )
    retriable = True
    invalid_metadata = True


class RequestTimedOutError(BrokerResponseError):
    code = 7
    name = "REQUEST_TIMED_OUT"
    message = "The request timed out."
    retriable = True


class BrokerNotAvailableError(BrokerResponseError):
    code = 8
    name = "BROKER_NOT_AVAILABLE"
    message = "The broker is not available."
    retriable = False


class ReplicaNotAvailableError(BrokerResponseError):
    code = 9
    name = "REPLICA_NOT_AVAILABLE"
    message = (
        "The replica is not available for this topic-partition. (Requests meant only "
        "for the leader or a follower, such as Produce and Fetch, get "
        "NOT_LEADER_OR_FOLLOWER instead when the broker is not a replica.)"
    )
    retriable = True
    invalid_metadata = True


class MessageTooLargeError(BrokerResponseError):
    """Also raised by the client for a record above max.request.size or buffer.memory
    (Java's RecordTooLargeException).
    """

    code = 10
    name = "MESSAGE_TOO_LARGE"
    message = (
        "The request contained a message larger than the broker's maximum accepted "
        "message size."
    )
    retriable = False


class StaleControllerEpochError(BrokerResponseError):
    code = 11
    name = "STALE_CONTROLLER_EPOCH"
    message = "The controller has moved to another broker."
    retriable = False


class OffsetMetadataTooLargeError(BrokerResponseError):
    code = 12
    name = "OFFSET_METADATA_TOO_LARGE"
    message = "The metadata string in the offset commit request is too large."
    retriable = False


class NetworkError(BrokerResponseError):
    code = 13
    name = "NETWORK_EXCEPTION"
    message = "The server closed the connection before a response arrived."
    retriable = True
    invalid_metadata = True


class CoordinatorLoadInProgressError(BrokerResponseError):
    code = 14
    name = "COORDINATOR_LOAD_IN_PROGRESS"
    message = (
        "The coordinator is still loading its state and cannot serve requests yet."
    )
    retriable = True


class CoordinatorNotAvailableError(BrokerResponseError):
    code = 15
    name = "COORDINATOR_NOT_AVAILABLE"
    message = "The coordinator is not available."
    retriable = True


class NotCoordinatorError(BrokerResponseError):
    code = 16
    name = "NOT_COORDINATOR"
    message = "This broker is not the right coordinator."
    retriable = True


class InvalidTopicError(BrokerResponseError):
    code = 17
    name = "INVALID_TOPIC_EXCEPTION"
    message = "The request tried to operate on an invalid topic."
    retriable = False


class RecordListTooLargeError(BrokerResponseError):
    code = 18
    name = "RECORD_LIST_TOO_LARGE"
    message = (
        "The request contained a record batch larger than the broker's configured log"
        " segment size."
    )
    retriable = False


class NotEnoughReplicasError(BrokerResponseError):
    code = 19
    name = "NOT_ENOUGH_REPLICAS"
    message = (
        "The records were rejected because fewer replicas are in sync than required "
        "(min.insync.replicas)."
    )
    retriable = True


class NotEnoughReplicasAfterAppendError(BrokerResponseError):
    code = 20
    name = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
    message = (
        "The records were written to the log, but to fewer in-sync replicas than "
        "required."
    )
    retriable = True


class InvalidRequiredAcksError(BrokerResponseError):
    code = 21
    name = "INVALID_REQUIRED_ACKS"
    message = "The produce request asked for an invalid value of required acks."
    retriable = False


class IllegalGenerationError(BrokerResponseError):
    code = 22
    name = "ILLEGAL_GENERATION"
    message = "The given group generation id is not valid."
    retriable = False


class InconsistentGroupProtocolError(BrokerResponseError):
    code = 23
    name = "INCONSISTENT_GROUP_PROTOCOL"
    message = (
        "The member's supported protocols are incompatible with those of the existing"
        " group members, or the first member joined with an empty protocol type or "
        "protocol list."
    )
    retriable = False


class InvalidGroupIdError(BrokerResponseError):
    code = 24
    name = "INVALID_GROUP_ID"
    message = "The configured group id is not valid."
    retriable = False


class UnknownMemberIdError(BrokerResponseError):
    code = 25
    name = "UNKNOWN_MEMBER_ID"
    message = "The group coordinator does not know this member."
    retriable = False


class InvalidSessionTimeoutError(BrokerResponseError):
    code = 26
    name = "INVALID_SESSION_TIMEOUT"
    message = (
        "The session timeout is outside the range the broker allows "
        "(group.min.session.timeout.ms to group.max.session.timeout.ms)."
    )
    retriable = False


class RebalanceInProgressError(BrokerResponseError):
    code = 27
    name = "REBALANCE_IN_PROGRESS"
    message = "The group is rebalancing, so the member must rejoin."
    retriable = False


class InvalidCommitOffsetSizeError(BrokerResponseError):
    code = 28
    name = "INVALID_COMMIT_OFFSET_SIZE"
    message = "The size of the committed offset data is not valid."
    retriable = False


class TopicAuthorizationFailedError(BrokerResponseError):
    code = 29
    name = "TOPIC_AUTHORIZATION_FAILED"
    message = "Not authorized to access the topic."
    retriable = False


class GroupAuthorizationFailedError(BrokerResponseError):
    code = 30
    name = "GROUP_AUTHORIZATION_FAILED"
    message = "Not authorized to access the group."
    retriable = False


class ClusterAuthorizationFailedError(BrokerResponseError):
    code = 31
    name = "CLUSTER_AUTHORIZATION_FAILED"
    message = "Not authorized for this cluster operation."
    retriable = False


class InvalidTimestampError(BrokerResponseError):
    code = 32
    name = "INVALID_TIMESTAMP"
    message = "The record's timestamp is outside the acceptable range."
    retriable = False


class UnsupportedSaslMechanismError(BrokerResponseError):
    code = 33
    name = "UNSUPPORTED_SASL_MECHANISM"
    message = "The broker does not support the requested SASL mechanism."
    retriable = False


class IllegalSaslStateError(BrokerResponseError):
    code = 34
    name = "ILLEGAL_SASL_STATE"
    message = "The request is not valid in the current SASL state."
    retriable = False


class UnsupportedVersionError(BrokerResponseError):
    """An API key or version is not supported (by us or by the peer)."""

    code = 35
    name = "UNSUPPORTED_VERSION"
    message = "This version of the API is not supported."
    retriable = False


class TopicAlreadyExistsError(BrokerResponseError):
    code = 36
    name = "TOPIC_ALREADY_EXISTS"
    message = "A topic with this name already exists."
    retriable = False


class InvalidPartitionsError(BrokerResponseError):
    code = 37
    name = "INVALID_PARTITIONS"
    message = "The number of partitions is less than 1."
    retriable = False


class InvalidReplicationFactorError(BrokerResponseError):
    code = 38
    name = "INVALID_REPLICATION_FACTOR"
    message = (
        "The replication factor is less than 1 or greater than the number of "
        "available brokers."
    )
    retriable = False


class InvalidReplicaAssignmentError(BrokerResponseError):
    code = 39
    name = "INVALID_REPLICA_ASSIGNMENT"
    message = "The replica assignment is not valid."
    retriable = False


class InvalidConfigError(BrokerResponseError):
    code = 40
    name = "INVALID_CONFIG"
    message = "The configuration is not valid."
    retriable = False


class NotControllerError(BrokerResponseError):
    code = 41
    name = "NOT_CONTROLLER"
    message = "This broker is not the controller of the cluster."
    retriable = True


class InvalidRequestError(BrokerResponseError):
    code = 42
    name = "INVALID_REQUEST"
    message = (
        "The request is malformed, most likely because of a bug in the client library"
        " or because it was sent to an incompatible broker; the broker logs have "
        "details."
    )
    retriable = False


class UnsupportedForMessageFormatError(BrokerResponseError):
    code = 43
    name = "UNSUPPORTED_FOR_MESSAGE_FORMAT"
    message = "The broker's message format version does not support this request."
    retriable = False


class PolicyViolationError(BrokerResponseError):
    code = 44
    name = "POLICY_VIOLATION"
    message = "The request parameters violate the configured policy."
    retriable = False


class OutOfOrderSequenceNumberError(BrokerResponseError):
    code = 45
    name = "OUT_OF_ORDER_SEQUENCE_NUMBER"
    message = "The broker received a sequence number out of order."
    retriable = False


class DuplicateSequenceNumberError(BrokerResponseError):
    code = 46
    name = "DUPLICATE_SEQUENCE_NUMBER"
    message = "The broker received a duplicate sequence number."
    retriable = False


class InvalidProducerEpochError(BrokerResponseError):
    code = 47
    name = "INVALID_PRODUCER_EPOCH"
    message = "The producer tried to produce with an out-of-date epoch."
    retriable = False


class InvalidTxnStateError(BrokerResponseError):
    code = 48
    name = "INVALID_TXN_STATE"
    message = "The producer tried a transactional operation while in an invalid state."
    retriable = False


class InvalidProducerIdMappingError(BrokerResponseError):
    code = 49
    name = "INVALID_PRODUCER_ID_MAPPING"
    message = (
        "The producer used a producer id that is not currently assigned to its "
        "transactional id."
    )
    retriable = False


class InvalidTransactionTimeoutError(BrokerResponseError):
    code = 50
    name = "INVALID_TRANSACTION_TIMEOUT"
    message = (
        "The transaction timeout exceeds the broker's maximum "
        "(transaction.max.timeout.ms)."
    )
    retriable = False


class ConcurrentTransactionsError(BrokerResponseError):
    code = 51
    name = "CONCURRENT_TRANSACTIONS"
    message = (
        "The producer tried to update a transaction while another operation on the "
        "same transaction was still in progress."
    )
    retriable = True


class TransactionCoordinatorFencedError(BrokerResponseError):
    code = 52
    name = "TRANSACTION_COORDINATOR_FENCED"
    message = (
        "The transaction coordinator that sent a WriteTxnMarker request is no longer "
        "the current coordinator for this producer."
    )
    retriable = False


class TransactionalIdAuthorizationFailedError(BrokerResponseError):
    code = 53
    name = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    message = "Not authorized for this transactional id."
    retriable = False


class SecurityDisabledError(BrokerResponseError):
    code = 54
    name = "SECURITY_DISABLED"
    message = "Security features are disabled."
    retriable = False


class OperationNotAttemptedError(BrokerResponseError):
    code = 55
    name = "OPERATION_NOT_ATTEMPTED"
    message = (
        "The broker did not attempt this operation: in a batched request, some "
        "operations failed and the broker answered without trying the rest."
    )
    retriable = False


class KafkaStorageError(BrokerResponseError):
    code = 56
    name = "KAFKA_STORAGE_ERROR"
    message = "A disk error occurred while accessing a log file on the broker."
    retriable = True
    invalid_metadata = True


class LogDirNotFoundError(BrokerResponseError):
    code = 57
    name = "LOG_DIR_NOT_FOUND"
    message = "The requested log directory is not in the broker's configuration."
    retriable = False


class SaslAuthenticationFailedError(BrokerResponseError):
    code = 58
    name = "SASL_AUTHENTICATION_FAILED"
    message = "SASL authentication failed."
    retriable = False


class UnknownProducerIdError(BrokerResponseError):
    code = 59
    name = "UNKNOWN_PRODUCER_ID"
    message = (
        "The broker has no metadata for this producer id, for example because "
        "retention deleted all of the producer's records; once its last records are "
        "gone the broker forgets the producer and rejects its further appends with "
        "this error."
    )
    retriable = False


class ReassignmentInProgressError(BrokerResponseError):
    code = 60
    name = "REASSIGNMENT_IN_PROGRESS"
    message = "A partition reassignment is in progress."
    retriable = False


class DelegationTokenAuthDisabledError(BrokerResponseError):
    code = 61
    name = "DELEGATION_TOKEN_AUTH_DISABLED"
    message = "The delegation token feature is not enabled."
    retriable = False


class DelegationTokenNotFoundError(BrokerResponseError):
    code = 62
    name = "DELEGATION_TOKEN_NOT_FOUND"
    message = "The delegation token was not found on the server."
    retriable = False


class DelegationTokenOwnerMismatchError(BrokerResponseError):
    code = 63
    name = "DELEGATION_TOKEN_OWNER_MISMATCH"
    message = (
        "The given principal is not a valid owner or renewer of the delegation token."
    )
    retriable = False


class DelegationTokenRequestNotAllowedError(BrokerResponseError):
    code = 64
    name = "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"
    message = (
        "Delegation token requests are not allowed on PLAINTEXT or one-way SSL "
        "connections, nor on connections authenticated with a delegation token."
    )
    retriable = False


class DelegationTokenAuthorizationFailedError(BrokerResponseError):
    code = 65
    name = "DELEGATION_TOKEN_AUTHORIZATION_FAILED"
    message = "Not authorized for this delegation token."
    retriable = False


class DelegationTokenExpiredError(BrokerResponseError):
    code = 66
    name = "DELEGATION_TOKEN_EXPIRED"
    message = "The delegation token has expired."
    retriable = False


class InvalidPrincipalTypeError(BrokerResponseError):
    code = 67
    name = "INVALID_PRINCIPAL_TYPE"
    message = "The given principal type is not supported."
    retriable = False


class NonEmptyGroupError(BrokerResponseError):
    code = 68
    name = "NON_EMPTY_GROUP"
    message = "The group is not empty."
    retriable = False


class GroupIdNotFoundError(BrokerResponseError):
    code = 69
    name = "GROUP_ID_NOT_FOUND"
    message = "The group id does not exist."
    retriable = False


class FetchSessionIdNotFoundError(BrokerResponseError):
    code = 70
    name = "FETCH_SESSION_ID_NOT_FOUND"
    message = "The fetch session id was not found."
    retriable = True


class InvalidFetchSessionEpochError(BrokerResponseError):
    code = 71
    name = "INVALID_FETCH_SESSION_EPOCH"
    message = "The fetch session epoch is not valid."
    retriable = True


class ListenerNotFoundError(BrokerResponseError):
    code = 72
    name = "LISTENER_NOT_FOUND"
    message = (
        "The leader broker has no listener matching the one on which the metadata "
        "request was handled."
    )
    retriable = True
    invalid_metadata = True


class TopicDeletionDisabledError(BrokerResponseError):
    code = 73
    name = "TOPIC_DELETION_DISABLED"
    message = "Topic deletion is disabled."
    retriable = False


class FencedLeaderEpochError(BrokerResponseError):
    code = 74
    name = "FENCED_LEADER_EPOCH"
    message = "The leader epoch in the request is older than the broker's epoch."
    retriable = True
    invalid_metadata = True


class UnknownLeaderEpochError(BrokerResponseError):
    code = 75
    name = "UNKNOWN_LEADER_EPOCH"
    message = "The leader epoch in the request is newer than the broker's epoch."
    retriable = True


class UnsupportedCompressionTypeError(BrokerResponseError):
    code = 76
    name = "UNSUPPORTED_COMPRESSION_TYPE"
    message = (
        "The client does not support the compression type of the requested partition."
    )
    retriable = False


class StaleBrokerEpochError(BrokerResponseError):
    code = 77
    name = "STALE_BROKER_EPOCH"
    message = "The broker epoch has changed."
    retriable = False


class OffsetNotAvailableError(BrokerResponseError):
    code = 78
    name = "OFFSET_NOT_AVAILABLE"
    message = (
        "The leader's high watermark has not caught up since a recent leader "
        "election, so offsets cannot be guaranteed to increase monotonically."
    )
    retriable = True


class MemberIdRequiredError(BrokerResponseError):
    code = 79
    name = "MEMBER_ID_REQUIRED"
    message = (
        "The group member needs a valid member id before it can join the consumer "
        "group."
    )
    retriable = False


class PreferredLeaderNotAvailableError(BrokerResponseError):
    code = 80
    name = "PREFERRED_LEADER_NOT_AVAILABLE"
    message = "The preferred leader is not available."
    retriable = True
    invalid_metadata = True


class GroupMaxSizeReachedError(BrokerResponseError):
    code = 81
    name = "GROUP_MAX_SIZE_REACHED"
    message = "The consumer group has reached its maximum size."
    retriable = False


class FencedInstanceIdError(BrokerResponseError):
    code = 82
    name = "FENCED_INSTANCE_ID"
    message = (
        "The broker rejected this static consumer: another consumer with the same "
        "group.instance.id registered under a different member.id."
    )
    retriable = False


class EligibleLeadersNotAvailableError(BrokerResponseError):
    code = 83
    name = "ELIGIBLE_LEADERS_NOT_AVAILABLE"
    message = "No eligible leaders are available for the topic partition."
    retriable = True
    invalid_metadata = True


class ElectionNotNeededError(BrokerResponseError):
    code = 84
    name = "ELECTION_NOT_NEEDED"
    message = "A leader election is not needed for the topic partition."
    retriable = True
    invalid_metadata = True


class NoReassignmentInProgressError(BrokerResponseError):
    code = 85
    name = "NO_REASSIGNMENT_IN_PROGRESS"
    message = "No partition reassignment is in progress."
    retriable = False


class GroupSubscribedToTopicError(BrokerResponseError):
    code = 86
    name = "GROUP_SUBSCRIBED_TO_TOPIC"
    message = (
        "Offsets of a topic cannot be deleted while the consumer group is actively "
        "subscribed to it."
    )
    retriable = False


class InvalidRecordError(BrokerResponseError):
    code = 87
    name = "INVALID_RECORD"
    message = "The record failed validation on the broker and was rejected."
    retriable = False


class UnstableOffsetCommitError(BrokerResponseError):
    code = 88
    name = "UNSTABLE_OFFSET_COMMIT"
    message = "There are unstable offsets that must be cleared first."
    retriable = True


class ThrottlingQuotaExceededError(BrokerResponseError):
    code = 89
    name = "THROTTLING_QUOTA_EXCEEDED"
    message = "The throttling quota was exceeded."
    retriable = True


class ProducerFencedError(BrokerResponseError):
    code = 90
    name = "PRODUCER_FENCED"
    message = "A newer producer with the same transactional id has fenced this one."
    retriable = False


class ResourceNotFoundError(BrokerResponseError):
    code = 91
    name = "RESOURCE_NOT_FOUND"
    message = "The request referred to a resource that does not exist."
    retriable = False


class DuplicateResourceError(BrokerResponseError):
    code = 92
    name = "DUPLICATE_RESOURCE"
    message = "The request referred to the same resource twice."
    retriable = False


class UnacceptableCredentialError(BrokerResponseError):
    code = 93
    name = "UNACCEPTABLE_CREDENTIAL"
    message = "The requested credential does not meet the acceptance criteria."
    retriable = False


class InconsistentVoterSetError(BrokerResponseError):
    code = 94
    name = "INCONSISTENT_VOTER_SET"
    message = (
        "The sender or the recipient of a voter-only request is not one of the "
        "expected voters."
    )
    retriable = False


class InvalidUpdateVersionError(BrokerResponseError):
    code = 95
    name = "INVALID_UPDATE_VERSION"
    message = "The given update version is not valid."
    retriable = False


class FeatureUpdateFailedError(BrokerResponseError):
    code = 96
    name = "FEATURE_UPDATE_FAILED"
    message = (
        "Finalized features could not be updated because of an unexpected server error."
    )
    retriable = False


class PrincipalDeserializationFailureError(BrokerResponseError):
    code = 97
    name = "PRINCIPAL_DESERIALIZATION_FAILURE"
    message = (
        "The request principal could not be deserialized during forwarding, which "
        "points to an internal problem in the cluster's security setup."
    )
    retriable = False


class SnapshotNotFoundError(BrokerResponseError):
    code = 98
    name = "SNAPSHOT_NOT_FOUND"
    message = "The requested snapshot was not found."
    retriable = False


class PositionOutOfRangeError(BrokerResponseError):
    code = 99
    name = "POSITION_OUT_OF_RANGE"
    message = (
        "The requested position is negative or not less than the size of the snapshot."
    )
    retriable = False


class UnknownTopicIdError(BrokerResponseError):
    code = 100
    name = "UNKNOWN_TOPIC_ID"
    message = "This broker does not host a topic with this topic id."
    retriable = True
    invalid_metadata = True


class DuplicateBrokerRegistrationError(BrokerResponseError):
    code = 101
    name = "DUPLICATE_BROKER_REGISTRATION"
    message = "This broker id is already in use."
    retriable = False


class BrokerIdNotRegisteredError(BrokerResponseError):
    code = 102
    name = "BROKER_ID_NOT_REGISTERED"
    message = "The given broker id is not registered."
    retriable = False


class InconsistentTopicIdError(BrokerResponseError):
    code = 103
    name = "INCONSISTENT_TOPIC_ID"
    message = "The topic id of the log does not match the topic id in the request."
    retriable = True
    invalid_metadata = True


class InconsistentClusterIdError(BrokerResponseError):
    code = 104
    name = "INCONSISTENT_CLUSTER_ID"
    message = "The cluster id in the request does not match the server's cluster id."
    retriable = False


class TransactionalIdNotFoundError(BrokerResponseError):
    code = 105
    name = "TRANSACTIONAL_ID_NOT_FOUND"
    message = "The transactional id was not found."
    retriable = False


class FetchSessionTopicIdError(BrokerResponseError):
    code = 106
    name = "FETCH_SESSION_TOPIC_ID_ERROR"
    message = "The fetch session used topic ids inconsistently."
    retriable = True


class IneligibleReplicaError(BrokerResponseError):
    code = 107
    name = "INELIGIBLE_REPLICA"
    message = "The new ISR includes at least one ineligible replica."
    retriable = False


class NewLeaderElectedError(BrokerResponseError):
    code = 108
    name = "NEW_LEADER_ELECTED"
    message = (
        "The AlterPartition request updated the partition state, but the leader has "
        "changed."
    )
    retriable = False


class OffsetMovedToTieredStorageError(BrokerResponseError):
    code = 109
    name = "OFFSET_MOVED_TO_TIERED_STORAGE"
    message = "The requested offset has moved to tiered storage."
    retriable = False


class FencedMemberEpochError(BrokerResponseError):
    code = 110
    name = "FENCED_MEMBER_EPOCH"
    message = (
        "The group coordinator fenced the member epoch; the member must give up all "
        "its partitions and rejoin."
    )
    retriable = False


class UnreleasedInstanceIdError(BrokerResponseError):
    code = 111
    name = "UNRELEASED_INSTANCE_ID"
    message = (
        "Another member of the consumer group still uses this instance id; that "
        "member must leave first."
    )
    retriable = False


class UnsupportedAssignorError(BrokerResponseError):
    code = 112
    name = "UNSUPPORTED_ASSIGNOR"
    message = "The consumer group does not support this assignor or its version range."
    retriable = False


class StaleMemberEpochError(BrokerResponseError):
    code = 113
    name = "STALE_MEMBER_EPOCH"
    message = (
        "The member epoch is stale; the member must retry once it receives its "
        "updated epoch through the ConsumerGroupHeartbeat API."
    )
    retriable = False


class MismatchedEndpointTypeError(BrokerResponseError):
    code = 114
    name = "MISMATCHED_ENDPOINT_TYPE"
    message = "The request was sent to an endpoint of the wrong type."
    retriable = False


class UnsupportedEndpointTypeError(BrokerResponseError):
    code = 115
    name = "UNSUPPORTED_ENDPOINT_TYPE"
    message = "This endpoint type is not supported yet."
    retriable = False


class UnknownControllerIdError(BrokerResponseError):
    code = 116
    name = "UNKNOWN_CONTROLLER_ID"
    message = "This controller id is not known."
    retriable = False


class UnknownSubscriptionIdError(BrokerResponseError):
    code = 117
    name = "UNKNOWN_SUBSCRIPTION_ID"
    message = (
        "The push telemetry request used a subscription id that is invalid or out of "
        "date."
    )
    retriable = False


class TelemetryTooLargeError(BrokerResponseError):
    code = 118
    name = "TELEMETRY_TOO_LARGE"
    message = (
        "The push telemetry request is larger than the maximum size the broker accepts."
    )
    retriable = False


class InvalidRegistrationError(BrokerResponseError):
    code = 119
    name = "INVALID_REGISTRATION"
    message = "The controller considers the broker registration invalid."
    retriable = False


class TransactionAbortableError(BrokerResponseError):
    code = 120
    name = "TRANSACTION_ABORTABLE"
    message = (
        "The server hit an error with the transaction; aborting the transaction lets "
        "the client keep using this transactional id."
    )
    retriable = False


class InvalidRecordStateError(BrokerResponseError):
    code = 121
    name = "INVALID_RECORD_STATE"
    message = (
        "The record state is invalid, so the delivery acknowledgement could not be "
        "completed."
    )
    retriable = False


class ShareSessionNotFoundError(BrokerResponseError):
    code = 122
    name = "SHARE_SESSION_NOT_FOUND"
    message = "The share session was not found."
    retriable = True


class InvalidShareSessionEpochError(BrokerResponseError):
    code = 123
    name = "INVALID_SHARE_SESSION_EPOCH"
    message = "The share session epoch is not valid."
    retriable = True


class FencedStateEpochError(BrokerResponseError):
    code = 124
    name = "FENCED_STATE_EPOCH"
    message = (
        "The share coordinator rejected the request because the share group state "
        "epoch did not match."
    )
    retriable = False


class InvalidVoterKeyError(BrokerResponseError):
    code = 125
    name = "INVALID_VOTER_KEY"
    message = "The voter key does not match the key of the receiving replica."
    retriable = False


class DuplicateVoterError(BrokerResponseError):
    code = 126
    name = "DUPLICATE_VOTER"
    message = "The voter is already in the set of voters."
    retriable = False


class VoterNotFoundError(BrokerResponseError):
    code = 127
    name = "VOTER_NOT_FOUND"
    message = "The voter is not in the set of voters."
    retriable = False


class InvalidRegularExpressionError(BrokerResponseError):
    code = 128
    name = "INVALID_REGULAR_EXPRESSION"
    message = "The regular expression is not valid."
    retriable = False


# Java's name for code 10, also used for records the client rejects before sending.
RecordTooLargeError = MessageTooLargeError
# The name the usual naming rule gives CORRUPT_MESSAGE.
CorruptMessageError = CorruptRecordError


# --- Registry -------------------------------------------------------------------------


class UnrecognizedBrokerError(BrokerResponseError):
    """A code this client does not know; ``for_code`` makes one subclass per code."""

    name = "UNRECOGNIZED_ERROR_CODE"
    message = "The broker returned an error code this client does not know."

    def __reduce__(self) -> tuple[Any, ...]:
        # Per-code subclasses are made at runtime and cannot be pickled by reference.
        return (_rebuild_unrecognized, (self.code, self.detail))


@cache
def _unrecognized(code: int) -> type[BrokerResponseError]:
    message = (
        f"The broker returned error code {code}, which this client does not know (the "
        "broker may be newer than the client); it is treated as a fatal error."
    )
    return type(
        "UnrecognizedBrokerError",
        (UnrecognizedBrokerError,),
        {"code": code, "message": message, "__module__": __name__},
    )


def _rebuild_unrecognized(code: int, detail: str | None) -> BrokerResponseError:
    return _unrecognized(code)(detail)


def _wire_classes() -> Iterator[type[BrokerResponseError]]:
    """Every subclass of BrokerResponseError that defines its own wire code."""
    stack = list(BrokerResponseError.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if "code" in vars(cls) and not issubclass(cls, UnrecognizedBrokerError):
            yield cls


def _build_registry() -> dict[int, type[BrokerResponseError]]:
    by_code: dict[int, type[BrokerResponseError]] = {}
    for cls in _wire_classes():
        if cls.code in by_code:
            raise RuntimeError(
                f"error code {cls.code} is claimed by both "
                f"{by_code[cls.code].__name__} and {cls.__name__}"
            )
        by_code[cls.code] = cls
    return dict(sorted(by_code.items()))


ERRORS_BY_CODE: dict[int, type[BrokerResponseError]] = _build_registry()
ERRORS_BY_NAME: dict[str, type[BrokerResponseError]] = {
    cls.name: cls for cls in ERRORS_BY_CODE.values()
}


def for_code(code: int) -> type[BrokerResponseError]:
    """The exception class for a wire error code (unknown codes: a generic class).

    Code 0 (NONE) means success and has no class, so asking for it is a caller bug.
    """
    if code == 0:
        raise ValueError("error code 0 (NONE) means success; it has no exception class")
    cls = ERRORS_BY_CODE.get(code)
    return cls if cls is not None else _unrecognized(code)


def raise_for_code(code: int, detail: str | None = None) -> None:
    """Raise the error for ``code`` with an optional detail; do nothing for 0 (NONE)."""
    if code != 0:
        raise for_code(code)(detail)
