"""The request versions KIP-896 removed in Kafka 4.0, byte for byte against kafka-python.

samsa serves Kafka 3.9's version ranges (samsa/broker/apis/versions.py).  kafka-python 3.x's
JSON-driven classes (test_kafka_python_interop.py) come from Kafka 4.x's message definitions,
which no longer have those versions; its hand-written pre-3.0 classes (``kafka.protocol.old``)
do, and were written by other people from the protocol guide.  For every served version below
the JSON classes' range that an old class exists for, request and response:

* a samsa-encoded random message decodes with kafka-python to the same values, field by field
  in wire order;
* kafka-python encodes those values to the very same bytes.

Every newly served old version must be covered here or by the JSON interop test (checked
below).
"""

from __future__ import annotations

import importlib
import io
import pkgutil
import uuid
import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.protocol
    import kafka.protocol.old
    from kafka.protocol.old.api import Request, Response

from samsa.broker.apis.versions import SERVED
from samsa.protocol import APIS, encode_body
from samsa.protocol.schema import StructSchema

from .kafka_python_classes import kafka_python_classes
from .strategies import body_strategy, present_fields


def _old_classes() -> dict[tuple[int, str, int], Any]:
    found: dict[tuple[int, str, int], Any] = {}
    for mod in pkgutil.walk_packages(kafka.protocol.old.__path__, "kafka.protocol.old."):
        module = importlib.import_module(mod.name)
        for obj in vars(module).values():
            if not isinstance(obj, type) or getattr(obj, "API_VERSION", None) is None:
                continue
            if not isinstance(getattr(obj, "SCHEMA", None), kafka.protocol.old.types.Schema):
                continue
            side = ("request" if issubclass(obj, Request)
                    else "response" if issubclass(obj, Response) else None)
            if side is not None:
                found[(obj.API_KEY, side, obj.API_VERSION)] = obj
    return found


def _json_minimums() -> dict[tuple[int, str], int]:
    return {key: int(str(cls._json["validVersions"]).split("-")[0])
            for key, cls in kafka_python_classes().items()}


OLD = _old_classes()
JSON_MIN = _json_minimums()
# Served versions below what kafka-python's JSON classes know (KIP-896 removals).
REMOVED = [(key, side, v) for key, (lo, _) in sorted(SERVED.items())
           for side in ("request", "response")
           for v in range(lo, JSON_MIN.get((key, side), lo))]
# kafka-python's hand-written class is wrong here: DescribeLogDirsRequest_v0 declares
# Partitions as one int32 where Kafka's DescribeLogDirsRequest.json has []int32.
KAFKA_PYTHON_BUGS = {(35, "request", 0)}
CASES = [c for c in REMOVED if c in OLD and c not in KAFKA_PYTHON_BUGS]


def test_every_removed_version_is_checked() -> None:
    assert REMOVED, "kafka-python's JSON classes should lack the KIP-896 versions"
    missing = [c for c in REMOVED if c not in OLD]
    assert not missing, f"no kafka-python class to check these against: {missing}"
    for key, _side, version in CASES:
        assert APIS[key].supports(version)


def _positional(message: Any, schema: StructSchema, version: int) -> list[Any]:
    """The message's present fields in wire order, nested the way kafka-python's old Schema
    decodes (structs as lists, arrays as lists)."""
    out: list[Any] = []
    for f in present_fields(schema, version, False):
        value = getattr(message, f.name)
        if f.kind == "struct":
            assert f.struct is not None
            value = _positional(value, f.struct, version)
        elif f.kind == "array" and value is not None:
            item = f.item
            if isinstance(item, StructSchema):
                value = [_positional(v, item, version) for v in value]
            else:
                value = list(value)
        elif f.kind in ("bytes", "records") and value is not None:
            value = bytes(value)
        elif f.kind == "uuid":
            value = value if value != uuid.UUID(int=0) else None
        out.append(value)
    return out


def _normalized(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_normalized(v) for v in value]
    return value


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{APIS[c[0]].name}-{c[1]}-v{c[2]}")
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_old_version_bytes_match_kafka_python(case: tuple[int, str, int], data: Any) -> None:
    key, side, version = case
    api = APIS[key]
    schema = api.request_schema if side == "request" else api.response_schema
    message = data.draw(body_strategy(key, side, version))
    ours = encode_body(message, version)
    old = OLD[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        decoded = old.SCHEMA.decode(io.BytesIO(ours))
        expected = _positional(message, schema, version)
        assert _normalized(decoded) == _normalized(expected)
        theirs = old.SCHEMA.encode(expected)
    assert bytes(theirs) == ours
