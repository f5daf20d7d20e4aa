"""KAN-GPT on Shakespeare: train an MLP-GPT and a parameter-matched KAN-GPT, sparsify, prune, sample.

    python examples/kan_gpt_shakespeare.py --text ../shared/data/shakespeare.txt --max-iters 2000

nanoGPT's char-level CPU recipe (block 64, batch 12, 4 layers, 4 heads, n_embd 128,
lr 1e-3). The KAN run adds weight-based L1 + entropy sparsification (``--lamb``), and
its best checkpoint is node-pruned with ``--theta``: by default each hidden unit is
scored by the RMS norm of its contribution to the FFN output over 8 training batches
(``--score output``), with ``theta`` a fraction of each layer's strongest unit
(``--absolute`` for a plain threshold). docs/benchmarks.md has what these defaults
measured after 1000 iterations (34 % of KAN units removed, val loss +0.015). Use
``--max-iters 20`` for a quick look. Writes everything under ``--out``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from kansym.gpt.checkpoint import load_gpt, save_gpt
from kansym.gpt.config import GPTTrainConfig, KANGPTConfig
from kansym.gpt.data import get_batch, load_char_data
from kansym.gpt.prune import prune_gpt
from kansym.gpt.sample import sample_text
from kansym.gpt.train import estimate_loss, train


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--text", default="../shared/data/shakespeare.txt")
    p.add_argument("--out", default="out/kan_gpt_shakespeare")
    p.add_argument("--max-iters", type=int, default=2000)
    p.add_argument("--lamb", type=float, default=1e-3, help="Sparsification weight of the KAN run.")
    p.add_argument("--theta", type=float, default=0.03, help="Node-pruning threshold (fraction of each layer's strongest unit).")
    p.add_argument("--score", choices=["weight", "sample", "output"], default="output", help="Unit strength for pruning (kansym.gpt.prune).")
    p.add_argument("--absolute", action="store_true", help="theta is an absolute score, not relative per layer.")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    out = Path(args.out)
    config = GPTTrainConfig(max_iters=args.max_iters, eval_interval=max(1, args.max_iters // 8), seed=args.seed,
                            warmup_iters=min(100, args.max_iters // 10))
    runs = {
        "mlp": (KANGPTConfig(ffn="mlp", seed=args.seed), config),
        "kan": (KANGPTConfig(ffn="kan", seed=args.seed), config.replace(lamb=args.lamb)),
    }
    for name, (model_config, train_config) in runs.items():
        result = train(model_config, train_config, args.text, out / name, overwrite=True, progress=True)
        print(f"{name}: val loss {result.last_val_loss:.4f} after {result.iter} iterations "
              f"({result.history[-1]['elapsed_s']:.0f} s of training)")

    loaded = load_gpt(out / "kan" / "best.pt")
    data = load_char_data(args.text, vocab=loaded.vocab)
    gen = torch.Generator().manual_seed(args.seed)
    idx = torch.cat([get_batch(data.train, config.batch_size, 64, gen)[0] for _ in range(8)]) if args.score != "weight" else None
    pruned = prune_gpt(loaded.model, theta=args.theta, idx=idx, score=args.score, relative=not args.absolute)
    before = estimate_loss(loaded.model, data, config)["val"]
    after = estimate_loss(pruned.model, data, config)["val"]
    save_gpt(out / "kan" / "pruned.pt", pruned.model, loaded.vocab, prune=pruned.report)
    print(json.dumps({"val_before": before, "val_after": after, **pruned.report}, indent=1))
    print(sample_text(pruned.model, loaded.vocab, "ROMEO:", 300, temperature=0.8, top_k=20, seed=args.seed))


if __name__ == "__main__":
    main()
