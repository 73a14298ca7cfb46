"""``meta.properties``: the cluster id and node id a data directory belongs to, as in Kafka.

Kafka (KRaft) writes ``version=1``, ``cluster.id``, ``node.id`` and ``directory.id`` into each
log directory and refuses to start a node whose ``node.id`` differs from the one recorded.
Ids are Kafka ``Uuid`` strings: 16 random bytes in URL-safe base64 without padding
(22 characters), never starting with ``-`` (which command lines would take for an option).
"""

from __future__ import annotations

import base64
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from samsa.broker.config import parse_properties
from samsa.errors import ConfigError

__all__ = ["META_PROPERTIES", "MetaProperties", "load_or_create_meta_properties", "random_uuid"]

META_PROPERTIES = "meta.properties"


def random_uuid() -> str:
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not text.startswith("-"):
            return text


@dataclass(frozen=True, slots=True)
class MetaProperties:
    cluster_id: str
    node_id: int
    directory_id: str


def load_or_create_meta_properties(data_dir: str | os.PathLike[str], node_id: int) -> MetaProperties:
    """Read ``data_dir/meta.properties`` (creating it, with a new cluster id, if absent).

    Raises ConfigError when the directory belongs to another node id."""
    path = Path(data_dir) / META_PROPERTIES
    props: dict[str, str] = {}
    if path.exists():
        props = parse_properties(path.read_text(encoding="utf-8"))
        recorded = props.get("node.id") or props.get("broker.id")
        if recorded is not None and recorded.strip() != str(node_id):
            raise ConfigError(
                "node.id",
                f"{node_id} does not match node.id={recorded} recorded in {path}: use the "
                "recorded id or another data directory")
    changed = False
    if not props.get("cluster.id"):
        props["cluster.id"] = random_uuid()
        changed = True
    if not props.get("directory.id"):
        props["directory.id"] = random_uuid()
        changed = True
    if props.get("node.id") is None:
        props["node.id"] = str(node_id)
        changed = True
    props.setdefault("version", "1")
    if changed:
        _write(path, props)
    return MetaProperties(props["cluster.id"], node_id, props["directory.id"])


def _write(path: Path, props: dict[str, str]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(f"#\n#{time.strftime('%a %b %d %H:%M:%S %Z %Y')}\n")
        f.writelines(f"{key}={props[key]}\n" for key in sorted(props))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
