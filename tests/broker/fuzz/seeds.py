"""The fuzzer's seed corpus: one valid request frame for every API key and version the broker
serves (samsa/broker/apis/versions.py SERVED), plus Produce requests carrying valid batches of
every codec (v2 batches, and magic 0/1 message sets for Produce v0-2).

Seeds are generated, deterministically, from the protocol declarations: every field present in a
version gets a representative value (a declared default, or one chosen by the field's name so
that requests address the fuzz topic, group and partition and are answered with error 0 where a
single request can be), arrays get one element.  A new API or version in SERVED gets seeds
without any change here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from samsa.broker.apis.versions import SERVED
from samsa.protocol import APIS, ApiKey, encode_request
from samsa.protocol.schema import FieldSchema, StructSchema
from samsa.records import Compression, RecordBatchBuilder
from samsa.records.legacy_builder import build_legacy_records

TOPIC = "fuzz-topic"
PARTITIONS = 2
DOOMED_TOPIC = "fuzz-doomed"  # what DeleteTopics seeds delete: never the topic the rest use
GROUP = "fuzz-group"
CLIENT_ID = "fuzz"
TIMESTAMP_MS = 1_700_000_000_000
ALL_CODECS = (Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4,
              Compression.ZSTD)
LEGACY_CODECS = ALL_CODECS[:4]  # zstd exists only from magic 2 on (KIP-110)


@dataclass(frozen=True)
class Seed:
    """A valid request frame (with its 4-byte size prefix) and what it is."""

    api_key: int
    version: int
    label: str
    frame: bytes

    @property
    def name(self) -> str:
        return f"{APIS[self.api_key].name}-v{self.version}-{self.label}"


# Values chosen by field name; a callable gets the enclosing struct's name.
_BY_NAME: dict[str, Any] = {
    "topic": TOPIC, "topic_name": TOPIC, "resource_name": TOPIC, "resource_name_filter": TOPIC,
    "group_id": GROUP, "key": GROUP, "protocol_type": "consumer", "protocol_name": "range",
    "principal": "User:fuzz", "principal_filter": "User:fuzz", "host": "*", "host_filter": "*",
    "mechanism": "PLAIN", "acks": -1, "timeout_ms": 5000, "max_wait_ms": 0, "min_bytes": 1,
    "max_bytes": 1 << 20, "partition_max_bytes": 1 << 20, "session_timeout_ms": 6000,
    "rebalance_timeout_ms": 100, "replica_id": -1, "producer_id": -1, "producer_epoch": -1,
    "current_leader_epoch": -1, "leader_epoch": 0, "last_fetched_epoch": -1,
    "generation_id": -1, "generation_id_or_member_epoch": -1, "member_epoch": -1,
    "timestamp": -1, "max_num_offsets": 1, "num_partitions": 1, "replication_factor": 1,
    "count": PARTITIONS, "transaction_timeout_ms": 60_000, "commit_timestamp": -1,
    "retention_time_ms": -1, "committed_leader_epoch": -1, "session_id": 0,
    "session_epoch": -1, "log_start_offset": -1, "iterations": 4096, "mechanism_int8": 1,
    "resource_type": 2, "resource_type_filter": 2, "operation": 2, "permission_type": 3,
    "resource_pattern_type": 3, "pattern_type_filter": 3, "config_operation": 0,
    "response_partition_limit": 100, "key_type": 0, "endpoint_type": 1,
    "salt": b"fuzz-salt", "salted_password": b"\x01" * 32, "auth_bytes": b"\x00fuzz\x00fuzz",
    "metadata": b"\x00\x00\x00\x00\x00\x01\x00\x0afuzz-topic\x00\x00\x00\x00",
    "assignment": b"", "committed_metadata": "", "reason": "fuzz",
    "client_software_name": "samsa-fuzz", "client_software_version": "1.0",
    "validate_only": True, "transactional_id": None,
}
# "name" depends on what it names.
_NAME_IN: dict[str, str] = {
    "CreatableTopic": "fuzz-created", "AlterConfigsResource": TOPIC,
    "AlterableConfig": "retention.ms", "CreatableTopicConfig": "retention.ms",
    "ScramCredentialDeletion": "fuzz-user", "ScramCredentialUpsertion": "fuzz-user",
    "UserName": "fuzz-user", "JoinGroupRequestProtocol": "range",
    "DeleteTopicState": DOOMED_TOPIC,
}
_VALUE_IN: dict[str, str] = {"AlterableConfig": "604800000", "CreatableTopicConfig": "604800000"}


def _batch(codec: Compression, records: int = 3) -> bytes:
    builder = RecordBatchBuilder(compression=codec)
    for i in range(records):
        builder.append(TIMESTAMP_MS + i, b"key-%d" % i, b"value-%d" % i * 4,
                       [("h", b"v")] if i == 1 else None)
    return builder.build()


def _legacy(magic: int, codec: Compression) -> bytes:
    entries = [(i, TIMESTAMP_MS + i, b"key-%d" % i, b"value-%d" % i) for i in range(3)]
    return build_legacy_records(magic, codec, entries)


def _field_value(f: FieldSchema, struct_name: str, version: int, records: bytes) -> Any:
    if f.kind == "records":
        return records
    if f.name == "name" and struct_name in _NAME_IN:
        return _NAME_IN[struct_name]
    if f.name == "name":
        return TOPIC
    if f.name == "value" and struct_name in _VALUE_IN:
        return _VALUE_IN[struct_name]
    if struct_name == "JoinGroupRequest" and f.name == "group_id":
        # A group per version: a v0 member (whose rebalance timeout is its session timeout)
        # would make every later version's seed wait for it to rejoin.
        return f"{GROUP}-v{version}"
    if f.name == "transactional_id" and version not in f.nullable:
        return "fuzz-txn"  # the transaction APIs (null only where a producer may omit it)
    if f.kind == "int8" and f.name == "mechanism":
        return _BY_NAME["mechanism_int8"]
    if f.name in _BY_NAME and f.kind != "array":
        return _BY_NAME[f.name]
    return f.default_factory()()  # the declared default, else the type's (0, "", zero uuid)


def _array_item(f: FieldSchema, struct_name: str) -> Any:
    """The single element of a primitive array."""
    if f.name in ("topic_names", "coordinator_keys"):
        return DOOMED_TOPIC if f.name == "topic_names" else GROUP
    if f.name in ("groups", "groups_names"):
        return GROUP
    if f.item in ("int32", "int64"):
        return 0
    if f.name == "states_filter":
        return "Stable"
    if f.name == "types_filter":
        return "classic"
    if f.name == "configuration_keys":
        return "retention.ms"
    return TOPIC


def build_message(schema: StructSchema, version: int, records: bytes) -> Any:
    """An instance of ``schema``'s class with every field of ``version`` filled in."""
    values: dict[str, Any] = {}
    for f in schema.fields:
        if version not in f.versions:
            continue
        if f.kind == "struct":
            assert f.struct is not None
            values[f.name] = build_message(f.struct, version, records)
        elif f.kind == "array":
            if f.name == "assignments" and schema.name != "SyncGroupRequest":
                # CreateTopics / CreatePartitions: counts, not an explicit assignment.
                values[f.name] = None if version in f.nullable else []
            elif isinstance(f.item, StructSchema):
                values[f.name] = [build_message(f.item, version, records)]
            else:
                values[f.name] = [_array_item(f, schema.name)]
        else:
            values[f.name] = _field_value(f, schema.name, version, records)
    return schema.cls(**values)


def _frame(api_key: int, version: int, records: bytes, correlation_id: int) -> bytes:
    api = APIS[api_key]
    request = build_message(api.request_schema, version, records)
    return encode_request(request, version, correlation_id, CLIENT_ID)


def build_seeds() -> list[Seed]:
    """Every seed, in a fixed order (the fuzzer refers to seeds by index)."""
    seeds: list[Seed] = []
    correlation_id = 1
    for key, (low, high) in sorted(SERVED.items()):
        for version in range(low, high + 1):
            if key == ApiKey.PRODUCE:
                bodies = ([(f"magic{m}-{c.name.lower()}", _legacy(m, c))
                           for m in (0, 1) for c in LEGACY_CODECS] if version <= 2 else
                          [(f"v2-{c.name.lower()}", _batch(c)) for c in ALL_CODECS
                           if c != Compression.ZSTD or version >= 7])  # KIP-110
            else:
                bodies = [("default", _batch(Compression.NONE))]
            for label, records in bodies:
                seeds.append(Seed(int(key), version, label,
                                  _frame(int(key), version, records, correlation_id)))
                correlation_id += 1
    return seeds


SEEDS: list[Seed] = build_seeds()
