"""The one generic codec: compiles an encoder and a decoder per struct and version, then caches them.

Rules (Kafka's message generator README and protocol guide):
* fields are written in declaration order, only those whose ``versions`` include the version;
* flexible versions use compact strings/bytes/arrays (unsigned varint length + 1, 0 = null) and
  end every struct with a tagged-field section: count, then ``tag, size, payload`` in tag order;
  unknown tags are skipped on read (and kept in ``unknown_tags``);
* writing a field the version does not have is an error unless the field is ``ignorable`` or
  holds its default value (Java's UnsupportedVersionException);
* runs of fixed-width fields are packed and unpacked with one ``struct`` call.

Strings, bytes, records, arrays and the tagged-field section are generated inline (a broker
decodes and encodes one or two of each per request, and a call per length prefix shows);
tagged fields are compared with their defaults inline, and the general writer (tag order,
unknown tags merged in) runs only when something must be written.
"""

from __future__ import annotations

import keyword
import struct
import uuid
from collections.abc import Callable
from typing import Any

from samsa.errors import UnsupportedVersionError
from samsa.protocol.message import Message
from samsa.protocol.schema import FieldSchema, StructSchema
from samsa.protocol.types import (
    BYTES_LIKE,
    FIXED,
    FIXED_FORMAT,
    INT16,
    INT32,
    Decoder,
    Encoder,
    GatherChunks,
    ProtocolDecodeError,
    bytes_codec,
    length_codec,
    past_end,
    read_uvarint,
    records_codec,
    string_codec,
    write_records,
    write_uvarint,
)

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
        out: list[Any] = []
        append = out.append
        for _ in range(n):
            x, pos = dec_item(buf, pos)
            append(x)
        return out, pos

    return enc, dec


class _Step:
    """One step of a compiled struct: a single field, or a packed run of fixed-width fields."""

    __slots__ = ("fields", "packer")

    def __init__(self, fields: list[FieldSchema], packer: struct.Struct | None) -> None:
        self.fields = fields
        self.packer = packer


_IMMUTABLE = (int, float, str, bytes, bool, type(None), uuid.UUID)


class _Source:
    """Python source being generated for one function, and the objects it refers to."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        self.lines: list[str] = []
        self.ns = namespace

    def bind(self, value: Any, hint: str = "k") -> str:
        """A global name in the generated code for ``value``."""
        name = f"_{hint}{len(self.ns)}"
        self.ns[name] = value
        return name

    def default(self, f: FieldSchema) -> str:
        """An expression for the field's default: a constant, or a call for mutable ones."""
        factory = f.default_factory()
        value = factory()
        if isinstance(value, _IMMUTABLE):
            return self.bind(value, "c")
        return self.bind(factory, "f") + "()"

    def equals_default(self, f: FieldSchema, expr: str) -> str:
        """A condition: ``expr == <the field's default>``, without building a default list or
        struct each time (a struct default is checked by its generated ``is_default``)."""
        value = f.default_factory()()
        if isinstance(value, Message):
            return f"{self.bind(is_default(value._schema), 'isdef')}({expr})"
        # An immutable constant, or an empty list that is only ever compared with.
        return f"{expr} == {self.bind(value, 'c')}"

    def differs_from_default(self, f: FieldSchema, expr: str) -> str:
        """The negation of ``equals_default``."""
        value = f.default_factory()()
        if isinstance(value, Message):
            return f"not {self.bind(is_default(value._schema), 'isdef')}({expr})"
        return f"{expr} != {self.bind(value, 'c')}"

    def add(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)


def _attr(name: str) -> str:
    if not name.isidentifier() or keyword.iskeyword(name):
        raise AssertionError(f"field name {name!r} is not a Python identifier")
    return "obj." + name


# StructSchema (hashed by identity) -> its generated is_default predicate.
_IS_DEFAULT: dict[StructSchema, Callable[[Any], bool]] = {}


def is_default(schema: StructSchema) -> Callable[[Any], bool]:
    """A generated predicate: ``value == schema.cls()`` (Message.__eq__: same type, every field
    of every version equal; unknown_tags not compared), without building the default instance.
    """
    check = _IS_DEFAULT.get(schema)
    if check is None:
        src = _Source({"cls": schema.cls})
        terms = ["type(v) is cls"]
        terms += [src.equals_default(f, "v." + f.name) for f in schema.fields]
        # e.g. LeaderIdAndEpoch: return type(v) is cls and v.leader_id == _c1 and ...
        src.add(0, "def is_default(v):")
        src.add(1, "return " + " and ".join(terms))
        source = "\n".join(src.lines) + "\n"
        exec(compile(source, f"<samsa is_default {schema.name}>", "exec"), src.ns)  # noqa: S102
        check = src.ns["is_default"]
        _IS_DEFAULT[schema] = check
    return check


