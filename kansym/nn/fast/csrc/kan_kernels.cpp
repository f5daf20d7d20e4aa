/* Native CPU kernels of the KAN layer: only the k + 1 B-splines that can be nonzero.

   Every input value has at most k + 1 nonzero B-splines of order k. On a uniform cubic grid
   they are fixed polynomials of the position t of the input inside its knot interval
   m = floor(s), s = (x - t_0) / h (de Boor 1978, ch. IX; Unser 1999, "Splines: a perfect fit
   for signal and image processing", IEEE Signal Processing Magazine 16(6), eq. 8):

       6 B_{m-3} = (1 - t)^3,  6 B_{m-2} = 3t^3 - 6t^2 + 4,
       6 B_{m-1} = -3t^3 + 3t^2 + 3t + 1,  6 B_m = t^3.

   Layers of NARROW inputs or more write each row of a uniform cubic grid from the symmetric
   two-term form -6 B_i = 4 (1 - a)_+^3 - (2 - a)_+^3, a = |s - i - 2| (Schoenberg 1946;
   Unser 1999, eq. 7), vectorised over the inputs; narrower ones compute the four polynomials
   once per input across rows and store them. On other grids (after update_grid), of any order
   up to KMAX, the bases are the per-interval polynomials of kansym.nn.fast.plan.make_plan,
   evaluated by Horner's rule after a count of the knots below the input. The backward
   kernels compute the derivatives times the matching entries of dL/dF, so dF/dx is never
   stored. The forward kernels also write sigmoid(x) (for silu and silu') with their own
   vectorised exp (Cody and Waite 1980 reduction and a Taylor polynomial; within 2 ulp).

   One template per kernel, instantiated for float and double behind the C ABI of
   kan_kernels.h. No torch headers: this translation unit compiles in about two seconds.
   Built by kansym/nn/fast/build.py through torch.utils.cpp_extension with
   -O3 -march=native -fno-math-errno -fno-trapping-math (no fast-math: NaN inputs give NaN,
   infinite ones 0, as the tensor kernels). */
#include "kan_kernels.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace {

constexpr int64_t BLOCK = 256; /* inputs per vectorised row block (wide layers) */
constexpr int64_t KMAX = 7;    /* highest spline order of the piecewise kernels */
constexpr int64_t NARROW = 8;  /* layers narrower than this take the across-rows kernels */
constexpr int64_t SBP = 64;    /* rows per block of the piecewise kernels */

/* An exported kernel's body: compiled as a function of its own (the C ABI wrapper below only
   jumps to it), so that its __restrict__ parameters keep their meaning; inlined into the
   wrapper, g++ lost them for some loops (the weight assembly ran 40 % slower). */
#define KS_ENTRY __attribute__((noinline))

/* exp(x) = 2^n exp(r), n = rint(x / ln 2), r = x - n ln 2 (Cody and Waite 1980: ln 2 in two
   parts, so r is exact to the working precision), exp(r) by its Taylor polynomial on
   |r| <= ln(2) / 2 (degree 7 in float: truncation 7e-9 relative; degree 13 in double:
   5e-18), 2^n as two exact powers of two so that overflow gives inf and underflow 0. Branch
   free (the loops calling it vectorise); NaN stays NaN. Within 2 ulp of the correctly rounded
   value (tests/nn/test_native_kernels.py). */
