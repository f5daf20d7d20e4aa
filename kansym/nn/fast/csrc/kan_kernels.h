/* The native CPU kernels of the KAN layer: their C ABI.

   Each kernel exists for float (suffix _f32) and double (_f64). kansym calls them through
   ctypes (kansym/nn/fast/native.py) and from the C++ operator (kan_op.cpp), which links
   against the same built library: one copy of the machine code, so both paths give the
   same numbers bit for bit. Layouts (all contiguous, row-major):

     x, sig, gx   (n, in)            sig = sigmoid(x), written by the forward kernels when wb
     out, g       (n, K + wb, in)    F: row 0 silu(x) when wb, then the K bases
     t0, inv_h    (in,)              uniform cubic grids: first knot and inverse step
     knots        (in, M)            piecewise plans: the knots of every input
     origins      (in (M + 1),)      the origin of the local variable of every slot
     table        (in (M + 1), 2, k + 1, k + 1)   polynomial pieces (values, derivatives)
     coef         (n_out, in, K)     spline coefficients; sb, ss, mask, live (n_out, in)
     weight, gw   (n_out, K + wb, in)
     rational:    x, out, g, gx (n, ch); a, ga (m1, ch); b, gb (nb, ch): per-channel coefficients
                  of F = (a_0 + ... + a_{m1-1} x^{m1-1}) / (1 + |b_0 x + ... + b_{nb-1} x^nb|)

   See kan_kernels.cpp for the algorithms and their sources. */
#ifndef KANSYM_KAN_KERNELS_H
#define KANSYM_KAN_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KANSYM_DECLARE_KERNELS(T, S)                                                               \
    void kansym_cubic_fwd_##S(const T *x, T *sig, const T *t0, const T *inv_h, int64_t n,         \
                              int64_t in, int64_t K, int64_t wb, T *out);                         \
    void kansym_cubic_bwd_##S(const T *g, const T *x, const T *sig, const T *t0, const T *inv_h,  \
                              int64_t n, int64_t in, int64_t K, int64_t wb, T *gx);               \
    void kansym_pw_fwd_##S(const T *x, T *sig, const T *knots, const T *origins, const T *table,  \
                           int64_t n, int64_t in, int64_t M, int64_t k, int64_t K, int64_t wb,    \
                           T *out);                                                               \
    void kansym_pw_bwd_##S(const T *g, const T *x, const T *sig, const T *knots,                  \
                           const T *origins, const T *table, int64_t n, int64_t in, int64_t M,    \
                           int64_t k, int64_t K, int64_t wb, T *gx);                              \
    void kansym_l1_fwd_##S(const T *F, const T *W, int64_t n, int64_t R, int64_t in, int64_t out, \
                           T *E, T *y, T *l1, T *work);                                           \
    void kansym_l1_bwd_##S(const T *F, const T *W, const T *E, const T *g_y, const T *g_l1,       \
                           int64_t n, int64_t R, int64_t in, int64_t out, T *gF, T *gW, T *work); \
    void kansym_weight_##S(const T *coef, const T *sb, const T *ss, const T *mask, int64_t n_out, \
                           int64_t in, int64_t K, int64_t wb, double scale, T *weight, T *live);  \
    void kansym_param_grads_##S(const T *gw, const T *coef, const T *mask, const T *live,         \
                                int64_t n_out, int64_t in, int64_t K, int64_t wb, double scale,   \
                                T *g_coef, T *g_base, T *g_sp);                                   \
    void kansym_rational_fwd_##S(const T *x, const T *a, const T *b, int64_t n, int64_t ch,       \
                                 int64_t m1, int64_t nb, T *out);                                 \
    void kansym_rational_bwd_##S(const T *g, const T *x, const T *a, const T *b, int64_t n,       \
                                 int64_t ch, int64_t m1, int64_t nb, T *gx, T *ga, T *gb);

KANSYM_DECLARE_KERNELS(float, f32)
KANSYM_DECLARE_KERNELS(double, f64)

#undef KANSYM_DECLARE_KERNELS

#ifdef __cplusplus
}
#endif

#endif /* KANSYM_KAN_KERNELS_H */