def _differs(f: FieldSchema) -> Callable[[Any], bool]:
    """``value != <the field's default>`` as a callable, for the general tagged-field writer."""
    default = f.default_factory()()
    if isinstance(default, Message):
        check = is_default(default._schema)
        return lambda v: not check(v)
    return lambda v: v != default


def _tag_of(f: FieldSchema) -> int:
    assert f.tag is not None
    return f.tag


def _too_many(name: str, n: int, pos: int, left: int) -> ProtocolDecodeError:
    # Every element takes at least one byte: a larger count is a corrupt length.
    return ProtocolDecodeError(f"array {name!r} claims {n} elements at position {pos}, "
                               f"more than the {left} bytes left")


def _compile_struct(schema: StructSchema, version: int, flexible: bool) -> StructCodec:
    """Generate, compile and return the encoder and decoder of a struct at one version.

    The code is specialised to the version (which fields, compact or classic lengths, runs of
    fixed-width fields packed into one struct call) so that a message is read and written
    without interpreting a plan field by field; nested structs and uuids call their compiled
    codecs.
    """
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
    for f in regular:
        if f.kind in FIXED_FORMAT and f.kind != "bool":
            run.append(f)
            continue
        if run:
            steps.append(_Step(run, struct.Struct(">" + "".join(FIXED_FORMAT[r.kind] for r in run))))
            run = []
        steps.append(_Step([f], None))
    if run:
        steps.append(_Step(run, struct.Struct(">" + "".join(FIXED_FORMAT[r.kind] for r in run))))

    tagged.sort(key=_tag_of)
    tag_codecs = {_tag_of(f): (f, _field_codec(f, version, flexible)) for f in tagged}
    tag_writers = [(_tag_of(f), f.name, tag_codecs[_tag_of(f)][1][0], _differs(f))
                   for f in tagged]
    name = schema.name
    present_names = {f.name for f in regular} | {f.name for f in tagged}

    def encode_tags(buf: bytearray, obj: Any) -> None:
        """The general tagged-field writer: known fields that differ from their default and
        unknown tags, in ascending tag order."""
        present: list[tuple[int, bytes]] = []
        for tag, fname, enc, differs in tag_writers:
            value = getattr(obj, fname)
            if differs(value):
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

    def decode_tags(obj: Any, buf: Any, pos: int) -> int:
        unknown = None
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
                object.__setattr__(obj, f.name, v)
            pos = end
        obj.unknown_tags = unknown
        return pos

    def absent_field(fname: str, value: Any) -> None:
        raise UnsupportedVersionError(
            f"{name}.{fname} = {value!r} cannot be sent at version {version}: "
            "the field does not exist in that version"
        )

    ns: dict[str, Any] = {
        "new": object.__new__, "cls": cls, "read_uvarint": read_uvarint,
        "write_uvarint": write_uvarint, "ProtocolDecodeError": ProtocolDecodeError,
        "encode_tags": encode_tags, "decode_tags": decode_tags, "absent_field": absent_field,
        "pack": struct.pack, "unpack_from": struct.unpack_from,
        "pack_i16": INT16.pack, "pack_i32": INT32.pack,
        "unpack_i16": INT16.unpack_from, "unpack_i32": INT32.unpack_from,
        "past_end": past_end, "too_many": _too_many,
        "BYTES_LIKE": BYTES_LIKE, "write_records": write_records, "GatherChunks": GatherChunks,
    }
    enc_src = _Source(ns)
    dec_src = _Source(ns)
    enc_src.add(0, "def encode(buf, obj):")
    dec_src.add(0, "def decode(buf, pos):")
    dec_src.add(1, "obj = new(cls)")
    for step in steps:
        if step.packer is not None:
            targets = ", ".join(_attr(f.name) for f in step.fields)
            packer = step.packer
            enc_src.add(1, f"buf += {enc_src.bind(packer.pack, 'p')}({targets})")
            dec_src.add(1, f"{targets}, = {dec_src.bind(packer.unpack_from, 'u')}(buf, pos)")
            dec_src.add(1, f"pos += {packer.size}")
        else:
            _gen_field(step.fields[0], version, flexible, enc_src, dec_src,
                       schema.null_reads_as_empty)
    for f in absent:
        if f.name not in present_names:
            dec_src.add(1, f"{_attr(f.name)} = {dec_src.default(f)}")
        if not f.ignorable:
            enc_src.add(1, f"if {enc_src.differs_from_default(f, _attr(f.name))}:")
            enc_src.add(2, f"absent_field({f.name!r}, {_attr(f.name)})")
    if flexible:
        for f in tagged:
            dec_src.add(1, f"{_attr(f.name)} = {dec_src.default(f)}")
        # The tagged-field section is nearly always empty (one zero byte): test each known
        # tagged field against its default here, and call the general writer only when one
        # differs or unknown tags were kept.
        conditions = ["obj.unknown_tags"]
        conditions += [enc_src.differs_from_default(f, _attr(f.name)) for f in tagged]
        enc_src.add(1, f"if {' or '.join(conditions)}:")
        enc_src.add(2, "encode_tags(buf, obj)")
        enc_src.add(1, "else:")
        enc_src.add(2, "buf.append(0)")
        dec_src.add(1, "if buf[pos] == 0:")
        dec_src.add(2, "pos += 1")
        dec_src.add(2, "obj.unknown_tags = None")
        dec_src.add(1, "else:")
        dec_src.add(2, "pos = decode_tags(obj, buf, pos)")
    else:
        dec_src.add(1, "obj.unknown_tags = None")
    enc_src.add(1, "return None")
    dec_src.add(1, "return obj, pos")
    source = "\n".join(enc_src.lines + [""] + dec_src.lines) + "\n"
    exec(compile(source, f"<samsa codec {name} v{version}>", "exec"), ns)  # noqa: S102
    return ns["encode"], ns["decode"]


