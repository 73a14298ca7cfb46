"""Topic name rules (Kafka's ``Topic.validate``) and the internal topics."""

from __future__ import annotations

import re

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")

GROUP_METADATA_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC})


def topic_name_problem(name: str | None) -> str | None:
    """Why ``name`` is not a legal topic name, or None when it is."""
    if name is None or name == "":
        return "the topic name is empty"
    if name in (".", ".."):
        return f"topic name {name!r} is not allowed"
    if len(name) > MAX_NAME_LENGTH:
        return f"topic name is {len(name)} characters long; the limit is {MAX_NAME_LENGTH}"
    if not _LEGAL.fullmatch(name):
        return (f"topic name {name!r} is illegal: use only ASCII letters, digits, '.', '_' "
                f"and '-'")
    return None


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPICS
