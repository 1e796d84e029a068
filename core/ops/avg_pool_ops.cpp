// Average pooling: avg_pool2d avg_pool2d_backward avg_pool3d avg_pool3d_backward
// _adaptive_avg_pool2d _adaptive_avg_pool2d_backward.
//
// Forward, per output element: y = (Σ_window x) ⊘ d with d = divisor_override, or the window size
// with (count_include_pad) or without the padding, or kH·kW for adaptive pooling (windows in
// pool_geometry.h). Backward: grad_input[p] = Σ over the windows o containing p of g_o ⊘ d_o.
// The kernels modelled (PyTorch 1.13 and 2.x, CPU and CUDA) and how the rules enclose them:
// - the sum runs in any order and bracketing (threads, vector lanes, atomics). avg_pool2d sums in
//   the accumulation format (CPU scalar_t for fp32/fp64, CUDA accscalar_t), and so does avg_pool3d
//   (CPU AveragePool3d.cpp's avg_pool3d_out_frame in scalar_t, fp32/fp64 only, in 1.13 and 2.15;
//   CUDA AveragePool3d.cu accscalar_t). Adaptive pooling on
//   CUDA before PyTorch 2.1 summed in the storage format (`T sum`, pytorch/pytorch#99378 moved it
//   to opmath), and every backward kernel accumulates grad_input in the storage format (CPU
//   `grad_input += grad_delta` in scalar_t, CUDA NCHW `*ptr_gradInput += grad_delta` in T, atomics
//   on T): there the sum may run in either format. |fl(Σ) − Σ| ≤ γ_{n−1}·Σ|x| with the unit
//   roundoff of the wider-error format (Higham 2002 eq. 4.4 for any summation tree;
//   Jeannerod–Rump 2013: (n−1)u suffices); additions are exact in the subnormal range;
// - the division by d: RN(s / d) (CPU, CUDA avg_pool2d), RN(s·RN(1/d)) (CUDA NHWC adaptive:
//   `factor = scalar_t(1.0) / (kH·kW)`), and for adaptive pooling RN(RN(s / kH) / kW) (CUDA NCHW),
//   RN(RN(g / kW) / kH) (CUDA atomic backward), RN(g·RN(RN(1/kW)·RN(1/kH))) (CUDA NHWC backward);
//   each operation correctly rounded in the accumulation format, or (where the kernels compute in
//   scalar_t / T: adaptive forward, all backward) the storage format. The integer d is converted
//   to that format (exact below 2^24 in fp32, but bf16 rounds above 256): d ∈ {d, RN(d)};
// - the result is rounded to the storage format.
// avg_pool3d_backward on CUDA at stride 1 without padding sums a position's gradients first and
//   multiplies once: RN(RN_acc(Σg)·RN(1/d)). d is the same for every window there, so the exact
//   value Σ(g·RN(1/d)) lies in the sum of the per-term enclosures (each holds g·RN(1/d) exactly),
//   the sum's error γ_{n−1}·Σ|g|·RN(1/d) is within the bound taken over those terms, and the last
//   rounding is the storage rounding above. The undivided sum can overflow acc where the
//   quotients' cannot (Σ|g| is d times larger): the 3-d backward gives the entire line when
//   Σ|g| + γ_{n−1}·Σ|g| may reach acc's largest finite value (kernels::AvgPoolModel::rawSum).
//   The random rule draws this kernel when every window has the same divisor.
// The interval rule takes the hull of every variant (rounding outward in the storage format
// encloses a rounding to the accumulation format, and any double rounding through it); the random
// rule picks one per execution. localError = distance from the point value to the interval rule's
// enclosure at the exact inputs. Averages are smooth: the vjp is exact everywhere (1/d to every
// element of the window; the backward ops are linear in grad_output, and self gives only the
// shape: zero gradient).
#include "core/kernels/avg_pool.h"
#include "core/ops/broadcasting.h"
#include "core/ops/error_bounds.h"
#include "core/ops/families.h"
#include "core/ops/formats.h"
#include "core/ops/kernel_offload.h"
#include "core/ops/nn_support.h"
#include "core/ops/pool_geometry.h"
#include "core/ops/random_arith.h"
#include "core/ops/registry.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

