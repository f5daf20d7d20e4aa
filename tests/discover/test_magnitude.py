"""kansym.discover.rows: results of the power-of-two working units moved back to the table's units."""

import math

import numpy as np
import pytest
import sympy

from kansym.discover import DiscoverConfig, discover
from kansym.discover.rows import check_representable, formula_to_table
from kansym.discover.result import Formula
from kansym.errors import DataError
from kansym.io.magnitude import ColumnScales
from kansym.symbolic.pareto import FrontEntry
from kansym.symbolic.verify import Fidelity, is_exact_recovery, r2_score

A, C = sympy.symbols("a c", real=True)


def _formula(expr, r2=1.0, r2_test=1.0, r2_model_test=1.0):
    front = (FrontEntry(expr, 3, r2_test, 0.0, True),)
    return Formula(expr=expr, raw=expr, symbols=(A, C), fidelity=Fidelity(r2, r2, 0.5, 0.25), target="y",
                   r2_test=r2_test, r2_model_test=r2_model_test, n_test=20, front=front, origin="direct search",
                   reason=f"direct search: {expr} (R² 1, complexity 3) chosen over the KAN's formula")


def test_a_formula_comes_back_with_its_errors_and_reason_in_the_tables_units():
    scales = ColumnScales((-995, 0), (-996,))  # a near 1e-300, y near 1e-300: y = 2**-996 * 2 (2**995 a) c
    f = formula_to_table(_formula(2 * A * C), scales)
    assert f.expr == A * C and f.raw == A * C and f.front[0].expr == A * C
    assert f.fidelity.r2_data == 1.0 and f.fidelity.max_abs_err == math.ldexp(0.5, -996)
    assert f.fidelity.rmse == math.ldexp(0.25, -996)
    assert f.reason == "direct search: a*c (R² 1, complexity 3) chosen over the KAN's formula"
    assert formula_to_table(_formula(2 * A * C), ColumnScales((0, 0), (0,))).expr == 2 * A * C  # identity


def test_a_law_that_float64_cannot_evaluate_in_the_tables_units_is_refused():
    scales = ColumnScales((-995, 0), (1019,))
    x = np.c_[np.linspace(1, 3, 20) * 1e-300, np.linspace(0.5, 2, 20)]
    y = 1e307 * (x[:, 0] * 1e300) * x[:, 1]
    f = formula_to_table(_formula(A * C), scales)  # y = 2**2014 a c: 1.5e606, beyond float64
    with pytest.raises(DataError, match=r"^the law of y was found on the table rescaled by powers of two .*"
                                        r"overflows to inf or nan in float64 .*express those columns"):
        check_representable(f, x, y, scales)
    ok = formula_to_table(_formula(A * C), ColumnScales((-995, 0), (-995,)))
    check_representable(ok, x, x[:, 0] * x[:, 1], ColumnScales((-995, 0), (-995,)))  # a c itself is fine


def test_a_formula_with_r2_not_above_0_is_flagged_even_when_the_model_fails_too():
    # one outlying row (1e300 among values near 1) dominates every squared error: y = 0 came out unflagged
    f = _formula(sympy.Integer(0), r2=-0.006, r2_test=-0.16, r2_model_test=-math.inf)
    assert f.warning == "the formula's R² (-0.1600) is not above 0: it explains nothing of the target's variation"
    assert _formula(A * C).warning is None


def test_a_target_negative_on_every_row_is_found_with_its_sign():
    # a potential-like law, negative everywhere and spanning decades: log units need -y (stop 24)
    rng = np.random.default_rng(4)
    x = np.column_stack([10 ** rng.uniform(0, 3, 600), rng.uniform(1, 5, 600)])
    y = -x[:, 0] * x[:, 1] ** 2
    found = discover(x, y, ["a", "b"], ["E"], DiscoverConfig(time_limit=60), progress=False)
    f = found.formulas[0]
    a, b = sympy.symbols("a b", positive=True)
    assert is_exact_recovery(-a * b**2, f.expr) and f.warning is None
    assert found.trained.transform.log_space and found.trained.transform.output_sign == (-1.0,)
    pred = found.trained.predict(x)[:, 0]
    assert np.all(pred < 0) and r2_score(y, pred) > 0.5  # the model in the table's units, its sign included
