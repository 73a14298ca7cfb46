"""The log cleaner's key -> last offset map, in a fixed budget of memory (Kafka's SkimpyOffsetMap).

An open-addressing hash table in one flat buffer.  An entry is the MD5 of the key (16 bytes)
and the offset (int64, big-endian): 24 bytes, so ``memory // 24`` slots.  The key itself is not
kept, so two keys whose MD5s are equal count as one key (as in Kafka).  A slot whose 24 bytes
are all zero is empty; nothing is ever removed.  The probe sequence is Kafka's: attempt ``i``
reads a big-endian int32 of the hash at byte ``min(i, 12)`` and adds ``max(0, i - 12)``, so the
first 13 probes come from the hash and the rest are linear; the slot is ``abs(value) % slots``.

The buffer is allocated zeroed (calloc: pages are only touched when an entry lands on them)
when a round starts and released when it ends, so an idle cleaner holds none of it.
"""

from __future__ import annotations

import hashlib
import struct

__all__ = ["ENTRY_SIZE", "OffsetMap"]

HASH_SIZE = 16
ENTRY_SIZE = HASH_SIZE + 8
_OFFSET = struct.Struct(">q")
_EMPTY = bytes(ENTRY_SIZE)
_MAX_HASH_PROBE = HASH_SIZE - 4  # the last int32 that fits in the hash starts here


def key_hash(key: bytes | bytearray | memoryview) -> bytes:
    return hashlib.md5(key, usedforsecurity=False).digest()


def _slot(digest: bytes, attempt: int, slots: int) -> int:
    start = min(_MAX_HASH_PROBE, attempt)
    value = int.from_bytes(digest[start:start + 4], "big", signed=True)
    if attempt > _MAX_HASH_PROBE:  # Java int arithmetic: wraps at 32 bits
        value = (value + attempt - _MAX_HASH_PROBE + 0x80000000) % 0x100000000 - 0x80000000
    # Kafka's Utils.abs: abs(Integer.MIN_VALUE) is 0.
    return (0 if value == -0x80000000 else abs(value)) % slots


class OffsetMap:
    """Key -> offset within ``memory`` bytes; full once ``load_factor`` of the slots are used."""

    def __init__(self, memory: int, load_factor: float = 0.9) -> None:
        self.memory = memory
        self.slots = memory // ENTRY_SIZE
        self.load_factor = load_factor
        if self.slots * load_factor <= 1:
            # Kafka's Cleaner asserts this: a round must be able to take at least one key.
            raise ValueError(
                f"log.cleaner.dedupe.buffer.size per cleaner thread ({memory} bytes) holds "
                f"{self.slots} entries of {ENTRY_SIZE} bytes; give it room for at least two")
        self._buf: bytearray | None = None
        self.size = 0  # entries in use
        self.latest_offset = -1  # the last offset put (or set by the cleaner)
        self.lookups = 0
        self.probes = 0

    @property
    def capacity(self) -> int:
        """How many keys fit before ``full``."""
        return int(self.slots * self.load_factor)

    @property
    def full(self) -> bool:
        return self.size >= self.slots * self.load_factor

    @property
    def utilization(self) -> float:
        return self.size / self.slots

    def _buffer(self) -> bytearray:
        if self._buf is None:
            self._buf = bytearray(self.slots * ENTRY_SIZE)
        return self._buf

    def put(self, key: bytes | bytearray | memoryview, offset: int) -> None:
        self.put_hash(key_hash(key), offset)

    def put_hash(self, digest: bytes, offset: int) -> None:
        buf = self._buffer()
        slots = self.slots
        self.lookups += 1
        attempt = 0
        while True:
            pos = _slot(digest, attempt, slots) * ENTRY_SIZE
            self.probes += 1
            current = buf[pos:pos + HASH_SIZE]
            if current == digest:
                break  # the same key (or an MD5 collision, taken as the same key)
            if buf[pos:pos + ENTRY_SIZE] == _EMPTY:
                buf[pos:pos + HASH_SIZE] = digest
                self.size += 1
                break
            attempt += 1
        _OFFSET.pack_into(buf, pos + HASH_SIZE, offset)
        self.latest_offset = offset

    def get(self, key: bytes | bytearray | memoryview) -> int:
        """The last offset put for ``key``, -1 if none."""
        return self.get_hash(key_hash(key))

    def get_hash(self, digest: bytes) -> int:
        buf = self._buf
        if buf is None:
            return -1
        slots = self.slots
        attempt = 0
        while True:
            pos = _slot(digest, attempt, slots) * ENTRY_SIZE
            if buf[pos:pos + HASH_SIZE] == digest:
                return int(_OFFSET.unpack_from(buf, pos + HASH_SIZE)[0])
            if buf[pos:pos + ENTRY_SIZE] == _EMPTY:
                return -1
            attempt += 1

    def clear(self) -> None:
        """Empty the map (a new zeroed buffer, allocated at the next put)."""
        self._buf = None
        self.size = 0
        self.latest_offset = -1
        self.lookups = 0
        self.probes = 0

    def release(self) -> None:
        """Give the buffer back (between rounds)."""
        self.clear()
