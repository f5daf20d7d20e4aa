"""Property-based tests (hypothesis): random tables, checkpoints and options never crash kansym.

Targets and what must hold for every generated example:

- ``read_table``: returns a :class:`Table` with finite values and consistent names, or
  raises a :class:`KansymError` (nothing else);
- ``kansym fit`` / ``kansym train`` / ``kansym prune`` / ``kansym symbolify`` through click's
  CliRunner: exit status 0 or 2, no traceback, the input files byte-for-byte unchanged,
  and on exit 2 exactly one ``error: ...`` line and no output left behind.

Tables mix headers (duplicates, empty, unicode, quotes), cells (NaN, inf, text, blanks,
huge and tiny numbers), separators, line endings, encodings and raw bytes; clean numeric
tables are mixed in so that the success path runs too (with options that keep it cheap).
Runs are derandomized so CI is reproducible.
"""

import json
import tempfile
from pathlib import Path

import numpy as np
import sympy
import torch
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kansym.cli.main import cli
from kansym.errors import KansymError
from kansym.io.table import Table
from kansym.io.tabular import read_table

SETTINGS = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# ------------------------------------------------------------------------------------ strategies

NAMES = st.one_of(
    st.sampled_from(["x", "x1", "x2", "y", "y", "", " ", "ä", "温度", "a b", '"q"', "1", "nan", "x,1", "y\t"]),
    st.text(max_size=5),
)
CELLS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-10**12, 10**12).map(str),
    st.sampled_from(["", "nan", "NaN", "inf", "-inf", "NA", "abc", "1e308", "-1e308", "1e-320", "1,5", '"2"', " 3 ",
                     "0x10", "1_000", "١٢", "\u00a0"]),
    st.text(max_size=4),
)
SEPARATORS = st.sampled_from([",", ";", "\t", "|", " ", ",,"])


@st.composite
def messy_tables(draw) -> bytes:
    """Any text table: random header, ragged rows of random cells, random separator and encoding."""
    sep = draw(SEPARATORS)
    header = draw(st.lists(NAMES, min_size=0, max_size=5))
    n_rows = draw(st.integers(0, 14))
    width = max(len(header), 1)
    rows = [draw(st.lists(CELLS, min_size=max(width - 1, 0), max_size=width + 1)) for _ in range(n_rows)]
    newline = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    text = newline.join([sep.join(header)] + [sep.join(r) for r in rows]) + draw(st.sampled_from(["", newline]))
    encoding = draw(st.sampled_from(["utf-8", "utf-8", "utf-8-sig", "latin-1", "utf-16"]))
    return text.encode(encoding, errors="replace")


@st.composite
def clean_tables(draw) -> bytes:
    """A numeric table x1[, x2], y that passes validation (a little noise: NaN cells, a constant column)."""
    n = draw(st.integers(10, 16))
    sep = draw(st.sampled_from([",", ";", "\t"]))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, 2)) * draw(st.sampled_from([1.0, 1e-9, 1e9]))
    y = x[:, 0] * 2 + np.sin(x[:, 1]) + rng.normal(0, 0.1, n)
    cells = [[f"{v:.10g}" for v in row] for row in np.column_stack([x, y])]
    if draw(st.booleans()):
        cells[draw(st.integers(0, n - 1))][draw(st.integers(0, 2))] = draw(st.sampled_from(["", "nan", "inf"]))
    header = ["x1", "x2", "y"]
    if draw(st.booleans()):
        header.append("c")
        cells = [r + ["7"] for r in cells]
    return "\n".join([sep.join(header)] + [sep.join(r) for r in cells]).encode() + b"\n"


TABLES = st.one_of(messy_tables(), clean_tables(), st.binary(max_size=300))
COLUMN_CHOICES = st.one_of(st.sampled_from(["y", "x1", "x", "z", "", "y,x1", "ä"]), st.text(max_size=4))


