"""Cross-check samsa's codec against kafka-python 3.x's JSON-driven protocol classes.

kafka-python was written by other people from Kafka's message JSON (4.2), so agreeing with it
catches mistakes that a samsa-only round trip cannot (an encoder and decoder that share a
misunderstanding).  For every API samsa declares and every version both libraries know,
request and response:

* the declared field trees agree (names, types, nullability, tags);
* samsa-encoded random messages decode with kafka-python to equal values;
* kafka-python-encoded messages decode with samsa to equal values, and the bytes are identical;
* whole frames (size + header + body) are byte-identical, including the ApiVersions response
  header v0 rule.

Known, deliberate differences between the two libraries are listed below and handled
explicitly; nothing else is tolerated.
"""

from __future__ import annotations

import uuid
import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# A missing peer must fail loudly, never skip.  (kafka-python loads its JSON with a
# deprecated importlib.resources call; silence that noise, it is not ours.)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka
    import kafka.protocol

from samsa.protocol import (
    APIS,
    decode_body,
    decode_request,
    decode_response,
    encode_body,
    encode_request,
    encode_response,
)
from samsa.protocol.schema import FieldSchema, StructSchema

from .kafka_python_classes import kafka_python_classes
from .strategies import body_strategy, present_fields

INT32_MIN = -(2**31)
ZERO_UUID = uuid.UUID(int=0)


def test_kafka_python_version() -> None:
    major = int(kafka.__version__.split(".")[0])
    assert major >= 3, f"these checks need kafka-python 3.x (JSON schemas), got {kafka.__version__}"


# -- finding kafka-python's classes ---------------------------------------------------------------

KP = kafka_python_classes()


def _kp_class(key: int, side: str) -> Any:
    cls = KP.get((key, side))
    assert cls is not None, f"kafka-python has no {side} class for API key {key}"
    return cls


def _common_versions(key: int) -> range:
    # kafka-python resets every class's minimum to 0 (it asks the broker instead), but its JSON
    # comes from Kafka 4.2, where versions below the 4.0 baseline (KIP-896) were removed and the
    # fields describing them may be gone; so only versions its JSON declares valid are compared.
    # samsa deliberately declares the older versions too (old clients; KIP-896 removed them only in Kafka 4.0).
    api = APIS[key]
    lo = max(api.min_version, _kp_class(key, "request").valid_versions[0])
    hi = min(api.max_version, _kp_class(key, "request").valid_versions[1])
    return range(lo, hi + 1)


def test_every_samsa_api_exists_in_kafka_python() -> None:
    for key, api in APIS.items():
        for side in ("request", "response"):
            cls = _kp_class(key, side)
            assert cls.name == f"{api.name}{side.capitalize()}"
        assert len(_common_versions(key)) > 0, api.name


CASES = [(key, side, v) for key in sorted(APIS) for v in _common_versions(key)
         for side in ("request", "response")]


def _case_id(case: tuple[int, str, int]) -> str:
    key, side, v = case
    return f"{APIS[key].name}-{side}-v{v}"


def test_sample_from_the_brief_is_covered() -> None:
    wanted = {"Produce": [3, 8, 9, 11, 12], "Fetch": [4, 11, 12, 15], "Metadata": [0, 4, 9, 12],
              "ApiVersions": [0, 3], "ListOffsets": [1, 6], "InitProducerId": [0, 2, 4],
              "CreateTopics": [2, 5], "OffsetCommit": [2, 8], "JoinGroup": [0, 5, 6],
              "SyncGroup": [3, 5], "FindCoordinator": [0, 3, 4], "DescribeConfigs": [1, 4]}
    covered = {(APIS[k].name, v) for k, _, v in CASES}
    missing = [(n, v) for n, vs in wanted.items() for v in vs if (n, v) not in covered]
    assert not missing