# -- generated code for one field ----------------------------------------------------------------
# Encoders take the value from ``obj.<field>`` and append to ``buf``; decoders read ``buf`` at
# ``pos``, set ``obj.<field>`` and advance ``pos``.  Locals ``v``, ``n``, ``end``, ``lst`` and
# ``x`` are scratch.

def _gen_field(f: FieldSchema, version: int, flexible: bool, enc_src: _Source,
               dec_src: _Source, null_reads_as_empty: bool = False) -> None:
    """Encoder and decoder lines for one field that is not part of a packed run."""
    target = _attr(f.name)
    compact = flexible if f.flexible is None else version in f.flexible
    nullable = version in f.nullable
    kind = f.kind
    if kind == "bool":
        enc_src.add(1, f"buf.append(1 if {target} else 0)")
        dec_src.add(1, f"{target} = buf[pos] != 0")
        dec_src.add(1, "pos += 1")
    elif kind in ("string", "bytes", "records"):
        _gen_sized(f, compact, nullable, enc_src, dec_src, null_reads_as_empty)
    elif kind == "array":
        _gen_array(f, version, flexible, compact, nullable, enc_src, dec_src)
    elif kind == "struct":
        assert f.struct is not None
        enc, dec = struct_codec(f.struct, version, flexible)
        e, d = enc_src.bind(enc, "e"), dec_src.bind(dec, "d")
        # Nullable struct fields (KIP-893) carry an int8 marker: -1 = null, 1 = present.
        enc_src.add(1, f"v = {target}")
        enc_src.add(1, "if v is None:")
        if nullable:
            enc_src.add(2, "buf.append(0xFF)")
        else:
            msg = f"struct field {f.name!r} is not nullable in this version"
            enc_src.add(2, f"raise ValueError({msg!r})")
        enc_src.add(1, "else:")
        if nullable:
            enc_src.add(2, "buf.append(1)")
        enc_src.add(2, f"{e}(buf, v)")
        if nullable:
            dec_src.add(1, "if buf[pos] == 0xFF:")
            dec_src.add(2, f"{target} = None")
            dec_src.add(2, "pos += 1")
            dec_src.add(1, "else:")
            dec_src.add(2, f"{target}, pos = {d}(buf, pos + 1)")
        else:
            dec_src.add(1, f"{target}, pos = {d}(buf, pos)")
    else:  # uuid (other fixed-width kinds are always in packed runs)
        enc, dec = _field_codec(f, version, flexible)
        enc_src.add(1, f"{enc_src.bind(enc, 'e')}(buf, {target})")
        dec_src.add(1, f"{target}, pos = {dec_src.bind(dec, 'd')}(buf, pos)")


