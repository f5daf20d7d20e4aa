"""Native CPU kernels of the KAN layer: only the ``k + 1`` B-splines that can be nonzero.

Every input value has at most ``k + 1`` nonzero B-splines of order ``k``. On a uniform
cubic grid they are fixed polynomials of the position ``t`` of the input inside its knot
interval ``m = floor(s)``, ``s = (x - t_0) / h`` (de Boor 1978, ch. IX; Unser 1999, IEEE
Signal Processing Magazine 16(6), eq. 8)::

    6 B_{m-3} = (1 - t)^3,  6 B_{m-2} = 3t^3 - 6t^2 + 4,
    6 B_{m-1} = -3t^3 + 3t^2 + 3t + 1,  6 B_m = t^3.

On other grids (after ``update_grid``), of any order up to 7, they are the per-interval
polynomials of :func:`kansym.nn.fast.plan.make_plan`, evaluated by Horner's rule after a
branch-free count of the knots below the input. Tensor code has to evaluate a closed
form for all ``K = G + k`` functions of every input; these kernels compute the ``k + 1``
polynomials once per input and write ``F`` (zeros elsewhere) or, in the backward, the
derivatives times the matching entries of ``dL/dF``, so ``dF/dx`` is never stored. The
weight assembly ``W = [w_b mask | c w_s mask scale]`` and the parameter gradients
through it are one pass each.

The C source below is compiled on first use with the system C compiler (``cc``, or
``$CC``; ``-O3 -march=native -fno-math-errno -fno-trapping-math``, no fast-math, so NaN
inputs give NaN) into ``$XDG_CACHE_HOME/kansym`` (default ``~/.cache/kansym``; a per-user
temporary folder when that is read-only), written atomically and reused by later
processes; it is loaded with :mod:`ctypes` and called on the tensors' memory (contiguous
CPU float32/float64 tensors; row blocks on ``torch.get_num_threads()`` threads, since
ctypes releases the GIL). Without a compiler, or with ``KANSYM_NATIVE=0`` in the
environment, :func:`available` is False and the tensor kernels of
:mod:`kansym.nn.fast.kernels` are used: same values to rounding (both tested against the
reference Cox–de Boor recursion, ``tests/nn/test_native_kernels.py``).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import socket
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

__all__ = ["available", "enable", "usable", "cubic_features", "cubic_input_grad", "weight", "param_grads"]

_TEMPLATE = r"""
/* One sample row, inputs j0 <= j < j1 (at most BLOCK): the four polynomials of every input
   once, then each basis row i picks the one with q = i - m + 3 in 0..3 (blends; both loops
   vectorise over inputs). NaN inputs give NaN in every basis, inputs outside the extended
   grid 0. */
static void fwd_row_SUF(const T *restrict xr, const T *restrict t0, const T *restrict inv_h,
                        int64_t in, int64_t j0, int64_t j1, int64_t K, T *restrict o) {
    T mm[BLOCK], v0[BLOCK], v1[BLOCK], v2[BLOCK], v3[BLOCK], nn[BLOCK];
    int64_t w = j1 - j0;
    for (int64_t j = 0; j < w; ++j) {
        T s = (xr[j0 + j] - t0[j0 + j]) * inv_h[j0 + j];
        T m = FLOOR(s), t = s - m, u = 1 - t, t2 = t * t;
        mm[j] = m - 3;
        v0[j] = -(u * u * u);
        v1[j] = -((3 * t - 6) * t2 + 4);
        v2[j] = -(((-3 * t + 3) * t + 3) * t + 1);
        v3[j] = -(t2 * t);
        nn[j] = s != s ? s : 0; /* NaN for a NaN input */
    }
    for (int64_t i = 0; i < K; ++i) {
        T *restrict oi = o + i * in + j0;
        T fi = (T)i;
        for (int64_t j = 0; j < w; ++j) {
            T q = fi - mm[j];
            T v = q == 0 ? v0[j] : 0;
            v = q == 1 ? v1[j] : v;
            v = q == 2 ? v2[j] : v;
            v = q == 3 ? v3[j] : v;
            oi[j] = v + nn[j];
        }
    }
}