inline float kexp(float x) {
    float xc = x > 88.8f ? 88.8f : x;
    xc = xc < -104.0f ? -104.0f : xc;
    float n = rintf(xc * 1.44269504088896341f);
    float r = (xc - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
    float p = 1.0f / 5040;
    p = p * r + 1.0f / 720; p = p * r + 1.0f / 120; p = p * r + 1.0f / 24; p = p * r + 1.0f / 6;
    p = p * r + 0.5f; p = p * r + 1.0f; p = p * r + 1.0f;
    int32_t k = (int32_t)n, a = k / 2, b = k - a;
    union { int32_t i; float f; } ua = {(a + 127) << 23}, ub = {(b + 127) << 23};
    return p * ua.f * ub.f;
}

inline double kexp(double x) {
    double xc = x > 709.9 ? 709.9 : x;
    xc = xc < -745.5 ? -745.5 : xc;
    double n = rint(xc * 1.4426950408889634074);
    double r = (xc - n * 6.93147180369123816490e-01) - n * 1.90821492927058770002e-10;
    double p = 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0; p = p * r + 1.0 / 39916800.0; p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0; p = p * r + 1.0 / 40320.0; p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0; p = p * r + 1.0 / 120.0; p = p * r + 1.0 / 24.0; p = p * r + 1.0 / 6.0;
    p = p * r + 0.5; p = p * r + 1.0; p = p * r + 1.0;
    int64_t k = (int64_t)n, a = k / 2, b = k - a;
    union { int64_t i; double f; } ua = {(a + 1023) << 52}, ub = {(b + 1023) << 52};
    return p * ua.f * ub.f;
}

/* 4-lane vectors of T (GNU vector extension): the four cubic pieces of a slot. */
template <typename T> struct Vec4;
template <> struct Vec4<float> { typedef float type __attribute__((vector_size(16), aligned(4), may_alias)); };
template <> struct Vec4<double> { typedef double type __attribute__((vector_size(32), aligned(8), may_alias)); };

/* One sample row, inputs j0 <= j < j1 (at most BLOCK), position s = (x - t0) / h on the
   extended grid: basis i is centred at s = i + 2 and, with a = |s - i - 2|,
   -6 B_i = 4 (1 - a)_+^3 - (2 - a)_+^3 (the symmetric two-term form of the cardinal cubic
   B-spline, Schoenberg 1946; Unser 1999, eq. 7): per basis row a few vector operations over
   the inputs, no interval lookup. NaN inputs give NaN in every basis, inputs outside the
   extended grid (+-inf included) 0. */
template <typename T>
void fwd_row(const T *__restrict__ xr, const T *__restrict__ t0, const T *__restrict__ inv_h, int64_t in,
             int64_t j0, int64_t j1, int64_t K, T *__restrict__ o) {
    T ss[BLOCK], nn[BLOCK];
    int64_t w = j1 - j0;
    for (int64_t j = 0; j < w; ++j) {
        T s = (xr[j0 + j] - t0[j0 + j]) * inv_h[j0 + j];
        ss[j] = s;
        nn[j] = s != s ? s : 0; /* NaN for a NaN input */
    }
    for (int64_t i = 0; i < K; ++i) {
        T *__restrict__ oi = o + i * in + j0;
        T c = (T)(i + 2);
        for (int64_t j = 0; j < w; ++j) {
            T a = std::fabs(ss[j] - c), p = 2 - a, q = 1 - a;
            p = p > 0 ? p : 0;
            q = q > 0 ? q : 0;
            oi[j] = (4 * (q * q * q) - p * p * p) + nn[j];
        }
    }
}

/* Its input gradient: d(-6 B_i)/ds = sign(s - i - 2) (3 (2 - a)_+^2 - 12 (1 - a)_+^2) (a value
   >= 0, so the sign is a copysign), times the matching entry of dL/dF, summed over i, times 1/h. */
template <typename T>
void bwd_row(const T *__restrict__ gb, const T *__restrict__ xr, const T *__restrict__ t0,
             const T *__restrict__ inv_h, int64_t in, int64_t j0, int64_t j1, int64_t K, T *__restrict__ o) {
    T ss[BLOCK], acc[BLOCK];
    int64_t w = j1 - j0;
    for (int64_t j = 0; j < w; ++j) {
        T s = (xr[j0 + j] - t0[j0 + j]) * inv_h[j0 + j];
        ss[j] = s;
        acc[j] = s != s ? s : 0;
    }
    for (int64_t i = 0; i < K; ++i) {
        const T *__restrict__ gi = gb + i * in + j0;
        T c = (T)(i + 2);
        for (int64_t j = 0; j < w; ++j) {
            T d = ss[j] - c, a = std::fabs(d), p = 2 - a, q = 1 - a;
            p = p > 0 ? p : 0;
            q = q > 0 ? q : 0;
            acc[j] += gi[j] * std::copysign(3 * (p * p) - 12 * (q * q), d);
        }
    }
    for (int64_t j = 0; j < w; ++j) o[j0 + j] = acc[j] * inv_h[j0 + j];
}

/* sig[e] = 1 / (1 + exp(-x[e])) for e < count, vectorised (kexp above); NaN stays NaN,
   -inf gives 0 and +inf 1, as torch.sigmoid. */
template <typename T> void sigmoid(const T *__restrict__ x, int64_t count, T *__restrict__ sig) {
    for (int64_t e = 0; e < count; ++e) sig[e] = 1 / (1 + kexp(-x[e]));
}

/* t0 and inv_h repeated for `per` rows of `in` inputs (te, he: BLOCK entries). */
template <typename T> void repeat_grid(const T *t0, const T *inv_h, int64_t in, int64_t per, T *te, T *he) {
    for (int64_t e = 0; e < per * in; ++e) {
        te[e] = t0[e % in];
        he[e] = inv_h[e % in];
    }
}

/* Narrow layers (in < NARROW): rows in blocks of BLOCK / in inputs, the four polynomials
   computed over the whole block (vectorised across rows; t0 and inv_h repeated per row), then
   F zeroed and the four nonzero values of each input stored at their rows. */
template <typename T>
void cubic_fwd_narrow(const T *x, const T *sig, const T *t0, const T *inv_h, int64_t n, int64_t in, int64_t K,
                      int64_t wb, T *out) {
    T te[BLOCK], he[BLOCK], mm[BLOCK], v0[BLOCK], v1[BLOCK], v2[BLOCK], v3[BLOCK];
    int64_t per = BLOCK / in, R = K + wb;
    repeat_grid(t0, inv_h, in, per, te, he);
    for (int64_t r0 = 0; r0 < n; r0 += per) {
        int64_t nr = r0 + per < n ? per : n - r0, w = nr * in;
        const T *__restrict__ xb = x + r0 * in;
        T *__restrict__ ob = out + r0 * R * in;
        for (int64_t e = 0; e < w; ++e) {
            T s = (xb[e] - te[e]) * he[e];
            T m = std::floor(s), t = s - m, u = 1 - t, t2 = t * t;
            m = m < -8 ? -8 : m > (T)(K + 8) ? (T)(K + 8) : m; /* +-inf: far outside, no row */
            mm[e] = s != s ? -16 : m - 3; /* -16: a NaN input, handled below */
            v0[e] = -(u * u * u);
            v1[e] = -((3 * t - 6) * t2 + 4);
            v2[e] = -(((-3 * t + 3) * t + 3) * t + 1);
            v3[e] = -(t2 * t);
        }
        for (int64_t e = 0; e < nr * R * in; ++e) ob[e] = 0;
        for (int64_t r = 0; r < nr; ++r) {
            T *__restrict__ o = ob + r * R * in;
            for (int64_t j = 0; j < in; ++j) {
                int64_t e = r * in + j, m = (int64_t)mm[e];
                if (m == -16) { /* NaN in every basis */
                    for (int64_t i = 0; i < K; ++i) o[(wb + i) * in + j] = xb[e];
                    continue;
                }
                T vq[4] = {v0[e], v1[e], v2[e], v3[e]};
                for (int64_t q = 0; q < 4; ++q)
                    if (m + q >= 0 && m + q < K) o[(wb + m + q) * in + j] = vq[q];
            }
            if (wb) {
                const T *__restrict__ sr = sig + (r0 + r) * in, *__restrict__ xr = xb + r * in;
                for (int64_t j = 0; j < in; ++j) o[j] = xr[j] * sr[j];
            }
        }
    }
}

/* Its input gradient: the four derivatives over the block, then the four matching entries
   of g gathered per input. */
template <typename T>
void cubic_bwd_narrow(const T *g, const T *x, const T *sig, const T *t0, const T *inv_h, int64_t n, int64_t in,
                      int64_t K, int64_t wb, T *gx) {
    T te[BLOCK], he[BLOCK], mm[BLOCK], d0[BLOCK], d1[BLOCK], d2[BLOCK], d3[BLOCK];
    int64_t per = BLOCK / in, R = K + wb;
    repeat_grid(t0, inv_h, in, per, te, he);
    for (int64_t r0 = 0; r0 < n; r0 += per) {
        int64_t nr = r0 + per < n ? per : n - r0, w = nr * in;
        const T *__restrict__ xb = x + r0 * in;
        for (int64_t e = 0; e < w; ++e) {
            T h = he[e], s = (xb[e] - te[e]) * h;
            T m = std::floor(s), t = s - m, u = 1 - t;
            m = m < -8 ? -8 : m > (T)(K + 8) ? (T)(K + 8) : m;
            mm[e] = s != s ? -16 : m - 3;
            d0[e] = 3 * u * u * h;
            d1[e] = -(9 * t - 12) * t * h;
            d2[e] = -((-9 * t + 6) * t + 3) * h;
            d3[e] = -3 * t * t * h;
        }
        for (int64_t r = 0; r < nr; ++r) {
            const T *__restrict__ gr = g + (r0 + r) * R * in;
            T *__restrict__ o = gx + (r0 + r) * in;
            for (int64_t j = 0; j < in; ++j) {
                int64_t e = r * in + j, m = (int64_t)mm[e];
                if (m == -16) {
                    o[j] = xb[e];
                    continue;
                }
                T dq[4] = {d0[e], d1[e], d2[e], d3[e]}, acc = 0;
                for (int64_t q = 0; q < 4; ++q)
                    if (m + q >= 0 && m + q < K) acc += gr[(wb + m + q) * in + j] * dq[q];
                o[j] = acc;
            }
            if (wb) {
                const T *__restrict__ sr = sig + (r0 + r) * in, *__restrict__ xr = xb + r * in;
                for (int64_t j = 0; j < in; ++j) o[j] += gr[j] * (sr[j] * (1 + xr[j] * (1 - sr[j])));
            }
        }
    }
}

/* out (n, K + wb, in): rows wb + i get -6 B_i(x); with wb, row 0 gets silu(x) = x sig(x),
   and sig (n, in) gets sigmoid(x) (written first). */
template <typename T>
KS_ENTRY void cubic_fwd(const T *x, T *sig, const T *t0, const T *inv_h, int64_t n, int64_t in, int64_t K, int64_t wb,
               T *out) {
    if (wb) sigmoid(x, n * in, sig);
    if (in < NARROW) {
        cubic_fwd_narrow(x, sig, t0, inv_h, n, in, K, wb, out);
        return;
    }
    for (int64_t r = 0; r < n; ++r) {
        const T *__restrict__ xr = x + r * in;
        T *__restrict__ o = out + r * (K + wb) * in;
        if (wb) {
            const T *__restrict__ sr = sig + r * in;
            for (int64_t j = 0; j < in; ++j) o[j] = xr[j] * sr[j];
        }
        for (int64_t j0 = 0; j0 < in; j0 += BLOCK)
            fwd_row(xr, t0, inv_h, in, j0, j0 + BLOCK < in ? j0 + BLOCK : in, K, o + wb * in);
    }
}

/* gx (n, in) = sum_i g[:, wb + i] d(-6 B_i)/dx, dB/dx recomputed from x; with wb, plus
   g[:, 0] silu'(x) = g[:, 0] sig (1 + x (1 - sig)), sig (n, in) given. */
template <typename T>
KS_ENTRY void cubic_bwd(const T *g, const T *x, const T *sig, const T *t0, const T *inv_h, int64_t n, int64_t in, int64_t K,
               int64_t wb, T *gx) {
    if (in < NARROW) {
        cubic_bwd_narrow(g, x, sig, t0, inv_h, n, in, K, wb, gx);
        return;
    }
    for (int64_t r = 0; r < n; ++r) {
        const T *__restrict__ xr = x + r * in, *__restrict__ gr = g + r * (K + wb) * in;
        T *__restrict__ o = gx + r * in;
        for (int64_t j0 = 0; j0 < in; j0 += BLOCK)
            bwd_row(gr + wb * in, xr, t0, inv_h, in, j0, j0 + BLOCK < in ? j0 + BLOCK : in, K, o);
        if (wb) {
            const T *__restrict__ sr = sig + r * in;
            for (int64_t j = 0; j < in; ++j) o[j] += gr[j] * (sr[j] * (1 + xr[j] * (1 - sr[j])));
        }
    }
}

/* Piecewise plans (any knots, order k <= KMAX), one feature (column) at a time over blocks of
   SBP rows: the slot s = #{knots <= x} of every sample by M compares vectorised across the
   block (M for NaN), then per sample the P = k + 1 polynomials of the bases s - 1 - k + q that
   can be nonzero there, by Horner's rule on u = x - origins[slot] over the plan's table (rows
   in (M + 1), 2, P [power], P [q]: values, then derivatives with d = 1); with P = 4 the four
   polynomials are one 4-lane vector, so each Horner step is one load and one multiply-add.
   cnt gets s, vals[q * SBP + r] the polynomial of basis s - 1 - k + q. */
template <typename T>
inline __attribute__((always_inline)) void
pw_col(int64_t P, int32_t d, const T *__restrict__ xc, int32_t nr, const T *__restrict__ kn, int32_t M,
       const T *__restrict__ origins, const T *__restrict__ table, int32_t f, int32_t *__restrict__ cnt,
       T *__restrict__ vals) {
    typedef typename Vec4<T>::type v4;
    for (int32_t r = 0; r < nr; ++r) cnt[r] = 0;
    for (int32_t t = 0; t < M; ++t) {
        T kt = kn[t];
        for (int32_t r = 0; r < nr; ++r) cnt[r] += xc[r] >= kt;
    }
    for (int32_t r = 0; r < nr; ++r) cnt[r] = xc[r] != xc[r] ? M : cnt[r];
    int64_t base = (int64_t)f * (M + 1), PP = P * P;
    for (int32_t r = 0; r < nr; ++r) {
        int64_t row = base + cnt[r];
        const T *__restrict__ c = table + (row * 2 + d) * PP; /* c[e * P + q] */
        T u = xc[r] - origins[row];
        u = u - u == 0 ? u : 0; /* +-inf: outside the grid, zero pieces */
        if (P == 4) {
            v4 a = *(const v4 *)(c + 12);
            a = *(const v4 *)(c + 8) + a * u;
            a = *(const v4 *)(c + 4) + a * u;
            a = *(const v4 *)c + a * u;
            for (int q = 0; q < 4; ++q) vals[q * SBP + r] = a[q];
        } else {
            for (int64_t q = 0; q < P; ++q) {
                T a = c[(P - 1) * P + q];
                for (int64_t e = P - 2; e >= 0; --e) a = c[e * P + q] + a * u;
                vals[q * SBP + r] = a;
            }
        }
    }
}

template <typename T>
inline __attribute__((always_inline)) void
pw_fwd_cols(int64_t P, const T *x, const T *sig, const T *knots, const T *origins, const T *table, int64_t n,
            int64_t in, int64_t M, int64_t K, int64_t wb, T *out) {
    T xc[SBP], vals[(KMAX + 1) * SBP];
    int32_t cnt[SBP];
    int64_t R = K + wb;
    for (int64_t r0 = 0; r0 < n; r0 += SBP) {
        int32_t nr = (int32_t)(r0 + SBP < n ? SBP : n - r0);
        T *__restrict__ ob = out + r0 * R * in;
        for (int64_t e = 0; e < nr * R * in; ++e) ob[e] = 0;
        for (int64_t f = 0; f < in; ++f) {
            for (int32_t r = 0; r < nr; ++r) xc[r] = x[(r0 + r) * in + f];
            pw_col(P, 0, xc, nr, knots + f * M, (int32_t)M, origins, table, (int32_t)f, cnt, vals);
            for (int32_t r = 0; r < nr; ++r) {
                T *__restrict__ o = ob + r * R * in + wb * in + f;
                int64_t first = (int64_t)cnt[r] - P;
                if (xc[r] != xc[r]) { /* NaN in every basis */
                    for (int64_t i = 0; i < K; ++i) o[i * in] = xc[r];
                    continue;
                }
                for (int64_t q = 0; q < P; ++q)
                    if (first + q >= 0 && first + q < K) o[(first + q) * in] = vals[q * SBP + r];
            }
        }
        if (wb)
            for (int64_t r = 0; r < nr; ++r) {
                const T *__restrict__ xr = x + (r0 + r) * in, *__restrict__ sr = sig + (r0 + r) * in;
                T *__restrict__ o = ob + r * R * in;
                for (int64_t j = 0; j < in; ++j) o[j] = xr[j] * sr[j];
            }
    }
}

template <typename T>
inline __attribute__((always_inline)) void
pw_bwd_cols(int64_t P, const T *g, const T *x, const T *sig, const T *knots, const T *origins, const T *table,
            int64_t n, int64_t in, int64_t M, int64_t K, int64_t wb, T *gx) {
    T xc[SBP], vals[(KMAX + 1) * SBP];
    int32_t cnt[SBP];
    int64_t R = K + wb;
    for (int64_t r0 = 0; r0 < n; r0 += SBP) {
        int32_t nr = (int32_t)(r0 + SBP < n ? SBP : n - r0);
        for (int64_t f = 0; f < in; ++f) {
            for (int32_t r = 0; r < nr; ++r) xc[r] = x[(r0 + r) * in + f];
            pw_col(P, 1, xc, nr, knots + f * M, (int32_t)M, origins, table, (int32_t)f, cnt, vals);
            for (int32_t r = 0; r < nr; ++r) {
                const T *__restrict__ gr = g + (r0 + r) * R * in + wb * in + f;
                int64_t first = (int64_t)cnt[r] - P;
                T acc = xc[r] != xc[r] ? xc[r] : 0;
                for (int64_t q = 0; q < P; ++q)
                    if (first + q >= 0 && first + q < K) acc += gr[(first + q) * in] * vals[q * SBP + r];
                gx[(r0 + r) * in + f] = acc;
            }
        }
        if (wb)
            for (int64_t r = r0; r < r0 + nr; ++r) {
                const T *__restrict__ xr = x + r * in, *__restrict__ sr = sig + r * in, *__restrict__ gr = g + r * R * in;
                T *__restrict__ o = gx + r * in;
                for (int64_t j = 0; j < in; ++j) o[j] += gr[j] * (sr[j] * (1 + xr[j] * (1 - sr[j])));
            }
    }
}

template <typename T>
KS_ENTRY void pw_fwd(const T *x, T *sig, const T *knots, const T *origins, const T *table, int64_t n, int64_t in, int64_t M,
            int64_t k, int64_t K, int64_t wb, T *out) {
    if (wb) sigmoid(x, n * in, sig);
    if (k == 3) /* cubic: the four polynomials as one vector per sample */
        pw_fwd_cols(4, x, sig, knots, origins, table, n, in, M, K, wb, out);
    else
        pw_fwd_cols(k + 1, x, sig, knots, origins, table, n, in, M, K, wb, out);
}

template <typename T>
KS_ENTRY void pw_bwd(const T *g, const T *x, const T *sig, const T *knots, const T *origins, const T *table, int64_t n,
            int64_t in, int64_t M, int64_t k, int64_t K, int64_t wb, T *gx) {
    if (k == 3)
        pw_bwd_cols(4, g, x, sig, knots, origins, table, n, in, M, K, wb, gx);
    else
        pw_bwd_cols(k + 1, g, x, sig, knots, origins, table, n, in, M, K, wb, gx);
}

/* Edges of a small layer for the sample-based L1 (KAN paper eq. 2.17): E (in, out, n) =
   sum_r F (n, R, in) W (out, R, in) per input feature, y (n, out) = sum_j E, l1 (out, in)
   = mean_n |E|. Per input j, its features are first copied to rows Fj (R, n) (scratch), so
   every loop below runs over samples, contiguous and vectorised, whatever out is (a [2, 5, 1]
   KAN has out = 5 and 1). work: (R + out) * n scratch. */
template <typename T>
KS_ENTRY void l1_fwd(const T *__restrict__ F, const T *__restrict__ W, int64_t n, int64_t R, int64_t in, int64_t out,
            T *__restrict__ E, T *__restrict__ y, T *__restrict__ l1, T *__restrict__ work) {
    T *__restrict__ Fj = work, *__restrict__ yt = work + R * n; /* yt (out, n): y transposed */
    for (int64_t e = 0; e < out * n; ++e) yt[e] = 0;
    for (int64_t j = 0; j < in; ++j) {
        for (int64_t s = 0; s < n; ++s)
            for (int64_t r = 0; r < R; ++r) Fj[r * n + s] = F[(s * R + r) * in + j];
        for (int64_t o = 0; o < out; ++o) {
            T *__restrict__ ejo = E + (j * out + o) * n, *__restrict__ yo = yt + o * n;
            const T *__restrict__ wo = W + o * R * in + j; /* W[o][r][j] = wo[r * in] */
            T w0 = wo[0];
            for (int64_t s = 0; s < n; ++s) ejo[s] = w0 * Fj[s];
            for (int64_t r = 1; r < R; ++r) {
                T wr = wo[r * in];
                const T *__restrict__ fr = Fj + r * n;
                for (int64_t s = 0; s < n; ++s) ejo[s] += wr * fr[s];
            }
            T lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0}, tail = 0;
            int64_t s = 0;
            for (; s + 8 <= n; s += 8)
                for (int64_t l = 0; l < 8; ++l) {
                    T v = ejo[s + l];
                    lanes[l] += v < 0 ? -v : v;
                    yo[s + l] += v;
                }
            for (; s < n; ++s) {
                T v = ejo[s];
                tail += v < 0 ? -v : v;
                yo[s] += v;
            }
            l1[o * in + j] = (tail + ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) +
                              ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]))) / (T)n;
        }
    }
    for (int64_t s = 0; s < n; ++s)
        for (int64_t o = 0; o < out; ++o) y[s * out + o] = yt[o * n + s];
}

