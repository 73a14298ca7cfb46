"""Mutations of valid request frames, drawn through hypothesis.

Three levels, so that hostile input reaches every layer rather than dying in the first check:

* bytes: bit flips, interesting bytes and integers, inserted / deleted / repeated ranges,
  truncation, splicing with another seed, length fields (int16 / int32 sizes and counts, and the
  unsigned varints of flexible versions) made to lie, and the frame's own size prefix;
* fields: the request decoded, one field set to a hostile value (an int at its bounds, a huge
  string, null, an array multiplied), encoded again -- well-formed frames asking for bad things;
* records: inside a Produce, the v2 batch's header fields, its (decompressed) records or its
  compressed payload mutated, the batch recompressed and its CRC recomputed (usually), so that
  the broker's record validation sees lies that a CRC does not catch.

A mutated input is the bytes one connection sends (one frame, or several pipelined), and
whether the size prefix was left alone (``framed``): if not, the client half-closes after
sending so that the broker sees the end of a frame that promised more.
"""

from __future__ import annotations

import functools
import struct
import uuid
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from crc32c import crc32c
from hypothesis import strategies as st

from samsa.protocol import ApiKey, decode_request, encode_request
from samsa.protocol.schema import StructSchema
from samsa.records import Compression, compress, decompress
from tests.broker.fuzz.seeds import DOOMED_TOPIC, SEEDS, TOPIC, Seed

Draw = Callable[[st.SearchStrategy[Any]], Any]
T = TypeVar("T")

INT_BOUNDS = {
    "int8": (-(1 << 7), (1 << 7) - 1), "int16": (-(1 << 15), (1 << 15) - 1),
    "uint16": (0, (1 << 16) - 1), "int32": (-(1 << 31), (1 << 31) - 1),
    "uint32": (0, (1 << 32) - 1), "int64": (-(1 << 63), (1 << 63) - 1),
}
INTERESTING_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFF, 0xFE)
# Sizes a lying length field may claim: off by one, zero, null, and far past the frame.
LENGTH_LIES = (-2, -1, 0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0xFFFF, 0x10000, 0x7FFFFFFF,
               -0x80000000, 1 << 20, 100 << 20)
# Varints that lie: null (0), huge, overlong encodings, a continuation that never ends.
VARINT_LIES = (b"\x00", b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\x07", b"\x80\x00",
               b"\x81\x80\x80\x80\x00", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
               b"\xff" * 12, b"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01")
HOSTILE_STRINGS = ("", "\x00", "..", ".", "__consumer_offsets", "a" * 249, "a" * 250,
                   "x" * 5000, "\u00e9\u4e2d\U0001f600", "bad topic", "-1", "*")
AMPLIFY = (0, 2, 50, 1000)
BYTE_OPS = ("flip", "byte", "int", "insert", "delete", "repeat", "truncate", "length", "varint",
            "splice")
MAX_INPUT = 1 << 20  # bytes; larger inputs are about throughput, not parsing

_BOOLS = st.booleans()
_SHORT_BYTES = st.binary(min_size=1, max_size=8)
_INSERTED_BYTES = st.binary(min_size=1, max_size=16)
_VALUE_BYTES = st.binary(max_size=64)
_TEXT = st.text(max_size=40)
_SIZE = struct.Struct(">i")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_BATCH_HEADER = 61  # a v2 batch's header, up to and including RecordsCount
_CRC_OFFSET = 17
_ATTRIBUTES_OFFSET = 21
# v2 batch header fields after the CRC that a lie can target: (offset, struct).
_BATCH_FIELDS = ((8, _I32), (16, struct.Struct(">b")), (21, _I16), (23, _I32), (27, _I64),
                 (35, _I64), (43, _I64), (51, _I16), (53, _I32), (57, _I32), (12, _I32))


@dataclass(frozen=True)
class Input:
    """What one connection sends; ``framed``: every frame's size prefix is honest."""

    data: bytes
    framed: bool
    how: str  # the mutations applied, for reports


# --- bytes ------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=8192)
def _ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.integers(lo, hi)  # built once per range: building a strategy costs more than a draw


def _int(draw: Draw, lo: int, hi: int) -> int:
    return int(draw(_ints(lo, hi)))


def _choice(draw: Draw, options: Sequence[T]) -> T:
    return options[_int(draw, 0, len(options) - 1)]


def _special_or_any(draw: Draw, specials: Sequence[int], lo: int, hi: int) -> int:
    """One of ``specials`` (those within lo..hi) half of the time, else anything in lo..hi."""
    inside = [v for v in specials if lo <= v <= hi]
    if inside and draw(_BOOLS):
        return _choice(draw, inside)
    return _int(draw, lo, hi)


