"""Fast B-spline evaluation for KAN layers: closed form on uniform grids, custom autograd.

The hot path of :class:`kansym.nn.layer.KANLayer` is one matmul ``out = F(x) W^T`` of
features ``F (N, 1 + K, in)``: row 0 is ``silu(x)``, rows ``1..K`` the ``K = G + k``
B-splines of every input feature (laid out ``(sample, basis, feature)`` so that every
elementwise step broadcasts over a contiguous feature axis), and ``W (out, (1 + K) in)``
holds ``w_b`` and ``w_s c``: the matmul of the dense-equivalent
``Linear(in (G + k + 1), out)``, and no ``(N, out, in)`` tensor.

Basis evaluation (values equal :func:`kansym.nn.spline.bspline_basis` to rounding):

- uniform knots ``t_i = t_0 + i h`` (every grid :func:`kansym.nn.spline.make_grid` makes):
  closed form. With ``s = (x - t_0) / h``, ``B_i(x) = beta_k(s - i)`` where ``beta_k`` is
  the cardinal B-spline of degree ``k`` on ``[0, k + 1]``; symmetric about ``c = (k+1)/2``
  it is ``k! beta_k = sum_{0 <= j < c} (-1)^j C(k + 1, j) (c - j - |s - i - c|)_+^k``
  (Schoenberg 1946; Unser 1999, "Splines: a perfect fit for signal and image processing",
  IEEE Signal Processing Magazine 16(6), eq. 7, in its symmetric form). No knot
  comparisons, exact zeros outside the support; ``k!`` is folded into the weights (for
  ``k = 3`` the features are ``-6 B``, from two clamped terms, see :func:`_cubic_into`).
- other knots (after ``update_grid``): piecewise polynomials. Between two knots every
  B-spline is a polynomial of degree ``k``; :func:`make_plan` runs the Cox–de Boor
  recursion (de Boor 1978) once per grid on the polynomial coefficients (in the local
  variable ``u = x - t_j`` of each interval ``j``, float64), so a forward only locates
  each input's interval (``searchsorted``), gathers that interval's ``(k + 1, K)``
  coefficients and runs Horner's rule (de Boor 1978, ch. I): about ten tensor ops for
  any ``k`` instead of the recursion's ``O(k)`` passes over ``(N, G + 2k, in)``. Inputs
  outside the extended grid get zero polynomials, as in the recursion. The recursion on
  samples (``force_reference``) stays as the reference.

Backward (memory-lean, one custom autograd node per layer): saved are ``F`` (which the
weight gradient needs anyway), the ``(out, in)``-sized weights and, only when ``x``
requires grad, ``dF/dx`` (``silu'`` and ``B'``), computed in the forward from the same
intermediates: ``B'`` in closed form on uniform grids, from the differentiated
polynomials on other grids, and ``B'_{i,k} = k (B_{i,k-1} / (t_{i+k} - t_i) -
B_{i+1,k-1} / (t_{i+k+1} - t_{i+1}))`` on the reference path (de Boor 1978).
Then ``dL/dx = sum_r (dL/dF W)_r dF_r/dx``. Elementwise work runs in row chunks on
reused buffers, so only ``F`` and ``dF/dx`` are full-size: no autograd graph of the
basis and no ``(N, out, in)`` tensor. :func:`compile_kernels` fuses the cubic
uniform-grid kernel with ``torch.compile`` (optional).

On CPU the node runs native code (C++ sources in ``csrc/``, built on first use with
``torch.utils.cpp_extension``, :mod:`kansym.nn.fast.build`): the C kernels through ctypes
(:mod:`kansym.nn.fast.native`) and, once its background build is done, the whole layer as
one C++ operator with no Python in the backward. Which path runs is one choice per
process, read once from the environment (``KANSYM_NATIVE=0``: tensor kernels only;
``KANSYM_OP=0``: no operator) and changed or reported with :func:`use_backend` and
:func:`backend`::

    >>> from kansym.nn import fast
    >>> fast.backend().path in ("op", "native", "torch")
    True
    >>> fast.use_backend("torch").path  # tensor kernels for this process (nothing native)
    'torch'
    >>> fast.use_backend("auto").requested
    'auto'

Device placement: every tensor is created on the input's device, the plan's knots
follow the layer's ``grid`` buffer, and inputs in float16/bfloat16 (autocast) are
evaluated in float32; the matmul runs in the autocast dtype.
"""

from kansym.nn.fast.backends import Backend, backend, use_backend
from kansym.nn.fast.cache import FeatureCache
from kansym.nn.fast.kernels import compile_kernels, features
from kansym.nn.fast.l1 import kan_linear_l1
from kansym.nn.fast.linear import kan_linear, spline_basis
from kansym.nn.fast.plan import SplinePlan, make_plan

__all__ = [
    "SplinePlan", "FeatureCache", "make_plan", "features", "kan_linear", "kan_linear_l1", "spline_basis",
    "compile_kernels", "Backend", "backend", "use_backend",
]