# ------------------------------------------------------------------------------------ read_table


@SETTINGS
@given(content=TABLES, target=COLUMN_CHOICES, inputs=st.one_of(st.none(), st.lists(COLUMN_CHOICES, max_size=3)),
       dropna=st.booleans(), drop_constant=st.booleans())
def test_read_table_returns_a_table_or_raises_kansym_error(content, target, inputs, dropna, drop_constant):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.csv"
        path.write_bytes(content)
        try:
            table = read_table(path, target, inputs, dropna=dropna, drop_constant=drop_constant)
        except KansymError as exc:
            event("KansymError")
            assert str(exc) and "\n" not in str(exc)
            return
        finally:
            assert path.read_bytes() == content
    event("Table")
    assert isinstance(table, Table)
    assert table.x.shape == (table.n_rows, len(table.input_names)) and table.y.shape == (table.n_rows, 1)
    assert np.isfinite(table.x).all() and np.isfinite(table.y).all()
    assert table.n_rows > table.d_in >= 1 and table.target_names == (target,)


# ------------------------------------------------------------------------------------ the CLI


def _check(result, inputs: dict[Path, bytes], outputs: list[Path]):
    """Exit 0 or 2, never a traceback, inputs unchanged; on 2 one error line and no outputs."""
    event(f"exit {result.exit_code}")
    assert result.exit_code in (0, 2), (result.exit_code, result.output, repr(result.exception))
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    for path, content in inputs.items():
        assert path.read_bytes() == content, path
    if result.exit_code == 2:
        lines = result.stderr.strip().splitlines()
        assert lines and lines[-1].startswith("error: "), result.stderr
        assert sum(line.startswith("error: ") for line in lines) == 1, result.stderr
        for out in outputs:
            assert not out.exists(), out


CHEAP = {"--steps": "1", "--hidden": "1", "--grid-size": "3"}
TRAIN_OPTIONS = st.fixed_dictionaries({}, optional={
    "--steps": st.sampled_from(["1", "2", "0", "-1", "x"]),
    "--hidden": st.sampled_from(["1", "1,1", "0", "1,0", "", "a", "-2"]),
    "--grid-size": st.sampled_from(["3", "0", "-1", "2.5"]),
    "--lamb": st.sampled_from(["0", "0.1", "-1", "nan", "inf", "1e300", "x"]),
    "--space": st.sampled_from(["auto", "linear", "log", "cubic"]),
    "--device": st.sampled_from(["cpu", "cpu", "foo", "cuda:3", "mps", ""]),
    "--seed": st.sampled_from(["0", "-1", "7", "x"]),
    "--inputs": COLUMN_CHOICES,
})


def _argv(options: dict) -> list[str]:
    argv = []
    for k, v in {**CHEAP, **options}.items():
        argv += [k, v]
    return argv


@SETTINGS
@given(content=TABLES, target=COLUMN_CHOICES, options=TRAIN_OPTIONS, dropna=st.booleans())
def test_train_cli_exits_0_or_2_and_keeps_the_input(content, target, options, dropna):
    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp) / "d.csv", Path(tmp) / "m.pt"
        data.write_bytes(content)
        argv = ["train", str(data), "--target", target, "-o", str(out), *_argv(options)] + (["--dropna"] if dropna else [])
        _check(CliRunner().invoke(cli, argv), {data: content}, [out])


FIT_OPTIONS = st.fixed_dictionaries({}, optional={
    "--theta": st.sampled_from(["0.01", "0", "-1", "nan", "inf"]),
    "--r2-threshold": st.sampled_from(["0.9", "0", "2", "nan"]),
    "--lib": st.sampled_from(["x", "x,sin", "sin,bogus", ",", "exp"]),
    "--finetune-steps": st.sampled_from(["1", "0"]),
})


@SETTINGS
@given(content=st.one_of(messy_tables(), st.binary(max_size=200), clean_tables()), target=COLUMN_CHOICES,
       options=TRAIN_OPTIONS, fit_options=FIT_OPTIONS)