def _pos(draw: Draw, buf: bytes | bytearray, *, end: bool = False) -> int:
    return _int(draw, 0, len(buf) if end else max(len(buf) - 1, 0))


def _length_candidates(buf: bytes | bytearray) -> list[tuple[int, int]]:
    """(position, width) of int16 / int32 values that could be a size or a count here:
    non-negative and no larger than what follows."""
    found = []
    n = len(buf)
    for p in range(n - 1):
        v16 = (buf[p] << 8) | buf[p + 1]
        if 0 < v16 <= n - p - 2:
            found.append((p, 2))
        if p + 3 < n and buf[p] == 0 and buf[p + 1] == 0:
            v32 = (buf[p + 2] << 8) | buf[p + 3]
            if 0 < v32 <= n - p - 4:
                found.append((p, 4))
    return found


def _varint_candidates(buf: bytes | bytearray) -> list[int]:
    """Positions of one-byte unsigned varints that could be a compact length here."""
    n = len(buf)
    return [p for p in range(n) if 1 < buf[p] < 0x80 and buf[p] - 1 <= n - p - 1]


def mutate_bytes(draw: Draw, data: bytes) -> tuple[bytes, str]:
    """One byte-level mutation of ``data`` (a frame body, or a batch's records)."""
    buf = bytearray(data)
    if not buf:
        return bytes(draw(_SHORT_BYTES)), "fill"
    op = _choice(draw, BYTE_OPS)
    if op == "flip":
        p = _pos(draw, buf)
        buf[p] ^= 1 << _int(draw, 0, 7)
    elif op == "byte":
        buf[_pos(draw, buf)] = _choice(draw, INTERESTING_BYTES)
    elif op == "int":
        width = _choice(draw, (2, 4, 8))
        if len(buf) >= width:
            p = _int(draw, 0, len(buf) - width)
            lo, hi = -(1 << (8 * width - 1)), (1 << (8 * width - 1)) - 1
            value = _special_or_any(draw, (lo, -1, 0, 1, hi), lo, hi)
            buf[p:p + width] = value.to_bytes(width, "big", signed=True)
    elif op == "insert":
        p = _pos(draw, buf, end=True)
        buf[p:p] = draw(_INSERTED_BYTES)
    elif op == "delete":
        p = _pos(draw, buf)
        del buf[p:p + _int(draw, 1, 16)]
    elif op == "repeat":
        p = _pos(draw, buf)
        chunk = buf[p:p + _int(draw, 1, 64)]
        buf[p:p] = chunk * _int(draw, 1, 8)
    elif op == "truncate":
        del buf[_pos(draw, buf):]
    elif op == "length":
        candidates = _length_candidates(buf)
        if candidates:
            p, width = _choice(draw, candidates)
            old = int.from_bytes(buf[p:p + width], "big")
            lie = _choice(draw, (old - 1, old + 1, old * 2, *LENGTH_LIES))
            bits = 8 * width
            lie = max(min(lie, (1 << (bits - 1)) - 1), -(1 << (bits - 1)))
            buf[p:p + width] = lie.to_bytes(width, "big", signed=True)
    elif op == "varint":
        varints = _varint_candidates(buf)
        if varints:
            p = _choice(draw, varints)
            buf[p:p + 1] = _choice(draw, (bytes([buf[p] - 1]), bytes([buf[p] + 1]), *VARINT_LIES))
    else:  # splice: this frame's start, another seed's end
        other = _choice(draw, SEEDS).frame[4:]
        buf = buf[:_pos(draw, buf)] + other[_pos(draw, other):]
    return bytes(buf), op


# --- fields -------------------------------------------------------------------------------------


def _field_slots(obj: Any, schema: StructSchema, version: int, path: str,
                 out: list[tuple[Any, Any, str]]) -> None:
    """(owner, field schema, path) of every field of ``obj`` present in ``version``."""
    for f in schema.fields:
        if version not in f.versions:
            continue
        out.append((obj, f, f"{path}.{f.name}"))
        value = getattr(obj, f.name)
        if f.kind == "struct" and value is not None:
            assert f.struct is not None
            _field_slots(value, f.struct, version, f"{path}.{f.name}", out)
        elif f.kind == "array" and isinstance(f.item, StructSchema) and value:
            for i, item in enumerate(value):
                _field_slots(item, f.item, version, f"{path}.{f.name}[{i}]", out)


