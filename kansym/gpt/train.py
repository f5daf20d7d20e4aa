"""Training loop of KAN-GPT: AdamW, warm-up + cosine decay, eval, checkpoints, resume, DDP.

The loop follows nanoGPT's ``train.py`` (AdamW with decoupled weight decay, linear
warm-up then cosine decay of the learning rate, global-norm gradient clipping) and
adds the KAN paper's sparsification (weight-based, see :mod:`kansym.gpt.ffn`).

Everything random is drawn from explicit streams derived from ``config.seed``: a
``torch.Generator`` for the data order, the global torch RNG (dropout) seeded inside
``torch.random.fork_rng`` so the caller's RNG is untouched, and a fixed generator for
the eval batches (the same batches at every evaluation). ``last.pt`` stores the data
order and RNG states, so ``resume=True`` continues the very same loss curve.

Run under ``torchrun --nproc_per_node N`` for data-parallel training (DDP; gloo on
CPU, nccl on CUDA): each process draws its own batches, gradients are averaged, and
process 0 writes the files.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
import torch.distributed as dist
from tqdm.auto import tqdm

from kansym.errors import CheckpointError, ConfigError, FitError
from kansym.gpt.checkpoint import load_gpt, save_gpt
from kansym.gpt.config import GPTTrainConfig, KANGPTConfig
from kansym.gpt.data import CharData, get_batch, load_char_data
from kansym.gpt.ffn import sparsity_penalty
from kansym.gpt.heads import ortho_penalty, overlap_summary, wo_sq_norm
from kansym.gpt.model import KANGPT

__all__ = ["TrainResult", "lr_at", "configure_optimizer", "estimate_loss", "train"]

logger = logging.getLogger("kansym")

_SEED_STRIDE = 1_000_003  # separates the per-rank data and dropout streams of one seed


@dataclass(frozen=True)
class TrainResult:
    """What a training run produced.

    Attributes
    ----------
    out_dir : Path
        Holds ``best.pt``, ``last.pt`` and ``log.jsonl``.
    iter : int
        Steps done (including those before a resume).
    best_val_loss, last_val_loss : float
    history : tuple of dict
        The rows of ``log.jsonl``: ``iter``, ``train_loss``, ``val_loss``, ``elapsed_s``
        (training time, evals excluded), ``tokens_per_s`` (since the previous row), ``lr``,
        and the attention-head terms: ``ortho_penalty`` (``ortho_lambda`` times the
        penalised mean overlap), ``wo_penalty`` (``wo_decay * wo_sq_norm``), ``wo_sq_norm``
        (mean over layers of ``||W_O||_F^2``) and ``overlap`` (per layer ``mean_{i<j}`` of
        the ``frobenius``, ``principal`` and ``principal_max`` measures, see
        :func:`kansym.gpt.heads.overlap_summary`).
    """

    out_dir: Path
    iter: int
    best_val_loss: float
    last_val_loss: float
    history: tuple[dict, ...]


def lr_at(it: int, config: GPTTrainConfig) -> float:
    """Learning rate of step ``it``: linear warm-up, cosine decay to ``min_lr``, then flat."""
    if it < config.warmup_iters:
        return config.lr * (it + 1) / (config.warmup_iters + 1)
    if it >= config.decay_iters:
        return config.final_lr
    ratio = (it - config.warmup_iters) / max(1, config.decay_iters - config.warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * ratio))
    return config.final_lr + coeff * (config.lr - config.final_lr)


def configure_optimizer(model: torch.nn.Module, config: GPTTrainConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on tensors of >= 2 dimensions only (biases and norms exempt)."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": config.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=config.lr, betas=(config.beta1, config.beta2))


@torch.no_grad()
def estimate_loss(
    model: KANGPT, data: CharData, config: GPTTrainConfig, ctx=contextlib.nullcontext
) -> dict[str, float]:
    """Mean loss on ``eval_iters`` batches of each split (the same batches on every call).

    Returns
    -------
    dict
        ``{"train": float, "val": float}``.
    """
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    out = {}
    for split in ("train", "val"):
        gen = torch.Generator().manual_seed(config.seed * _SEED_STRIDE + 999_983)
        total = 0.0
        for _ in range(config.eval_iters):
            x, y = get_batch(data.split(split), config.batch_size, model.config.block_size, gen, device)
            with ctx():
                _, loss = model(x, y)
            total += loss.item()
        out[split] = total / config.eval_iters
    model.train(was_training)
    return out


@torch.no_grad()
def _head_terms(model: KANGPT, config: GPTTrainConfig) -> dict:
    """The attention-head terms of a log row: penalty values and per-layer overlaps."""
    return {
        "ortho_penalty": config.ortho_lambda * ortho_penalty(model, config.ortho_kind).item(),
        "wo_penalty": config.wo_decay * wo_sq_norm(model).item(),
        "wo_sq_norm": wo_sq_norm(model).item(),
        "overlap": overlap_summary(model),
    }


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _to_cpu(obj):
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_cpu(v) for v in obj)
    return obj


def _gather(obj, world: int) -> list:
    if world == 1:
        return [obj]
    out = [None] * world
    dist.all_gather_object(out, obj)
    return out


def _read_log(path: Path, upto: int) -> list[dict]:
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if r["iter"] <= upto]


@dataclass
class _Run:
    """The fixed parts of a run: its options, data, model, optimizer, device and processes."""

    config: GPTTrainConfig
    data: CharData
    model: KANGPT
    fwd: torch.nn.Module  # the model as the steps call it (DDP-wrapped, compiled)
    optimizer: torch.optim.AdamW
    ctx: Callable[[], contextlib.AbstractContextManager]  # autocast or nothing
    device: torch.device
    cuda: bool
    world: int
    rank: int
    out_dir: Path
    text_meta: dict
    step_tokens: int  # tokens of one step over all processes


@dataclass
class _Loop:
    """The changing state of the loop: counters, clocks, data stream and log rows."""

    data_gen: torch.Generator
    it: int = 0
    best: float = float("inf")
    elapsed: float = 0.0
    tokens: int = 0
    history: list[dict] = field(default_factory=list)
    last_val: float = float("nan")
    window_tokens: int = 0  # since the previous log row
    window_time: float = 0.0


def _resume_run(
    model_config: KANGPTConfig | None, config: GPTTrainConfig | None, text: Path, last_path: Path, world: int
) -> tuple[GPTTrainConfig, KANGPT, CharData, dict]:
    """Load ``last.pt`` to resume it, checking that nothing that must stay the same changed."""
    if not last_path.exists():
        raise CheckpointError(f"'{last_path}' does not exist; drop --resume to start a new run")
    loaded = load_gpt(last_path)
    state = loaded.checkpoint.get("train")
    if not state or "optimizer" not in state:
        raise CheckpointError(f"'{last_path}' holds no training state; it cannot be resumed")
    saved = GPTTrainConfig.from_dict(state["config"])
    config = saved if config is None else saved.resume_with(config)
    if model_config is not None and model_config.replace(vocab_size=loaded.model.config.vocab_size) != loaded.model.config:
        raise ConfigError("cannot resume with another model architecture; drop the architecture options")
    if state.get("world_size", 1) != world:
        raise ConfigError(f"the run was trained on {state.get('world_size', 1)} processes; resume it on as many")
    data = load_char_data(text, val_fraction=config.val_fraction, vocab=loaded.vocab)
    if state["text"]["sha256"] != _sha256(text):
        raise ConfigError(f"'{text}' is not the text this run was trained on; give the same file")
    return config, loaded.model, data, state


def _new_run(
    model_config: KANGPTConfig | None, config: GPTTrainConfig | None, text: Path, out_dir: Path, overwrite: bool
) -> tuple[GPTTrainConfig, KANGPT, CharData, None]:
    """Check the options of a new run, read the text and build the model."""
    if model_config is None or config is None:
        raise ConfigError("a new run needs a model config and a training config")
    if (out_dir / "last.pt").exists() and not overwrite:
        raise ConfigError(f"'{out_dir}' already holds a run; use --resume to continue it, --force to replace it, "
                          "or another -o")
    data = load_char_data(text, val_fraction=config.val_fraction)
    return config, KANGPT(model_config.replace(vocab_size=data.vocab.size)), data, None


def _prepare_run(config: GPTTrainConfig, model: KANGPT, data: CharData, text: Path, out_dir: Path,
                 world: int, rank: int, local_rank: int) -> _Run:
    """Join the process group, move the model to its device, and make the optimizer and the forward."""
    if world > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if config.device.startswith("cuda") else "gloo")
    device = torch.device(f"cuda:{local_rank}" if world > 1 and config.device.startswith("cuda") else config.device)
    cuda = device.type == "cuda"
    model.to(device=device, dtype=getattr(torch, config.dtype))
    model.train()
    optimizer = configure_optimizer(model, config)
    fwd = model
    if world > 1:
        fwd = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if cuda else None)
    if config.compile:
        fwd = torch.compile(fwd)
    amp = cuda and config.amp
    ctx = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if amp else contextlib.nullcontext
    text_meta = {"sha256": _sha256(text), "chars": int(len(data.train) + len(data.val))}
    return _Run(config=config, data=data, model=model, fwd=fwd, optimizer=optimizer, ctx=ctx, device=device,
                cuda=cuda, world=world, rank=rank, out_dir=out_dir, text_meta=text_meta,
                step_tokens=config.batch_size * model.config.block_size * world)


def _start_loop(run: _Run, state: dict | None) -> _Loop:
    """Seed the RNG streams, restore a resumed run's optimizer, counters and RNG states, and (re)write the log."""
    seed = run.config.seed * _SEED_STRIDE + 2 * run.rank
    torch.manual_seed(seed + 1)
    loop = _Loop(data_gen=torch.Generator().manual_seed(seed))
    if state is not None:
        run.optimizer.load_state_dict(state["optimizer"])
        loop.it, loop.best, loop.elapsed, loop.tokens = (state["iter"], state["best_val_loss"], state["elapsed_s"],
                                                         state["tokens"])
        loop.data_gen.set_state(state["rng"]["data"][run.rank])
        torch.set_rng_state(state["rng"]["torch"][run.rank])
        if run.cuda and state["rng"]["cuda"]:
            torch.cuda.set_rng_state(state["rng"]["cuda"][run.rank], run.device)
        loop.history = _read_log(run.out_dir / "log.jsonl", loop.it)
    if run.rank == 0:
        run.out_dir.mkdir(parents=True, exist_ok=True)
        (run.out_dir / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in loop.history))
    loop.last_val = loop.history[-1]["val_loss"] if loop.history else float("nan")
    return loop


