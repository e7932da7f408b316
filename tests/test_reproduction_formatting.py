"""The numbers of the reproductions' markdown tables (`hf_jepa.reproductions.formatting`)."""

import math

from hf_jepa.reproductions.formatting import percent


def test_percent_has_one_decimal_and_a_unit():
    assert percent(0.519) == "51.9%"
    assert percent(1) == "100.0%"
    assert percent(0.0625, unit="") == "6.2"


def test_percent_marks_what_is_not_a_finite_number():
    for value in (None, math.nan, math.inf, "0.5", True):
        assert percent(value) == "n/a"
    assert percent(None, missing="-") == "-"