namespace lossbound {

namespace {

using namespace ops;

enum class Pool { Avg, Adaptive };

/// The arithmetic of one node: accumulation and storage formats, and whether the sum and the
/// division may also run in the storage format (adaptive forward, every backward).
using Arith = kernels::AvgPoolModel;

Arith arithOf(const OpArgs& a, const OpContext& ctx, Pool pool, int dims, bool backward) {
  const DType t = a.outSpec(0).dtype;
  return {accumulationFormat(ctx.precision, t), outFormat(a, ctx),
          backward || pool == Pool::Adaptive, pool == Pool::Adaptive, backward && dims == 3};
}

void requireFloating(const OpArgs& a, const Tensor& t, const char* what) {
  if (!isFloating(t.dtype()))
    a.fail(std::string(what) + " should be a floating tensor, found " +
           std::string(dtypeName(t.dtype())));
}

/// Returns each window's divisor, kH and kW (params[3o..] for window o: kernels::avgPoolWindow,
/// kernels::avgPoolBackwardInput).
std::vector<double> windowParams(const PoolLayout& l) {
  std::vector<double> params;
  params.reserve(3 * l.windows.size());
  for (const PoolWindow& w : l.windows)
    for (std::int64_t v : {w.divisor, w.kH, w.kW}) params.push_back(static_cast<double>(v));
  return params;
}

/// One random execution's choices.
struct RandomArith {
  Format sumIn, opIn, store;
  bool sumToStore;
  int mode;  // 0: v / d; 1: v·RN(1/d); 2: v / kH / kW; 3: v / kW / kH; 4: v·RN(RN(1/kW)·RN(1/kH))
  bool rawSum = false;  // the backward sums the undivided gradients in acc, then ·RN_acc(1/d)
};

RandomArith pickArith(const Arith& m, std::mt19937_64& rng) {
  RandomArith r{m.acc, m.acc, m.store, false, 0};
  if (m.rawSum) r.rawSum = (rng() & 1) != 0;
  if (m.narrow) {
    if (rng() & 1) r.sumIn = m.store;
    if (rng() & 1) r.opIn = m.store;
    r.sumToStore = (rng() & 1) != 0;
  }
  r.mode = static_cast<int>(rng() % (m.adaptive ? 5u : 2u));
  return r;
}

double randomDivide(double v, const PoolWindow& w, const RandomArith& r) {
  const Format f = r.opIn;
  const auto rn = [f](double x) { return roundNearest(x, f); };
  const double d = rn(static_cast<double>(w.divisor));
  const double kh = rn(static_cast<double>(w.kH)), kw = rn(static_cast<double>(w.kW));
  switch (r.mode) {
    case 1:
      return rn(v * rn(1.0 / d));
    case 2:
      return rn(rn(v / kh) / kw);
    case 3:
      return rn(rn(v / kw) / kh);
    case 4:
      return rn(v * rn(rn(1.0 / kw) * rn(1.0 / kh)));
    default:
      return rn(v / d);
  }
}

/// The layout of a forward node (avg_pool2d/3d or _adaptive_avg_pool2d) on input shape `in`.
PoolLayout forwardLayout(const OpArgs& a, Pool pool, int dims, const Shape& in, std::size_t first) {
  if (pool == Pool::Avg) return avgPoolLayout(a, in, first, dims);
  const std::vector<std::int64_t> size = a.intListArg(first, "output_size");
  if (size.size() != 2 && size.size() != 1)
    a.fail("output_size should have 1 or 2 values, found " + std::to_string(size.size()));
  return adaptivePoolLayout(a, in, size.front(), size.back());
}

// ---------------------------------------------------------------------------------------------

/// avg_pool2d, avg_pool3d and _adaptive_avg_pool2d.
class AvgPoolRule final : public OpRule {
 public:
  /// Takes the pooled dims: 2 or 3 (avg_pool3d).
  AvgPoolRule(Pool pool, int dims) : mPool(pool), mDims(dims) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    requireFloating(a, x, "self");
    const PoolLayout l = forwardLayout(a, mPool, mDims, x.shape(), 1);
    std::vector<double> y(static_cast<std::size_t>(l.planes * l.outPlane()));
    forEachWindow(l, [&](std::size_t k, std::int64_t base, const PoolWindow& w) {
      double s = 0.0;
      for (std::int64_t off : w.offsets) s += x.values()[static_cast<std::size_t>(base + off)];
      y[k] = w.offsets.empty() ? 0.0 : s / static_cast<double>(w.divisor);
    });
    return {Tensor::point(l.outShape, a.outSpec(0).dtype, std::move(y))};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const Tensor& x = a.tensor(0);
    requireFloating(a, x, "self");
    const PoolLayout l = forwardLayout(a, mPool, mDims, x.shape(), 1);
    const Arith m = arithOf(a, ctx, mPool, mDims, false);
    // Each window through kernels::avgPoolWindow (core/kernels/avg_pool.h): its elements
    // gathered into a row of k (plane offsets, -1 past the window's end), with its divisor, kH
    // and kW; offered to the backend (a device gathers and averages where x is), else here.
    const auto windows = static_cast<std::int64_t>(l.windows.size());
    const std::int64_t k = l.windowSize();
    const std::vector<double> off = l.windowOffsets();
    const std::vector<double> params = windowParams(l);
    const DType t = a.outSpec(0).dtype;
    if (auto r = offerAvgPool(ctx.backend, x, l.planes, l.inPlane(), windows, k, off, params, m,
                              l.outShape, t))
      return {std::move(*r)};
    const std::size_t n = static_cast<std::size_t>(l.planes * windows);
    std::vector<double> lo(n), hi(n), wlo(static_cast<std::size_t>(k)), whi(wlo.size());
    for (std::int64_t pl = 0; pl < l.planes; ++pl)
      for (std::int64_t o = 0; o < windows; ++o) {
        const double* wo = off.data() + o * k;
        windowElements(x, l, pl, wo, k, wlo.data(), whi.data());
        const Interval r =
            kernels::avgPoolWindow(wlo.data(), whi.data(), wo, k, params.data() + 3 * o, m);
        const auto j = static_cast<std::size_t>(pl * windows + o);
        lo[j] = r.lo;
        hi[j] = r.hi;
      }
    return {Tensor::interval(l.outShape, t, std::move(lo), std::move(hi))};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const Tensor& x = a.tensor(0);
    requireFloating(a, x, "self");
    const PoolLayout l = forwardLayout(a, mPool, mDims, x.shape(), 1);
    std::mt19937_64& rng = *ctx.rng;
    const RandomArith r = pickArith(arithOf(a, ctx, mPool, mDims, false), rng);
    std::vector<double> y(static_cast<std::size_t>(l.planes * l.outPlane())), terms;
    forEachWindow(l, [&](std::size_t k, std::int64_t base, const PoolWindow& w) {
      if (w.offsets.empty()) {
        y[k] = 0.0;
        return;
      }
      terms.clear();
      for (std::int64_t off : w.offsets)
        terms.push_back(x.values()[static_cast<std::size_t>(base + off)]);
      double s = randomSum(terms, r.sumIn, rng);
      if (r.sumToStore) s = roundNearest(s, r.store);
      y[k] = roundNearest(randomDivide(s, w, r), r.store);
    });
    return {Tensor::point(l.outShape, a.outSpec(0).dtype, std::move(y))};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    const PoolLayout l = forwardLayout(a, mPool, mDims, x.shape(), 1);
    std::vector<double> gx(static_cast<std::size_t>(x.numel()), 0.0);
    forEachWindow(l, [&](std::size_t k, std::int64_t base, const PoolWindow& w) {
      const double gk = g[0].values()[k] / static_cast<double>(w.divisor);
      for (std::int64_t off : w.offsets) gx[static_cast<std::size_t>(base + off)] += gk;
    });
    return {Tensor::point(x.shape(), x.dtype(), std::move(gx))};
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> outs,
                                 OpContext& ctx) const override {
    return {nn::localErrorFromEnclosure(outs[0], interval(a, ctx)[0])};
  }

