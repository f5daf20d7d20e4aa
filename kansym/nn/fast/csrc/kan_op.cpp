/* The KAN layer as one C++ torch operator: kan_linear, forward and backward without Python.

   The operator runs the forward and the backward of kansym.nn.fast.native_linear's
   _KANLinearNative (native W and F, one matmul; F^T g with the parameter gradients, g W with
   the native input gradient) as a torch::autograd::Function, so a layer call crosses Python
   once and its backward not at all (a Python autograd.Function costs about 60-100 us per
   forward+backward here). It calls the C kernels of kan_kernels.h in the kernels library it
   is linked against: the very code the ctypes path runs, so the same numbers bit for bit.
   Built by kansym/nn/fast/build.py with torch.utils.cpp_extension; its namespace is the
   extension's name (TORCH_EXTENSION_NAME, kansym_op_<key>). */
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include "kan_kernels.h"

namespace {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t MIN_WORK = 1 << 16; /* elements of F per thread below which one thread is faster */

template <typename T> struct Kernels;
#define KS_KERNELS(T, S)                                                                           \
    template <> struct Kernels<T> {                                                                \
        static constexpr auto weight = kansym_weight_##S;                                          \
        static constexpr auto param_grads = kansym_param_grads_##S;                                \
        static constexpr auto cubic_fwd = kansym_cubic_fwd_##S;                                    \
        static constexpr auto cubic_bwd = kansym_cubic_bwd_##S;                                    \
        static constexpr auto pw_fwd = kansym_pw_fwd_##S;                                          \
        static constexpr auto pw_bwd = kansym_pw_bwd_##S;                                          \
    };
KS_KERNELS(float, f32)
KS_KERNELS(double, f64)

/* Row blocks of at least MIN_WORK elements of F each, on torch's intra-op threads. */
template <typename F> void by_rows(int64_t n, int64_t row_elems, const F &run) {
    int64_t grain = std::max<int64_t>(1, (2 * MIN_WORK + row_elems - 1) / row_elems);
    if (n <= grain) {
        run(0, n);
        return;
    }
    at::parallel_for(0, n, std::max<int64_t>(1, MIN_WORK / row_elems), run);
}

/* grid: uniform cubic {t0, inv_h}; piecewise {knots (in, M), origins, table}. */
template <typename T>
void features(const Tensor &x, Tensor &sig, const std::vector<Tensor> &grid, int64_t order,
              int64_t K, int64_t wb, Tensor &out) {
    int64_t n = x.size(0), in = x.size(1), R = K + wb;
    const T *xp = x.data_ptr<T>();
    T *sp = wb ? sig.data_ptr<T>() : const_cast<T *>(xp); /* sigmoid(x) is written (only with wb) */
    T *op = out.data_ptr<T>();
    if (grid.size() == 2) {
        const T *t0 = grid[0].data_ptr<T>(), *ih = grid[1].data_ptr<T>();
        by_rows(n, R * in, [&](int64_t r0, int64_t r1) {
            Kernels<T>::cubic_fwd(xp + r0 * in, sp + r0 * in, t0, ih, r1 - r0, in, K, wb, op + r0 * R * in);
        });
    } else {
        const T *kn = grid[0].data_ptr<T>(), *org = grid[1].data_ptr<T>(), *tab = grid[2].data_ptr<T>();
        int64_t M = grid[0].size(1);
        by_rows(n, R * in, [&](int64_t r0, int64_t r1) {
            Kernels<T>::pw_fwd(xp + r0 * in, sp + r0 * in, kn, org, tab, r1 - r0, in, M, order, K, wb,
                               op + r0 * R * in);
        });
    }
}

template <typename T>
void input_grad(const Tensor &gf, const Tensor &x, const Tensor &sig, const std::vector<Tensor> &grid,
                int64_t order, int64_t K, int64_t wb, Tensor &gx) {
    int64_t n = x.size(0), in = x.size(1), R = K + wb;
    const T *gp = gf.data_ptr<T>(), *xp = x.data_ptr<T>(), *sp = wb ? sig.data_ptr<T>() : xp;
    T *op = gx.data_ptr<T>();
    if (grid.size() == 2) {
        const T *t0 = grid[0].data_ptr<T>(), *ih = grid[1].data_ptr<T>();
        by_rows(n, R * in, [&](int64_t r0, int64_t r1) {
            Kernels<T>::cubic_bwd(gp + r0 * R * in, xp + r0 * in, sp + r0 * in, t0, ih, r1 - r0, in, K, wb,
                                  op + r0 * in);
        });
    } else {
        const T *kn = grid[0].data_ptr<T>(), *org = grid[1].data_ptr<T>(), *tab = grid[2].data_ptr<T>();
        int64_t M = grid[0].size(1);
        by_rows(n, R * in, [&](int64_t r0, int64_t r1) {
            Kernels<T>::pw_bwd(gp + r0 * R * in, xp + r0 * in, sp + r0 * in, kn, org, tab, r1 - r0, in, M,
                               order, K, wb, op + r0 * in);
        });
    }
}

struct KANLinear : public torch::autograd::Function<KANLinear> {
    static Tensor forward(AutogradContext *ctx, const Tensor &x, const Tensor &coef, const Tensor &scale_base,
                          const Tensor &scale_sp, const Tensor &mask, std::vector<Tensor> grid, int64_t order,
                          bool with_base, double scale, const std::optional<Tensor> &feats,
                          const std::optional<Tensor> &sig_in, bool need_x) {
        int64_t n = x.size(0), in = x.size(1), n_out = coef.size(0), K = coef.size(2), wb = with_base;
        int64_t R = K + wb;
        auto opts = x.options();
        Tensor w = at::empty({n_out, R, in}, opts), live = at::empty({n_out, in}, opts), f, sig;
        AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "kan_linear_weight", [&] {
            Kernels<scalar_t>::weight(coef.data_ptr<scalar_t>(), scale_base.data_ptr<scalar_t>(),
                                      scale_sp.data_ptr<scalar_t>(), mask.data_ptr<scalar_t>(), n_out, in, K, wb,
                                      scale, w.data_ptr<scalar_t>(), live.data_ptr<scalar_t>());
        });
        if (feats.has_value()) { /* a FeatureCache hit */
            f = *feats;
            sig = wb ? *sig_in : Tensor();
        } else {
            sig = wb ? at::empty_like(x) : Tensor(); /* written by the kernel */
            f = at::empty({n, R, in}, opts);
            AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "kan_linear_features",
                                       [&] { features<scalar_t>(x, sig, grid, order, K, wb, f); });
        }
        Tensor flat = f.view({n, R * in}), w2 = w.view({n_out, R * in});
        ctx->save_for_backward({flat, w2, need_x ? x : Tensor(), need_x ? sig : Tensor(), coef, mask, live});
        ctx->saved_data["grid"] = grid;
        ctx->saved_data["order"] = order;
        ctx->saved_data["wb"] = wb;
        ctx->saved_data["scale"] = scale;
        return at::mm(flat, w2.t());
    }

    static variable_list backward(AutogradContext *ctx, variable_list grads) {
        TORCH_CHECK(!at::GradMode::is_enabled(),
                    "kansym's KAN layer has first derivatives only (hand-written backward): second derivatives "
                    "(create_graph=True) are not supported; kansym.nn.spline.bspline_basis is differentiable to "
                    "any order");
        auto saved = ctx->get_saved_variables();
        const Tensor &flat = saved[0], &w2 = saved[1], &x = saved[2], &sig = saved[3], &coef = saved[4],
                     &mask = saved[5], &live = saved[6];
        auto grid = ctx->saved_data["grid"].toTensorVector();
        int64_t order = ctx->saved_data["order"].toInt(), wb = ctx->saved_data["wb"].toInt();
        double scale = ctx->saved_data["scale"].toDouble();
        int64_t n_out = coef.size(0), in = coef.size(1), K = coef.size(2);
        Tensor g = grads[0].to(flat.scalar_type()).contiguous(), gx, g_coef, g_base, g_sp;
        if (ctx->needs_input_grad(0)) {
            Tensor gf = at::mm(g, w2); /* (N, R in) */
            gx = at::empty({x.size(0), in}, x.options());
            AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "kan_linear_input_grad",
                                       [&] { input_grad<scalar_t>(gf, x, sig, grid, order, K, wb, gx); });
        }
        if (ctx->needs_input_grad(1) || ctx->needs_input_grad(2) || ctx->needs_input_grad(3)) {
            Tensor gw = at::mm(g.t(), flat); /* (out, R in) */
            auto opts = coef.options();
            g_coef = at::empty_like(coef);
            g_sp = at::empty({n_out, in}, opts);
            if (wb) g_base = at::empty({n_out, in}, opts);
            AT_DISPATCH_FLOATING_TYPES(coef.scalar_type(), "kan_linear_param_grads", [&] {
                Kernels<scalar_t>::param_grads(gw.data_ptr<scalar_t>(), coef.data_ptr<scalar_t>(),
                                               mask.data_ptr<scalar_t>(), live.data_ptr<scalar_t>(), n_out, in, K,
                                               wb, scale, g_coef.data_ptr<scalar_t>(),
                                               wb ? g_base.data_ptr<scalar_t>() : nullptr,
                                               g_sp.data_ptr<scalar_t>());
            });
            if (!ctx->needs_input_grad(1)) g_coef = Tensor();
            if (!ctx->needs_input_grad(2)) g_base = Tensor();
            if (!ctx->needs_input_grad(3)) g_sp = Tensor();
        }
        return {gx, g_coef, g_base, g_sp, Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor(),
                Tensor()};
    }
};