static void bwd_row_SUF(const T *restrict gb, const T *restrict xr, const T *restrict t0,
                        const T *restrict inv_h, int64_t in, int64_t j0, int64_t j1, int64_t K,
                        T *restrict o) {
    T mm[BLOCK], d0[BLOCK], d1[BLOCK], d2[BLOCK], d3[BLOCK], acc[BLOCK];
    int64_t w = j1 - j0;
    for (int64_t j = 0; j < w; ++j) {
        T s = (xr[j0 + j] - t0[j0 + j]) * inv_h[j0 + j];
        T m = FLOOR(s), t = s - m, u = 1 - t;
        mm[j] = m - 3;
        d0[j] = 3 * u * u;
        d1[j] = -(9 * t - 12) * t;
        d2[j] = -((-9 * t + 6) * t + 3);
        d3[j] = -3 * t * t;
        acc[j] = s != s ? s : 0;
    }
    for (int64_t i = 0; i < K; ++i) {
        const T *restrict gi = gb + i * in + j0;
        T fi = (T)i;
        for (int64_t j = 0; j < w; ++j) {
            T q = fi - mm[j];
            T d = q == 0 ? d0[j] : 0;
            d = q == 1 ? d1[j] : d;
            d = q == 2 ? d2[j] : d;
            d = q == 3 ? d3[j] : d;
            acc[j] += gi[j] * d;
        }
    }
    for (int64_t j = 0; j < w; ++j) o[j0 + j] = acc[j] * inv_h[j0 + j];
}

/* out (n, K + wb, in): rows wb + i get -6 B_i(x); with wb, row 0 gets silu(x) = x sig(x),
   sig (n, in) given. */
void kansym_cubic_fwd_SUF(const T *x, const T *sig, const T *t0, const T *inv_h, int64_t n,
                          int64_t in, int64_t K, int64_t wb, T *out) {
    for (int64_t r = 0; r < n; ++r) {
        const T *restrict xr = x + r * in;
        T *restrict o = out + r * (K + wb) * in;
        if (wb) {
            const T *restrict sr = sig + r * in;
            for (int64_t j = 0; j < in; ++j) o[j] = xr[j] * sr[j];
        }
        for (int64_t j0 = 0; j0 < in; j0 += BLOCK)
            fwd_row_SUF(xr, t0, inv_h, in, j0, j0 + BLOCK < in ? j0 + BLOCK : in, K, o + wb * in);
    }
}

/* gx (n, in) = sum_i g[:, wb + i] d(-6 B_i)/dx, dB/dx recomputed from x; with wb, plus
   g[:, 0] silu'(x) = g[:, 0] sig (1 + x (1 - sig)), sig (n, in) given. */
void kansym_cubic_bwd_SUF(const T *g, const T *x, const T *sig, const T *t0, const T *inv_h,
                          int64_t n, int64_t in, int64_t K, int64_t wb, T *gx) {
    for (int64_t r = 0; r < n; ++r) {
        const T *restrict xr = x + r * in, *restrict gr = g + r * (K + wb) * in;
        T *restrict o = gx + r * in;
        for (int64_t j0 = 0; j0 < in; j0 += BLOCK)
            bwd_row_SUF(gr + wb * in, xr, t0, inv_h, in, j0, j0 + BLOCK < in ? j0 + BLOCK : in, K, o);
        if (wb) {
            const T *restrict sr = sig + r * in;
            for (int64_t j = 0; j < in; ++j) o[j] += gr[j] * (sr[j] * (1 + xr[j] * (1 - sr[j])));
        }
    }
}

/* Any knots, any order k <= KMAX: per input, its slot s = #{knots <= x} (M knots per
   feature, sorted), the local variable u = x - origins[slot] and, by Horner's rule on
   the plan's table (rows in*(M+1), k+1, 2K: values then derivatives), the k + 1
   polynomials of the bases i = s - 1 - k + q that can be nonzero there; then the same
   blends as the uniform kernels. d = 0 gives values, d = 1 derivatives. */
static void pw_row_SUF(const T *restrict xr, const T *restrict knots, const T *restrict origins,
                       const T *restrict table, int64_t in, int64_t j0, int64_t j1, int64_t M,
                       int64_t k, int64_t K, int64_t d, T mm[BLOCK], T v[KMAX + 1][BLOCK],
                       T nn[BLOCK]) {
    for (int64_t j = 0; j < j1 - j0; ++j) {
        int64_t f = j0 + j;
        T xv = xr[f];
        const T *restrict kn = knots + f * M;
        int64_t s = 0; /* s = #{knots <= x}, branch-free (M is small) */
        for (int64_t t = 0; t < M; ++t) s += kn[t] <= xv;
        if (xv != xv) s = M; /* NaN: outside, NaN below */
        int64_t row = f * (M + 1) + s, k1 = k + 1;
        T u = xv - origins[row];
        u = u - u == 0 ? u : 0; /* +-inf: outside the grid, zero pieces; NaN comes from nn */
        const T *restrict c = table + (row * 2 + d) * k1 * k1; /* pieces[row][d][q][e] */
        mm[j] = (T)(s - 1 - k);
        nn[j] = xv != xv ? xv : 0;
        for (int64_t q = 0; q <= k; ++q) {
            T val = 0;
            for (int64_t e = k; e >= 0; --e) val = c[q * k1 + e] + val * u;
            v[q][j] = val;
        }
    }
}

