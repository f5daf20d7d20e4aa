"""Attention heads: overlap measures with known answers, basis dependence, penalty, exact reordering, CLI."""

import json
import math

import pytest
import torch
from click.testing import CliRunner

from kansym.cli.main import cli
from kansym.errors import ConfigError
from kansym.gpt.ablation import head_importance
from kansym.gpt.checkpoint import load_gpt, save_gpt
from kansym.gpt.data import CharVocab
from kansym.gpt.head_order import cluster_order, head_orders, reorder_heads, restore_head_order
from kansym.gpt.head_report import analyse_heads, reorder_by
from kansym.gpt.heads import (
    attention_maps, attention_similarity, change_head_basis, frobenius_overlap, head_output_projections,
    ortho_penalty, pair_mean, principal_cosines, principal_overlap,
)
from kansym.gpt.model import KANGPT
from kansym.gpt.train import train

from .conftest import tiny_config, tiny_train


def orthonormal(n, seed=0):
    q, _ = torch.linalg.qr(torch.randn(n, n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64))
    return q  # (n, n)


def test_identical_heads_score_one():
    # rank-one heads: the seed's score is 1 as well
    row = torch.randn(1, 1, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    W = torch.cat([row, 3.0 * row, -row])  # (3, 1, 12): three heads on one line
    assert torch.allclose(frobenius_overlap(W), torch.ones(3, 3, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(principal_overlap(W), torch.ones(3, 3, dtype=torch.float64), atol=1e-12)
    # full-rank identical heads: principal overlap 1; the seed's score is sum s^4 / (sum s^2)^2
    head = torch.randn(4, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    W = torch.stack([head, head])  # (2, 4, 12)
    assert principal_overlap(W)[0, 1].item() == pytest.approx(1.0, abs=1e-12)
    assert principal_overlap(W, "max")[0, 1].item() == pytest.approx(1.0, abs=1e-12)
    s = torch.linalg.svdvals(head)
    assert frobenius_overlap(W)[0, 1].item() == pytest.approx((s**4).sum().item() / (s**2).sum().item() ** 2, rel=1e-12)
    iso = orthonormal(12)[:4].expand(2, 4, 12)  # isotropic heads score 1 / d_head
    assert frobenius_overlap(iso)[0, 1].item() == pytest.approx(0.25, rel=1e-12)


def test_orthogonal_row_spaces_score_zero():
    Q = orthonormal(12)  # rows: an orthonormal basis of R^12
    mix = torch.randn(3, 4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(3))  # non-orthogonal in-head bases
    W = torch.stack([mix[h] @ Q[4 * h: 4 * h + 4] for h in range(3)])  # (3, 4, 12)
    off = ~torch.eye(3, dtype=torch.bool)
    assert frobenius_overlap(W)[off].abs().max().item() < 1e-12
    assert principal_overlap(W)[off].abs().max().item() < 1e-12
    assert principal_overlap(W, "max")[off].abs().max().item() < 1e-7
    assert torch.allclose(torch.diagonal(principal_overlap(W)), torch.ones(3, dtype=torch.float64))


def test_principal_cosines_known_angle():
    # two planes in R^3 sharing one axis and tilted by 60 degrees in the other: cosines 1 and 0.5
    e = torch.eye(3, dtype=torch.float64)
    a, t = e[:2], math.pi / 3
    b = torch.stack([e[0], math.cos(t) * e[1] + math.sin(t) * e[2]])
    cos = principal_cosines(torch.stack([a, b]))[0, 1]
    assert cos.tolist() == pytest.approx([1.0, 0.5], abs=1e-12)
    assert principal_overlap(torch.stack([a, b]))[0, 1].item() == pytest.approx((1 + 0.25) / 2, abs=1e-12)


def test_gradient_path_matches_svd_path():
    W = torch.randn(4, 8, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    exact = principal_overlap(W)
    Wg = W.clone().requires_grad_()
    traced = principal_overlap(Wg)
    assert torch.allclose(traced.detach(), exact, atol=1e-12)
    pair_mean(traced).backward()
    assert torch.isfinite(Wg.grad).all() and Wg.grad.abs().max() > 0


def test_change_of_basis_moves_frobenius_not_principal_nor_logits():
    model = KANGPT(tiny_config(vocab_size=11, n_head=2, n_embd=16, ffn="mlp,kan", bias=True)).double().eval()
    W0 = head_output_projections(model, 0).detach()  # (2, 8, 16)
    u = torch.linalg.svd(W0[0] @ W0[1].T)[0][:, 0]  # direction of head 0 most aligned with head 1
    f0 = frobenius_overlap(W0)[0, 1].item()
    idx = torch.randint(11, (3, 8), generator=torch.Generator().manual_seed(0))
    scores = {}
    for k in (0.1, 10.0):
        A = torch.eye(8, dtype=torch.float64) + (k - 1) * torch.outer(u, u)  # invertible, not orthogonal
        other = change_head_basis(model, 0, 0, A)
        W1 = head_output_projections(other, 0).detach()
        assert not torch.allclose(W0, W1)
        assert (principal_overlap(W1) - principal_overlap(W0)).abs().max().item() < 1e-6
        assert (principal_overlap(W1, "max") - principal_overlap(W0, "max")).abs().max().item() < 1e-6
        torch.testing.assert_close(other(idx)[0], model(idx)[0], rtol=0, atol=1e-12)  # same function
        scores[k] = frobenius_overlap(W1)[0, 1].item()
    # the seed's score moves both ways (0.058 -> 0.043 and 0.113 for this model)
    assert scores[0.1] < 0.8 * f0 and scores[10.0] > 1.5 * f0
    with pytest.raises(ConfigError, match="singular"):
        change_head_basis(model, 0, 0, torch.zeros(8, 8))


def test_attention_maps_similarity_and_importance():
    from scipy.spatial.distance import jensenshannon

    model = KANGPT(tiny_config(vocab_size=11, n_head=2, n_embd=16, ffn="mlp")).eval()
    idx = torch.randint(11, (4, 8), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        qkv = model.blocks[0].attn.head_qkv_weights()  # (3, H, hs, C) view
        qkv[:2, 1] = qkv[:2, 0]  # head 1 of layer 0 attends exactly like head 0
        model.blocks[1].attn.head_qkv_weights()[:2, 0] *= 60.0  # layer 1: head 0 sharp, head 1 near uniform
        model.blocks[1].attn.head_output_weights()[1] = 0.0  # head 1 of layer 1 writes nothing
    assert attention_similarity(model, idx, 0)[0, 1].item() == pytest.approx(1.0, abs=1e-6)
    # the maps are the probabilities the forward pass used: P @ v gives each head's output
    captured = {}
    handle = model.blocks[1].attn.head_out.register_forward_hook(lambda m, a, out: captured.setdefault("y", out))
    model(idx)
    handle.remove()
    P = attention_maps(model, idx, 1)  # (B, H, T, T)
    x = model.blocks[1].ln_1(model.blocks[0](model.wte(idx) + model.wpe(torch.arange(8))))
    v = torch.einsum("btc,hdc->bhtd", x, model.blocks[1].attn.head_qkv_weights()[2])  # (B, H, T, hs)
    torch.testing.assert_close(P @ v, captured["y"], rtol=1e-4, atol=1e-6)
    # 1 - JS / ln 2, JS from scipy, averaged over the batch and query positions t >= 1
    js = [jensenshannon(P[b, 0, t, : t + 1].double().numpy(), P[b, 1, t, : t + 1].double().numpy()) ** 2
          for b in range(4) for t in range(1, 8)]
    sim = attention_similarity(model, idx, 1)[0, 1].item()
    assert sim == pytest.approx(1.0 - sum(js) / len(js) / math.log(2), abs=1e-5)
    assert sim < 0.9
    before = {k: v.clone() for k, v in model.state_dict().items()}
    base, imp = head_importance(model, [(idx, idx)])
    assert imp[1, 1].item() == 0.0  # zeroing a head that writes nothing changes nothing
    assert imp[0, 0].item() != 0.0
    assert base == pytest.approx(model(idx, idx)[1].item(), abs=1e-6)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # masked by a hook, weights untouched


@pytest.mark.parametrize("kind", ["frobenius", "principal"])
def test_penalty_lowers_its_own_measure(text_file, tmp_path, kind):
    model = tiny_config(n_head=4, n_embd=16, ffn="mlp")
    runs = {}
    for lam in (0.0, 1.0):
        config = tiny_train(max_iters=20, eval_interval=5, ortho_lambda=lam, ortho_kind=kind)
        train(model, config, text_file, tmp_path / f"{kind}{lam}")
        runs[lam] = [json.loads(line) for line in (tmp_path / f"{kind}{lam}" / "log.jsonl").read_text().splitlines()]
    measure = lambda row: sum(row["overlap"][kind]) / len(row["overlap"][kind])  # noqa: E731
    penalised = [measure(r) for r in runs[1.0]]
    assert penalised[-1] < 0.5 * penalised[0]
    assert penalised[-1] < 0.5 * measure(runs[0.0][-1])
    assert runs[1.0][-1]["ortho_penalty"] == pytest.approx(measure(runs[1.0][-1]), rel=1e-4)
    assert runs[0.0][-1]["ortho_penalty"] == 0.0 and math.isfinite(runs[1.0][-1]["val_loss"])


def test_ortho_penalty_is_mean_of_pair_means():
    model = KANGPT(tiny_config(n_head=4, n_embd=16))
    value = ortho_penalty(model, "frobenius")
    expected = sum(pair_mean(frobenius_overlap(b.attn.head_output_weights())).item() for b in model.blocks) / 2
    assert value.item() == pytest.approx(expected, rel=1e-6)
    value.backward()
    assert model.blocks[0].attn.c_proj.weight.grad.abs().max() > 0


def test_reordered_heads_index_buffers_move_with_the_model_and_are_not_saved():
    model = reorder_heads(KANGPT(tiny_config(n_layer=1, n_head=4, n_embd=16, seed=3)), {0: [2, 0, 3, 1]}).eval()
    attn = model.blocks[0].attn
    buffers = dict(attn.named_buffers())
    assert torch.equal(buffers["_order"], torch.tensor([2, 0, 3, 1]))  # module buffers: .to(device) moves them once
    assert buffers["_attn_index"].shape == (48,) and buffers["_proj_index"].shape == (16,)
    assert not any("index" in k or "_order" in k or "_inverse" in k for k in model.state_dict())
    idx = torch.randint(11, (2, 8), generator=torch.Generator().manual_seed(0))
    double = model.to(torch.float64)  # integer index buffers keep their dtype
    assert attn._attn_index.dtype == torch.int64 and torch.isfinite(double(idx)[0]).all()


def test_cluster_order_groups_similar_heads():
    S = torch.full((4, 4), 0.1)
    S[0, 2] = S[2, 0] = S[1, 3] = S[3, 1] = 0.9
    S.fill_diagonal_(1.0)
    order = cluster_order(S)
    assert sorted(order) == [0, 1, 2, 3]
    pos = {h: i for i, h in enumerate(order)}
    assert abs(pos[0] - pos[2]) == 1 and abs(pos[1] - pos[3]) == 1


def test_reordering_is_bit_exact_and_reversible(tmp_path):
    model = KANGPT(tiny_config(n_layer=2, n_head=4, n_embd=16, ffn="mlp,kan", bias=True, seed=3)).eval()
    idx = torch.randint(11, (3, 8), generator=torch.Generator().manual_seed(2))
    logits = model(idx)[0]
    new = reorder_heads(model, {0: [2, 0, 3, 1], 1: [3, 2, 1, 0]})
    assert torch.equal(new(idx)[0], logits)
    assert head_orders(new) == [[2, 0, 3, 1], [3, 2, 1, 0]]
    # stored head 0 of layer 0 is the original head 2
    assert torch.equal(head_output_projections(new, 0)[0], head_output_projections(model, 0)[2])
    assert torch.equal(new.blocks[0].attn.head_qkv_weights()[:, 0], model.blocks[0].attn.head_qkv_weights()[:, 2])
    again = reorder_heads(new, {0: [1, 0, 2, 3]})  # permutations compose
    assert head_orders(again)[0] == [0, 2, 3, 1] and torch.equal(again(idx)[0], logits)
    path = save_gpt(tmp_path / "r.pt", again, CharVocab(tuple("abcdefghijk")))
    loaded = load_gpt(path).model
    assert loaded.config.head_order == ((0, 2, 3, 1), (3, 2, 1, 0))
    assert torch.equal(loaded(idx)[0], logits)
    back = restore_head_order(loaded)
    assert back.config.head_order is None
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in back.state_dict().items())
    with pytest.raises(ConfigError, match="not a permutation"):
        reorder_heads(model, {0: [0, 0, 1, 2]})
    with pytest.raises(ConfigError, match="out of range"):
        reorder_heads(model, {5: [0, 1, 2, 3]})


def test_heads_cli(text_file, tmp_path):
    runner = CliRunner()
    out = tmp_path / "run"
    args = ["gpt", "train", "--text", str(text_file), "-o", str(out), "--n-layer", "2", "--n-head", "4", "--n-embd", "16",
            "--block-size", "8", "--batch-size", "4", "--max-iters", "6", "--eval-interval", "3", "--eval-iters", "1",
            "--ffn", "mlp", "--ortho-lambda", "0.5", "--ortho-kind", "frobenius", "--wo-decay", "0.01", "-q"]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert rows[-1]["ortho_penalty"] > 0 and rows[-1]["wo_penalty"] == pytest.approx(0.01 * rows[-1]["wo_sq_norm"])
    ckpt, reordered, plots = out / "last.pt", tmp_path / "reordered.pt", tmp_path / "plots"
    result = runner.invoke(cli, ["gpt", "heads", str(ckpt), "--text", str(text_file), "--batches", "1", "--metric", "js",
                                 "--plots", str(plots), "--reorder", "-o", str(reordered), "-q"])
    assert result.exit_code == 0, result.output
    assert "layer 1" in result.stdout and "principal mean cos²" in result.stdout and "ablation" in result.stdout
    for name in ("heads_before.png", "heads_after.png", "importance.png"):
        assert (plots / name).read_bytes()[:4] == b"\x89PNG"
    before, after = load_gpt(ckpt), load_gpt(reordered)
    report = analyse_heads(before.model)
    idx = torch.randint(before.vocab.size, (2, 8), generator=torch.Generator().manual_seed(0))
    assert torch.equal(after.model(idx)[0], before.model(idx)[0])
    assert after.checkpoint["heads"]["metric"] == "js" and len(after.checkpoint["heads"]["head_order"]) == 2
    result = runner.invoke(cli, ["gpt", "heads", str(reordered), "--json", "--layer", "0"])
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout.strip())
    order = after.model.config.head_order[0]
    assert row["head_order"] == list(order) and row["js"] is None
    # the reordered model's principal matrix is the original's, permuted
    P = torch.tensor(row["principal"])
    assert torch.allclose(P, report[0].principal[list(order)][:, list(order)], atol=1e-6)
    assert reorder_by(report, "principal")[0] == cluster_order(report[0].principal)


@pytest.mark.parametrize("extra, needle", [
    (["--layer", "7"], "out of range"),
    (["--text", "MISSING"], "does not exist"),
    (["--metric", "js"], "needs --text"),
    (["--reorder"], "go together"),
])
def test_heads_cli_errors(text_file, tmp_path, extra, needle):
    model = KANGPT(tiny_config(n_head=2, n_embd=16, vocab_size=len(set(text_file.read_text()))))
    ckpt = save_gpt(tmp_path / "m.pt", model, CharVocab.from_text(text_file.read_text()))
    extra = [str(tmp_path / "nope.txt") if e == "MISSING" else e for e in extra]
    result = CliRunner().invoke(cli, ["gpt", "heads", str(ckpt), *extra])
    assert result.exit_code == 2
    assert result.output.startswith("error:") and needle in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_heads_cli_rejects_a_kan_checkpoint(tmp_path):
    from kansym.io.checkpoint import save_checkpoint

    path = save_checkpoint({"kind": "kan", "model": {}}, tmp_path / "kan.pt")
    result = CliRunner().invoke(cli, ["gpt", "heads", str(path)])
    assert result.exit_code == 2 and result.output.startswith("error:") and "Traceback" not in result.output