# -- known differences ----------------------------------------------------------------------------
# kafka-python patches three schemas: the int32 "authorized operations" bit fields are renamed to
# ``authorized_operations`` and typed "bitfield" (a set of bit positions; INT32_MIN, i.e. only
# bit 31, means "not requested" and reads as None).  Values are converted, not ignored.

RENAMES: dict[tuple[int, str, str], str] = {
    # (api key, samsa struct name, samsa field name) -> kafka-python field name
    (3, "MetadataResponse", "cluster_authorized_operations"): "authorized_operations",
    (3, "MetadataResponseTopic", "topic_authorized_operations"): "authorized_operations",
    (60, "DescribeClusterResponse", "cluster_authorized_operations"): "authorized_operations",
    (15, "DescribedGroup", "authorized_operations"): "authorized_operations",
}


def _kp_name(key: int, schema: StructSchema, f: FieldSchema) -> str:
    return RENAMES.get((key, schema.name, f.name), f.name)


def _int_to_bitfield(value: int) -> set[int] | None:
    if value == INT32_MIN:
        return None
    bits = value & 0xFFFFFFFF
    return {b for b in range(32) if bits >> b & 1}


def _bitfield_to_int(value: set[int] | None) -> int:
    if value is None:
        return INT32_MIN
    n = sum(1 << b for b in value)
    return n - (1 << 32) if n >= 1 << 31 else n


def _kp_fields(kp_container: Any) -> dict[str, Any]:
    fields = kp_container.fields
    return dict(fields) if isinstance(fields, dict) else {f.name: f for f in fields}


def _is_struct(f: FieldSchema) -> bool:
    return f.kind == "struct"


def _is_struct_array(f: FieldSchema) -> bool:
    return f.kind == "array" and isinstance(f.item, StructSchema)


def _kp_reads_as_v0(key: int, side: str, message: Any) -> bool:
    """kafka-python reads every ApiVersions response with a non-zero error code as a v0 body,
    whatever version was asked for: that is what a broker sends when it does not know the
    requested version (KIP-511).  For such messages the samsa -> kafka-python direction is
    checked on the v0 encoding; kafka-python -> samsa is checked at the real version."""
    return key == 18 and side == "response" and message.error_code != 0


# -- value conversion ------------------------------------------------------------------------------

def _to_kp(key: int, schema: StructSchema, kp_fields: dict[str, Any], obj: Any, version: int,
           flexible: bool) -> dict[str, Any]:
    """samsa struct -> keyword arguments for the kafka-python data class."""
    out: dict[str, Any] = {}
    for f in present_fields(schema, version, flexible):
        name = _kp_name(key, schema, f)
        kf = kp_fields[name]
        value = getattr(obj, f.name)
        if kf.type_str == "bitfield":
            value = _int_to_bitfield(value)
        elif f.kind == "uuid" and value == ZERO_UUID:
            # kafka-python spells the zero UUID None (it encodes None as 16 zero bytes); its
            # tagged-field writer compares with that default, so pass None to omit a default
            # tagged UUID as Kafka does.
            value = None
        elif _is_struct(f) and value is not None:
            assert f.struct is not None
            if f.tag is not None and value == f.default_factory()():
                # kafka-python's default for a tagged struct is None and it writes any other
                # value; Kafka (and samsa) omit a tagged field equal to its default.  None is
                # how kafka-python spells "default", so the wire bytes agree.
                value = None
            else:
                value = kf.data_class(**_to_kp(key, f.struct, _kp_fields(kf), value, version,
                                               flexible))
        elif _is_struct_array(f) and value is not None:
            assert isinstance(f.item, StructSchema)
            sub = _kp_fields(kf)
            value = [kf.data_class(**_to_kp(key, f.item, sub, x, version, flexible))
                     for x in value]
        out[name] = value
    return out