void kansym_pw_fwd_SUF(const T *x, const T *sig, const T *knots, const T *origins, const T *table,
                       int64_t n, int64_t in, int64_t M, int64_t k, int64_t K, int64_t wb, T *out) {
    T mm[BLOCK], v[KMAX + 1][BLOCK], nn[BLOCK];
    for (int64_t r = 0; r < n; ++r) {
        const T *restrict xr = x + r * in;
        T *restrict o = out + r * (K + wb) * in;
        if (wb) {
            const T *restrict sr = sig + r * in;
            for (int64_t j = 0; j < in; ++j) o[j] = xr[j] * sr[j];
        }
        for (int64_t j0 = 0; j0 < in; j0 += BLOCK) {
            int64_t j1 = j0 + BLOCK < in ? j0 + BLOCK : in, w = j1 - j0;
            pw_row_SUF(xr, knots, origins, table, in, j0, j1, M, k, K, 0, mm, v, nn);
            for (int64_t i = 0; i < K; ++i) { /* zeros, or NaN for NaN inputs */
                T *restrict oi = o + (wb + i) * in + j0;
                for (int64_t j = 0; j < w; ++j) oi[j] = nn[j];
            }
            for (int64_t j = 0; j < w; ++j) /* the k + 1 pieces that can be nonzero */
                for (int64_t p = 0; p <= k; ++p) {
                    int64_t i = (int64_t)mm[j] + p;
                    if (i >= 0 && i < K) o[(wb + i) * in + j0 + j] += v[p][j];
                }
        }
    }
}

void kansym_pw_bwd_SUF(const T *g, const T *x, const T *sig, const T *knots, const T *origins,
                       const T *table, int64_t n, int64_t in, int64_t M, int64_t k, int64_t K,
                       int64_t wb, T *gx) {
    T mm[BLOCK], v[KMAX + 1][BLOCK], nn[BLOCK];
    for (int64_t r = 0; r < n; ++r) {
        const T *restrict xr = x + r * in, *restrict gr = g + r * (K + wb) * in;
        T *restrict o = gx + r * in;
        for (int64_t j0 = 0; j0 < in; j0 += BLOCK) {
            int64_t j1 = j0 + BLOCK < in ? j0 + BLOCK : in, w = j1 - j0;
            pw_row_SUF(xr, knots, origins, table, in, j0, j1, M, k, K, 1, mm, v, nn);
            for (int64_t j = 0; j < w; ++j) {
                T acc = nn[j];
                for (int64_t p = 0; p <= k; ++p) {
                    int64_t i = (int64_t)mm[j] + p;
                    if (i >= 0 && i < K) acc += gr[(wb + i) * in + j0 + j] * v[p][j];
                }
                o[j0 + j] = acc;
            }
        }
        if (wb) {
            const T *restrict sr = sig + r * in;
            for (int64_t j = 0; j < in; ++j) o[j] += gr[j] * (sr[j] * (1 + xr[j] * (1 - sr[j])));
        }
    }
}

/* Edges of a small layer for the sample-based L1 (KAN paper eq. 2.17): E (in, n, out) =
   sum_r F (n, R, in) W (out, R, in) per input feature, y (n, out) = sum_j E, l1 (out, in)
   = mean_n |E|. work: R * out scratch. */
void kansym_l1_fwd_SUF(const T *restrict F, const T *restrict W, int64_t n, int64_t R, int64_t in,
                       int64_t out, T *restrict E, T *restrict y, T *restrict l1, T *restrict work) {
    for (int64_t e = 0; e < n * out; ++e) y[e] = 0;
    for (int64_t j = 0; j < in; ++j) {
        T *restrict wj = work; /* wj[r][o] = W[o][r][j] */
        for (int64_t o = 0; o < out; ++o)
            for (int64_t r = 0; r < R; ++r) wj[r * out + o] = W[(o * R + r) * in + j];
        for (int64_t o = 0; o < out; ++o) l1[o * in + j] = 0;
        for (int64_t s = 0; s < n; ++s) {
            T *restrict ej = E + (j * n + s) * out, *restrict ys = y + s * out;
            for (int64_t o = 0; o < out; ++o) ej[o] = 0;
            for (int64_t r = 0; r < R; ++r) {
                T f = F[(s * R + r) * in + j];
                const T *restrict w = wj + r * out;
                for (int64_t o = 0; o < out; ++o) ej[o] += f * w[o];
            }
            for (int64_t o = 0; o < out; ++o) {
                ys[o] += ej[o];
                l1[o * in + j] += ej[o] < 0 ? -ej[o] : ej[o];
            }
        }
        for (int64_t o = 0; o < out; ++o) l1[o * in + j] /= (T)n;
    }
}