def _hostile_value(draw: Draw, f: Any, value: Any, version: int) -> Any:
    nullable = version in f.nullable
    if nullable and _int(draw, 0, 4) == 0:
        return None
    kind = f.kind
    if kind in INT_BOUNDS:
        lo, hi = INT_BOUNDS[kind]
        return _special_or_any(draw, (lo, -1, 0, 1, hi, 1000, 100_000), lo, hi)
    if kind == "bool":
        return not value
    if kind == "float64":
        return _choice(draw, (float("nan"), float("inf"), -1.0, 1e308))
    if kind == "string":
        return _choice(draw, HOSTILE_STRINGS) if draw(_BOOLS) else draw(_TEXT)
    if kind in ("bytes", "records"):
        return draw(_VALUE_BYTES) if draw(_BOOLS) else _choice(draw, (b"", b"\x00" * 4096))
    if kind == "uuid":
        return uuid.UUID(int=_choice(draw, (1, (1 << 128) - 1)))
    if kind == "array":
        items = list(value or [])
        k = _choice(draw, AMPLIFY)
        if not items:
            return [] if k == 0 else items
        return (items * k)[:k] if k <= len(items) else [items[i % len(items)] for i in range(k)]
    return value


def mutate_fields(draw: Draw, seed: Seed) -> tuple[bytes, str] | None:
    """The seed decoded, one field (or two) made hostile, encoded again; None when the value
    cannot be encoded (then the caller falls back to bytes)."""
    header, body = decode_request(seed.frame[4:])
    slots: list[tuple[Any, Any, str]] = []
    api = body.api
    _field_slots(body, api.request_schema, seed.version, api.name, slots)
    if not slots:
        return None
    hows = []
    amplified = False
    for _ in range(_int(draw, 1, 2)):
        owner, f, path = _choice(draw, slots)
        if f.kind == "array":
            if amplified:
                continue  # one multiplied array per input: 1000 x 1000 is a client's bug
            amplified = True
        setattr(owner, f.name, _hostile_value(draw, f, getattr(owner, f.name), seed.version))
        hows.append(path)
    try:
        frame = encode_request(body, seed.version, header.correlation_id, header.client_id)
    except Exception:  # noqa: BLE001 - a value the codec refuses to write (string too long)
        return None
    if len(frame) > MAX_INPUT:
        return None
    return frame, "field " + ",".join(hows)


# --- records inside a Produce -------------------------------------------------------------------


def _assemble(header: bytearray, payload: bytes, fix_crc: bool) -> bytes:
    batch = header + payload
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    if fix_crc:
        struct.pack_into(">I", batch, _CRC_OFFSET, crc32c(bytes(batch[_ATTRIBUTES_OFFSET:])))
    return bytes(batch)


def mutate_batch(draw: Draw, batch: bytes) -> tuple[bytes, str]:
    """One mutation of a v2 batch (see the module docstring); legacy sets get bytes only."""
    if len(batch) < _BATCH_HEADER or batch[16] != 2:
        mutated, op = mutate_bytes(draw, batch)
        return _fix_legacy_crc(mutated, draw(_BOOLS)), f"legacy {op}"
    header = bytearray(batch[:_BATCH_HEADER])
    payload = batch[_BATCH_HEADER:]
    codec = Compression(header[22] & 0x07)
    fix_crc = _int(draw, 0, 9) > 0
    where = _choice(draw, ("header", "records", "payload", "codec"))
    if where == "header":
        offset, fmt = _choice(draw, _BATCH_FIELDS)
        old = fmt.unpack_from(header, offset)[0]
        bits = 8 * fmt.size
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        value = _special_or_any(draw, (old - 1, old + 1, lo, -1, 0, 1, hi), lo, hi)
        fmt.pack_into(header, offset, value)
        batch_out = bytearray(_assemble(header, payload, fix_crc=False))
        if offset != 8:  # a lying BatchLength is the point, keep it
            struct.pack_into(">i", batch_out, 8, len(batch_out) - 12)
        if fix_crc:
            struct.pack_into(">I", batch_out, _CRC_OFFSET,
                             crc32c(bytes(batch_out[_ATTRIBUTES_OFFSET:])))
        return bytes(batch_out), f"batch header @{offset}={value}"
    if where == "codec":
        header[22] = (header[22] & 0xF8) | _int(draw, 0, 7)
        return _assemble(header, payload, fix_crc), "batch codec bits"
    if where == "payload" or codec == Compression.NONE:
        mutated, op = mutate_bytes(draw, payload)
        return _assemble(header, mutated, fix_crc), f"batch payload {op}"
    records = decompress(codec, payload)
    mutated, op = mutate_bytes(draw, records)
    return _assemble(header, compress(codec, mutated), fix_crc), f"batch records {op}"


def _fix_legacy_crc(data: bytes, fix: bool) -> bytes:
    """Recompute the CRC-32 of the first legacy message, so its content lies past the CRC."""
    if not fix or len(data) < 17:
        return data
    buf = bytearray(data)
    size = _I32.unpack_from(buf, 8)[0]
    end = min(12 + max(size, 0), len(buf))
    struct.pack_into(">I", buf, 12, zlib.crc32(bytes(buf[16:end])))
    return bytes(buf)