/* Preconditions the Python caller checks; repeated here so that a wrong call raises instead of
   reading out of bounds. */
void check(const Tensor &t, const Tensor &x, const char *name) {
    TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == x.scalar_type() && t.is_contiguous(), "kan_linear: ",
                name, " must be a contiguous CPU tensor of x's dtype");
}

Tensor kan_linear(const Tensor &x, const Tensor &coef, const Tensor &scale_base, const Tensor &scale_sp,
                  const Tensor &mask, std::vector<Tensor> grid, int64_t order, bool with_base, double scale,
                  const std::optional<Tensor> &feats, const std::optional<Tensor> &sig) {
    TORCH_CHECK(x.dim() == 2 && coef.dim() == 3 && coef.size(1) == x.size(1), "kan_linear: x (N, in), coef (out, in, K)");
    TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble, "kan_linear: float32 or float64");
    TORCH_CHECK(grid.size() == 2 || grid.size() == 3, "kan_linear: grid is {t0, inv_h} or {knots, origins, table}");
    TORCH_CHECK(grid.size() == 3 || order == 3, "kan_linear: uniform grids are cubic");
    check(x, x, "x");
    check(coef, x, "coef");
    check(scale_base, x, "scale_base");
    check(scale_sp, x, "scale_sp");
    check(mask, x, "mask");
    for (const auto &t : grid) check(t, x, "grid");
    int64_t n_out = coef.size(0), in = x.size(1), K = coef.size(2);
    TORCH_CHECK(K >= 1 && scale_base.sizes() == mask.sizes() && scale_sp.sizes() == mask.sizes() &&
                    mask.dim() == 2 && mask.size(0) == n_out && mask.size(1) == in,
                "kan_linear: scale_base, scale_sp and mask (out, in) of coef (out, in, K)");
    if (grid.size() == 2) { /* uniform cubic: first knot and inverse step per input */
        TORCH_CHECK(grid[0].dim() == 1 && grid[1].dim() == 1 && grid[0].size(0) == in && grid[1].size(0) == in,
                    "kan_linear: t0 and inv_h (in,)");
    } else { /* piecewise: knots (in, M), origins (in (M + 1),), pieces (in (M + 1), 2, k + 1, k + 1) */
        TORCH_CHECK(order >= 0 && order <= 7, "kan_linear: piecewise order 0..7");
        TORCH_CHECK(grid[0].dim() == 2 && grid[0].size(0) == in, "kan_linear: knots (in, M)");
        int64_t slots = in * (grid[0].size(1) + 1), P = order + 1;
        TORCH_CHECK(grid[1].numel() == slots && grid[2].dim() == 4 && grid[2].size(0) == slots &&
                        grid[2].size(1) == 2 && grid[2].size(2) == P && grid[2].size(3) == P,
                    "kan_linear: origins (in (M + 1),) and pieces (in (M + 1), 2, k + 1, k + 1)");
        TORCH_CHECK(K == grid[0].size(1) - order - 1, "kan_linear: K = M - k - 1 bases on M knots");
    }
    if (feats.has_value()) {
        check(*feats, x, "feats");
        TORCH_CHECK(feats->numel() == x.size(0) * (coef.size(2) + with_base) * x.size(1), "kan_linear: feats size");
        if (with_base) {
            TORCH_CHECK(sig.has_value() && sig->sizes() == x.sizes(), "kan_linear: sig (N, in) with feats");
            check(*sig, x, "sig");
        }
    }
    /* whether the backward will want dL/dx (forward runs with grad mode off, so decide here) */
    bool need_x = x.requires_grad() && at::GradMode::is_enabled();
    return KANLinear::apply(x, coef, scale_base, scale_sp, mask, std::move(grid), order, with_base, scale, feats, sig,
                            need_x);
}

}  // namespace

TORCH_LIBRARY(TORCH_EXTENSION_NAME, m) {
    m.def("kan_linear(Tensor x, Tensor coef, Tensor scale_base, Tensor scale_sp, Tensor mask, Tensor[] grid, "
          "int order, bool with_base, float scale, Tensor? feats=None, Tensor? sig=None) -> Tensor");
}

TORCH_LIBRARY_IMPL(TORCH_EXTENSION_NAME, CompositeImplicitAutograd, m) { m.impl("kan_linear", kan_linear); }
