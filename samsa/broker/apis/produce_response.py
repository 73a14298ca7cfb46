"""The usual Produce answer (one topic, one partition, appended) from a template.

A librdkafka producer sends one ProduceRequest per partition batch, thousands a second, and
every answer has the same shape: only the correlation id, partition index, base offset, log
append time and log start offset change.  Building the response objects and running the
generic encoder for it costs a few microseconds per request; patching those five fields into a
copy of a frame the generic encoder produced once costs under one.  The template *is* the
generic encoder's output (probe values are written, found and then overwritten), so the bytes
cannot drift from it; tests compare the two for every version.
"""

from __future__ import annotations

import struct

from samsa.protocol import ProduceResponse, encode_response

__all__ = ["success_frame"]

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
# PartitionIndex, ErrorCode (0), BaseOffset, LogAppendTimeMs and, from v5, LogStartOffset follow
# one another in every version: patched with one call.
_FIELDS = struct.Struct(">ihqq")
_FIELDS_V5 = struct.Struct(">ihqqq")
# Distinct probe values whose encodings cannot occur elsewhere in the probe frame.
_PROBE_CORRELATION = 0x5A17C0DE
_PROBE_INDEX = 0x5A1DE7E5
_PROBE_BASE_OFFSET = 0x5AB45E0FF5E75A01
_PROBE_APPEND_TIME = 0x5AA99E4D71AE5A02
_PROBE_START_OFFSET = 0x5A57A27FF5E75A03


class _Template:
    __slots__ = ("append_time_at", "base_offset_at", "correlation_at", "frame", "index_at",
                 "start_offset_at")

    def __init__(self, version: int, topic: str) -> None:
        probe = ProduceResponse(throttle_time_ms=0, responses=[
            ProduceResponse.TopicProduceResponse(name=topic, partition_responses=[
                ProduceResponse.PartitionProduceResponse(
                    index=_PROBE_INDEX, error_code=0, base_offset=_PROBE_BASE_OFFSET,
                    log_append_time_ms=_PROBE_APPEND_TIME,
                    log_start_offset=_PROBE_START_OFFSET, record_errors=[],
                    error_message=None)])])
        (frame,) = encode_response(probe, version, _PROBE_CORRELATION)
        self.frame = frame
        self.correlation_at = _find(frame, _I32.pack(_PROBE_CORRELATION))
        self.index_at = _find(frame, _I32.pack(_PROBE_INDEX))
        self.base_offset_at = _find(frame, _I64.pack(_PROBE_BASE_OFFSET))
        self.append_time_at = _find(frame, _I64.pack(_PROBE_APPEND_TIME))
        # log_start_offset exists from v5; before that the field is not on the wire.
        self.start_offset_at = _find(frame, _I64.pack(_PROBE_START_OFFSET), optional=True)
        if (self.base_offset_at != self.index_at + 6
                or self.append_time_at != self.base_offset_at + 8
                or self.start_offset_at not in (-1, self.append_time_at + 8)):
            raise AssertionError(f"ProduceResponse v{version}: the patched fields are not "
                                 "contiguous")


def _find(frame: bytes, pattern: bytes, *, optional: bool = False) -> int:
    count = frame.count(pattern)
    if count == 0 and optional:
        return -1
    if count != 1:
        raise AssertionError(f"probe {pattern.hex()} occurs {count} times in the template")
    return frame.index(pattern)


_templates: dict[tuple[int, str], _Template] = {}


def success_frame(version: int, correlation_id: int, topic: str, index: int, base_offset: int,
                  log_append_time_ms: int, log_start_offset: int) -> bytes:
    """The size-prefixed ProduceResponse frame ``encode_response`` would give for one topic and
    one partition appended without error (throttle 0, no record errors, no error message)."""
    template = _templates.get((version, topic))
    if template is None:
        template = _templates[(version, topic)] = _Template(version, topic)
        if len(_templates) > 10_000:  # topic names are client-chosen: keep the cache bounded
            _templates.clear()
            _templates[(version, topic)] = template
    out = bytearray(template.frame)
    _I32.pack_into(out, template.correlation_at, correlation_id)
    if template.start_offset_at >= 0:
        _FIELDS_V5.pack_into(out, template.index_at, index, 0, base_offset, log_append_time_ms,
                             log_start_offset)
    else:
        _FIELDS.pack_into(out, template.index_at, index, 0, base_offset, log_append_time_ms)
    return bytes(out)
