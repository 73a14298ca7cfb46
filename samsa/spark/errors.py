"""Errors of the Spark data source (the Kafka client errors come from samsa.errors)."""

from __future__ import annotations

from samsa.errors import ClientError

__all__ = ["DataLossError"]


class DataLossError(ClientError):
    """Records the query should read are gone (retention, delete_records, a deleted topic).

    Raised only under ``failOnDataLoss=true`` (the default); with ``false`` the source logs a
    warning and skips what is missing, as Spark's Kafka source does.
    """

    name = "DATA_LOSS"
    message = "Some data may have been lost."