def _train_step(run: _Run, loop: _Loop) -> tuple[float, torch.Tensor]:
    """One optimizer step at the scheduled learning rate; returns that rate and the batch's loss."""
    config, model = run.config, run.model
    t0 = time.perf_counter()
    lr = lr_at(loop.it, config)
    for group in run.optimizer.param_groups:
        group["lr"] = lr
    x, y = get_batch(run.data.train, config.batch_size, model.config.block_size, loop.data_gen, run.device)  # (B, T)
    with run.ctx():
        _, loss = run.fwd(x, y)
    total = loss + config.lamb * sparsity_penalty(model, mu1=config.mu1, mu2=config.mu2) if config.lamb else loss
    if config.ortho_lambda:
        total = total + config.ortho_lambda * ortho_penalty(model, config.ortho_kind)
    if config.wo_decay:
        total = total + config.wo_decay * wo_sq_norm(model)
    run.optimizer.zero_grad(set_to_none=True)
    total.backward()
    if config.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
    run.optimizer.step()
    step = loop.it + 1
    if run.cuda and (step % 10 == 0 or step % config.eval_interval == 0 or step == config.max_iters):
        # wait for the GPU only where times are read (log and eval steps), not every step: the
        # steps between only queue work, so each window's summed dt is still its wall time
        torch.cuda.synchronize(run.device)
    dt = time.perf_counter() - t0
    loop.it, loop.elapsed, loop.tokens = loop.it + 1, loop.elapsed + dt, loop.tokens + run.step_tokens
    loop.window_tokens, loop.window_time = loop.window_tokens + run.step_tokens, loop.window_time + dt
    return lr, loss


