"""The one generic codec: compiles an encoder and a decoder per struct and version, then caches them.

Rules (Kafka's message generator README and protocol guide):
* fields are written in declaration order, only those whose ``versions`` include the version;
* flexible versions use compact strings/bytes/arrays (unsigned varint length + 1, 0 = null) and
  end every struct with a tagged-field section: count, then ``tag, size, payload`` in tag order;
  unknown tags are skipped on read (and kept in ``unknown_tags``);
* writing a field the version does not have is an error unless the field is ``ignorable`` or
  holds its default value (Java's UnsupportedVersionException);
* runs of fixed-width fields are packed and unpacked with one ``struct`` call.
"""

from __future__ import annotations

import struct
from operator import attrgetter
from typing import Any, Callable

from samsa.protocol.message import Message
from samsa.protocol.schema import FieldSchema, StructSchema
from samsa.protocol.types import (
    FIXED,
    FIXED_FORMAT,
    Decoder,
    Encoder,
    ProtocolDecodeError,
    bytes_codec,
    length_codec,
    read_uvarint,
    records_codec,
    string_codec,
    write_uvarint,
)
from samsa.errors import UnsupportedVersionError

StructCodec = tuple[Encoder, Decoder]


def struct_codec(schema: StructSchema, version: int, flexible: bool) -> StructCodec:
    """The (encoder, decoder) pair of a struct at a version; compiled once and cached."""
    key = (version, flexible)
    codec = schema.codecs.get(key)
    if codec is None:
        codec = _compile_struct(schema, version, flexible)
        schema.codecs[key] = codec
    return codec


def _field_codec(f: FieldSchema, version: int, flexible: bool) -> StructCodec:
    compact = flexible if f.flexible is None else version in f.flexible
    nullable = version in f.nullable
    kind = f.kind
    if kind in FIXED:
        return FIXED[kind]
    if kind == "string":
        return string_codec(compact, nullable, f.name)
    if kind == "bytes":
        return bytes_codec(compact, nullable, f.name)
    if kind == "records":
        return records_codec(compact, nullable, f.name)
    if kind == "struct":
        assert f.struct is not None
        return _nullable_struct(f, struct_codec(f.struct, version, flexible), nullable)
    if kind == "array":
        item = f.item
        if isinstance(item, StructSchema):
            item_codec = struct_codec(item, version, flexible)
        else:
            assert isinstance(item, str)
            fake = FieldSchema.__new__(FieldSchema)
            fake.kind, fake.name, fake.flexible = item, f.name + "[]", None
            fake.nullable = f.nullable.__class__(1, 0)
            item_codec = _field_codec(fake, version, flexible)
        return _array_codec(f.name, item_codec, compact, nullable)
    raise AssertionError(f"unknown field kind {kind}")


def _nullable_struct(f: FieldSchema, codec: StructCodec, nullable: bool) -> StructCodec:
    if not nullable:
        enc_inner, dec_inner = codec

        def enc_required(buf: bytearray, v: Any) -> None:
            if v is None:
                raise ValueError(f"struct field {f.name!r} is not nullable in this version")
            enc_inner(buf, v)

        return enc_required, dec_inner
    enc_s, dec_s = codec

    def enc(buf: bytearray, v: Any) -> None:
        if v is None:
            buf.append(0xFF)  # int8 -1
        else:
            buf.append(1)
            enc_s(buf, v)

    def dec(buf: Any, pos: int) -> tuple[Any, int]:
        marker = buf[pos]
        if marker == 0xFF:
            return None, pos + 1
        return dec_s(buf, pos + 1)

    return enc, dec


def _array_codec(name: str, item: StructCodec, compact: bool, nullable: bool) -> StructCodec:
    write_len, read_len = length_codec(compact, wide=True)
    enc_item, dec_item = item

    def enc(buf: bytearray, v: Any) -> None:
        if v is None:
            if not nullable:
                raise ValueError(f"array field {name!r} is not nullable in this version")
            write_len(buf, -1)
            return
        write_len(buf, len(v))
        for x in v:
            enc_item(buf, x)

    def dec(buf: Any, pos: int) -> tuple[Any, int]:
        n, pos = read_len(buf, pos)
        if n < 0:
            if not nullable:
                raise ProtocolDecodeError(f"non-nullable array {name!r} was null")
            return None, pos
        if n > len(buf) - pos:
            # Every element takes at least one byte: a larger count is a corrupt length.
            raise ProtocolDecodeError(f"array {name!r} claims {n} elements at position {pos}, "
                                      f"more than the {len(buf) - pos} bytes left")
        out = []
        append = out.append
        for _ in range(n):
            x, pos = dec_item(buf, pos)
            append(x)
        return out, pos

    return enc, dec


class _Step:
    """One step of a compiled struct: a single field, or a packed run of fixed-width fields."""

    __slots__ = ("names", "enc", "dec", "packer")

    def __init__(self, names: tuple[str, ...], enc: Encoder | None, dec: Decoder | None,
                 packer: struct.Struct | None) -> None:
        self.names = names
        self.enc = enc
        self.dec = dec
        self.packer = packer


