"""kansym.plot and ``kansym plot``: every kind in every format, what the diagram draws, bad requests.

Small bundles are built here (random KANs with a real transform and history), so the
whole file runs in seconds; one slow test draws the real hello-world run.
"""

import json
import subprocess
from pathlib import Path
import sys
import time

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from kansym.cli.main import cli
from kansym.io.bundle import ModelBundle
from kansym.nn.config import KANConfig
from kansym.nn.kan import KAN
from kansym.plot import plot_curves, plot_diagram, plot_edge, plot_report, save_figure
from kansym.symbolic.fit import EdgeFit
from kansym.io.transform import DataTransform

HISTORY = {"step": list(range(5)), "train_loss": [1.0, 0.5, 0.2, 0.1, 0.05],
           "val_loss": [1.1, 0.6, 0.25, 0.12, 0.06], "reg": [3.0, 2.0, 1.5, 1.2, 1.1]}


def make_bundle(width=(2, 3, 1), n=120, seed=0, meta=None, names=None):
    """A random (untrained) KAN bundled with data ``y = sin(pi x0) + x1^2``, float64."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, size=(n, width[0]))
    y = (np.sin(np.pi * x[:, 0]) + (x[:, 1] ** 2 if width[0] > 1 else 0.0))[:, None]
    model = KAN(KANConfig(width=width, grid_size=5, seed=seed)).double()
    names = names or [f"x{k}" for k in range(width[0])]
    meta = {"history": HISTORY, "train_config": {"lamb": 0.1}} if meta is None else meta
    return ModelBundle.create(model, DataTransform.fit(x, y), names, ["y"], x, y, meta=meta)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    """A saved pruned-sized bundle and a matching formula.json."""
    d = tmp_path_factory.mktemp("plot")
    bundle = make_bundle(width=(2, 1, 1), names=["semi_major_axis_km", "primary_mass_kg"])
    bundle.save(d / "pruned.pt")
    fits = [{"id": [0, 0, 0], **EdgeFit("sin", 3.0, 0.0, 1.0, 0.0, 0.99).to_dict()}]
    (d / "formula.json").write_text(json.dumps({
        "format": "kansym-formula", "target": bundle.output_names[0],
        "inputs": ["semi_major_axis_km", "primary_mass_kg"], "sympy": "sin(3*semi_major_axis_km) + primary_mass_kg**2",
        "edges": fits, "width_pruned": [2, 1, 1]}))
    return d


@pytest.fixture()
def runner():
    return CliRunner()


def _one_line_error(result, needle):
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], result.stderr
    assert "Traceback" not in result.output


def _image_ok(path, fmt):
    data = path.read_bytes()
    assert len(data) > 2000, (path, len(data))
    head = {"png": b"\x89PNG", "pdf": b"%PDF", "svg": b"<?xml"}[fmt]
    assert data.startswith(head)


@pytest.mark.parametrize("kind", ["diagram", "edge", "report", "curves"])
def test_every_kind_writes_every_format(runner, ckpt, tmp_path, kind):
    for fmt in ("png", "pdf", "svg"):
        out = tmp_path / f"{kind}.{fmt}"
        args = ["plot", str(ckpt / "pruned.pt"), "--kind", kind, "-o", str(out), "--fits", str(ckpt / "formula.json"), "-q"]
        if kind == "edge":
            args += ["--edge", "0,0,0"]
        if kind == "report" and fmt != "png":
            args += ["--no-front"]  # the search (about a second) once is enough
        result = runner.invoke(cli, args)
        assert result.exit_code == 0, result.output
        _image_ok(out, fmt)
        # an image kansym wrote is replaced without --force
        assert runner.invoke(cli, args).exit_code == 0


def test_report_uses_the_formula_json_next_to_the_checkpoint_and_ignores_a_foreign_one(runner, ckpt, tmp_path):
    out = tmp_path / "r.png"
    result = runner.invoke(cli, ["plot", str(ckpt / "pruned.pt"), "--kind", "report", "-o", str(out), "--no-front"])
    assert result.exit_code == 0, result.output
    assert f"using {ckpt / 'formula.json'}" in result.stderr
    assert "formula primary_mass_kg**2 + sin(3*semi_major_axis_km);" in result.stdout  # the fit's formula, not a new search
    # a formula.json of other inputs next to a copy: not used (the report searches as without it)
    other = tmp_path / "other"
    other.mkdir()
    (other / "pruned.pt").write_bytes((ckpt / "pruned.pt").read_bytes())
    (other / "formula.json").write_text(json.dumps({"format": "kansym-formula", "sympy": "sin(3*zeta)", "edges": []}))
    result = runner.invoke(cli, ["plot", str(other / "pruned.pt"), "--kind", "report", "-o", str(out), "--no-front"])
    assert result.exit_code == 0, result.output
    assert "using" not in result.stderr and "sin(3*zeta)" not in result.stdout


def test_diagram_draws_every_live_edge_and_hides_pruned_ones():
    bundle = make_bundle(width=(3, 4, 2))
    with torch.no_grad():
        bundle.model.layers[0].mask[:, 2] = 0.0  # 4 edges of input 2
        bundle.model.layers[1].mask[1, 3] = 0.0  # 1 edge
    live = 3 * 4 + 4 * 2 - 5
    r = plot_diagram(bundle)
    assert (r.n_edges_total, r.n_edges_live, r.n_edges_drawn, r.n_insets) == (20, live, live, live)
    assert r.n_pruned_drawn == 0
    assert len(r.drawn) == live and (0, 2, 0) not in r.drawn and (1, 3, 1) not in r.drawn
    # grey dashed collection only with show_pruned
    dashed = [c for c in r.figure.axes[0].collections if c.get_linestyle()[0][1] is not None]
    assert not dashed
    shown = plot_diagram(bundle, show_pruned=True)
    assert shown.n_edges_drawn == live and shown.n_pruned_drawn == 5


def test_diagram_opacity_follows_tanh_beta_score():
    bundle = make_bundle(width=(2, 2, 1))
    r = plot_diagram(bundle, beta=3.0)
    lines = [l for l in r.figure.axes[0].lines]  # one curve per edge, strongest first in each layer
    from kansym.plot.edges import edge_curves

    norm = edge_curves(bundle.model, bundle.model_inputs()).normalised_scores()
    want = sorted(np.tanh(3.0 * np.concatenate([n.ravel() for n in norm])))
    got = sorted(l.get_alpha() for l in lines)
    np.testing.assert_allclose(got, want, rtol=1e-9)
    assert max(got) == pytest.approx(np.tanh(3.0))


def test_diagram_of_a_pruned_checkpoint_shows_the_removed_nodes_only_on_request():
    bundle = make_bundle(width=(2, 1, 1), meta={"history": HISTORY, "prune_report": {
        "width_before": [2, 5, 1], "width_after": [2, 1, 1], "removed_nodes": {"1": [0, 1, 2, 3]}, "removed_inputs": []}})
    assert plot_diagram(bundle).n_pruned_drawn == 0
    r = plot_diagram(bundle, show_pruned=True)
    assert r.n_edges_drawn == 3 and r.n_pruned_drawn == 4 * 2 + 4 * 1


def test_diagram_theta_marks_weak_nodes_as_pruned():
    bundle = make_bundle(width=(2, 4, 1))
    with torch.no_grad():
        bundle.model.layers[1].mask[0, 1] = 0.0  # node 1 of layer 1 has no outgoing edge
    r = plot_diagram(bundle, theta=1e-6)
    assert r.n_edges_live == 2 * 4 + 4 - 1 - 2  # the node's two incoming edges go too
    assert all(not (l == 0 and j == 1) for l, i, j in r.drawn)


def test_diagram_labels_csv_names_and_primitives():
    bundle = make_bundle(names=["mass", "radius"])
    fits = {(0, 1, 2): EdgeFit("exp", 1.0, 0.0, 1.0, 0.0, 0.999)}
    texts = {t.get_text() for t in plot_diagram(bundle, fits=fits).figure.axes[0].texts}
    assert {"mass", "radius", "y", "exp"} <= texts


def test_wide_model_plots_fast_and_states_how_many_edges_were_drawn(tmp_path):
    bundle = make_bundle(width=(64, 64, 1), n=200)
    t0 = time.perf_counter()
    r = plot_diagram(bundle)
    save_figure(r.figure, tmp_path / "wide.png")
    seconds = time.perf_counter() - t0
    assert r.n_edges_live == 64 * 64 + 64
    assert r.n_edges_drawn == 100 + 64 and r.n_insets == 30 + 30
    title = r.figure._suptitle.get_text()
    assert f"{r.n_edges_drawn} of {r.n_edges_live} live edges drawn" in title and "strongest 100" in title
    assert seconds < 10, seconds
    _image_ok(tmp_path / "wide.png", "png")


def test_edge_plot_overlays_the_fit_with_r2_in_the_title():
    bundle = make_bundle()
    r = plot_edge(bundle, (0, 0, 1))
    assert r.fit is not None and np.isfinite(r.r2)
    top, bottom = r.figure.axes
    assert "R\u00b2" in top.get_title() and f"{r.r2:.6f}" in top.get_title()
    assert len(top.lines) == 3 and len(bottom.patches) == 40  # spline, data, fit; histogram bars


def test_report_and_curves_draw_their_panels():
    import sympy

    bundle = make_bundle()
    a, b = sympy.symbols("x0 x1", real=True)
    front = [{"complexity": 7, "error": 0.1, "accepted": True}, {"complexity": 3, "error": 0.5, "accepted": False},
             {"complexity": 5, "error": 0.01, "accepted": True}, {"complexity": 9, "error": 0.2, "accepted": False}]
    r = plot_report(bundle, sympy.sin(sympy.pi * a) + b**2, front=front)
    assert r.n_front == 4 and r.n_residual_panels == 2
    assert any("R\u00b2 = 1.000000" in ax.get_title() for ax in r.figure.axes)
    from kansym.plot.report import pareto_mask

    assert pareto_mask(np.array([7, 3, 5, 9]), np.array([0.1, 0.5, 0.01, 0.2])).tolist() == [False, True, True, False]
    c = plot_curves({"history": HISTORY, "finetune_history": HISTORY})
    assert (c.n_steps, c.n_finetune_steps) == (5, 5)


def test_report_front_uses_the_expression_complexity_of_the_cli_pareto_front():
    import sympy

    from kansym.symbolic.pareto import expression_complexity

    from types import SimpleNamespace

    bundle = make_bundle()
    a, b = sympy.symbols("x0 x1", real=True)
    # Occam candidates: an edge-complexity sum and the expression; the panel plots the latter
    front = [SimpleNamespace(expr=sympy.exp(b**2 + sympy.sin(sympy.pi * a)), complexity=7, error=0.01, accepted=True),
             SimpleNamespace(expr=1.3 * a + 2.1, complexity=2, error=0.5, accepted=False),
             {"complexity": 4, "error": 0.2, "accepted": False},  # no expression: its stored complexity
             {"sympy": "__import__('os').getpid()", "complexity": 5, "error": 0.3, "accepted": False}]  # text: never parsed
    r = plot_report(bundle, sympy.sin(sympy.pi * a) + b**2, front=front)
    panel = next(ax for ax in r.figure.axes if ax.get_title() == "formulas tried")
    xs = panel.collections[0].get_offsets()[:, 0].tolist()
    assert xs == [expression_complexity(sympy.exp(b**2 + sympy.sin(sympy.pi * a))), expression_complexity(1.3 * a + 2.1),
                  4.0, 5.0]
    assert panel.get_xlabel() == "complexity (expression nodes)"


def test_report_front_stars_the_answer_of_the_final_front_and_names_the_occam_choice_otherwise():
    from types import SimpleNamespace

    import sympy

    bundle = make_bundle()
    a, b = sympy.symbols("x0 x1", real=True)
    formula = sympy.sin(sympy.pi * a) + b**2
    # formula.json's "pareto": the answer is the chosen entry, not the last one
    pareto = [{"sympy": "sin(pi*x0) + x1**2", "complexity": 8, "error": 1e-6, "chosen": True},
              {"sympy": "sin(3.14159*x0) + x1**2.00001", "complexity": 10, "error": 9e-7, "chosen": False}]
    r = plot_report(bundle, formula, front=pareto)
    panel = next(ax for ax in r.figure.axes if ax.get_title() == "Pareto front of the answer")
    star = next(c for c in panel.collections if c.get_label() == "chosen")
    assert star.get_offsets()[0].tolist() == [8.0, 1e-6]
    # the Occam step's candidates: its last accepted formula, under that name
    occam = [SimpleNamespace(expr=a + b, complexity=2, error=0.3, accepted=True),
             SimpleNamespace(expr=formula, complexity=4, error=1e-6, accepted=True),
             SimpleNamespace(expr=a, complexity=1, error=0.9, accepted=False)]
    r = plot_report(bundle, formula, front=occam)
    panel = next(ax for ax in r.figure.axes if ax.get_title() == "formulas tried")
    star = next(c for c in panel.collections if c.get_label() == "Occam step's choice")
    assert star.get_offsets()[0].tolist() == [8.0, 1e-6]  # sin(pi*x0) + x1**2 has 8 expression nodes


def test_report_front_keeps_a_log_axis_only_for_errors_spanning_a_decade():
    import sympy

    bundle = make_bundle()
    a, b = sympy.symbols("x0 x1", real=True)
    formula = sympy.sin(sympy.pi * a) + b**2
    # Kepler's front: two formulas whose errors differ by 10 %: a log axis labelled its minor ticks
    # (3.2e-3, 3.15e-3, ...) into the y label; now a linear axis, and whole-number complexities
    narrow = [{"complexity": 9, "error": 3.22e-3, "chosen": True}, {"complexity": 11, "error": 2.88e-3, "chosen": False}]
    panel = next(ax for ax in plot_report(bundle, formula, front=narrow).figure.axes
                 if ax.get_title() == "Pareto front of the answer")
    panel.figure.canvas.draw()
    assert panel.get_yscale() == "linear"
    assert all(float(t).is_integer() for t in panel.get_xticks())
    wide = [{"complexity": 3, "error": 0.5, "chosen": False}, {"complexity": 8, "error": 1e-6, "chosen": True}]
    panel = next(ax for ax in plot_report(bundle, formula, front=wide).figure.axes
                 if ax.get_title() == "Pareto front of the answer")
    assert panel.get_yscale() == "log"


def test_bad_requests_are_one_line_errors(runner, ckpt, tmp_path):
    pt = str(ckpt / "pruned.pt")
    _one_line_error(runner.invoke(cli, ["plot", pt, "--kind", "pie", "-o", str(tmp_path / "a.png")]), "pie")
    _one_line_error(runner.invoke(cli, ["plot", pt, "--kind", "edge", "--edge", "0,2,0", "-o", str(tmp_path / "a.png")]), "outside")
    _one_line_error(runner.invoke(cli, ["plot", pt, "--kind", "edge", "--edge", "2,0,0", "-o", str(tmp_path / "a.png")]), "outside")
    _one_line_error(runner.invoke(cli, ["plot", pt, "--kind", "edge", "--edge", "a,b", "-o", str(tmp_path / "a.png")]), "--edge")
    _one_line_error(runner.invoke(cli, ["plot", pt, "--kind", "edge", "-o", str(tmp_path / "a.png")]), "--edge")
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    _one_line_error(runner.invoke(cli, ["plot", pt, "-o", str(blocker / "a.png")]), "cannot write")
    # regression: as root os.access says every directory is writable; /proc only failed
    # after the whole report was computed (about 11 s); a real probe fails at once
    if Path("/proc").is_dir():
        _one_line_error(runner.invoke(cli, ["plot", pt, "--kind", "report", "-o", "/proc/a.png"]), "does not accept files")
    _one_line_error(runner.invoke(cli, ["plot", pt, "-o", str(tmp_path / "a.jpg")]), ".png, .pdf or .svg")
    _one_line_error(runner.invoke(cli, ["plot", str(tmp_path / "none.pt"), "-o", str(tmp_path / "a.png")]), "none.pt")
    _one_line_error(runner.invoke(cli, ["plot", pt, "-o", str(blocker)]), "")  # .txt
    foreign = tmp_path / "mine.png"
    foreign.write_bytes(b"\x89PNG not ours")
    _one_line_error(runner.invoke(cli, ["plot", pt, "-o", str(foreign)]), "--force")
    assert foreign.read_bytes() == b"\x89PNG not ours"
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"format": "kansym-formula", "target": "y", "inputs": ["x0", "x1"], "sympy": "0", "edges": [],
                                 "width_pruned": [2, 5, 1]}))
    _one_line_error(runner.invoke(cli, ["plot", pt, "--fits", str(wrong), "-o", str(tmp_path / "b.png")]), "width")
    assert not (tmp_path / "a.png").exists() and not (tmp_path / "b.png").exists()


def test_unknown_kind_through_the_console_script(ckpt, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "kansym", "plot", str(ckpt / "pruned.pt"), "--kind", "pie",
                           "-o", str(tmp_path / "a.png")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "pie" in lines[0]


def test_importing_kansym_plot_does_not_import_matplotlib():
    code = "import sys, kansym, kansym.plot, kansym.cli.main; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.slow
@pytest.mark.parametrize("example", ["hello", "kepler"])
def test_real_runs_plot_every_kind_in_every_format(runner, tmp_path, example):
    out, plots = tmp_path / "run", tmp_path / "plots"
    result = runner.invoke(cli, ["fit", "--example", example, "-o", str(out), "--plots", str(plots), "-q"])
    assert result.exit_code == 0, result.output
    for name in ("diagram.png", "report.png", "curves.png"):
        _image_ok(plots / name, "png")
    pruned, fits = out / "pruned.pt", out / "formula.json"
    for kind, extra in [("diagram", ["--fits", str(fits)]), ("edge", ["--edge", "0,0,0"]),
                        ("report", ["--fits", str(fits)]), ("curves", [])]:
        for fmt in ("png", "pdf", "svg"):
            target = tmp_path / f"{kind}.{fmt}"
            res = runner.invoke(cli, ["plot", str(pruned), "--kind", kind, "-o", str(target), *extra])
            assert res.exit_code == 0, (kind, fmt, res.output)
            _image_ok(target, fmt)
    bundle = ModelBundle.load(pruned)
    live = int(sum(int((layer.mask > 0).sum()) for layer in bundle.model.layers))
    from kansym.discover.record import read_record

    r = plot_diagram(bundle, fits=read_record(fits).edge_fits(bundle.model.width))
    assert r.n_edges_drawn == live and r.n_pruned_drawn == 0
    # Kepler's law is additive in log units: its KAN has no hidden layer and nothing to prune
    record = json.loads(fits.read_text())
    pruned_any = record["width_trained"] != record["width_pruned"]
    assert (plot_diagram(bundle, show_pruned=True).n_pruned_drawn > 0) == pruned_any
    assert pruned_any == (example == "hello")


def test_report_title_keeps_exact_exponents():
    import sympy

    from kansym.plot.report import _short

    a, m = sympy.symbols("a M", positive=True)
    text = _short(sympy.Float(281377.930581917) * a ** sympy.Rational(3, 2) / sympy.sqrt(m))
    assert text == "2.814e+5*a**(3/2)/sqrt(M)"
