from __future__ import annotations

import pytest

from samsa.broker.log.files import parse_partition_dir_name


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("t-0", ("t", 0)),
        ("my-topic-12", ("my-topic", 12)),  # the partition follows the last dash
        ("-3", None),  # no topic
        ("topic", None),  # no dash
        ("t-", None),  # no partition
        ("t-x", None),
        ("t-0.0123abcd-delete", None),
        ("t-0.0123abcd-stray", None),
    ],
    ids=["plain", "dashed-topic", "no-topic", "no-dash", "no-number", "not-a-number", "delete", "stray"],
)
def test_parse_partition_dir_name(name: str, parsed: tuple[str, int] | None) -> None:
    assert parse_partition_dir_name(name) == parsed
