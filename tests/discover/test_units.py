"""Unit parsing and dimensional analysis (kansym.discover.units): exact exponents on known laws."""

from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kansym.errors import DataError
from kansym.discover.dimensional import analyze
from kansym.discover.units import parse_unit, read_units

EQUATIONS = "/work/shared/data/feynman/equations.csv"
F = Fraction


@pytest.mark.parametrize("text, expected", [
    ("kg*m/s^2", {"kg": 1, "m": 1, "s": -2}),
    ("m^1 * s^(-2)", {"m": 1, "s": -2}),
    ("Velocity, m^1 * s^(-1)", {"m": 1, "s": -1}),
    ("Newton's constant, m^3 * s^(-2) * kg^(-1)", {"m": 3, "s": -2, "kg": -1}),
    ("m**2/(kg*s)", {"m": 2, "kg": -1, "s": -1}),
    ("m^(1/2)", {"m": F(1, 2)}),
    ("mol*cd/K", {"mol": 1, "cd": 1, "K": -1}),
    ("m/m", {}),
    ("Dimensionless", {}),
    ("1", {}),
    ("", {}),
])
def test_parse_unit(text, expected):
    assert parse_unit(text) == {k: F(v) for k, v in sorted(expected.items())}


@pytest.mark.parametrize("text", ["kg m", "2*m", "m+s", "sin(m)", "m^x", "m;import os"])
def test_parse_unit_errors_quote_the_unit(text):
    with pytest.raises(DataError, match="cannot read the unit") as info:
        parse_unit(text)
    assert text in str(info.value) and "\n" not in str(info.value)


@pytest.mark.skipif(not Path(EQUATIONS).exists(), reason="the Feynman equations CSV is not on this machine")
def test_every_unit_of_the_equations_csv_parses():
    df = pd.read_csv(EQUATIONS)
    cols = ["output_units"] + [c for c in df.columns if c.endswith("_units") and c != "output_units"]
    texts = set(df[cols].stack().dropna())
    parsed = {t: parse_unit(t) for t in texts}
    assert parsed["Boltzmann constant, m^2 * s^(-2) * kg^1 * T^(-1)"] == {"T": -1, "kg": 1, "m": 2, "s": -2}
    assert parsed["Τime, s^1"] == {"s": 1}  # the label starts with a Greek capital tau
    assert {d for p in parsed.values() for d in p} == {"m", "s", "kg", "T", "V"}


def test_read_units_inline_json_csv_and_missing(tmp_path):
    assert read_units("v=m/s, c=m/s", ["v", "c"]) == {"v": {"m": 1, "s": -1}, "c": {"m": 1, "s": -1}}
    js = tmp_path / "u.json"
    js.write_text('{"v": "m/s", "E": "Energy, m^2 * s^(-2) * kg^1"}')
    assert read_units(str(js), ["E"])["E"] == {"kg": 1, "m": 2, "s": -2}
    cs = tmp_path / "u.csv"
    cs.write_text('column,unit\nv,"Velocity, m^1 * s^(-1)"\nm,kg\n')
    assert read_units(str(cs), ["v", "m"]) == {"v": {"m": 1, "s": -1}, "m": {"kg": 1}}
    with pytest.raises(DataError, match="no unit given for column.* E"):
        read_units(str(cs), ["v", "m", "E"])


def test_kepler_is_a_pure_monomial():
    # T = 2 pi sqrt(a^3 / (G M)): the units fix every exponent, no group is left
    red = analyze(["a", "M", "G"], [parse_unit("m"), parse_unit("kg"), parse_unit("m^3/(kg*s^2)")], parse_unit("s"))
    assert red.groups == ()
    assert red.p == (F(3, 2), F(-1, 2), F(-1, 2))


