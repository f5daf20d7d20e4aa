"""Group-rational KAN feed-forward block (GR-KAN) and the SwiGLU baseline.

GR-KAN follows the Kolmogorov–Arnold Transformer (Yang & Wang 2024, "Kolmogorov–Arnold
Transformer", arXiv:2409.10594): every edge ``(j, i)`` of a KAN layer is
``w_ji F_g(i)(x_i)``, a learned weight times a rational function shared by the group
``g(i)`` of input channels, so one layer is ``Linear(F(x))`` and costs an MLP's
matmul. The rational is KAT's form of a safe Padé activation unit (Molina et al. 2020,
"Padé Activation Units: End-to-end Learning of Flexible Activation Functions in Deep
Networks", ICLR; their safe PAU uses ``1 + sum_k |b_k| |x|^k``)::

    F(x) = P(x) / Q(x),  P(x) = a_0 + a_1 x + ... + a_m x^m,
                         Q(x) = 1 + |b_1 x + ... + b_n x^n|    (>= 1: no pole)

with KAT's degrees ``(m, n) = (5, 4)`` and 8 groups. The FFN is KAT's two GR-KAN layers
``C -> h -> C``: ``F_1`` (initialised to the identity) on the ``C`` inputs, ``Linear(C, h)``,
``F_2`` (initialised to GELU) on the ``h`` hidden channels, ``Linear(h, C)``
(KAT's ``KAN`` module: ``act1 -> fc1 -> act2 -> fc2``).

Variance-preserving initialisation (KAT): a linear layer after a rational ``F`` gets
weights ``N(0, 1 / (fan_in E[F(x)^2]))`` with ``x ~ N(0, 1)`` (the LayerNorm'd block
input), so the hidden pre-activations have unit variance where ``F_2`` was fitted. It is
GR-KAN's default input-projection init here (``KANGPTConfig.fc_init``, set by
:func:`kansym.gpt.ffn.input_projection_stds`; ``gpt2`` gives it GPT-2's ``N(0, 0.02^2)``
instead). The output projection keeps GPT-2's scaled residual init like every other FFN
of the model (:class:`kansym.gpt.model.KANGPT`), so the residual stream starts as small
as theirs.

SwiGLU (Shazeer 2020, "GLU Variants Improve Transformer", arXiv:2002.05202):
``W_2 (SiLU(W_1 x) * W_3 x)``, three ``C x h`` matrices.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from kansym.errors import ConfigError

__all__ = ["RATIONAL_INITS", "GroupRational", "GRKANFFN", "SwiGLUFFN", "fit_rational", "gaussian_second_moment",
           "rational_second_moment"]

# (a_0..a_5, b_1..b_4) of F for (m, n) = (5, 4). "gelu": fit_rational(F.gelu, 5, 4) on [-3, 3]
# (least squares in float64, max error 7.7e-4 there; KAT fits the same interval).
RATIONAL_INITS: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "identity": ((0.0, 1.0, 0.0, 0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0)),
    "gelu": (
        (-5.3164764e-04, 4.9999991e-01, 4.0319691e-01, 7.5687311e-02, -1.1719516e-02, -3.5338096e-03),
        (3.6450144e-07, 1.5137409e-01, -7.9472887e-07, -7.0672791e-03),
    ),
}


def _rational(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``P(x) / (1 + |B(x)|)`` by Horner's rule; ``a (..., m + 1)``, ``b (..., n)`` broadcast against ``x``.

    The derivative of ``|B|`` at ``B = 0`` is taken as +1 (a subgradient), not 0.
    """
    p = a[..., -1]
    for k in range(a.shape[-1] - 2, -1, -1):
        p = p * x + a[..., k]
    q = b[..., -1] * x
    for k in range(b.shape[-1] - 2, -1, -1):
        q = (q + b[..., k]) * x
    # |q| with the right derivative (+1) at q = 0: torch's abs has derivative 0 there, which would keep a
    # denominator initialised to zero (the identity init, B = 0 everywhere) at zero for ever
    return p / (1.0 + torch.where(q >= 0, q, -q))


def _native_kernels(x: torch.Tensor):
    """kansym's C kernels (:func:`kansym.nn.fast.backends.native_kernels`) for a CPU float input, else None.

    Not while ``torch.compile`` traces (a ctypes call cannot be traced; the tensor path fuses).
    """
    if x.device.type != "cpu" or x.dtype not in (torch.float32, torch.float64) or torch.compiler.is_compiling():
        return None
    from kansym.nn.fast.backends import native_kernels

    return native_kernels()