def test_fit_cli_exits_0_or_2_and_keeps_the_input(content, target, options, fit_options):
    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp) / "d.csv", Path(tmp) / "out"
        data.write_bytes(content)
        argv = ["fit", str(data), "--target", target, "-o", str(out), *_argv({"--finetune-steps": "1", **options, **fit_options})]
        _check(CliRunner().invoke(cli, argv), {data: content}, [out])


# ------------------------------------------------------------------------------------ checkpoints

_VALID: dict[str, bytes] = {}


def _valid_checkpoint() -> bytes:
    """Bytes of a tiny trained KAN checkpoint (made once per session)."""
    if "kan" not in _VALID:
        with tempfile.TemporaryDirectory() as tmp:
            data, out = Path(tmp) / "d.csv", Path(tmp) / "m.pt"
            rng = np.random.default_rng(0)
            x = rng.uniform(-1, 1, (30, 2))
            data.write_text("x1,x2,y\n" + "".join(f"{a},{b},{2 * a - b}\n" for a, b in x))
            result = CliRunner().invoke(cli, ["train", str(data), "-t", "y", "-o", str(out), *_argv({"--hidden": "2"})])
            assert result.exit_code == 0, result.output
            _VALID["kan"] = out.read_bytes()
    return _VALID["kan"]


@st.composite
def checkpoints(draw) -> bytes:
    """A valid checkpoint, one cut short, random bytes, or a valid one with an entry changed."""
    valid = _valid_checkpoint()
    kind = draw(st.sampled_from(["valid", "truncated", "random", "mutated", "mutated", "mutated"]))
    if kind == "valid":
        return valid
    if kind == "truncated":
        return valid[: draw(st.integers(0, len(valid) - 1))]
    if kind == "random":
        return draw(st.binary(max_size=400))
    import io

    obj = torch.load(io.BytesIO(valid), weights_only=True)
    path = draw(st.sampled_from([("version",), ("kind",), ("format",), ("model",), ("model", "config"),
                                 ("model", "state_dict"), ("transform",), ("input_names",), ("output_names",),
                                 ("x_cal",), ("y_cal",), ("meta",), ("model", "config", "width"),
                                 ("model", "config", "grid_size"), ("transform", "log_space")]))
    value = draw(st.sampled_from([None, 0, -1, 2, "kan-gpt", "x", [], {}, [1, 2], torch.zeros(3), torch.full((2, 2), float("nan")),
                                  ["a"], float("nan")]))
    node = obj
    for key in path[:-1]:
        node = node[key]
    if draw(st.booleans()):
        node[path[-1]] = value
    else:
        node.pop(path[-1], None)
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


@SETTINGS
@given(ckpt=checkpoints(), theta=st.sampled_from(["0.01", "0", "-1", "nan", "inf", "1e9"]),
       data=st.one_of(st.none(), messy_tables(), clean_tables()))
def test_prune_cli_exits_0_or_2_and_keeps_the_checkpoint(ckpt, theta, data):
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "m.pt", Path(tmp) / "p.pt"
        src.write_bytes(ckpt)
        inputs = {src: ckpt}
        argv = ["prune", str(src), "--theta", theta, "-o", str(out)]
        if data is not None:
            (Path(tmp) / "d.csv").write_bytes(data)
            inputs[Path(tmp) / "d.csv"] = data
            argv += ["--data", str(Path(tmp) / "d.csv")]
        _check(CliRunner().invoke(cli, argv), inputs, [out])


@SETTINGS
@given(ckpt=checkpoints(), lib=st.sampled_from(["x", "x,sin", "bogus", "", ","]),
       r2=st.sampled_from(["0.9", "0.999", "0", "1.5"]), data=st.one_of(st.none(), messy_tables(), clean_tables()))