  /// Calls f(flat output k, plane base offset, window) for every output element.
  template <class F>
  static void forEachWindow(const PoolLayout& l, F&& f) {
    for (std::int64_t pl = 0; pl < l.planes; ++pl)
      for (std::size_t o = 0; o < l.windows.size(); ++o)
        f(static_cast<std::size_t>(pl * l.outPlane()) + o, pl * l.inPlane(), l.windows[o]);
  }

 private:
  Pool mPool;
  int mDims;
};

/// avg_pool2d_backward, avg_pool3d_backward and _adaptive_avg_pool2d_backward.
class AvgPoolBackwardRule final : public OpRule {
 public:
  AvgPoolBackwardRule(Pool pool, int dims) : mPool(pool), mDims(dims) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const Parts c = parts(a);
    std::vector<double> gx(static_cast<std::size_t>(c.self.numel()), 0.0);
    scatter(c, [&](std::size_t k, std::size_t target, const PoolWindow& w) {
      gx[target] += c.grad.values()[k] / static_cast<double>(w.divisor);
    });
    return {Tensor::point(c.self.shape(), a.outSpec(0).dtype, std::move(gx))};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const Parts c = parts(a);
    const Arith m = arithOf(a, ctx, mPool, mDims, true);
    // Each input through kernels::avgPoolBackwardInput (core/kernels/avg_pool.h): the windows
    // that contain its plane position, in window order (a shape-only list, -1 past the last), and
    // every window's divisor, kH and kW; offered to the backend (a device reads grad where it
    // is), else run here.
    const PoolLayout& l = c.l;
    const auto windows = static_cast<std::int64_t>(l.windows.size());
    std::vector<std::vector<std::int64_t>> of(static_cast<std::size_t>(l.inPlane()));
    for (std::int64_t o = 0; o < windows; ++o)
      for (std::int64_t off : l.windows[static_cast<std::size_t>(o)].offsets)
        of[static_cast<std::size_t>(off)].push_back(o);
    const std::vector<double> params = windowParams(l);
    std::size_t k = 1;
    for (const auto& list : of) k = std::max(k, list.size());
    std::vector<double> wins(of.size() * k, -1.0);
    for (std::size_t q = 0; q < of.size(); ++q)
      for (std::size_t j = 0; j < of[q].size(); ++j)
        wins[q * k + j] = static_cast<double>(of[q][j]);
    const kernels::AvgPoolBackwardShape shape{l.planes, windows, l.inPlane(),
                                              static_cast<std::int64_t>(k)};
    const auto n = static_cast<std::size_t>(c.self.numel());
    std::vector<double> lo(n), hi(n);
    const kernels::ConstIntervalSpan g{c.grad.lo().data(), c.grad.hi().data()};
    if (n == 0 || !ctx.backend.avgPoolBackward(m, shape, g, wins.data(), params.data(),
                                               {lo.data(), hi.data()}))
      for (std::size_t i = 0; i < n; ++i) {
        const Interval r = kernels::avgPoolBackwardInput(g, static_cast<std::int64_t>(i),
                                                         wins.data(), params.data(), shape, m);
        lo[i] = r.lo;
        hi[i] = r.hi;
      }
    return {Tensor::interval(c.self.shape(), a.outSpec(0).dtype, std::move(lo), std::move(hi))};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const Parts c = parts(a);
    std::mt19937_64& rng = *ctx.rng;
    const Arith m = arithOf(a, ctx, mPool, mDims, true);
    const RandomArith r = pickArith(m, rng);
    const auto& ws = c.l.windows;
    if (r.rawSum && !ws.empty() && std::all_of(ws.begin(), ws.end(), [&](const PoolWindow& w) {
          return w.divisor == ws.front().divisor;
        })) {
      // CUDA avg_pool3d's stride-1 backward: Σg in acc (any order), times RN_acc(1/d), stored.
      const double c1 =
          roundNearest(1.0 / roundNearest(static_cast<double>(ws.front().divisor), m.acc), m.acc);
      std::vector<std::vector<double>> raw(static_cast<std::size_t>(c.self.numel()));
      scatter(c, [&](std::size_t k, std::size_t target, const PoolWindow&) {
        raw[target].push_back(c.grad.values()[k]);
      });
      std::vector<double> gx(raw.size(), 0.0);
      for (std::size_t p = 0; p < raw.size(); ++p)
        if (!raw[p].empty())
          gx[p] = roundNearest(roundNearest(randomSum(raw[p], m.acc, rng) * c1, m.acc), r.store);
      return {Tensor::point(c.self.shape(), a.outSpec(0).dtype, std::move(gx))};
    }
    std::vector<double> term(static_cast<std::size_t>(c.grad.numel()));
    AvgPoolRule::forEachWindow(c.l, [&](std::size_t k, std::int64_t, const PoolWindow& w) {
      term[k] = randomDivide(c.grad.values()[k], w, r);
    });
    std::vector<std::vector<double>> terms(static_cast<std::size_t>(c.self.numel()));
    scatter(c, [&](std::size_t k, std::size_t target, const PoolWindow&) {
      terms[target].push_back(term[k]);
    });
    std::vector<double> gx(terms.size(), 0.0);
    for (std::size_t p = 0; p < terms.size(); ++p)
      if (!terms[p].empty()) gx[p] = roundNearest(randomSum(terms[p], r.sumIn, rng), r.store);
    return {Tensor::point(c.self.shape(), a.outSpec(0).dtype, std::move(gx))};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> h, OpContext&) const override {
    const Parts c = parts(a);
    std::vector<double> dg(static_cast<std::size_t>(c.grad.numel()), 0.0);
    scatter(c, [&](std::size_t k, std::size_t target, const PoolWindow& w) {
      dg[k] += h[0].values()[target] / static_cast<double>(w.divisor);
    });
    return {Tensor::point(c.grad.shape(), c.grad.dtype(), std::move(dg)),
            Tensor::full(c.self.shape(), c.self.dtype(), 0.0)};
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> outs,
                                 OpContext& ctx) const override {
    return {nn::localErrorFromEnclosure(outs[0], interval(a, ctx)[0])};
  }