class _RationalFn(torch.autograd.Function):
    """:func:`_rational` on ``(N, ch)`` inputs with per-channel ``a (ch, m + 1)``, ``b (ch, n)``, as one autograd node.

    Saves only ``x``, ``a``, ``b`` and recomputes ``P``, ``P'``, ``B``, ``B'`` in the backward
    (Horner's rule carries the derivative along, Knuth, TAOCP vol. 2, §4.6.4):
    ``dF/dx = (P' - F sgn(B) B') / Q``, ``dF/da_k = x^k / Q``, ``dF/db_j = -F sgn(B) x^j / Q``
    with ``sgn(0) = +1`` as in :func:`_rational`. On CPU (float32/64) both directions run kansym's
    C kernels (``kansym_rational_fwd``/``_bwd`` in ``kansym/nn/fast/csrc/kan_kernels.cpp``: one
    pass per row, channels vectorised); elsewhere, or with ``fast.use_backend("torch")``, tensor ops:
    in-place steps on a few buffers instead
    of autograd's saved intermediates, coefficient rows made contiguous (a broadcast of a strided
    column is several times slower): 2.3x less CPU time than autograd through :func:`_rational` at
    ``768 x 511`` (one thread, forward + backward), and less memory.
    """

    @staticmethod
    def forward(ctx, x, a, b):
        at, bt = a.t().contiguous(), b.t().contiguous()  # (m + 1, ch), (n, ch): contiguous rows broadcast fast
        ctx.save_for_backward(x, at, bt)
        ctx.kernels = _native_kernels(x)
        if ctx.kernels is not None:
            return ctx.kernels.rational(x, at, bt)
        p = at[-1].expand_as(x).clone()
        for k in range(at.shape[0] - 2, -1, -1):
            torch.addcmul(at[k], p, x, out=p)  # p = p x + a_k
        q = x * bt[-1]
        for k in range(bt.shape[0] - 2, -1, -1):
            q.add_(bt[k]).mul_(x)
        return p.div_(q.abs_().add_(1.0))

    @staticmethod
    def backward(ctx, g):
        x, at, bt = ctx.saved_tensors
        if ctx.kernels is not None:
            gx, ga, gb = ctx.kernels.rational_backward(g, x, at, bt)
            return gx, ga.t(), gb.t()
        p, dp = at[-1].expand_as(x).clone(), torch.zeros_like(x)
        for k in range(at.shape[0] - 2, -1, -1):
            torch.addcmul(p, dp, x, out=dp)  # P' = P' x + P
            torch.addcmul(at[k], p, x, out=p)
        c, dc = bt[-1].expand_as(x).clone(), torch.zeros_like(x)  # B = x c(x), c = b_1 + b_2 x + ...
        for k in range(bt.shape[0] - 2, -1, -1):
            torch.addcmul(c, dc, x, out=dc)
            torch.addcmul(bt[k], c, x, out=c)
        big_b = c * x
        d_b = torch.addcmul(c, dc, x, out=dc)  # B' = c + x c'
        neg = big_b < 0  # sgn(B) = -1 there, +1 elsewhere (also at B = 0)
        inv_q = big_b.abs_().add_(1.0).reciprocal_()  # 1 / Q
        t = g * inv_q  # g / Q
        s = t * p.mul_(inv_q)  # g F / Q
        s = torch.where(neg, -s, s)  # g F sgn(B) / Q
        gx = torch.addcmul(dp.mul_(t), s, d_b, value=-1.0) if ctx.needs_input_grad[0] else None
        ga, gb = torch.empty_like(at), torch.empty_like(bt)
        ga[0] = t.sum(0)
        for k in range(1, at.shape[0]):
            ga[k] = t.mul_(x).sum(0)  # sum_N g x^k / Q
        for j in range(bt.shape[0]):
            gb[j] = s.mul_(x).sum(0)  # sum_N g F sgn(B) x^(j + 1) / Q
        return gx, ga.t(), gb.t().neg()