def test_symbolify_cli_exits_0_or_2_and_keeps_the_checkpoint(ckpt, lib, r2, data):
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "m.pt", Path(tmp) / "f.json"
        src.write_bytes(ckpt)
        inputs = {src: ckpt}
        argv = ["symbolify", str(src), "--lib", lib, "--r2-threshold", r2, "--json", str(out)]
        if data is not None:
            (Path(tmp) / "d.csv").write_bytes(data)
            inputs[Path(tmp) / "d.csv"] = data
            argv += ["--data", str(Path(tmp) / "d.csv")]
        _check(CliRunner().invoke(cli, argv), inputs, [out])


# ------------------------------------------------------------------ the edges: magnitudes, column names
# Cheap pieces, not whole fits: the power-of-two working units and their way back, R² across them,
# and the identifier map through a formula.json record.

from kansym.discover.record import FormulaRecord, dumps, formula_record  # noqa: E402
from kansym.discover.result import Formula  # noqa: E402
from kansym.io.magnitude import ColumnScales, LINEAR_RANGE, LOG_RANGE  # noqa: E402
from kansym.symbolic.compose import input_symbols, lambdify_formula  # noqa: E402
from kansym.symbolic.parse import identifier, identifiers, is_safe_identifier  # noqa: E402
from kansym.symbolic.verify import Fidelity, r2_score  # noqa: E402


@st.composite
def extreme_columns(draw, n: int) -> np.ndarray:
    """``n`` finite values of one magnitude ``2**e`` (e anywhere in float64's range, subnormals
    included), spread over up to 60 binary orders below it, signed or not, a zero perhaps."""
    e = draw(st.integers(-1070, 1024))
    offsets = draw(st.lists(st.integers(0, 60), min_size=n, max_size=n))
    mant = draw(st.lists(st.floats(0.5, 1.0, exclude_max=True), min_size=n, max_size=n))
    signed = draw(st.booleans())
    signs = draw(st.lists(st.sampled_from([-1.0, 1.0] if signed else [1.0]), min_size=n, max_size=n))
    col = np.ldexp(np.asarray(mant) * np.asarray(signs), e - np.asarray(offsets))
    if draw(st.booleans()):
        col[draw(st.integers(0, n - 1))] = 0.0
    return col


@st.composite
def extreme_tables(draw) -> tuple[np.ndarray, np.ndarray]:
    n, d = draw(st.integers(2, 12)), draw(st.integers(1, 3))
    cols = [draw(extreme_columns(n)) for _ in range(d + 1)]
    return np.column_stack(cols[:-1]), cols[-1][:, None]