/* Its backward: g_E = g_y + sign(E) g_l1 / n; gF (n, R, in) = g_E W (when gF is given),
   gW (out, R, in) = F^T g_E. work: (2 R + out + 1) * n scratch. */
template <typename T>
KS_ENTRY void l1_bwd(const T *__restrict__ F, const T *__restrict__ W, const T *__restrict__ E, const T *__restrict__ g_y,
            const T *__restrict__ g_l1, int64_t n, int64_t R, int64_t in, int64_t out, T *__restrict__ gF,
            T *__restrict__ gW, T *__restrict__ work) {
    T *__restrict__ Fj = work, *__restrict__ gFj = work + R * n, *__restrict__ gyt = gFj + R * n;
    T *__restrict__ ge = gyt + out * n;
    for (int64_t s = 0; s < n; ++s)
        for (int64_t o = 0; o < out; ++o) gyt[o * n + s] = g_y[s * out + o];
    for (int64_t j = 0; j < in; ++j) {
        for (int64_t s = 0; s < n; ++s)
            for (int64_t r = 0; r < R; ++r) Fj[r * n + s] = F[(s * R + r) * in + j];
        if (gF)
            for (int64_t e = 0; e < R * n; ++e) gFj[e] = 0;
        for (int64_t o = 0; o < out; ++o) {
            const T *__restrict__ ejo = E + (j * out + o) * n, *__restrict__ gyo = gyt + o * n;
            T c = g_l1 ? g_l1[o * in + j] / (T)n : 0;
            for (int64_t s = 0; s < n; ++s) {
                T v = ejo[s];
                ge[s] = gyo[s] + ((v > 0) - (v < 0)) * c;
            }
            for (int64_t r = 0; r < R; ++r) {
                const T *__restrict__ fr = Fj + r * n;
                T wr = W[(o * R + r) * in + j], lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0}, tail = 0;
                int64_t s = 0;
                for (; s + 8 <= n; s += 8)
                    for (int64_t l = 0; l < 8; ++l) lanes[l] += fr[s + l] * ge[s + l];
                for (; s < n; ++s) tail += fr[s] * ge[s];
                gW[(o * R + r) * in + j] = tail + ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) +
                                           ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
                if (gF) {
                    T *__restrict__ gr = gFj + r * n;
                    for (int64_t s2 = 0; s2 < n; ++s2) gr[s2] += wr * ge[s2];
                }
            }
        }
        if (gF)
            for (int64_t s = 0; s < n; ++s)
                for (int64_t r = 0; r < R; ++r) gF[(s * R + r) * in + j] = gFj[r * n + s];
    }
}

