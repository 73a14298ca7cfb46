"""Producer id allocation for InitProducerId: unique for the life of the data directory.

Ids are handed out from blocks; before the first id of a block is used, the *end* of the block
is written (atomically, fsynced) to ``producer_id_block`` in the data directory.  After a
restart, allocation resumes at the stored end, so an id is never reused even after a crash
(the unused rest of the last block is skipped, as Kafka does with its controller-allocated
blocks of 1000).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from samsa.errors import KafkaStorageError

BLOCK_SIZE = 1000
FILE_NAME = "producer_id_block"
MAX_PRODUCER_ID = (1 << 63) - 1


class ProducerIdManager:
    def __init__(self, data_dir: str | os.PathLike[str], block_size: int = BLOCK_SIZE) -> None:
        self._path = Path(data_dir) / FILE_NAME
        self._block_size = block_size
        self._lock = threading.Lock()
        self._next = self._read_stored_end()
        self._block_end = self._next  # nothing reserved yet

    def _read_stored_end(self) -> int:
        try:
            text = self._path.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            return 0
        try:
            value = int(text)
        except ValueError:
            raise KafkaStorageError(
                f"{self._path} holds {text!r}, not a producer id; restore it or remove it only "
                f"if no producer ids were ever handed out from this data directory"
            ) from None
        if value < 0:
            raise KafkaStorageError(f"{self._path} holds a negative producer id {value}")
        return value

    def _reserve_block(self) -> None:
        # Re-read the stored end: another manager over the same directory (a second KafkaApis
        # over the same logs) may have reserved blocks since; never hand out its ids again.
        self._next = max(self._next, self._read_stored_end())
        end = self._next + self._block_size
        if end > MAX_PRODUCER_ID:
            raise KafkaStorageError("producer ids are exhausted")
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w", encoding="ascii") as f:
            f.write(f"{end}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)
        try:
            dir_fd = os.open(self._path.parent, os.O_RDONLY)
        except OSError:
            dir_fd = -1
        if dir_fd >= 0:
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        self._block_end = end

    def generate(self) -> int:
        """A producer id never handed out before from this data directory."""
        with self._lock:
            if self._next >= self._block_end:
                self._reserve_block()
            pid = self._next
            self._next += 1
            return pid