@SETTINGS
@given(table=extreme_tables(), space=st.sampled_from(["auto", "linear", "log"]), noise=st.floats(1e-6, 0.5))
def test_working_units_are_exact_moderate_and_keep_r2(table, space, noise):
    x, y = table
    s = ColumnScales.fit(x, y, space)
    xw, yw = s.x_to_working(x), s.y_to_working(y)
    assert np.array_equal(s.x_to_table(xw), x) and np.array_equal(s.y_to_table(yw), y)  # bit for bit
    for col, k in zip(np.column_stack([x, y]).T, s.x_exp + s.y_exp):
        work = np.abs(np.ldexp(col, -k))
        if s.identity or not np.any(work):
            continue
        assert work.max() < 2.0
        assert work[work > 0].min() >= min(2.0 ** -1022, np.abs(col[col != 0]).min())  # nothing rounded away
    if s.identity:  # every column moderate ("auto" takes either range: the wider one holds)
        low, high = LINEAR_RANGE if space == "linear" else LOG_RANGE
        for col in np.column_stack([x, y]).T:
            top = np.abs(col).max()
            assert top == 0 or 2.0 ** low <= top < 2.0 ** high
    # R² is the same number in both units (predictions off by a relative ``noise``)
    with np.errstate(over="ignore"):  # a target at float's limit times 1.5 is inf: no prediction to score
        pred = y[:, 0] * (1 + noise * np.cos(np.arange(len(y))))
    if np.all(np.isfinite(pred)):
        assert r2_score(yw[:, 0], s.y_to_working(pred[:, None])[:, 0]) == r2_score(y[:, 0], pred)
    # a law of the working units, written back, is the same numbers in the table's units
    syms = input_symbols([f"x{i}" for i in range(x.shape[1])])
    law = sympy.Rational(3, 2) * syms[0] + syms[-1] / 7  # linear: no intermediate product under- or overflows
    back = s.expr_to_table(law, syms)
    with np.errstate(all="ignore"):
        want = np.ldexp(lambdify_formula(law, syms)(xw), s.y_exp[0])
        got = lambdify_formula(back, syms)(x)
    ok = np.isfinite(want) & np.isfinite(got) & (np.abs(want) > 1e-290) & (np.abs(want) < 1e300)
    normal = all(sympy.Integer(2) ** -1022 <= abs(c) < sympy.Integer(2) ** 1024 for c in back.atoms(sympy.Float))
    if normal:  # a subnormal constant keeps fewer digits (check_representable then judges by R²)
        # relative to the terms, not to their sum: two terms that cancel leave only rounding
        with np.errstate(all="ignore"):
            terms = np.ldexp(np.abs(1.5 * xw[:, 0]) + np.abs(xw[:, -1] / 7), s.y_exp[0])
        assert np.all(np.abs(got[ok] - want[ok]) <= 1e-12 * terms[ok])


NAME_TEXT = st.one_of(
    st.sampled_from(["mass kg", "speed-m/s", "E (J)", "I", "E", "S", "N", "pi", "beta", "lambda", "2theta", "Δt", "µ",
                     "x", "x_2", "class", "max", "", " ", "a\nb", "__debug__", "X", "numpy", "phi_0_0_0"]),
    st.text(max_size=8),
)


@SETTINGS
@given(names=st.lists(NAME_TEXT, min_size=1, max_size=4, unique=True), target=NAME_TEXT, log_space=st.booleans())
def test_any_column_names_round_trip_through_formula_json(names, target, log_space):
    ids = identifiers(names)
    assert len(set(ids)) == len(ids) and all(is_safe_identifier(i) for i in ids) and ids == identifiers(names)
    symbols = input_symbols(names, positive=log_space)
    expr = sum((k + 1) * s for k, s in enumerate(symbols)) + sympy.Float(0.5) * symbols[0] * symbols[-1] ** 2
    formula = Formula(expr=expr, raw=expr, symbols=tuple(symbols), fidelity=Fidelity(1.0, 1.0, 0.0, 0.0), target=target)
    record = json.loads(dumps(formula_record(formula, extra={"space": "log" if log_space else "linear"})))
    assert record["inputs"] == names and list(record["symbols"]) == list(ids)
    rows = np.random.default_rng(0).uniform(0.5, 2.0, (6, len(names)))
    want = lambdify_formula(expr, symbols)(rows)
    # the JSON's promise: sympify on its identifiers (with or without locals) is the formula
    for local in ({i: sympy.Symbol(i) for i in ids}, None):
        parsed = sympy.sympify(record["sympy"], locals=local)
        got = lambdify_formula(parsed, [sympy.Symbol(i) for i in ids])(rows)
        np.testing.assert_allclose(got, want, rtol=1e-12)
    # kansym's reader gives it back on the column names
    back = FormulaRecord(record)
    assert [s.name for s in back.symbols()] == names
    np.testing.assert_allclose(back.predict(rows), want, rtol=1e-12)
    # the Python export compiles and computes it
    namespace: dict = {}
    exec(compile(record["python"], "formula.py", "exec"), namespace)  # noqa: S102 - kansym's own export
    np.testing.assert_allclose(namespace[identifier(target)](rows), want, rtol=1e-12)