/* W (out, K + wb, in): row 0 w_b mask (with wb), rows wb + k c[:, :, k] live, where
   live = w_s mask scale (out, in) is also returned: the weight of the layer's one matmul. */
template <typename T>
KS_ENTRY void weight(const T *__restrict__ coef, const T *__restrict__ sb, const T *__restrict__ ss,
            const T *__restrict__ mask, int64_t n_out, int64_t in, int64_t K, int64_t wb, double scale,
            T *__restrict__ w_out, T *__restrict__ live) {
    for (int64_t o = 0; o < n_out; ++o) {
        T *__restrict__ w = w_out + o * (K + wb) * in;
        for (int64_t j = 0; j < in; ++j) {
            int64_t e = o * in + j;
            T lv = ss[e] * mask[e] * (T)scale;
            live[e] = lv;
            if (wb) w[j] = sb[e] * mask[e];
            const T *__restrict__ c = coef + e * K;
            for (int64_t k = 0; k < K; ++k) w[(wb + k) * in + j] = c[k] * lv;
        }
    }
}

/* From g_W (out, K + wb, in): g_coef (out, in, K) = g_W^T live, g_ws (out, in) =
   sum_k g_W c mask scale, g_wb (out, in) = g_W[:, 0] mask (with wb). */
template <typename T>
KS_ENTRY void param_grads(const T *__restrict__ gw, const T *__restrict__ coef, const T *__restrict__ mask,
                 const T *__restrict__ live, int64_t n_out, int64_t in, int64_t K, int64_t wb, double scale,
                 T *__restrict__ g_coef, T *__restrict__ g_base, T *__restrict__ g_sp) {
    for (int64_t o = 0; o < n_out; ++o) {
        const T *__restrict__ g = gw + o * (K + wb) * in;
        for (int64_t j = 0; j < in; ++j) {
            int64_t e = o * in + j;
            const T *__restrict__ c = coef + e * K;
            T *__restrict__ gc = g_coef + e * K;
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

/* Group-rational activation of GR-KAN (kansym/gpt/grkan.py): F = P(x) / (1 + |B(x)|) per channel,
   P and B by Horner's rule (Knuth, TAOCP vol. 2, 4.6.4), each step one loop over the row's
   channels (contiguous: it vectorises). a (m1, ch), b (nb, ch) hold the channels' coefficients
   by row; B(x) = x (b_0 + b_1 x + ...). One row at a time, on buffers of one row. */
template <typename T>
KS_ENTRY void rational_fwd(const T *__restrict__ x, const T *__restrict__ a, const T *__restrict__ b, int64_t n,
                           int64_t ch, int64_t m1, int64_t nb, T *__restrict__ out) {
    std::vector<T> qbuf(ch);
    T *__restrict__ q = qbuf.data();
    for (int64_t i = 0; i < n; ++i) {
        const T *__restrict__ xr = x + i * ch;
        T *__restrict__ p = out + i * ch;
        const T *top = a + (m1 - 1) * ch, *btop = b + (nb - 1) * ch;
        for (int64_t c = 0; c < ch; ++c) p[c] = top[c], q[c] = btop[c];
        for (int64_t k = m1 - 2; k >= 0; --k) {
            const T *ak = a + k * ch;
            for (int64_t c = 0; c < ch; ++c) p[c] = p[c] * xr[c] + ak[c];
        }
        for (int64_t k = nb - 2; k >= 0; --k) {
            const T *bk = b + k * ch;
            for (int64_t c = 0; c < ch; ++c) q[c] = q[c] * xr[c] + bk[c];
        }
        for (int64_t c = 0; c < ch; ++c) p[c] = p[c] / (T(1) + std::fabs(q[c] * xr[c]));
    }
}

/* Its backward: gx = g (P' - F sgn(B) B') / Q, ga_k = sum_rows g x^k / Q, gb_j = -sum_rows g F sgn(B)
   x^(j+1) / Q with sgn(0) = +1 (a subgradient, so a zero denominator can start to move); P', B'
   carried along Horner's rule. ga, gb are overwritten. */
template <typename T>
KS_ENTRY void rational_bwd(const T *__restrict__ g, const T *__restrict__ x, const T *__restrict__ a,
                           const T *__restrict__ b, int64_t n, int64_t ch, int64_t m1, int64_t nb, T *__restrict__ gx,
                           T *__restrict__ ga, T *__restrict__ gb) {
    std::vector<T> buf(5 * ch);
    T *__restrict__ p = buf.data();
    T *__restrict__ dp = p + ch;
    T *__restrict__ cc = dp + ch;
    T *__restrict__ dc = cc + ch;
    T *__restrict__ t = dc + ch;
    for (int64_t j = 0; j < m1 * ch; ++j) ga[j] = T(0);
    for (int64_t j = 0; j < nb * ch; ++j) gb[j] = T(0);
    for (int64_t i = 0; i < n; ++i) {
        const T *__restrict__ xr = x + i * ch;
        const T *__restrict__ gr = g + i * ch;
        T *__restrict__ s = gx + i * ch; /* holds g F sgn(B) / Q until gx is written */
        const T *top = a + (m1 - 1) * ch, *btop = b + (nb - 1) * ch;
        for (int64_t c = 0; c < ch; ++c) p[c] = top[c], dp[c] = T(0), cc[c] = btop[c], dc[c] = T(0);
        for (int64_t k = m1 - 2; k >= 0; --k) {
            const T *ak = a + k * ch;
            for (int64_t c = 0; c < ch; ++c) dp[c] = dp[c] * xr[c] + p[c], p[c] = p[c] * xr[c] + ak[c];
        }
        for (int64_t k = nb - 2; k >= 0; --k) {
            const T *bk = b + k * ch;
            for (int64_t c = 0; c < ch; ++c) dc[c] = dc[c] * xr[c] + cc[c], cc[c] = cc[c] * xr[c] + bk[c];
        }
        for (int64_t c = 0; c < ch; ++c) {
            T big = cc[c] * xr[c], dbig = cc[c] + xr[c] * dc[c];
            T inv_q = T(1) / (T(1) + std::fabs(big));
            T tc = gr[c] * inv_q, sc = tc * p[c] * inv_q;
            sc = big < T(0) ? -sc : sc;
            t[c] = tc;
            dc[c] = sc;                   /* s, kept for the b gradients */
            s[c] = tc * dp[c] - sc * dbig; /* gx */
        }
        for (int64_t c = 0; c < ch; ++c) ga[c] += t[c];
        for (int64_t k = 1; k < m1; ++k) {
            T *gak = ga + k * ch;
            for (int64_t c = 0; c < ch; ++c) t[c] *= xr[c], gak[c] += t[c];
        }
        for (int64_t j = 0; j < nb; ++j) {
            T *gbj = gb + j * ch;
            for (int64_t c = 0; c < ch; ++c) dc[c] *= xr[c], gbj[c] -= dc[c];
        }
    }
}

}  // namespace

/* The C ABI of kan_kernels.h: each template for float and double. */
#define KANSYM_DEFINE_KERNELS(T, S)                                                                                  \
    void kansym_cubic_fwd_##S(const T *x, T *sig, const T *t0, const T *inv_h, int64_t n, int64_t in, int64_t K,    \
                              int64_t wb, T *out) {                                                                \
        cubic_fwd(x, sig, t0, inv_h, n, in, K, wb, out);                                                           \
    }                                                                                                              \
    void kansym_cubic_bwd_##S(const T *g, const T *x, const T *sig, const T *t0, const T *inv_h, int64_t n,         \
                              int64_t in, int64_t K, int64_t wb, T *gx) {                                          \
        cubic_bwd(g, x, sig, t0, inv_h, n, in, K, wb, gx);                                                         \
    }                                                                                                              \
    void kansym_pw_fwd_##S(const T *x, T *sig, const T *knots, const T *origins, const T *table, int64_t n,         \
                           int64_t in, int64_t M, int64_t k, int64_t K, int64_t wb, T *out) {                      \
        pw_fwd(x, sig, knots, origins, table, n, in, M, k, K, wb, out);                                            \
    }                                                                                                              \
    void kansym_pw_bwd_##S(const T *g, const T *x, const T *sig, const T *knots, const T *origins, const T *table,  \
                           int64_t n, int64_t in, int64_t M, int64_t k, int64_t K, int64_t wb, T *gx) {            \
        pw_bwd(g, x, sig, knots, origins, table, n, in, M, k, K, wb, gx);                                          \
    }                                                                                                              \
    void kansym_l1_fwd_##S(const T *F, const T *W, int64_t n, int64_t R, int64_t in, int64_t out, T *E, T *y,       \
                           T *l1, T *work) {                                                                       \
        l1_fwd(F, W, n, R, in, out, E, y, l1, work);                                                               \
    }                                                                                                              \
    void kansym_l1_bwd_##S(const T *F, const T *W, const T *E, const T *g_y, const T *g_l1, int64_t n, int64_t R,   \
                           int64_t in, int64_t out, T *gF, T *gW, T *work) {                                       \
        l1_bwd(F, W, E, g_y, g_l1, n, R, in, out, gF, gW, work);                                                   \
    }                                                                                                              \
    void kansym_weight_##S(const T *coef, const T *sb, const T *ss, const T *mask, int64_t n_out, int64_t in,       \
                           int64_t K, int64_t wb, double scale, T *w, T *live) {                                   \
        weight(coef, sb, ss, mask, n_out, in, K, wb, scale, w, live);                                              \
    }                                                                                                              \
    void kansym_param_grads_##S(const T *gw, const T *coef, const T *mask, const T *live, int64_t n_out, int64_t in, \
                                int64_t K, int64_t wb, double scale, T *g_coef, T *g_base, T *g_sp) {              \
        param_grads(gw, coef, mask, live, n_out, in, K, wb, scale, g_coef, g_base, g_sp);                          \
    }                                                                                                              \
    void kansym_rational_fwd_##S(const T *x, const T *a, const T *b, int64_t n, int64_t ch, int64_t m1, int64_t nb, \
                                 T *out) {                                                                         \
        rational_fwd(x, a, b, n, ch, m1, nb, out);                                                                 \
    }                                                                                                              \
    void kansym_rational_bwd_##S(const T *g, const T *x, const T *a, const T *b, int64_t n, int64_t ch, int64_t m1, \
                                 int64_t nb, T *gx, T *ga, T *gb) {                                                \
        rational_bwd(g, x, a, b, n, ch, m1, nb, gx, ga, gb);                                                       \
    }

extern "C" {
KANSYM_DEFINE_KERNELS(float, f32)
KANSYM_DEFINE_KERNELS(double, f64)
}
