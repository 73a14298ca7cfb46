"""Hypothesis strategies for record batches."""

from __future__ import annotations

from hypothesis import strategies as st

from samsa.records import Compression

BASE_TS = 1_700_000_000_000

keys = st.none() | st.binary(max_size=300)
values = st.none() | st.binary(max_size=3000)
headers = st.lists(
    st.tuples(st.text(max_size=20), st.none() | st.binary(max_size=50)),
    max_size=4,
)
# Deltas from the base timestamp, including negative ones and large (multi-byte) ones.
timestamps = st.integers(min_value=-(10**9), max_value=10**9).map(lambda d: BASE_TS + d)
record = st.tuples(timestamps, keys, values, headers)
records = st.lists(record, min_size=1, max_size=40)
codecs = st.sampled_from(list(Compression))