/* Its backward: g_E = g_y + sign(E) g_l1 / n; gF (n, R, in) = g_E W (when gF is given),
   gW (out, R, in) = F^T g_E. work: 2 R * out + out scratch. */
void kansym_l1_bwd_SUF(const T *restrict F, const T *restrict W, const T *restrict E,
                       const T *restrict g_y, const T *restrict g_l1, int64_t n, int64_t R,
                       int64_t in, int64_t out, T *restrict gF, T *restrict gW, T *restrict work) {
    T *restrict wj = work, *restrict gwj = work + R * out, *restrict ge = work + 2 * R * out;
    for (int64_t j = 0; j < in; ++j) {
        for (int64_t o = 0; o < out; ++o)
            for (int64_t r = 0; r < R; ++r) {
                wj[r * out + o] = W[(o * R + r) * in + j];
                gwj[r * out + o] = 0;
            }
        for (int64_t s = 0; s < n; ++s) {
            const T *restrict ej = E + (j * n + s) * out, *restrict gys = g_y + s * out;
            for (int64_t o = 0; o < out; ++o) {
                T sg = (ej[o] > 0) - (ej[o] < 0);
                ge[o] = gys[o] + (g_l1 ? sg * g_l1[o * in + j] / (T)n : 0);
            }
            for (int64_t r = 0; r < R; ++r) {
                const T *restrict w = wj + r * out;
                T *restrict gw = gwj + r * out;
                T f = F[(s * R + r) * in + j], acc = 0;
                for (int64_t o = 0; o < out; ++o) {
                    acc += ge[o] * w[o];
                    gw[o] += f * ge[o];
                }
                if (gF) gF[(s * R + r) * in + j] = acc;
            }
        }
        for (int64_t o = 0; o < out; ++o)
            for (int64_t r = 0; r < R; ++r) gW[(o * R + r) * in + j] = gwj[r * out + o];
    }
}

/* W (out, K + wb, in): row 0 w_b mask (with wb), rows wb + k c[:, :, k] live, where
   live = w_s mask scale (out, in) is also returned: the weight of the layer's one matmul. */
void kansym_weight_SUF(const T *restrict coef, const T *restrict sb, const T *restrict ss,
                       const T *restrict mask, int64_t n_out, int64_t in, int64_t K, int64_t wb,
                       double scale, T *restrict weight, T *restrict live) {
    for (int64_t o = 0; o < n_out; ++o) {
        T *restrict w = weight + o * (K + wb) * in;
        for (int64_t j = 0; j < in; ++j) {
            int64_t e = o * in + j;
            T lv = ss[e] * mask[e] * (T)scale;
            live[e] = lv;
            if (wb) w[j] = sb[e] * mask[e];
            const T *restrict c = coef + e * K;
            for (int64_t k = 0; k < K; ++k) w[(wb + k) * in + j] = c[k] * lv;
        }
    }
}

/* From g_W (out, K + wb, in): g_coef (out, in, K) = g_W^T live, g_ws (out, in) =
   sum_k g_W c mask scale, g_wb (out, in) = g_W[:, 0] mask (with wb). */
void kansym_param_grads_SUF(const T *restrict gw, const T *restrict coef, const T *restrict mask,
                            const T *restrict live, int64_t n_out, int64_t in, int64_t K,
                            int64_t wb, double scale, T *restrict g_coef, T *restrict g_base,
                            T *restrict g_sp) {
    for (int64_t o = 0; o < n_out; ++o) {
        const T *restrict g = gw + o * (K + wb) * in;
        for (int64_t j = 0; j < in; ++j) {
            int64_t e = o * in + j;
            const T *restrict c = coef + e * K;
            T *restrict gc = g_coef + e * K;
            T acc = 0, lv = live[e];
            for (int64_t k = 0; k < K; ++k) {
                T gk = g[(wb + k) * in + j];
                gc[k] = gk * lv;
                acc += gk * c[k];
            }
            g_sp[e] = acc * mask[e] * (T)scale;
            if (wb) g_base[e] = g[j] * mask[e];
        }
    }
}
"""

_SOURCE = "#include <math.h>\n#include <stdint.h>\n#define BLOCK 256\n#define KMAX 7\n" + "".join(
    _TEMPLATE.replace("SUF", suffix).replace("FLOOR", floor).replace("T ", f"{ctype} ").replace("(T)", f"({ctype})")
    .replace("T *", f"{ctype} *")
    for ctype, suffix, floor in (("float", "f32", "floorf"), ("double", "f64", "floor"))
)


_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_state = {"tried": False, "enabled": os.environ.get("KANSYM_NATIVE", "1") != "0", "error": None}


def _cache_dirs() -> list[Path]:
    """Where the built library may live: the user cache, then a per-user temporary folder."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    return [Path(base) / "kansym", Path(tempfile.gettempdir()) / f"kansym-{uid}"]