def _from_kp(key: int, schema: StructSchema, kp_obj: Any, version: int, flexible: bool) -> Any:
    """kafka-python decoded object -> samsa struct of the same values."""
    kwargs: dict[str, Any] = {}
    kp_fields = _kp_fields(kp_obj._struct)
    for f in present_fields(schema, version, flexible):
        name = _kp_name(key, schema, f)
        kf = kp_fields[name]
        value = getattr(kp_obj, name)
        if kf.type_str == "bitfield":
            value = _bitfield_to_int(value)
        elif f.kind == "uuid" and value is None:
            value = ZERO_UUID  # kafka-python reads the zero UUID as None
        elif f.kind in ("bytes", "records") and isinstance(value, (memoryview, bytearray)):
            value = bytes(value)
        elif _is_struct(f):
            assert f.struct is not None
            if value is None and f.tag is not None and version not in f.nullable:
                value = f.default_factory()()  # absent tagged struct = its default
            elif value is not None:
                value = _from_kp(key, f.struct, value, version, flexible)
        elif _is_struct_array(f) and value is not None:
            assert isinstance(f.item, StructSchema)
            value = [_from_kp(key, f.item, x, version, flexible) for x in value]
        kwargs[f.name] = value
    return schema.cls(**kwargs)


def _samsa_to_kp_message(key: int, side: str, version: int, message: Any) -> Any:
    api = APIS[key]
    schema = api.request_schema if side == "request" else api.response_schema
    kp_cls = _kp_class(key, side)
    kwargs = _to_kp(key, schema, _kp_fields(kp_cls._struct), message, version,
                    api.is_flexible(version))
    return kp_cls(version=version, **kwargs)


def _kp_to_samsa_message(key: int, side: str, version: int, kp_obj: Any) -> Any:
    api = APIS[key]
    schema = api.request_schema if side == "request" else api.response_schema
    return _from_kp(key, schema, kp_obj, version, api.is_flexible(version))


# -- schema agreement ----------------------------------------------------------------------------

def _describe_samsa(key: int, schema: StructSchema, version: int, flexible: bool) -> dict:
    out = {}
    for f in present_fields(schema, version, flexible):
        t, sub = f.type_name, None
        if _is_struct(f):
            assert f.struct is not None
            t, sub = "struct", _describe_samsa(key, f.struct, version, flexible)
        elif _is_struct_array(f):
            assert isinstance(f.item, StructSchema)
            t, sub = "[]struct", _describe_samsa(key, f.item, version, flexible)
        if (key, schema.name, f.name) in RENAMES:
            assert t == "int32"
            t = "bitfield"
        out[_kp_name(key, schema, f)] = (t, version in f.nullable, f.tag, sub)
    return out


def _in(rng: tuple[int, int] | None, v: int) -> bool:
    return rng is not None and rng[0] <= v <= rng[1]


def _describe_kp(kp_fields: dict[str, Any], version: int, flexible: bool) -> dict:
    out = {}
    for kf in kp_fields.values():
        if not kf.for_version_q(version):
            continue
        if kf.tag is not None and not (flexible and kf.tagged_field_q(version)):
            continue
        t, sub = kf.type_str, None
        if kf.is_struct():
            t, sub = "struct", _describe_kp(_kp_fields(kf), version, flexible)
        elif kf.is_struct_array():
            t, sub = "[]struct", _describe_kp(_kp_fields(kf), version, flexible)
        out[kf.name] = (t, kf.nullable_for_version_q(version), kf.tag, sub)
    return out


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_schemas_agree(case: tuple[int, str, int]) -> None:
    key, side, version = case
    api = APIS[key]
    kp_cls = _kp_class(key, side)
    assert api.is_flexible(version) == kp_cls.flexible_version_q(version)
    schema = api.request_schema if side == "request" else api.response_schema
    flexible = api.is_flexible(version)
    assert _describe_samsa(key, schema, version, flexible) == _describe_kp(
        _kp_fields(kp_cls._struct), version, flexible)


# -- values and bytes -----------------------------------------------------------------------------

