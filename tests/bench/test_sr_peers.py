"""bench/sr_peers.py: peers' models become sympy on the equation's variables; peers run
through the harness on kansym's rows (each peer test skips when its package is absent)."""

import importlib.util
import re
import sys
from collections import namedtuple
from pathlib import Path

import numpy as np
import pytest
import sympy

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT / "bench"))
spec = importlib.util.spec_from_file_location("feynman_bench_peers", ROOT / "bench" / "feynman.py")
fb = importlib.util.module_from_spec(spec)
sys.modules["feynman_bench_peers"] = fb
spec.loader.exec_module(fb)
import sr_peers  # noqa: E402

CSV = """id,output,formula,v1_name,v1_low,v1_high,v2_name,v2_low,v2_high
T.2,F,mu*Nn,mu,1,5,Nn,1,5
T.4,E_n,I*E/(1+I),I,1,5,E,1,5
"""
Node = namedtuple("Node", "name arity")  # gplearn's _Function as far as the conversion reads it


@pytest.fixture()
def eqs(tmp_path):
    path = tmp_path / "eq.csv"
    path.write_text(CSV)
    return path, fb.load_equations(path)


def _same(expr, names, fn, rng=np.random.default_rng(0)):
    x = rng.uniform(1, 5, size=(50, len(names)))
    got = sympy.lambdify(sr_peers.variables(names), expr, "numpy")(*x.T)
    return np.allclose(got, fn(*x.T), rtol=1e-12)


def test_operon_strings_become_sympy_on_the_variables_not_builtins():
    text = "(((-0.052448) * X0) / (sqrt(1 + (0.611357 * X1) ^ 2))) + exp(X2) * log(X3) + tanh(X1)"
    expr = sr_peers.operon_to_sympy(text, ["I", "E", "gamma", "beta"])
    assert sorted(s.name for s in expr.free_symbols) == ["E", "I", "beta", "gamma"]
    assert not expr.has(sympy.I) and not expr.has(sympy.E) and not expr.has(sympy.gamma)
    assert _same(expr, ["I", "E", "gamma", "beta"], lambda i, e, g, b: -0.052448 * i / np.sqrt(1 + (0.611357 * e) ** 2)
                 + np.exp(g) * np.log(b) + np.tanh(e))


def test_rils_strings_become_sympy():
    expr = sr_peers.rils_to_sympy("(((x1*x0)/(x0+1))+(1/exp(x1)))+pow(x0,2)+sqrt(x1)", ["I", "E"])
    assert _same(expr, ["I", "E"], lambda i, e: e * i / (i + 1) + np.exp(-e) + i**2 + np.sqrt(e))


def test_unknown_names_and_functions_are_errors_not_symbols():
    with pytest.raises(ValueError, match="not variables"):
        sr_peers.rils_to_sympy("x0 + x5", ["a", "b"])
    with pytest.raises(ValueError, match="cannot read"):
        sr_peers.operon_to_sympy("erf(X0)", ["a"])
    with pytest.raises(ValueError, match="cannot read"):
        sr_peers.operon_to_sympy("X0 +", ["a"])


def test_gplearn_programs_keep_full_precision_and_protected_forms():
    add, mul, div, log, sqrt = Node("add", 2), Node("mul", 2), Node("div", 2), Node("log", 1), Node("sqrt", 1)
    program = [add, mul, 0, 1.23456789, div, log, 1, sqrt, 0]  # 1.23456789*X0 + log(X1)/sqrt(X0)
    expr = sr_peers.gplearn_to_sympy(program, ["I", "E"])
    assert _same(expr, ["I", "E"], lambda i, e: 1.23456789 * i + np.log(e) / np.sqrt(i))
    assert expr.has(sympy.Abs)  # gplearn's sqrt and log are of |a|
    with pytest.raises(ValueError, match="after its end"):
        sr_peers.gplearn_to_sympy([mul, 0, 1, 0], ["I", "E"])
    with pytest.raises(ValueError, match="no sympy form"):
        sr_peers.gplearn_to_sympy([Node("sig", 1), 0], ["I"])


def test_converted_models_meet_the_same_exact_check_and_test_r2(eqs):
    _, (t2, t4) = eqs
    args = fb.parse_args(["--rows", "100", "--test-rows", "50"])
    rows = fb.equation_rows(t4, args)
    # gplearn's |.| on positive variables and Operon's rounding-level constants still recover
    program = [Node("div", 2), Node("mul", 2), 0, 1, Node("add", 2), 0, 1.0000001]
    judged = sr_peers.score(t4, sr_peers.gplearn_to_sympy(program, t4.names), rows)
    assert judged["recovered"] and judged["r2_test"] > 0.999999 and judged["guardrails"] == []
    wrong = sr_peers.score(t4, sr_peers.rils_to_sympy("x0*x1/(x0+2)", t4.names), rows)
    assert not wrong["recovered"] and wrong["r2_test"] < 0.999
    t2_rows = fb.equation_rows(t2, args)
    for text, recovered in [("(2.000000000000 * (X0 * X1))", True), ("(X0 * X1) + 0.5", True),
                            ("(2.000000000000 * (X0 * X1)) + 0.5", False)]:  # a factor or an offset, not both
        assert sr_peers.score(t2, sr_peers.operon_to_sympy(text, t2.names), t2_rows)["recovered"] is recovered