class CompileError(OSError):
    """The C compiler ran and failed (as opposed to an unusable cache folder)."""


def _compile(lib_path: Path) -> None:
    """Build the library at ``lib_path`` (atomically) and remove older builds there.

    Raises
    ------
    CompileError
        The compiler failed.
    OSError
        The folder cannot be created or written.
    """
    lib_path.parent.mkdir(parents=True, exist_ok=True)
    cc = os.environ.get("CC", "cc")
    with tempfile.TemporaryDirectory(dir=lib_path.parent) as tmp:
        src, out = Path(tmp) / "kernels.c", Path(tmp) / "kernels.so"
        src.write_text(_SOURCE)
        flags = ["-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-fPIC", "-shared"]
        try:
            done = subprocess.run([cc, *flags, str(src), "-o", str(out), "-lm"], capture_output=True, timeout=120)
        except (OSError, subprocess.SubprocessError) as exc:  # no such compiler, or it hung
            raise CompileError(f"{cc}: {exc}") from None
        if done.returncode != 0:
            lines = done.stderr.decode(errors="replace").strip().splitlines()
            raise CompileError(f"{cc} exited with {done.returncode}" + (f": {lines[-1]}" if lines else ""))
        os.replace(out, lib_path)  # atomic: a concurrent process sees no file or the whole file
    for old in lib_path.parent.glob("*.so"):  # builds of other kansym versions (a loaded one stays mapped)
        if old != lib_path and (old.name.startswith("kernels_") or old.name.startswith("cubic_")):
            old.unlink(missing_ok=True)


def _build() -> ctypes.CDLL:
    """Compile (once per machine and source) and load the kernels; raises OSError."""
    key = hashlib.sha256(f"{_SOURCE}{platform.machine()}{socket.gethostname()}".encode()).hexdigest()[:16]
    error: OSError | None = None
    for folder in _cache_dirs():
        lib_path = folder / f"kernels_{key}.so"
        if lib_path.exists():
            break
        try:
            _compile(lib_path)
            break
        except CompileError:
            raise
        except OSError as exc:  # the folder is unusable (read-only, a file, ...): try the next one
            error = exc
    else:
        raise error if error is not None else OSError("no writable cache folder")
    lib = ctypes.CDLL(str(lib_path))
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    for suffix in ("f32", "f64"):
        getattr(lib, f"kansym_cubic_fwd_{suffix}").argtypes = [ptr, ptr, ptr, ptr, i64, i64, i64, i64, ptr]
        getattr(lib, f"kansym_cubic_bwd_{suffix}").argtypes = [ptr, ptr, ptr, ptr, ptr, i64, i64, i64, i64, ptr]
        getattr(lib, f"kansym_pw_fwd_{suffix}").argtypes = [ptr] * 5 + [i64] * 6 + [ptr]
        getattr(lib, f"kansym_pw_bwd_{suffix}").argtypes = [ptr] * 6 + [i64] * 6 + [ptr]
        getattr(lib, f"kansym_l1_fwd_{suffix}").argtypes = [ptr, ptr] + [i64] * 4 + [ptr] * 4
        getattr(lib, f"kansym_l1_bwd_{suffix}").argtypes = [ptr] * 5 + [i64] * 4 + [ptr] * 3
        getattr(lib, f"kansym_weight_{suffix}").argtypes = [ptr] * 4 + [i64] * 4 + [ctypes.c_double, ptr, ptr]
        getattr(lib, f"kansym_param_grads_{suffix}").argtypes = [ptr] * 4 + [i64] * 4 + [ctypes.c_double] + [ptr] * 3
    return lib


def available() -> bool:
    """Whether the native kernels are enabled and built (compiles them on the first call).

    Returns False (and remembers why in ``native._state["error"]``) when disabled by
    :func:`enable` or ``KANSYM_NATIVE=0``, or when no C compiler could build them.
    """
    global _lib
    if not _state["enabled"]:
        return False
    if not _state["tried"]:
        with _lock:
            if not _state["tried"]:
                try:
                    _lib = _build()
                except OSError as exc:
                    _state["error"] = f"{type(exc).__name__}: {exc}"
                    print(f"kansym: native spline kernels unavailable ({_state['error']}); using torch kernels",
                          file=sys.stderr)
                _state["tried"] = True
    return _lib is not None


def enable(on: bool = True) -> None:
    """Turn the native kernels on (the default where a C compiler exists) or off (torch kernels)."""
    _state["enabled"] = bool(on)


def usable(x: torch.Tensor) -> bool:
    """True when ``x`` can go through the native kernels: a CPU float32/float64 tensor, kernels available."""
    return x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64) and available()


def _ptr(t: torch.Tensor) -> int:
    return t.data_ptr()


