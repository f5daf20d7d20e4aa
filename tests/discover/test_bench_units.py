"""bench/feynman.py reads the units of the equations CSV and gives them to the pipeline."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("feynman_bench_units", ROOT / "bench" / "feynman.py")
fb = importlib.util.module_from_spec(spec)
sys.modules["feynman_bench_units"] = fb
spec.loader.exec_module(fb)

CSV = """id,set,output,output_units,formula,n_vars,notes,v1_name,v1_low,v1_high,v1_units,v2_name,v2_low,v2_high,v2_units,v3_name,v3_low,v3_high,v3_units,v4_name,v4_low,v4_high,v4_units
I.12.2,feynman,F,"Force, m^1 * s^(-2) * kg^1",q1*q2*r/(4*pi*epsilon*r**3),4,,q1,1,5,"Charge, m^2 * s^(-2) * kg^1 * V^(-1)",q2,1,5,"Charge, m^2 * s^(-2) * kg^1 * V^(-1)",epsilon,1,5,"Electric permitivity, m^1 * s^(-2) * kg^1 * V^(-2)",r,1,5,"Length, m^1"
T.2,feynman,F,,mu*Nn,2,,mu,1,5,,Nn,1,5,,,,,,,,,
"""


def test_units_are_read_per_variable_and_missing_ones_mean_none(tmp_path):
    path = tmp_path / "eq.csv"
    path.write_text(CSV)
    eqs = fb.load_equations(path)
    assert eqs[0].units[3] == "Length, m^1" and eqs[0].output_units.startswith("Force")
    assert eqs[1].units == () and eqs[1].output_units is None


def test_units_given_by_default_and_the_constant_case_is_recovered(tmp_path):
    path = tmp_path / "eq.csv"
    path.write_text(CSV)
    eq = fb.load_equations(path)[0]
    args = fb.parse_args(["--equations", str(path), "--rows", "300", "--test-rows", "50"])
    assert args.units is True and fb.parse_args(["--no-units"]).units is False
    row = fb.run_equation(eq, args)
    assert row["recovered"] and row["units"] and row["runs"] == 0 and row["r2_test"] > 0.999999
    assert row["reduction"]["groups"] == {}


def test_recovery_is_judged_on_the_sampling_ranges(tmp_path):
    from kansym.symbolic.verify import is_exact_recovery

    path = tmp_path / "eq.csv"
    path.write_text("id,output,formula,v1_name,v1_low,v1_high,v2_name,v2_low,v2_high,v3_name,v3_low,v3_high\n"
                    "I.48.2,E,m*c**2/sqrt(1-v**2/c**2),m,1,5,v,1,2,c,3,10\n")
    eq = fb.load_equations(path)[0]
    cand = "c**3*m/sqrt(c**2 - v**2)"  # equal for c > 0, which the range [3, 10] says
    assert is_exact_recovery(eq.truth_on_ranges(), cand, symbols=list(eq.names))
    assert not is_exact_recovery(eq.truth(), cand, symbols=list(eq.names))  # not for every real c
    assert not is_exact_recovery(eq.truth_on_ranges(), "c**3*m/sqrt(c**2 + v**2)", symbols=list(eq.names))
