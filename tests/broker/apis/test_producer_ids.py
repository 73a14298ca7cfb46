"""The producer id block file: a damaged or exhausted one stops InitProducerId with
KAFKA_STORAGE_ERROR instead of handing out ids that may have been used already."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from samsa.broker.apis.producer_ids import FILE_NAME, MAX_PRODUCER_ID, ProducerIdManager
from samsa.errors import KafkaStorageError
from samsa.protocol import InitProducerIdRequest

KAFKA_STORAGE_ERROR = 56


@pytest.mark.parametrize(("stored", "message"), [
    ("12x\n", "not a producer id"),
    ("-5\n", "negative producer id -5"),
])
def test_a_damaged_block_file_is_refused(tmp_path: Path, stored: str, message: str) -> None:
    (tmp_path / FILE_NAME).write_text(stored, encoding="ascii")
    with pytest.raises(KafkaStorageError, match=message):
        ProducerIdManager(tmp_path)


def test_ids_stop_when_exhausted(tmp_path: Path) -> None:
    (tmp_path / FILE_NAME).write_text(f"{MAX_PRODUCER_ID - 7}\n", encoding="ascii")
    manager = ProducerIdManager(tmp_path, block_size=5)
    assert [manager.generate() for _ in range(5)] == list(range(MAX_PRODUCER_ID - 7, MAX_PRODUCER_ID - 2))
    with pytest.raises(KafkaStorageError, match="exhausted"):
        manager.generate()


def test_init_producer_id_answers_storage_error_when_the_block_file_is_damaged(
        client: Any, log_manager: Any) -> None:
    (Path(log_manager.data_dir) / FILE_NAME).write_text("garbage\n", encoding="ascii")
    response = client.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000,
                                                 producer_id=-1, producer_epoch=-1), 4)
    assert (response.error_code, response.producer_id, response.producer_epoch) == (
        KAFKA_STORAGE_ERROR, -1, -1)