INTEROP = settings(max_examples=10, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
@INTEROP
@given(data=st.data())
def test_bodies_interoperate(case: tuple[int, str, int], data: Any) -> None:
    key, side, version = case
    kp_cls = _kp_class(key, side)
    message = data.draw(body_strategy(key, side, version), label="message")
    samsa_bytes = encode_body(message, version)

    samsa_cls = APIS[key].request_class if side == "request" else APIS[key].response_class

    # samsa -> kafka-python
    if _kp_reads_as_v0(key, side, message):
        v0_bytes = encode_body(message, 0)
        kp_decoded = kp_cls.decode(v0_bytes, version=version)
        assert _kp_to_samsa_message(key, side, 0, kp_decoded) == decode_body(samsa_cls, 0, v0_bytes)
    else:
        kp_decoded = kp_cls.decode(samsa_bytes, version=version)
        assert _kp_to_samsa_message(key, side, version, kp_decoded) == message

    # kafka-python -> samsa, and the same bytes
    kp_message = _samsa_to_kp_message(key, side, version, message)
    kp_bytes = bytes(kp_message.encode(version=version))
    assert decode_body(samsa_cls, version, kp_bytes) == message
    assert kp_bytes == samsa_bytes


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
@settings(max_examples=3, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_frames_interoperate(case: tuple[int, str, int], data: Any) -> None:
    key, side, version = case
    kp_cls = _kp_class(key, side)
    message = data.draw(body_strategy(key, side, version), label="message")
    correlation_id = data.draw(st.integers(-(2**31), 2**31 - 1), label="correlation_id")
    kp_message = _samsa_to_kp_message(key, side, version, message)
    if side == "request":
        client_id = data.draw(st.none() | st.text(max_size=6), label="client_id")
        kp_message.with_header(correlation_id=correlation_id, client_id=client_id)
        kp_frame = bytes(kp_message.encode(header=True, framed=True))
        samsa_frame = encode_request(message, version, correlation_id, client_id)
        assert samsa_frame == kp_frame
        header, body = decode_request(kp_frame[4:])
        assert (header.request_api_key, header.request_api_version) == (key, version)
        assert (header.correlation_id, header.client_id) == (correlation_id, client_id)
        assert body == message
        kp_decoded = kp_cls.decode(samsa_frame, version=version, header=True, framed=True)
        assert kp_decoded.header.correlation_id == correlation_id
        assert kp_decoded.header.client_id == client_id
        assert _kp_to_samsa_message(key, side, version, kp_decoded) == message
    else:
        kp_message.with_header(correlation_id=correlation_id)
        kp_frame = bytes(kp_message.encode(header=True, framed=True))
        [samsa_frame] = encode_response(message, version, correlation_id)
        assert samsa_frame == kp_frame
        got_correlation_id, body = decode_response(key, version, kp_frame[4:])
        assert got_correlation_id == correlation_id and body == message
        read_version = 0 if _kp_reads_as_v0(key, side, message) else version
        [samsa_frame] = encode_response(message, read_version, correlation_id)
        kp_decoded = kp_cls.decode(samsa_frame, version=version, header=True, framed=True)
        assert kp_decoded.header.correlation_id == correlation_id
        _, expected = decode_response(key, read_version, samsa_frame[4:])
        assert _kp_to_samsa_message(key, side, read_version, kp_decoded) == expected


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_response_header_is_v0_in_both(version: int) -> None:
    api = APIS[18]
    response = api.response_class(error_code=35, api_keys=[
        api.response_class.ApiVersion(api_key=18, min_version=0, max_version=4)])
    [samsa_frame] = encode_response(response, version, 99)
    kp_message = _samsa_to_kp_message(18, "response", version, response)
    kp_message.with_header(correlation_id=99)
    assert samsa_frame == bytes(kp_message.encode(header=True, framed=True))
    # Header v0: the correlation id is followed directly by the int16 error code, even at v3+.
    assert samsa_frame[4:8] == (99).to_bytes(4, "big")
    assert samsa_frame[8:10] == (35).to_bytes(2, "big")