def _check_loss(loop: _Loop, loss: torch.Tensor, config: GPTTrainConfig, bar: tqdm) -> None:
    """Every 10th step and at the end: stop on a non-finite loss, else show it and the tokens/s."""
    if loop.it % 10 == 0 or loop.it == config.max_iters:
        value = loss.item()
        if not math.isfinite(value):
            raise FitError(f"the training loss became {value} at step {loop.it}; lower --lr or raise --grad-clip")
        bar.set_postfix(loss=f"{value:.4f}", tok_s=f"{loop.window_tokens / max(loop.window_time, 1e-9):.0f}")


def _evaluate(run: _Run, loop: _Loop, lr: float) -> None:
    """Evaluate both splits, add the log row, and (process 0) write it and the checkpoints."""
    losses = estimate_loss(run.model, run.data, run.config, run.ctx)
    row = {
        "iter": loop.it,
        "train_loss": losses["train"],
        "val_loss": losses["val"],
        "elapsed_s": loop.elapsed,
        "tokens_per_s": loop.window_tokens / max(loop.window_time, 1e-9),
        "lr": lr,
        **_head_terms(run.model, run.config),
    }
    loop.window_tokens, loop.window_time = 0, 0.0
    loop.history.append(row)
    loop.last_val = losses["val"]
    improved = loop.last_val < loop.best
    loop.best = min(loop.best, loop.last_val)
    rng = {
        "data": _gather(loop.data_gen.get_state(), run.world),
        "torch": _gather(torch.get_rng_state(), run.world),
        "cuda": _gather(torch.cuda.get_rng_state(run.device), run.world) if run.cuda else [],
    }
    if run.rank == 0:
        _write_run_files(run, loop, row, improved, rng)
        logger.info("iter %d: train %.4f, val %.4f", loop.it, losses["train"], losses["val"])