def test_lambda_says_whether_the_rows_can_tell_a_formula_from_the_law(eqs):
    _, (t2, _) = eqs
    rows = fb.equation_rows(t2, fb.parse_args(["--rows", "1000", "--test-rows", "50", "--noise", "0.01"]))
    law = rows.x[:, 0] * rows.x[:, 1]  # mu*Nn on [1, 5]^2: RMS about 9.6, noise sigma about 0.096
    sigma2 = float(np.mean((rows.y - law) ** 2))
    assert sr_peers.truth_noncentrality(t2, law, rows) == 0.0
    # an offset of 0.001 (1 % of the noise) over 1000 rows: lambda = 1000 * 1e-6 / sigma^2, about 0.11
    assert sr_peers.truth_noncentrality(t2, law + 0.001, rows) == pytest.approx(1e-3 / sigma2, rel=1e-9)
    assert sr_peers.truth_noncentrality(t2, law + 0.001, rows) < sr_peers.INDISTINGUISHABLE
    assert sr_peers.truth_noncentrality(t2, 1.01 * law, rows) > 100 * sr_peers.INDISTINGUISHABLE
    assert sr_peers.truth_noncentrality(t2, np.full(law.shape, np.nan), rows) is None
    clean = fb.equation_rows(t2, fb.parse_args(["--rows", "1000", "--test-rows", "50"]))
    assert sr_peers.truth_noncentrality(t2, law + 0.001, clean) is None  # no noise: every difference shows
    judged = sr_peers.score(t2, sr_peers.rils_to_sympy("x0*x1 + 0.001*x0", t2.names), rows)
    expected = float(np.sum((0.001 * rows.x[:, 0]) ** 2) / sigma2)  # about 1
    assert not judged["recovered"] and judged["lambda_truth"] == pytest.approx(expected, rel=1e-6)


def test_every_method_gets_the_same_rows(eqs):
    _, (t2, _) = eqs
    args = fb.parse_args(["--rows", "100", "--test-rows", "50", "--noise", "0.01"])
    a, b = fb.equation_rows(t2, args), fb.equation_rows(t2, args)
    assert all(np.array_equal(getattr(a, f), getattr(b, f)) for f in ("x", "y", "x_test", "y_test"))
    assert not np.allclose(a.y, a.x[:, 0] * a.x[:, 1]) and np.allclose(a.y_test, a.x_test[:, 0] * a.x_test[:, 1])


def test_peer_list_keeps_kansym_first_and_rejects_unknown_names():
    assert fb.methods_of(fb.parse_args(["--peer", "rils,operon"])) == ["kansym", "rils", "operon"]
    assert fb.methods_of(fb.parse_args(["--peer", "kansym,gplearn,rils,gplearn"])) == ["kansym", "gplearn", "rils"]
    assert fb.methods_of(fb.parse_args(["--peer", "none"])) == ["kansym"]
    with pytest.raises(SystemExit):
        fb.parse_args(["--peer", "pysr"])


def test_a_missing_peer_is_a_one_line_error(eqs, monkeypatch, capsys):
    path, _ = eqs
    monkeypatch.setattr(sr_peers, "installed", lambda peer: False)
    assert fb.main(["--equations", str(path), "--peer", "rils"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: --peer rils needs its package: pip install pybind11 setuptools wheel && "
        "pip install --no-build-isolation rils-rols==1.6.7")


def test_the_installed_peers_run_in_the_harness_within_the_limit(eqs, monkeypatch, capfd):
    peers = [p for p in ("rils", "operon", "gplearn") if sr_peers.installed(p)]
    if not peers:
        pytest.skip("no peer installed (pip install -e .[bench]; RILS-ROLS: see bench/sr_peers.py)")
    _, (t2, _) = eqs
    monkeypatch.setattr(fb, "run_equation", lambda eq, args: {"id": eq.id, "recovered": False})  # peers only
    limit = 4  # RILS-ROLS keeps 3 s back: 1 s of search
    args = fb.parse_args(["--rows", "200", "--test-rows", "50", "--time-limit", str(limit), "--peer", ",".join(peers),
                          "--jobs", "1"])
    rows = fb.run_all([t2], args, emit=lambda row: None)
    assert [r["method"] for r in rows] == ["kansym", *peers]
    for row in rows[1:]:
        assert "error" not in row and row["seconds"] <= limit, row
        assert row["half"] == fb.half_of("T.2") and row["noise"] == 0.0 and row["units_given"] is True
        assert isinstance(row["guardrails"], list) and row["r2_test"] is not None
        assert {s.name for s in sympy.sympify(row["formula"]).free_symbols} <= {"mu", "Nn"}
    assert capfd.readouterr().out == ""  # the peers' own printing stays off stdout


def test_no_equation_id_is_named_in_kansym():
    csv = ROOT.parent / "shared" / "data" / "feynman" / "equations.csv"
    if not csv.exists():
        pytest.skip(f"{csv} not present")
    ids = [e.id for e in fb.load_equations(csv)]
    pattern = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, ids)) + r")(?![\w.])")
    named = {str(p.relative_to(ROOT)): sorted(set(pattern.findall(p.read_text(encoding="utf-8"))))
             for p in (ROOT / "kansym").rglob("*.py")}
    assert {k: v for k, v in named.items() if v} == {}
