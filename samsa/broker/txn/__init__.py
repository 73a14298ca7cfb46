"""The transaction coordinator (KIP-98): transactional ids, their producer ids and epochs, and
their transactions' states, kept in ``__transaction_state``; markers written at the end."""

from samsa.broker.txn.coordinator import (
    TXN_DEFAULTS,
    ProducerIdAndEpoch,
    TransactionCoordinator,
    TransactionDescription,
    TransactionListing,
)
from samsa.broker.txn.markers import GroupTransactions
from samsa.broker.txn.state import TransactionMetadata, TransactionState
from samsa.broker.txn.store import TRANSACTION_STATE_TOPIC

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "TXN_DEFAULTS",
    "GroupTransactions",
    "ProducerIdAndEpoch",
    "TransactionCoordinator",
    "TransactionDescription",
    "TransactionListing",
    "TransactionMetadata",
    "TransactionState",
]