def _write_run_files(run: _Run, loop: _Loop, row: dict, improved: bool, rng: dict) -> None:
    """Append ``row`` to ``log.jsonl``, save ``best.pt`` if the validation loss improved, and ``last.pt``."""
    with open(run.out_dir / "log.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")
    meta = {"config": run.config.to_dict(), "iter": loop.it, "val_loss": loop.last_val, "best_val_loss": loop.best,
            "elapsed_s": loop.elapsed, "tokens": loop.tokens, "world_size": run.world, "text": run.text_meta}
    if improved:
        save_gpt(run.out_dir / "best.pt", run.model, run.data.vocab, train=meta)
    full = dict(meta, optimizer=_to_cpu(run.optimizer.state_dict()), rng=_to_cpu(rng))
    save_gpt(run.out_dir / "last.pt", run.model, run.data.vocab, train=full)


def _run_loop(run: _Run, loop: _Loop, progress: bool) -> None:
    """Step until ``max_iters``, evaluating and saving every ``eval_interval`` steps and at the end."""
    config = run.config
    bar = tqdm(total=config.max_iters, initial=loop.it, disable=not progress or run.rank != 0, leave=False, unit="it")
    while loop.it < config.max_iters:
        lr, loss = _train_step(run, loop)
        bar.update(1)
        _check_loss(loop, loss, config, bar)
        if loop.it % config.eval_interval and loop.it != config.max_iters:
            continue
        _evaluate(run, loop, lr)
    bar.close()


def train(
    model_config: KANGPTConfig | None,
    config: GPTTrainConfig | None,
    text: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = False,
) -> TrainResult:
    """Train a KAN-GPT on a text file, writing ``best.pt``, ``last.pt`` and ``log.jsonl``.

    Parameters
    ----------
    model_config : KANGPTConfig or None
        Architecture; its ``vocab_size`` is replaced by the text's. With ``resume`` it may
        be None (the saved one is used); otherwise it must equal the saved one.
    config : GPTTrainConfig or None
        Optimisation; with ``resume``, None means the saved config, and only
        ``max_iters``, ``lr_decay_iters``, eval settings, device, amp and compile may change.
    text : path of a UTF-8 text file
    out_dir : directory of the run
    resume : bool
        Continue from ``out_dir/last.pt`` (same data order, RNG states and optimizer).
    overwrite : bool
        Start afresh even if ``out_dir`` already holds a run.
    progress : bool
        Show a progress bar with the loss and tokens/s.

    Returns
    -------
    TrainResult

    Raises
    ------
    DataError
        Unreadable or too short text; a resumed run given another text.
    ConfigError
        Bad options, an existing run without ``resume``/``overwrite``, or changed
        settings on resume.
    CheckpointError
        ``resume`` without a usable ``last.pt``.
    FitError
        The loss became NaN or infinite.
    """
    out_dir, text = Path(out_dir), Path(text)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    if resume:
        config, model, data, state = _resume_run(model_config, config, text, out_dir / "last.pt", world)
    else:
        config, model, data, state = _new_run(model_config, config, text, out_dir, overwrite)
    run = _prepare_run(config, model, data, text, out_dir, world, rank, local_rank)
    with torch.random.fork_rng(devices=[run.device] if run.cuda else []):
        loop = _start_loop(run, state)
        _run_loop(run, loop, progress)
    if world > 1:
        dist.barrier()
    return TrainResult(out_dir=out_dir, iter=loop.it, best_val_loss=loop.best, last_val_loss=loop.last_val,
                       history=tuple(loop.history))