def _gen_write_length(src: _Source, indent: int, length: str, compact: bool, wide: bool) -> None:
    """Append the length prefix ``length`` (an expression): a varint of length + 1 (one byte
    below 127, written inline), or an int32/int16."""
    if compact:
        src.add(indent, f"n = {length} + 1")
        src.add(indent, "if n < 0x80:")
        src.add(indent + 1, "buf.append(n)")
        src.add(indent, "else:")
        src.add(indent + 1, "write_uvarint(buf, n)")
    else:
        src.add(indent, f"buf += {'pack_i32' if wide else 'pack_i16'}({length})")


def _gen_read_length(src: _Source, indent: int, compact: bool, wide: bool) -> None:
    """Read a length prefix into ``n`` (-1 = null) and advance ``pos``."""
    if compact:
        src.add(indent, "n = buf[pos]")
        src.add(indent, "if n < 0x80:")
        src.add(indent + 1, "pos += 1")
        src.add(indent, "else:")
        src.add(indent + 1, "n, pos = read_uvarint(buf, pos)")
        src.add(indent, "n -= 1")
    else:
        src.add(indent, f"n, = {'unpack_i32' if wide else 'unpack_i16'}(buf, pos)")
        src.add(indent, f"pos += {4 if wide else 2}")


def _gen_null_write(src: _Source, what: str, name: str, compact: bool, wide: bool,
                    nullable: bool) -> None:
    """The ``if v is None:`` branch of an encoder (indent 2, under ``if v is None:``)."""
    if not nullable:
        src.add(2, f"raise ValueError({f'{what} {name!r} is not nullable in this version'!r})")
    elif compact:
        src.add(2, "buf.append(0)")
    else:
        src.add(2, "buf += " + repr(b"\xff\xff\xff\xff" if wide else b"\xff\xff"))


def _gen_sized(f: FieldSchema, compact: bool, nullable: bool, enc_src: _Source,
               dec_src: _Source, null_reads_as_empty: bool = False) -> None:
    """A length-prefixed string, bytes or records field."""
    target = _attr(f.name)
    kind = f.kind
    wide = kind != "string"
    # encode
    enc_src.add(1, f"v = {target}")
    enc_src.add(1, "if v is None:")
    _gen_null_write(enc_src, "field", f.name, compact, wide, nullable)
    enc_src.add(1, "else:")
    if kind == "string":
        enc_src.add(2, "v = v.encode()")
    _gen_write_length(enc_src, 2, "len(v)", compact, wide)
    if kind == "records":
        # File slices (zero-copy sends) are not bytes-like, and a GatherChunks splices large
        # values in too: write_records does both.
        enc_src.add(2, "if isinstance(v, BYTES_LIKE) and type(buf) is not GatherChunks:")
        enc_src.add(3, "buf += v")
        enc_src.add(2, "else:")
        enc_src.add(3, "write_records(buf, v)")
    else:
        enc_src.add(2, "buf += v")
    # decode
    what = f"{'string' if kind == 'string' else kind} {f.name!r}"
    _gen_read_length(dec_src, 1, compact, wide)
    dec_src.add(1, "if n < 0:")
    if nullable or kind == "records":  # a null records value is read as None in any version
        dec_src.add(2, f"{target} = None")
    elif null_reads_as_empty:
        dec_src.add(2, f"{target} = {'str()' if kind == 'string' else 'bytes()'}")
    else:
        dec_src.add(2, f"raise ProtocolDecodeError({f'non-nullable {what} was null'!r})")
    dec_src.add(1, "else:")
    dec_src.add(2, "end = pos + n")
    dec_src.add(2, "if end > len(buf):")
    dec_src.add(3, f"raise past_end({what!r}, pos, n, len(buf))")
    if kind == "string":
        dec_src.add(2, "try:")
        dec_src.add(3, f"{target} = str(buf[pos:end], 'utf-8')")
        dec_src.add(2, "except UnicodeDecodeError as e:")
        dec_src.add(3, f"raise ProtocolDecodeError({f'{what} is not valid UTF-8: '!r} + str(e))"
                       " from None")
    elif kind == "bytes":
        dec_src.add(2, f"{target} = bytes(buf[pos:end])")
    else:
        # A slice, not a copy, when the input is a memoryview (the broker's frames).
        dec_src.add(2, f"{target} = buf[pos:end]")
    dec_src.add(2, "pos = end")