def fit_rational(fn, m: int = 5, n: int = 4, *, low: float = -3.0, high: float = 3.0, points: int = 2001,
                 refine: bool = True) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Least-squares coefficients of a safe rational ``P / (1 + |B|)`` approximating ``fn``.

    A linear least-squares start solves ``P(x) - fn(x) B(x) = fn(x)`` (the linearised
    rational fit: the equation multiplied by the denominator, exact where ``B >= 0``), then L-BFGS minimises the true mean
    squared error, all in float64 on ``points`` equally spaced samples of ``[low, high]``.

    Parameters
    ----------
    fn : callable
        Tensor -> tensor, e.g. ``torch.nn.functional.gelu``.
    m, n : int
        Numerator and denominator degrees.
    low, high, points :
        The fitted interval and its samples.
    refine : bool
        Run L-BFGS after the linear start (about 2 s).

    Returns
    -------
    a : Tensor (m + 1,)
    b : Tensor (n,)
    max_error : float
        ``max |F - fn|`` on the samples.
    """
    x = torch.linspace(low, high, points, dtype=torch.float64)
    y = fn(x)
    powers = x[:, None] ** torch.arange(m + 1, dtype=torch.float64)  # (P, m + 1)
    design = torch.cat([powers, -y[:, None] * x[:, None] ** torch.arange(1, n + 1, dtype=torch.float64)], 1)  # (P, m + n + 1)
    sol = torch.linalg.lstsq(design, y[:, None]).solution[:, 0]
    a, b = sol[:m + 1].clone(), sol[m + 1:].clone()
    if refine:
        a.requires_grad_(True)
        b.requires_grad_(True)
        opt = torch.optim.LBFGS([a, b], max_iter=500, line_search_fn="strong_wolfe", tolerance_grad=1e-14, tolerance_change=1e-16)

        def closure():
            opt.zero_grad()
            loss = (_rational(x, a, b) - y).pow(2).mean()
            loss.backward()
            return loss

        opt.step(closure)
        a, b = a.detach(), b.detach()
    return a, b, (_rational(x, a, b) - y).abs().max().item()


def gaussian_second_moment(fn, samples: int = 200_001) -> float:
    """``E[fn(x)^2]`` for ``x ~ N(0, 1)`` (midpoint quadrature on ``[-8, 8]``, float64); ``fn`` maps tensors to tensors."""
    x = torch.linspace(-8.0, 8.0, samples, dtype=torch.float64)
    w = torch.exp(-0.5 * x * x) / math.sqrt(2 * math.pi) * (x[1] - x[0])
    return float((w * fn(x).pow(2)).sum())


def rational_second_moment(a: torch.Tensor, b: torch.Tensor, samples: int = 200_001) -> float:
    """``E[F(x)^2]`` for ``x ~ N(0, 1)`` of the rational with coefficients ``a``, ``b`` (:func:`gaussian_second_moment`)."""
    return gaussian_second_moment(lambda x: _rational(x, a.double(), b.double()), samples)


class GroupRational(nn.Module):
    """Rational activation ``F_g(x) = P_g(x) / (1 + |B_g(x)|)`` with one ``F_g`` per group of channels.

    Parameters
    ----------
    channels : int
        Width of the last axis of the input.
    groups : int
        Number of coefficient sets; channel ``c`` uses group ``c * groups // channels``
        (contiguous groups of near-equal size, so any width works; KAT needs divisibility).
    degrees : (int, int)
        ``(m, n)``; only ``(5, 4)`` has initial values in :data:`RATIONAL_INITS`.
    init : {"identity", "gelu"}

    Attributes
    ----------
    numerator : Parameter (groups, m + 1)
    denominator : Parameter (groups, n)
    group : LongTensor buffer (channels,)
        Group of each channel (saved: node pruning removes entries).

    Raises
    ------
    ConfigError
        Unknown init, degrees without initial values, or no group.
    """

    def __init__(self, channels: int, groups: int = 8, degrees: tuple[int, int] = (5, 4), init: str = "gelu") -> None:
        super().__init__()
        if init not in RATIONAL_INITS:
            raise ConfigError(f"unknown rational init {init!r}; use one of {', '.join(RATIONAL_INITS)}")
        m, n = (int(d) for d in degrees)
        a0, b0 = RATIONAL_INITS[init]
        if (m, n) != (len(a0) - 1, len(b0)):
            raise ConfigError(f"rational degrees must be (5, 4) (the initial values are fitted for them), got {tuple(degrees)}")
        if groups < 1:  # more groups than channels is allowed (a pruned layer keeps all its groups' coefficients)
            raise ConfigError(f"a group-rational layer needs at least 1 group, got {groups}")
        self.channels, self.groups, self.degrees, self.init = channels, groups, (m, n), init
        self.numerator = nn.Parameter(torch.tensor(a0).repeat(groups, 1))
        self.denominator = nn.Parameter(torch.tensor(b0).repeat(groups, 1))
        self.register_buffer("group", torch.arange(channels) * groups // channels)

    def extra_repr(self) -> str:
        return f"channels={self.channels}, groups={self.groups}, degrees={self.degrees}, init={self.init}"

    def coefficients(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-channel ``a (channels, m + 1)`` and ``b (channels, n)``."""
        return self.numerator[self.group], self.denominator[self.group]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``F_g(c)(x[..., c])``: ``(..., channels) -> (..., channels)``."""
        a, b = self.coefficients()  # (ch, m + 1), (ch, n)
        dtype, lead = x.dtype, x.shape[:-1]
        x = x.reshape(-1, self.channels)  # (N, ch)
        if dtype in (torch.float16, torch.bfloat16):  # autocast: the rational in float32, as the KAN bases
            x = x.float()
        if x.dtype != a.dtype:
            a, b = a.to(x.dtype), b.to(x.dtype)
        return _RationalFn.apply(x.contiguous(), a.contiguous(), b.contiguous()).to(dtype).reshape(*lead, self.channels)

    def curves(self, xs: torch.Tensor) -> torch.Tensor:
        """Every group's function at the points ``xs (P,)``: ``(groups, P)``."""
        return _rational(xs[None, :], self.numerator[:, None, :], self.denominator[:, None, :])

    def second_moment(self) -> torch.Tensor:
        """Per-group ``E[F_g(x)^2]`` for ``x ~ N(0, 1)`` (41-point Gauss-Hermite rule; differentiable), ``(groups,)``."""
        import numpy as np

        nodes, weights = np.polynomial.hermite_e.hermegauss(41)
        x = torch.as_tensor(nodes, dtype=self.numerator.dtype, device=self.numerator.device)
        w = torch.as_tensor(weights / math.sqrt(2 * math.pi), dtype=x.dtype, device=x.device)
        return (self.curves(x).pow(2) * w).sum(dim=-1)

    def keep(self, index: torch.Tensor) -> None:
        """Keep only the channels ``index`` (node pruning); the group coefficients stay."""
        self.group = self.group.index_select(0, index.to(self.group.device)).clone()
        self.channels = int(self.group.numel())


