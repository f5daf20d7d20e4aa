"""bench/gpt.py's paired summary against swiglu and bench/gpt_gpu.py's smoke run (the GPU script on a CPU)."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT / "bench"))
import gpt as bench_gpt  # noqa: E402
import gpt_gpu  # noqa: E402

from .conftest import TEXT  # noqa: E402


def row(model, seed, val, train_s, step_ms=100.0):
    # curve rows (iter, elapsed_s, val_loss): linear in time from 3.0 to val
    curve = [[i, train_s * i / 100, 3.0 + (val - 3.0) * i / 100] for i in (50, 100)]
    return {"model": model, "seed": seed, "val_loss": val, "train_s": train_s, "curve": curve, "ffn": model,
            "kan_hidden": [0], "params": 800_000, "iters": 100, "step_ms": step_ms, "tokens_per_s": 7680.0,
            "peak_mem_mb": 400.0}


def test_paired_differences_are_against_swiglu_with_a_t_interval():
    rows = [row("mlp", s, 1.90 + 0.01 * s, 10.0) for s in range(3)]
    rows += [row("swiglu", s, 1.85 + 0.01 * s, 10.0) for s in range(3)]
    rows += [row("grkan", s, 1.80 + 0.011 * s, 20.0) for s in range(3)]  # twice the step time
    assert bench_gpt.baseline_of(rows) == "swiglu"
    md = bench_gpt.summarize(rows)
    # grkan - swiglu at equal iterations: -0.05, -0.049, -0.048 -> mean -0.049, sd 0.001, t(0.975, 2) = 4.303
    assert "val_loss: grkan - swiglu over 3 seeds: mean -0.0490, 95 % CI [-0.0515, -0.0465]" in md
    # at equal wall time (10 s) grkan is read half-way: 3 + (v - 3) / 2
    for r in rows:
        if r["model"] == "grkan":
            assert r["equal_time_val_loss"] == pytest.approx(3.0 + (r["val_loss"] - 3.0) / 2)
    assert "| grkan | 3 | 0.800 M | 1.8110 | -0.0490 [-0.0515, -0.0465] |" in md
    assert "mlp - swiglu" in md and "grkan - mlp" not in md
    assert bench_gpt.paired_interval([0.1])[0] == 0.1


def test_curves_png(tmp_path):
    rows = [row(m, s, 1.9, 10.0) for m in ("swiglu", "kan") for s in range(2)]
    path = bench_gpt.plot_curves(rows, tmp_path / "img" / "curves.png")
    assert path.stat().st_size > 10_000


@pytest.mark.slow
def test_gpu_script_smoke_run_on_cpu(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text(TEXT * 3, encoding="utf-8")
    out = tmp_path / "gpu.json"
    assert gpt_gpu.main(["--smoke", "--device", "cpu", "--no-compile", "--models", "swiglu,grkan-gpt2", "--budget-s", "1",
                         "--text", str(text), "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["ffn"] for r in rows] == ["swiglu", "grkan-gpt2"]  # bench/gpt.py arm names, init suffix included
    for r in rows:
        assert r["iters"] >= 10 and r["val_loss"] < 4.0 and r["tokens_per_s"] > 0 and r["smoke"]
    import torch

    if not torch.cuda.is_available():
        assert gpt_gpu.main(["--text", str(text)]) == 2  # the default device is cuda: a one-line refusal


def test_arm_names_carry_the_ffn_the_rank_and_the_input_init():
    assert bench_gpt.arm("grkan-gpt2") == {"ffn": "grkan", "fc_init": "gpt2"}
    assert bench_gpt.arm("swiglu-vp") == {"ffn": "swiglu", "fc_init": "variance"}
    assert bench_gpt.arm("kan-r16-vp") == {"ffn": "kan", "kan_rank": 16, "fc_init": "variance"}
    assert bench_gpt.arm("cheby") == {"ffn": "cheby"}
    with pytest.raises(KeyError):
        bench_gpt.arm("cheby-he")


def test_contrasts_are_paired_differences_and_differences_of_differences():
    rows = [row("swiglu", s, 1.75 + 0.01 * s, 10.0) for s in range(3)]
    rows += [row("swiglu-vp", s, 1.70 + 0.01 * s, 10.0) for s in range(3)]  # init: -0.05 every seed
    rows += [row("grkan-gpt2", s, 1.76 + 0.01 * s, 10.0) for s in range(3)]
    rows += [row("grkan", s, 1.68 + 0.01 * s + 0.001 * s, 10.0) for s in range(3)]  # init: -0.08, -0.079, -0.078
    text = bench_gpt.contrasts(rows, "grkan:grkan-gpt2,grkan:grkan-gpt2:swiglu-vp:swiglu")
    first, second = text.splitlines()
    # -0.08, -0.079, -0.078: mean -0.079, sd 0.001, t(0.975, 2) = 4.303 -> half-width 0.0025
    assert first == "val_loss: grkan - grkan-gpt2 over 3 seeds: mean -0.0790, 95 % CI [-0.0815, -0.0765] (t, 2 dof)"
    assert second.startswith("val_loss: (grkan - grkan-gpt2) - (swiglu-vp - swiglu) over 3 seeds: mean -0.0290, ")
    with pytest.raises(ValueError, match="A:B or A:B:C:D"):
        bench_gpt.contrasts(rows, "grkan:swiglu:kan")