def test_relativistic_energy_has_the_group_v_over_c():
    units = [parse_unit("kg"), parse_unit("m/s"), parse_unit("m/s")]
    red = analyze(["m", "v", "c"], units, parse_unit("kg*m^2/s^2"))
    assert red.groups == ((0, 1, -1),)  # v/c, mostly positive, first exponent positive
    assert red.dims == ("kg", "m", "s")
    # with data the monomial leaving y / x^p flattest is chosen: m c^2 (y' = gamma), not m v^2
    rng = np.random.default_rng(0)
    x = np.column_stack([rng.uniform(1, 5, 200), rng.uniform(1, 2, 200), rng.uniform(3, 10, 200)])
    y = x[:, 0] * x[:, 2] ** 2 / np.sqrt(1 - (x[:, 1] / x[:, 2]) ** 2)
    red = analyze(["m", "v", "c"], units, parse_unit("kg*m^2/s^2"), x, y)
    assert red.p == (1, 0, 2)
    g, yp = red.reduce(x, y)
    np.testing.assert_allclose(g[:, 0], x[:, 1] / x[:, 2])
    np.testing.assert_allclose(yp, 1 / np.sqrt(1 - g[:, 0] ** 2))


def test_null_space_is_sparse_integer_and_deterministic():
    # four lengths: three ratio groups, each of two variables
    red = analyze(["x1", "x2", "y1", "y2"], [parse_unit("m")] * 4, parse_unit("m"))
    assert red.groups == ((1, -1, 0, 0), (1, 0, -1, 0), (1, 0, 0, -1))
    assert red.group_names == ("pi1", "pi2", "pi3")
    # a dimensionless variable is its own group, named after itself
    red = analyze(["r", "F", "theta"], [parse_unit("m"), parse_unit("kg*m/s^2"), {}], parse_unit("kg*m^2/s^2"))
    assert red.groups == ((0, 0, 1),) and red.group_names == ("theta",)
    assert red.p == (1, 1, 0)


def test_inconsistent_units_give_none_and_all_dimensionless_is_trivial():
    assert analyze(["x"], [parse_unit("m")], parse_unit("s")) is None
    red = analyze(["a", "b"], [{}, {}], {})
    assert red.trivial and red.group_names == ("a", "b")


def test_a_ratio_group_is_turned_to_be_mostly_below_one():
    # columns in the order c, v: the circuit rule alone gives c/v; the data turn it to v/c
    rng = np.random.default_rng(0)
    x = np.column_stack([rng.uniform(3, 10, 100), rng.uniform(1, 2, 100)])
    units = [parse_unit("m/s"), parse_unit("m/s")]
    assert analyze(["c", "v"], units, parse_unit("m/s")).groups == ((1, -1),)
    assert analyze(["c", "v"], units, parse_unit("m/s"), x, x[:, 1]).groups == ((-1, 1),)


def test_monomials_reach_a_square_of_a_group():
    # E = -C / n^2 with n dimensionless: p + (-2) * [n] is among the monomials tried
    red = analyze(["m", "n"], [parse_unit("kg"), {}], parse_unit("kg"))
    assert (F(1), F(-2)) in red.monomials()


def test_a_column_given_twice_is_an_error_and_an_unused_one_a_warning(tmp_path, caplog):
    # Regressions (fresh-user check): a repeated column silently kept its last unit, and a
    # misspelt extra column was ignored without a word.
    with pytest.raises(DataError, match="unit of column 'm' is given twice"):
        read_units("m=kg,v=m/s,m=s", ["m", "v"])
    cs = tmp_path / "u.csv"
    cs.write_text("m,kg\nv,m/s\nm,s\n")
    with pytest.raises(DataError, match="line 3: the unit of column 'm' is given twice"):
        read_units(str(cs), ["m", "v"])
    with caplog.at_level("WARNING", logger="kansym.discover.units"):
        assert read_units("m=kg,v=m/s,zz=m", ["m", "v"]) == {"m": {"kg": 1}, "v": {"m": 1, "s": -1}}
    assert "units given for zz, which is not among the columns used (m, v); ignored" in caplog.text