 private:
  struct Parts {
    const Tensor& grad;
    const Tensor& self;
    PoolLayout l;
  };
  Parts parts(const OpArgs& a) const {
    const Tensor& grad = a.tensor(0);
    const Tensor& self = a.tensor(1);
    requireFloating(a, grad, "grad_output");
    PoolLayout l = [&] {
      if (mPool == Pool::Avg) return avgPoolLayout(a, self.shape(), 2, mDims);
      if (grad.rank() < 2) a.fail("grad_output should have H and W dims");
      return adaptivePoolLayout(a, self.shape(), grad.shape()[grad.shape().size() - 2],
                                grad.shape().back());
    }();
    requireOutputShape(a, l, grad.shape());
    return {grad, self, std::move(l)};
  }
  /// Calls f(flat output k, flat input target, window) for every (output, window element).
  template <class F>
  static void scatter(const Parts& c, F&& f) {
    AvgPoolRule::forEachWindow(c.l, [&](std::size_t k, std::int64_t base, const PoolWindow& w) {
      for (std::int64_t off : w.offsets) f(k, static_cast<std::size_t>(base + off), w);
    });
  }

  Pool mPool;
  int mDims;
};

}  // namespace

void registerAvgPoolOps(OpRegistry& r) {
  for (int dims : {2, 3}) {
    const std::string op = "aten.avg_pool" + std::to_string(dims) + "d";
    r.add(op + ".default", std::make_shared<AvgPoolRule>(Pool::Avg, dims));
    r.add(op + "_backward.default", std::make_shared<AvgPoolBackwardRule>(Pool::Avg, dims));
  }
  r.add("aten._adaptive_avg_pool2d.default", std::make_shared<AvgPoolRule>(Pool::Adaptive, 2));
  r.add("aten._adaptive_avg_pool2d_backward.default",
        std::make_shared<AvgPoolBackwardRule>(Pool::Adaptive, 2));
}

}  // namespace lossbound