def _as(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``t`` in ``dtype``, contiguous; ``t`` itself when it already is (no dispatch: these calls are per step)."""
    return t if t.dtype == dtype and t.is_contiguous() else t.to(dtype).contiguous()


_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_MIN_WORK = 1 << 16  # elements of F per thread below which one thread is faster


def _by_rows(run, n: int, row_elems: int) -> None:
    """``run(r0, r1)`` over row blocks covering ``range(n)``, on ``torch.get_num_threads()`` threads.

    ctypes releases the GIL during the C call, so the blocks run in parallel; a private
    thread pool avoids mixing an OpenMP runtime with torch's.
    """
    global _pool, _pool_size
    threads = min(torch.get_num_threads(), max(1, n * row_elems // _MIN_WORK))
    if threads <= 1:
        run(0, n)
        return
    if _pool_size < threads:
        _pool, _pool_size = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kansym-native"), threads
    step = -(-n // threads)
    list(_pool.map(lambda r0: run(r0, min(n, r0 + step)), range(0, n, step)))


def cubic_features(
    x: torch.Tensor, t0: torch.Tensor, inv_h: torch.Tensor, n_basis: int, with_base: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``F (N, n_basis + with_base, in)``: ``silu(x)`` in row 0 (with a base), then ``-6 B_i(x)``.

    Parameters
    ----------
    x : Tensor (N, in)
        CPU float32/float64 (see :func:`usable`).
    t0, inv_h : Tensor (in,)
        First knot and inverse knot step of each feature's uniform grid.
    n_basis : int
        ``K = G + 3``.
    with_base : bool
        Put ``silu(x)`` in row 0.

    Returns
    -------
    F : Tensor (N, n_basis + with_base, in)
    sig : Tensor (N, in) or None
        ``sigmoid(x)`` with a base (what :func:`cubic_input_grad` needs for ``silu'``).
    """
    x = x if x.is_contiguous() else x.contiguous()
    t0, inv_h = _as(t0, x.dtype), _as(inv_h, x.dtype)
    n, width = x.shape
    sig = torch.sigmoid(x) if with_base else None  # torch's vectorised exp
    out = torch.empty(n, n_basis + int(with_base), width, dtype=x.dtype)
    fn = _lib.kansym_cubic_fwd_f32 if x.dtype == torch.float32 else _lib.kansym_cubic_fwd_f64
    rows, size = (n_basis + int(with_base)) * width, x.element_size()
    xp, sp, op = _ptr(x), _ptr(sig if with_base else x), _ptr(out)

    def run(r0: int, r1: int) -> None:
        off = r0 * width * size
        fn(xp + off, sp + off, _ptr(t0), _ptr(inv_h), r1 - r0, width, n_basis, int(with_base), op + r0 * rows * size)

    _by_rows(run, n, rows)
    return out, sig


def cubic_input_grad(
    g_feats: torch.Tensor, x: torch.Tensor, sig: torch.Tensor | None, t0: torch.Tensor, inv_h: torch.Tensor
) -> torch.Tensor:
    """``dL/dx (N, in) = sum_r g_feats[:, r] dF_r/dx`` for the features of :func:`cubic_features`.

    Parameters
    ----------
    g_feats : Tensor (N, K + with_base, in)
        Gradient with respect to the features, same dtype as ``x``.
    x, t0, inv_h
        As in :func:`cubic_features`.
    sig : Tensor (N, in) or None
        ``sigmoid(x)`` from :func:`cubic_features` when row 0 is ``silu(x)``; None without a base.
    """
    x, g_feats = x.contiguous(), g_feats.contiguous()
    t0, inv_h = _as(t0, x.dtype), _as(inv_h, x.dtype)
    n, width = x.shape
    with_base = sig is not None
    n_basis = g_feats.shape[1] - int(with_base)
    out = torch.empty(n, width, dtype=x.dtype)
    fn = _lib.kansym_cubic_bwd_f32 if x.dtype == torch.float32 else _lib.kansym_cubic_bwd_f64
    sig = sig.contiguous() if with_base else x
    rows, size = (n_basis + int(with_base)) * width, x.element_size()
    gp, xp, sp, op = _ptr(g_feats), _ptr(x), _ptr(sig), _ptr(out)

    def run(r0: int, r1: int) -> None:
        off = r0 * width * size
        fn(gp + r0 * rows * size, xp + off, sp + off, _ptr(t0), _ptr(inv_h), r1 - r0, width, n_basis, int(with_base),
           op + off)

    _by_rows(run, n, rows)
    return out


def params_usable(*tensors: torch.Tensor) -> bool:
    """True when the layer parameters can go through :func:`weight` / :func:`param_grads`."""
    dtype = tensors[0].dtype
    return (
        dtype in (torch.float32, torch.float64)
        and all(t.device.type == "cpu" and t.dtype == dtype and t.is_contiguous() for t in tensors)
        and available()
    )


def weight(
    coef: torch.Tensor, scale_base: torch.Tensor, scale_sp: torch.Tensor, mask: torch.Tensor, scale: float, with_base: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """``W (out, K + with_base, in)`` and ``live (out, in)`` of :func:`kansym.nn.fast.linear._weight` in one pass.

    All inputs contiguous CPU tensors of one float dtype (:func:`params_usable`); ``coef
    (out, in, K)``, the others ``(out, in)``; ``scale`` the plan's feature scale.
    """
    n_out, width, n_basis = coef.shape
    w = torch.empty(n_out, n_basis + int(with_base), width, dtype=coef.dtype)
    live = torch.empty(n_out, width, dtype=coef.dtype)
    fn = _lib.kansym_weight_f32 if coef.dtype == torch.float32 else _lib.kansym_weight_f64
    fn(_ptr(coef), _ptr(scale_base), _ptr(scale_sp), _ptr(mask), n_out, width, n_basis, int(with_base), scale,
       _ptr(w), _ptr(live))
    return w, live


def param_grads(
    g_w: torch.Tensor, coef: torch.Tensor, mask: torch.Tensor, live: torch.Tensor, scale: float, with_base: bool
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """Gradients of ``coef (out, in, K)``, ``scale_base`` and ``scale_sp (out, in)`` from ``g_W (out, K + with_base, in)``.

    The inverse of :func:`weight` (chain rule through ``W``); ``g_base`` is None without a base.
    """
    g_w = _as(g_w, coef.dtype)
    n_out, width, n_basis = coef.shape
    g_coef = torch.empty_like(coef)
    g_sp = torch.empty(n_out, width, dtype=coef.dtype)
    g_base = torch.empty(n_out, width, dtype=coef.dtype) if with_base else None
    fn = _lib.kansym_param_grads_f32 if coef.dtype == torch.float32 else _lib.kansym_param_grads_f64
    fn(_ptr(g_w), _ptr(coef), _ptr(mask), _ptr(live), n_out, width, n_basis, int(with_base), scale, _ptr(g_coef),
       _ptr(g_base) if with_base else None, _ptr(g_sp))
    return g_coef, g_base, g_sp


MAX_ORDER = 7  # KMAX of the C source


def _pieces(plan) -> torch.Tensor:
    """The plan's table compacted to the ``k + 1`` bases that can be nonzero in each slot.

    ``(in (M + 1), 2, k + 1, k + 1)``: for slot ``s`` (interval ``s - 1``), entry
    ``[d, q, e]`` is the coefficient of ``u^e`` of basis ``i = s - 1 - k + q`` (``d = 0``)
    or of its derivative (``d = 1``); 0 where ``i`` is outside ``0..K-1``. Built once per
    plan.
    """
    cached = plan.__dict__.get("_native_pieces")
    if cached is not None:
        return cached
    table, k, n_basis = plan.table, plan.order, plan.n_basis  # (in (M + 1), k + 1, 2K)
    slots = plan.rows.shape[1] + 1
    s = torch.arange(table.shape[0], device=table.device) % slots  # slot of each row
    i = (s - 1 - k).view(-1, 1) + torch.arange(k + 1, device=table.device)  # (rows, k + 1)
    valid = (i >= 0) & (i < n_basis)
    idx = i.clamp(0, n_basis - 1)
    parts = []
    for d in (0, 1):
        cols = (idx + d * n_basis).unsqueeze(1).expand(-1, k + 1, -1)  # (rows, k + 1 [e], k + 1 [q])
        part = torch.gather(table, 2, cols) * valid.unsqueeze(1)  # (rows, e, q)
        parts.append(part.transpose(1, 2))  # (rows, q, e)
    pieces = torch.stack(parts, dim=1).contiguous()  # (rows, 2, q, e)
    object.__setattr__(plan, "_native_pieces", pieces)  # a frozen plan: cached on the instance, dies with it
    return pieces


def _plan_tensors(plan, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return tuple(_as(t, dtype) for t in (plan.rows, plan.origins, _pieces(plan)))


def piecewise_features(x: torch.Tensor, plan, with_base: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """As :func:`cubic_features` for a piecewise plan (any knots, order <= 7): ``F`` with ``B_i(x)`` (scale 1) and ``sig``.

    Parameters
    ----------
    x : Tensor (N, in)
        CPU float32/float64 (see :func:`usable`).
    plan : SplinePlan
        A plan with ``plan.piecewise`` (see :func:`kansym.nn.fast.plan.make_plan`).
    with_base : bool
        Put ``silu(x)`` in row 0.
    """
    x = x.contiguous()
    knots, origins, table = _plan_tensors(plan, x.dtype)
    n, width = x.shape
    m, k, n_basis = knots.shape[1], plan.order, plan.n_basis
    sig = torch.sigmoid(x) if with_base else None
    out = torch.empty(n, n_basis + int(with_base), width, dtype=x.dtype)
    fn = _lib.kansym_pw_fwd_f32 if x.dtype == torch.float32 else _lib.kansym_pw_fwd_f64
    rows, size = (n_basis + int(with_base)) * width, x.element_size()
    xp, sp, op = _ptr(x), _ptr(sig if with_base else x), _ptr(out)

    def run(r0: int, r1: int) -> None:
        off = r0 * width * size
        fn(xp + off, sp + off, _ptr(knots), _ptr(origins), _ptr(table), r1 - r0, width, m, k, n_basis, int(with_base),
           op + r0 * rows * size)

    _by_rows(run, n, rows)
    return out, sig


def piecewise_input_grad(g_feats: torch.Tensor, x: torch.Tensor, sig: torch.Tensor | None, plan) -> torch.Tensor:
    """As :func:`cubic_input_grad` for the features of :func:`piecewise_features`."""
    x, g_feats = x.contiguous(), g_feats.contiguous()
    knots, origins, table = _plan_tensors(plan, x.dtype)
    n, width = x.shape
    with_base = sig is not None
    m, k, n_basis = knots.shape[1], plan.order, plan.n_basis
    sig = sig.contiguous() if with_base else x
    out = torch.empty(n, width, dtype=x.dtype)
    fn = _lib.kansym_pw_bwd_f32 if x.dtype == torch.float32 else _lib.kansym_pw_bwd_f64
    rows, size = (n_basis + int(with_base)) * width, x.element_size()
    gp, xp, sp, op = _ptr(g_feats), _ptr(x), _ptr(sig), _ptr(out)

    def run(r0: int, r1: int) -> None:
        off = r0 * width * size
        fn(gp + r0 * rows * size, xp + off, sp + off, _ptr(knots), _ptr(origins), _ptr(table), r1 - r0, width, m, k,
           n_basis, int(with_base), op + off)

    _by_rows(run, n, rows)
    return out


L1_MAX_EDGES = 4096  # in * out of the layers whose edge values the native kernels compute


def l1_usable(feats: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether :func:`l1_edges` applies: small layers (``in * out <= L1_MAX_EDGES``), one CPU float dtype."""
    return (
        weight.shape[0] * weight.shape[2] <= L1_MAX_EDGES
        and feats.dtype == weight.dtype
        and params_usable(feats, weight)
    )


def l1_edges(feats: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Edge values ``E (in, N, out)``, node outputs ``(N, out)`` and ``mean_N |E|`` as ``(out, in)``.

    Parameters
    ----------
    feats : Tensor (N, R, in)
    weight : Tensor (out, R, in)
        Contiguous, same float dtype, CPU (:func:`l1_usable`).
    """
    n, n_rows, width = feats.shape
    n_out = weight.shape[0]
    edges = torch.empty(width, n, n_out, dtype=feats.dtype)
    out = torch.empty(n, n_out, dtype=feats.dtype)
    l1 = torch.empty(n_out, width, dtype=feats.dtype)
    work = torch.empty(n_rows * n_out, dtype=feats.dtype)
    fn = _lib.kansym_l1_fwd_f32 if feats.dtype == torch.float32 else _lib.kansym_l1_fwd_f64
    fn(_ptr(feats), _ptr(weight), n, n_rows, width, n_out, _ptr(edges), _ptr(out), _ptr(l1), _ptr(work))
    return edges, out, l1


def l1_edges_backward(
    feats: torch.Tensor, weight: torch.Tensor, edges: torch.Tensor, g_out: torch.Tensor, g_l1: torch.Tensor | None,
    need_feats: bool,
) -> tuple[torch.Tensor | None, torch.Tensor]:
    """``dL/dF (N, R, in)`` (or None) and ``dL/dW (out, R, in)`` through :func:`l1_edges`."""
    n, n_rows, width = feats.shape
    n_out = weight.shape[0]
    g_out = _as(g_out, feats.dtype)
    g_l1 = _as(g_l1, feats.dtype) if g_l1 is not None else None
    g_feats = torch.empty_like(feats) if need_feats else None
    g_w = torch.empty_like(weight)
    work = torch.empty(2 * n_rows * n_out + n_out, dtype=feats.dtype)
    fn = _lib.kansym_l1_bwd_f32 if feats.dtype == torch.float32 else _lib.kansym_l1_bwd_f64
    fn(_ptr(feats), _ptr(weight), _ptr(edges), _ptr(g_out), _ptr(g_l1) if g_l1 is not None else None, n, n_rows,
       width, n_out, _ptr(g_feats) if need_feats else None, _ptr(g_w), _ptr(work))
    return g_feats, g_w