_SHORT_ARRAY = 32


def _array_structs(fixed_format: str, method: str) -> list[Any]:
    """``Struct("><k><format>").<method>`` for k = 0 .. _SHORT_ARRAY - 1."""
    return [getattr(struct.Struct(f">{k}{fixed_format}"), method) for k in range(_SHORT_ARRAY)]


def _gen_array(f: FieldSchema, version: int, flexible: bool, compact: bool, nullable: bool,
               enc_src: _Source, dec_src: _Source) -> None:
    """An array: elements of a fixed-width kind in one struct call, others one by one."""
    target = _attr(f.name)
    item = f.item
    fixed_format = None
    if isinstance(item, StructSchema):
        item_enc, item_dec = struct_codec(item, version, flexible)
    else:
        assert isinstance(item, str)
        if item in FIXED_FORMAT and item != "bool":
            fixed_format = FIXED_FORMAT[item]
        fake = FieldSchema.__new__(FieldSchema)
        fake.kind, fake.name, fake.flexible = item, f.name + "[]", None
        fake.nullable = f.nullable.__class__(1, 0)
        item_enc, item_dec = _field_codec(fake, version, flexible)
    e, d = enc_src.bind(item_enc, "e"), dec_src.bind(item_dec, "d")
    # encode
    enc_src.add(1, f"v = {target}")
    enc_src.add(1, "if v is None:")
    _gen_null_write(enc_src, "array field", f.name, compact, True, nullable)
    enc_src.add(1, "else:")
    if fixed_format is not None:
        packs = enc_src.bind(_array_structs(fixed_format, "pack"), "packs")
        enc_src.add(2, "k = len(v)")
        _gen_write_length(enc_src, 2, "k", compact, wide=True)
        # Precompiled Structs for short arrays (a format string per call costs more than the
        # packing); nothing to pack for an empty one.
        enc_src.add(2, f"if 0 < k < {_SHORT_ARRAY}:")
        enc_src.add(3, f"buf += {packs}[k](*v)")
        enc_src.add(2, "elif k:")
        enc_src.add(3, f"buf += pack('>%d{fixed_format}' % k, *v)")
    else:
        _gen_write_length(enc_src, 2, "len(v)", compact, wide=True)
        enc_src.add(2, "for x in v:")
        enc_src.add(3, f"{e}(buf, x)")
    # decode
    _gen_read_length(dec_src, 1, compact, wide=True)
    dec_src.add(1, "if n < 0:")
    if nullable:
        dec_src.add(2, f"{target} = None")
    else:
        dec_src.add(2, f"raise ProtocolDecodeError({f'non-nullable array {f.name!r} was null'!r})")
    dec_src.add(1, "else:")
    dec_src.add(2, "if n > len(buf) - pos:")
    dec_src.add(3, f"raise too_many({f.name!r}, n, pos, len(buf) - pos)")
    if fixed_format is not None:
        size = struct.calcsize(">" + fixed_format)
        unpacks = dec_src.bind(_array_structs(fixed_format, "unpack_from"), "unpacks")
        dec_src.add(2, f"if n < {_SHORT_ARRAY}:")
        dec_src.add(3, f"{target} = list({unpacks}[n](buf, pos))")
        dec_src.add(2, "else:")
        dec_src.add(3, f"{target} = list(unpack_from('>%d{fixed_format}' % n, buf, pos))")
        dec_src.add(2, f"pos += n * {size}")
    else:
        dec_src.add(2, "lst = []")
        dec_src.add(2, "for _ in range(n):")
        dec_src.add(3, f"x, pos = {d}(buf, pos)")
        dec_src.add(3, "lst.append(x)")
        dec_src.add(2, f"{target} = lst")


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
    except MALFORMED as e:
        raise malformed(schema, version, e) from None


# What a generated decoder raises on truncated or malformed input besides ProtocolDecodeError
# (no bounds checks on the hot path: a short buffer fails in struct or indexing).
MALFORMED = (struct.error, IndexError, ValueError)


def malformed(schema: StructSchema, version: int, e: Exception) -> ProtocolDecodeError:
    return ProtocolDecodeError(
        f"{schema.name} v{version} does not parse: the message is truncated or malformed ({e})")
