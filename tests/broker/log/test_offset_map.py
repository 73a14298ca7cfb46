"""The cleaner's key -> offset map: Kafka's SkimpyOffsetMap layout, probing and capacity."""

from __future__ import annotations

import hashlib

import pytest

from samsa.broker.log.offset_map import ENTRY_SIZE, OffsetMap, _slot


def test_put_get_overwrite_and_missing() -> None:
    m = OffsetMap(1024 * ENTRY_SIZE)
    for i in range(500):
        m.put(b"key-%d" % i, i)
    m.put(b"key-7", 9000)
    assert m.size == 500
    assert m.get(b"key-7") == 9000
    assert m.get(b"key-499") == 499
    assert m.get(b"absent") == -1
    assert m.latest_offset == 9000


def test_capacity_follows_memory_and_load_factor() -> None:
    m = OffsetMap(100 * ENTRY_SIZE + 23, load_factor=0.5)
    assert m.slots == 100
    assert m.capacity == 50
    for i in range(50):
        assert not m.full
        m.put(b"%d" % i, i)
    assert m.full


def test_refuses_a_map_without_room_for_two_keys() -> None:
    with pytest.raises(ValueError, match="at least two"):
        OffsetMap(ENTRY_SIZE)


def test_probe_sequence_is_kafkas() -> None:
    digest = bytes(range(16))
    slots = 1_000_003
    # Attempts 0..12 read the int32 at byte min(i, 12); later ones add (i - 12).
    for attempt in range(13):
        value = int.from_bytes(digest[attempt:attempt + 4], "big", signed=True)
        assert _slot(digest, attempt, slots) == abs(value) % slots
    value = int.from_bytes(digest[12:16], "big", signed=True)
    assert _slot(digest, 15, slots) == abs(value + 3) % slots


def test_hash_collisions_probe_on_and_keep_both_keys() -> None:
    # A map of 2 slots: every key lands in one of them; the second key probes to the other.
    m = OffsetMap(3 * ENTRY_SIZE, load_factor=1.0)
    m.put(b"a", 1)
    m.put(b"b", 2)
    m.put(b"c", 3)
    assert (m.get(b"a"), m.get(b"b"), m.get(b"c")) == (1, 2, 3)
    assert m.probes > m.lookups  # some puts needed more than one probe


def test_same_md5_counts_as_the_same_key() -> None:
    m = OffsetMap(64 * ENTRY_SIZE)
    digest = hashlib.md5(b"x").digest()
    m.put_hash(digest, 5)
    m.put_hash(digest, 6)
    assert m.size == 1
    assert m.get(b"x") == 6


def test_buffer_is_the_configured_memory_and_released_by_clear() -> None:
    m = OffsetMap(10_000)
    assert m._buf is None  # nothing held until a round puts a key
    m.put(b"k", 1)
    assert m._buf is not None and len(m._buf) == (10_000 // ENTRY_SIZE) * ENTRY_SIZE <= 10_000
    m.release()
    assert m._buf is None and m.size == 0 and m.get(b"k") == -1