class GRKANFFN(nn.Module):
    """KAT's two GR-KAN layers ``C -> h -> C``: ``proj(F_2(fc(F_1(x))))`` (module docstring).

    Parameters
    ----------
    n_embd, hidden : int
        ``C`` and ``h``.
    groups : int
        Coefficient groups of each rational (KAT: 8).
    degrees : (int, int)
        ``(m, n)`` of the rationals.
    bias : bool
    dropout : float

    Attributes
    ----------
    act_in : GroupRational (C channels, identity init)
    c_fc : nn.Linear (C -> h)
    act_hidden : GroupRational (h channels, GELU init)
    c_proj : nn.Linear (h -> C)
    """

    kind = "grkan"

    def __init__(self, n_embd: int, hidden: int, *, groups: int = 8, degrees: tuple[int, int] = (5, 4),
                 bias: bool = False, dropout: float = 0.0) -> None:
        super().__init__()
        self.act_in = GroupRational(n_embd, groups, degrees, init="identity")
        self.c_fc = nn.Linear(n_embd, hidden, bias=bias)
        self.act_hidden = GroupRational(hidden, groups, degrees, init="gelu")
        self.c_proj = nn.Linear(hidden, n_embd, bias=bias)
        self.dropout = nn.Dropout(dropout)

    @property
    def hidden(self) -> int:
        """Hidden width ``h``."""
        return self.c_fc.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act_hidden(self.c_fc(self.act_in(x)))  # (B, T, h)
        return self.dropout(self.c_proj(h))  # (B, T, C)

    def edge_scores(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Weight-based edge magnitudes ``|w_ji| rms(F_g(i))`` of both layers (differentiable).

        An edge of a GR-KAN layer is ``w_ji F_g(i)(x_i)``; its size on unit-variance
        inputs is ``|w_ji| sqrt(E[F_g(i)(x)^2])``, the analogue of the KAN FFN's
        weight-based score (:func:`kansym.gpt.ffn.edge_scores`).

        Returns
        -------
        fc : Tensor (h, C)
        proj : Tensor (C, h)
        """
        rms_in = self.act_in.second_moment().clamp_min(1e-12).sqrt()[self.act_in.group]  # (C,)
        rms_hid = self.act_hidden.second_moment().clamp_min(1e-12).sqrt()[self.act_hidden.group]  # (h,)
        return self.c_fc.weight.abs() * rms_in, self.c_proj.weight.abs() * rms_hid


class SwiGLUFFN(nn.Module):
    """SwiGLU feed-forward: ``c_proj(SiLU(c_fc x) * c_gate x) -> Dropout`` (Shazeer 2020).

    Parameters
    ----------
    n_embd, hidden : int
        ``C`` and ``h``; param-matched to a GELU MLP of width ``h_m`` by ``h ~ 2 h_m / 3``
        (:func:`kansym.gpt.matching.match_ffn_hidden`).
    bias : bool
    dropout : float
    """

    kind = "swiglu"

    def __init__(self, n_embd: int, hidden: int, *, bias: bool = False, dropout: float = 0.0) -> None:
        super().__init__()
        self.c_fc = nn.Linear(n_embd, hidden, bias=bias)  # W_1
        self.c_gate = nn.Linear(n_embd, hidden, bias=bias)  # W_3
        self.c_proj = nn.Linear(hidden, n_embd, bias=bias)  # W_2
        self.dropout = nn.Dropout(dropout)

    @property
    def hidden(self) -> int:
        """Hidden width ``h``."""
        return self.c_fc.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.silu(self.c_fc(x)) * self.c_gate(x)  # (B, T, h)
        return self.dropout(self.c_proj(h))  # (B, T, C)
