"""Hidden widths that give each FFN kind of a KAN-GPT the parameter count of the MLP FFN."""

from __future__ import annotations

from kansym.nn.bases import n_basis
from kansym.nn.config import GRID_SIZE

__all__ = ["KAN_KINDS", "match_ffn_hidden", "match_kan_hidden"]

KAN_KINDS = ("kan", "kan-residual", "cheby")  # the FFN kinds built from KAN layers (kansym.gpt.ffn.KANFFN)


def match_kan_hidden(
    n_embd: int,
    mlp_hidden: int,
    *,
    basis: str = "bspline",
    grid_size: int = GRID_SIZE,
    degree: int = 3,
    residual: bool = False,
    bias: bool = False,
    rank: int | None = None,
) -> int:
    """KAN FFN hidden width whose parameter count matches an MLP FFN's.

    MLP FFN (``d -> h_m -> d``): ``2 d h_m`` weights (+ ``h_m + d`` biases). KAN FFN
    (``d -> h -> d``, two KAN layers): ``2 d h (K + 2)`` (coefficients, ``w_b``, ``w_s``),
    plus ``d^2`` for the linear shortcut of ``kan-residual``. Factorised through rank
    ``r`` (:class:`kansym.gpt.ffn.LowRankKANLayer`: ``w_b``, ``U``, ``V`` per layer):
    ``d h + r (h + d K)`` plus ``h d + r (d + h K)``, i.e. ``2 d h + r (d + h) (K + 1)``.
    Returns the integer ``h`` closest to equality (at least 1); the mismatch is below
    half the parameters of one hidden unit, ``d (K + 2)`` (full) or ``d + r (K + 1) / 2``
    (factorised), i.e. under 5 % for any ``mlp_hidden >= 10 (K + 2)``.

    Parameters
    ----------
    n_embd : int
        Model width ``d``.
    mlp_hidden : int
        Hidden width ``h_m`` of the MLP being matched (``4 d`` in GPT-2).
    basis, grid_size, degree : see :func:`kansym.nn.bases.n_basis`
    residual : bool
        Count the ``kan-residual`` linear shortcut.
    bias : bool
        Whether the MLP has biases.
    rank : int, optional
        Rank of a factorised KAN FFN; None: full coefficient tensors.

    Returns
    -------
    int
    """
    target = 2 * n_embd * mlp_hidden + (mlp_hidden + n_embd if bias else 0)
    if residual:
        target -= n_embd * n_embd
    k = n_basis(basis, grid_size, degree)
    if rank is None:
        return max(1, round(target / (2 * n_embd * (k + 2))))
    fixed = rank * n_embd * (k + 1)  # the part of r (d + h) (K + 1) that does not grow with h
    return max(1, round((target - fixed) / (2 * n_embd + rank * (k + 1))))


def match_ffn_hidden(
    kind: str,
    n_embd: int,
    mlp_hidden: int,
    *,
    bias: bool = False,
    groups: int = 8,
    degrees: tuple[int, int] = (5, 4),
    **kan: object,
) -> int:
    """Hidden width of an FFN of ``kind`` whose parameter count matches the MLP FFN's.

    With ``d = n_embd``, ``h_m = mlp_hidden`` the MLP has ``2 d h_m`` weights
    (+ ``h_m + d`` biases). SwiGLU (``W_2 (SiLU(W_1 x) * W_3 x)``) has ``3 d h``
    (+ ``2 h + d``), so ``h ~ 2 h_m / 3`` (Shazeer 2020, arXiv:2002.05202, keeps the
    count the same way). GR-KAN (two linear layers and two group-rational activations
    of ``groups`` coefficient sets of ``m + 1 + n`` numbers) has
    ``2 d h + 2 groups (m + n + 1)`` (+ ``h + d``). The rounding error is below one hidden
    unit: ``3 d`` (SwiGLU) or ``2 d`` (GR-KAN) parameters, under 1 % for ``h_m >= 4 d``.

    Parameters
    ----------
    kind : {"kan", "kan-residual", "cheby", "swiglu", "grkan"}
    n_embd, mlp_hidden : int
    bias : bool
        Whether the FFNs have biases.
    groups, degrees :
        Of the GR-KAN rationals.
    **kan :
        ``basis``, ``grid_size``, ``degree``, ``rank`` for :func:`match_kan_hidden` (the caller
        gives ``cheby`` the Chebyshev basis: :meth:`kansym.gpt.config.KANGPTConfig.basis_of`).

    Returns
    -------
    int
        At least 1.
    """
    target = 2 * n_embd * mlp_hidden + (mlp_hidden + n_embd if bias else 0)
    if kind in KAN_KINDS:
        return match_kan_hidden(n_embd, mlp_hidden, residual=kind == "kan-residual", bias=bias, **kan)  # type: ignore[arg-type]
    if kind == "swiglu":
        return max(1, round((target - (n_embd if bias else 0)) / (3 * n_embd + (2 if bias else 0))))
    if kind == "grkan":
        fixed = 2 * groups * (degrees[0] + degrees[1] + 1) + (n_embd if bias else 0)
        return max(1, round((target - fixed) / (2 * n_embd + (1 if bias else 0))))
    raise ValueError(f"no hidden width to match for FFN kind {kind!r}")