def _compile_struct(schema: StructSchema, version: int, flexible: bool) -> StructCodec:
    cls = schema.cls
    regular: list[FieldSchema] = []
    tagged: list[FieldSchema] = []
    absent: list[FieldSchema] = []
    for f in schema.fields:
        if version not in f.versions:
            absent.append(f)
        elif f.tag is not None and f.tagged is not None:
            if flexible and version in f.tagged:
                tagged.append(f)
            else:
                absent.append(f)
        else:
            regular.append(f)

    # Group consecutive fixed-width, non-bool fields into one struct format.
    steps: list[_Step] = []
    run: list[FieldSchema] = []

    def flush_run() -> None:
        if not run:
            return
        if len(run) == 1:
            enc, dec = _field_codec(run[0], version, flexible)
            steps.append(_Step((run[0].name,), enc, dec, None))
        else:
            fmt = ">" + "".join(FIXED_FORMAT[f.kind] for f in run)
            steps.append(_Step(tuple(f.name for f in run), None, None, struct.Struct(fmt)))
        run.clear()

    for f in regular:
        if f.kind in FIXED_FORMAT and f.kind != "bool":
            run.append(f)
        else:
            flush_run()
            enc, dec = _field_codec(f, version, flexible)
            steps.append(_Step((f.name,), enc, dec, None))
    flush_run()

    tag_codecs = {f.tag: (f, _field_codec(f, version, flexible)) for f in tagged}
    tag_order = sorted(tag_codecs)
    tag_defaults = {f.tag: f.default_factory() for f in tagged}
    absent_checks = [(f.name, f.default_factory()) for f in absent if not f.ignorable]
    defaults = cls._defaults
    field_names = set(cls._field_names)
    name = schema.name

    enc_plan: list[tuple[Callable[[Any], Any], Any, Any]] = []
    for step in steps:
        if step.packer is not None:
            enc_plan.append((attrgetter(*step.names), None, step.packer.pack))
        else:
            enc_plan.append((attrgetter(step.names[0]), step.enc, None))

    def encode(buf: bytearray, obj: Any) -> None:
        for get, enc, pack in enc_plan:
            if pack is not None:
                buf += pack(*get(obj))
            else:
                enc(buf, get(obj))  # type: ignore[misc]
        for fname, factory in absent_checks:
            value = getattr(obj, fname)
            if value != factory():
                raise UnsupportedVersionError(
                    f"{name}.{fname} = {value!r} cannot be sent at version {version}: "
                    "the field does not exist in that version"
                )
        if flexible:
            _encode_tags(buf, obj)

    def _encode_tags(buf: bytearray, obj: Any) -> None:
        present: list[tuple[int, bytes]] = []
        for tag in tag_order:
            f, (enc, _dec) = tag_codecs[tag]
            value = getattr(obj, f.name)
            if value == tag_defaults[tag]():
                continue
            sub = bytearray()
            enc(sub, value)
            present.append((tag, bytes(sub)))
        unknown = obj.unknown_tags
        if unknown:
            present.extend(unknown.items())
            present.sort(key=lambda kv: kv[0])
        write_uvarint(buf, len(present))
        for tag, payload in present:
            write_uvarint(buf, tag)
            write_uvarint(buf, len(payload))
            buf += payload

    dec_plan: list[tuple[tuple[str, ...], Any, Any]] = []
    for step in steps:
        if step.packer is not None:
            dec_plan.append((step.names, None, step.packer))
        else:
            dec_plan.append((step.names, step.dec, None))
    present_names = {n for s in steps for n in s.names} | {f.name for f in tagged}
    fill_defaults = [(n, factory) for n, factory in defaults if n not in present_names]
    tagged_fill = [(f.name, tag_defaults[f.tag]) for f in tagged]
    new = object.__new__
    setattr_ = object.__setattr__
    del field_names

    def decode(buf: Any, pos: int) -> tuple[Any, int]:
        obj = new(cls)
        for names, dec, packer in dec_plan:
            if packer is not None:
                values = packer.unpack_from(buf, pos)
                pos += packer.size
                for n, v in zip(names, values):
                    setattr_(obj, n, v)
            else:
                v, pos = dec(buf, pos)
                setattr_(obj, names[0], v)
        for n, factory in fill_defaults:
            setattr_(obj, n, factory())
        unknown = None
        if flexible:
            for n, factory in tagged_fill:
                setattr_(obj, n, factory())
            count, pos = read_uvarint(buf, pos)
            for _ in range(count):
                tag, pos = read_uvarint(buf, pos)
                size, pos = read_uvarint(buf, pos)
                end = pos + size
                if end > len(buf):
                    raise ProtocolDecodeError(
                        f"tagged field {tag} of {name} runs past the end of the message")
                entry = tag_codecs.get(tag)
                if entry is None:
                    if unknown is None:
                        unknown = {}
                    unknown[tag] = bytes(buf[pos:end])
                else:
                    f, (_enc, dec_t) = entry
                    v, _ = dec_t(buf[:end], pos)
                    setattr_(obj, f.name, v)
                pos = end
        setattr_(obj, "unknown_tags", unknown)
        return obj, pos

    return encode, decode


def encode_struct(obj: Message, version: int, flexible: bool, buf: bytearray) -> None:
    encode, _ = struct_codec(obj._schema, version, flexible)
    encode(buf, obj)


def decode_struct(schema: StructSchema, version: int, flexible: bool, buf: Any,
                  pos: int = 0) -> tuple[Any, int]:
    _, decode = struct_codec(schema, version, flexible)
    try:
        return decode(buf, pos)
    except ProtocolDecodeError:
        raise
    except (struct.error, IndexError, ValueError) as e:
        raise ProtocolDecodeError(
            f"{schema.name} v{version} does not parse: the message is truncated or malformed ({e})"
        ) from None