def mutate_produce(draw: Draw, seed: Seed) -> tuple[bytes, str]:
    header, body = decode_request(seed.frame[4:])
    partition = body.topic_data[0].partition_data[0]
    partition.records, how = mutate_batch(draw, bytes(partition.records))
    return encode_request(body, seed.version, header.correlation_id, header.client_id), how


def _reframe(body: bytes) -> bytes:
    return _SIZE.pack(len(body)) + body


# --- scenarios: valid requests about one edge-case topic -----------------------------------------

# Names Kafka accepts (or refuses by rule) that stress what a broker does with a name: the
# longest allowed (its directory names must still fit 255 bytes), names that collide once '.'
# and '_' are mapped alike (Kafka's Topic.hasCollision), internal topics, punctuation only.
EDGE_NAMES = ("a" * 249, "a" * 248 + ".", "fuzz.edge", "fuzz_edge", "__consumer_offsets",
              "__transaction_state", "-", "_", "..a", "a..", "A" * 200, "fuzz-topic-0")
_SEED_TOPICS = frozenset({TOPIC, DOOMED_TOPIC, "fuzz-created"})
# Seeds that name a topic, by API: a scenario draws the API first, so that the few that create
# or delete a topic are as likely as the many versions of Fetch or Produce.
TOPIC_SEEDS: list[list[Seed]] = [
    group for key in sorted({s.api_key for s in SEEDS})
    if (group := [s for s in SEEDS if s.api_key == key
                  and any(t.encode() in s.frame for t in _SEED_TOPICS)])]


def _retarget(obj: Any, schema: StructSchema, version: int, name: str) -> None:
    """Point every topic name in ``obj`` at ``name``; CreateTopics stops validating only."""
    for f in schema.fields:
        if version not in f.versions:
            continue
        value = getattr(obj, f.name)
        if f.kind == "string" and value in _SEED_TOPICS:
            setattr(obj, f.name, name)
        elif f.name == "validate_only":
            setattr(obj, f.name, False)
        elif f.kind == "struct" and value is not None:
            assert f.struct is not None
            _retarget(value, f.struct, version, name)
        elif f.kind == "array" and value:
            if isinstance(f.item, StructSchema):
                for item in value:
                    _retarget(item, f.item, version, name)
            else:
                setattr(obj, f.name, [name if v in _SEED_TOPICS else v for v in value])


def mutate_scenario(draw: Draw) -> Input:
    """Two to five valid requests pipelined on one connection, all about one edge-case topic
    (create it, produce to it, fetch, describe, delete ...), in a drawn order."""
    name = _choice(draw, EDGE_NAMES)
    frames, hows = [], []
    for _ in range(_int(draw, 2, 5)):
        seed = _choice(draw, _choice(draw, TOPIC_SEEDS))
        header, body = decode_request(seed.frame[4:])
        _retarget(body, body.api.request_schema, seed.version, name)
        frames.append(encode_request(body, seed.version, header.correlation_id, header.client_id))
        hows.append(seed.name)
    return Input(b"".join(frames), True, f"scenario {name[:20]!r}: {', '.join(hows)}")


# --- whole inputs -------------------------------------------------------------------------------


def mutate(draw: Draw, seed: Seed) -> Input:
    """A mutated input made from ``seed``: one to three mutations, maybe a lying size prefix,
    maybe a valid request pipelined behind it; or, now and then, a scenario instead."""
    if _int(draw, 0, 7) == 0:
        return mutate_scenario(draw)
    level = _choice(draw, ("bytes", "bytes", "fields", "records"))
    hows: list[str] = []
    frame = seed.frame
    if level == "records" and seed.api_key == ApiKey.PRODUCE:
        frame, how = mutate_produce(draw, seed)
        hows.append(how)
    elif level == "fields":
        result = mutate_fields(draw, seed)
        if result is not None:
            frame, how = result
            hows.append(how)
    if not hows or draw(_BOOLS):
        body = frame[4:]
        for _ in range(_int(draw, 1, 3)):
            body, op = mutate_bytes(draw, body)
            hows.append(op)
        frame = _reframe(body)
    framed = True
    if _int(draw, 0, 9) == 0:
        size = _choice(draw, (-1, 0, 1, 3, len(frame) - 3, len(frame), len(frame) + 100,
                              1 << 20, 0x7FFFFFFF))
        frame = _SIZE.pack(size) + frame[4:]
        hows.append(f"size prefix {size}")
        framed = size == len(frame) - 4
    if framed and _int(draw, 0, 4) == 0:
        frame += _choice(draw, SEEDS).frame
        hows.append("then a valid request")
    return Input(frame, framed, "; ".join(hows))

