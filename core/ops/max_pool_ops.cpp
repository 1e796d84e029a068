// Max pooling: max_pool2d_with_indices and max_pool3d_with_indices (values, int64 indices) and
// their backward ops (scatter grad_output to the saved indices). A 3-d window is a list of
// offsets in a D×H×W volume (pool_geometry.h), otherwise the same as a 2-d one: what follows
// holds for both.
//
// max_pool2d_with_indices — windows as in pool_geometry.h; the kernels (CPU cpu_max_pool, CUDA
// max_pool_forward_nchw/nhwc) keep the first maximum in scan order (`val > maxval || isnan(val)`)
// and report its offset h·W + w in the plane.
// - Values: a maximum is a selection, exact; the only rounding is the storage of the result
//   (a no-op unless the precision model stores in a narrower format than the input's). Interval:
//   [max of lower ends, max of upper ends] (the tightest enclosure of the max of intervals),
//   rounded outward.
// - Indices: an integer output. Interval: [first, last] offset of the window elements that can be
//   the maximum (upper end ≥ the largest lower end), which contains the index of every kernel
//   whatever it does with ties. For point inputs with a tie the kernels' index is the first; the
//   interval still spans every tied element (an implementation keeping the last is reasonable).
// - vjp: the gradient of each output goes to its point index (PyTorch's backward). The max is
//   1-Lipschitz in the max-norm, so the value is fine to first order away from ties; at a (near)
//   tie x_i ≥ x_j the candidate's inputs x + δ may select j, and the linearization through i misses
//   (|δ_i| + |δ_j| − (x_i − x_j))₊. localError adds that term for |δ_k| ≤ ρ_k, one storage rounding
//   of each input (u_s·|x|·(1 + u_s) + η_s/2): max over j ≠ i of (ρ_i + ρ_j − (x_i − x_j))₊.
//   Rounding every input to nearest alone never needs it (RN is monotone: the max of the stored
//   values is the stored max); it covers tied values stored with independent errors of up to one
//   rounding (different directions, different computations). Larger upstream errors that reorder
//   a window are outside the first-order model.
// - Consequence for the indices: they carry no adjoint and no local error (an integer). Where
//   window values are within rounding of each other the candidate's index may differ from the
//   point index, and max_pool2d_with_indices_backward then routes the whole gradient to another
//   input element: an O(|g|) difference in that gradient tensor that no first-order term covers.
//   The interval method covers it (the index enclosure spans the candidates, and the backward
//   rule scatters hull(0, g) to every offset an index interval allows).
//
// max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation,
// ceil_mode, indices) — grad_input[p] = Σ grad_output[o] over the outputs o whose index is p.
// Overlapping windows (stride < kernel) can send several gradients to one p: their sum runs in any
// order in the accumulation format (CUDA: accscalar_t) or the storage format (CPU: scalar_t
// grad_input +=): |error| ≤ γ_{m−1}(u_s)·Σ|g| for m terms (Higham 2002 eq. 4.4; Jeannerod–Rump
// 2013), then the storage rounding. Interval indices [lo, hi] send hull(0, g) to every offset in
// them. vjp: gather of the adjoint at the indices (grad_output), zero (self), none (indices).
#include "core/kernels/max_pool.h"
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

void requireFloating(const OpArgs& a, const Tensor& t, const char* what) {
  if (!isFloating(t.dtype()))
    a.fail(std::string(what) + " should be a floating tensor, found " +
           std::string(dtypeName(t.dtype())));
}

/// The first maximum of a window in scan order, as the kernels find it.
struct Argmax {
  double value;
  std::int64_t index;
};
Argmax firstMax(std::span<const double> plane, const PoolWindow& w) {
  Argmax m{-kInf, w.start};
  for (std::int64_t off : w.offsets) {
    const double v = plane[static_cast<std::size_t>(off)];
    if (v > m.value || std::isnan(v)) m = {v, off};
  }
  return m;
}

class MaxPoolWithIndicesRule final : public OpRule {
 public:
  /// Takes the pooled dims: 2 (max_pool2d_with_indices) or 3 (max_pool3d_with_indices).
  explicit MaxPoolWithIndicesRule(int dims) : mDims(dims) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    return pointMax(a, nullptr);
  }

  // Each window is kernels::maxPoolWindow (core/kernels/max_pool.h), offered to the backend
  // first: the windows gathered into rows, one body per row, the same bits.
  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const Tensor& x = a.tensor(0);
    requireFloating(a, x, "self");
    const PoolLayout l = maxPoolLayout(a, x.shape(), 1, mDims);
    const Format s = outFormat(a, ctx);
    const std::int64_t windows = l.outPlane(), count = l.planes * windows, k = l.windowSize();
    // The windows' plane offsets in scan order (-1 past a window's end) and starts: shape-only.
    const std::vector<double> off = l.windowOffsets();
    std::vector<double> starts(static_cast<std::size_t>(windows));
    for (std::int64_t o = 0; o < windows; ++o)
      starts[static_cast<std::size_t>(o)] =
          static_cast<double>(l.windows[static_cast<std::size_t>(o)].start);
    if (auto r = offerMaxPool(ctx.backend, x, l.planes, l.inPlane(), windows, k, off, starts, s,
                              l.outShape, a.outSpec(0).dtype))
      return std::move(*r);
    const std::size_t n = static_cast<std::size_t>(count);
    std::vector<double> vlo(n), vhi(n), ilo(n), ihi(n), wlo(static_cast<std::size_t>(k)), whi(wlo);
    for (std::int64_t pl = 0; pl < l.planes; ++pl)
      for (std::int64_t o = 0; o < windows; ++o) {
        const double* wo = off.data() + o * k;
        windowElements(x, l, pl, wo, k, wlo.data(), whi.data());
        Interval v, ix;
        kernels::maxPoolWindow(wlo.data(), whi.data(), wo, k, starts[static_cast<std::size_t>(o)],
                               s, v, ix);
        const auto j = static_cast<std::size_t>(pl * windows + o);
        vlo[j] = v.lo;
        vhi[j] = v.hi;
        ilo[j] = ix.lo;
        ihi[j] = ix.hi;
      }
    return {Tensor::interval(l.outShape, a.outSpec(0).dtype, std::move(vlo), std::move(vhi)),
            Tensor::interval(l.outShape, DType::Int64, std::move(ilo), std::move(ihi))};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const Format s = outFormat(a, ctx);
    return pointMax(a, &s);
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor> outs,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    const PoolLayout l = maxPoolLayout(a, x.shape(), 1, mDims);
    std::vector<double> gx(static_cast<std::size_t>(x.numel()), 0.0);
    for (std::int64_t pl = 0; pl < l.planes; ++pl)
      for (std::int64_t o = 0; o < l.outPlane(); ++o) {
        // A window of padding and dilation holes only (−inf, index past the plane) depends on
        // no input.
        if (l.windows[static_cast<std::size_t>(o)].offsets.empty()) continue;
        const auto k = static_cast<std::size_t>(pl * l.outPlane() + o);
        const auto idx = static_cast<std::int64_t>(outs[1].values()[k]);
        gx[static_cast<std::size_t>(pl * l.inPlane() + idx)] += g[0].values()[k];
      }
    return {Tensor::point(x.shape(), x.dtype(), std::move(gx))};
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> outs,
                                 OpContext& ctx) const override {
    const Tensor& x = a.tensor(0);
    const PoolLayout l = maxPoolLayout(a, x.shape(), 1, mDims);
    const Format s = outFormat(a, ctx), sx = ctx.precision.storageFor(x.dtype());
    std::vector<double> e(static_cast<std::size_t>(outs[0].numel()), 0.0);
    const auto xv = x.values();
    for (std::int64_t pl = 0; pl < l.planes; ++pl) {
      const auto plane = xv.subspan(static_cast<std::size_t>(pl * l.inPlane()),
                                    static_cast<std::size_t>(l.inPlane()));
      for (std::size_t o = 0; o < l.windows.size(); ++o) {
        const auto k = static_cast<std::size_t>(pl * l.outPlane()) + o;
        const double y = outs[0].values()[k];
        if (!std::isfinite(y)) continue;
        // Storage rounding of the selected value.
        double r = roundingExact(y, s);
        // Near ties: another element may be selected once each input moves by its rounding.
        const auto i = static_cast<std::int64_t>(outs[1].values()[k]);
        const double rhoI = roundingError(y, sx, sx);
        double tie = 0.0;
        for (std::int64_t off : l.windows[o].offsets) {
          if (off == i) continue;
          const double xj = plane[static_cast<std::size_t>(off)];
          if (!std::isfinite(xj)) continue;
          const double slack = sub_up(add_up(rhoI, roundingError(xj, sx, sx)), sub_down(y, xj));
          tie = std::fmax(tie, slack);
        }
        e[k] = add_up(r, tie);
      }
    }
    return {Tensor::point(outs[0].shape(), outs[0].dtype(), std::move(e)),
            Tensor::full(outs[1].shape(), outs[1].dtype(), 0.0)};
  }

 private:
  /// Returns |RN_s(y) − y| bounded from above (0 when y is representable in s).
  static double roundingExact(double y, Format s) {
    const double lo = roundToFormat(y, s, RoundingDirection::Down);
    const double hi = roundToFormat(y, s, RoundingDirection::Up);
    return std::fmax(sub_up(hi, y), sub_up(y, lo));
  }

  /// The kernels' values and indices; values rounded to `store` when given (random domain).
  std::vector<Tensor> pointMax(const OpArgs& a, const Format* store) const {
    const Tensor& x = a.tensor(0);
    requireFloating(a, x, "self");
    const PoolLayout l = maxPoolLayout(a, x.shape(), 1, mDims);
    const std::size_t n = static_cast<std::size_t>(l.planes * l.outPlane());
    std::vector<double> v(n), idx(n);
    const auto xv = x.values();
    for (std::int64_t pl = 0; pl < l.planes; ++pl) {
      const auto plane = xv.subspan(static_cast<std::size_t>(pl * l.inPlane()),
                                    static_cast<std::size_t>(l.inPlane()));
      for (std::size_t o = 0; o < l.windows.size(); ++o) {
        const Argmax m = firstMax(plane, l.windows[o]);
        const auto k = static_cast<std::size_t>(pl * l.outPlane()) + o;
        v[k] = store ? roundNearest(m.value, *store) : m.value;
        idx[k] = static_cast<double>(m.index);
      }
    }
    return {Tensor::point(l.outShape, a.outSpec(0).dtype, std::move(v)),
            Tensor::point(l.outShape, DType::Int64, std::move(idx))};
  }

  int mDims;
};

class MaxPoolWithIndicesBackwardRule final : public OpRule {
 public:
  /// Takes the pooled dims: 2 or 3.
  explicit MaxPoolWithIndicesBackwardRule(int dims) : mDims(dims) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const Layout c = layout(a);
    std::vector<double> gx(static_cast<std::size_t>(c.self.numel()), 0.0);
    forEachIndex(a, c,
                 [&](std::size_t k, std::size_t target) { gx[target] += c.grad.values()[k]; });
    return {Tensor::point(c.self.shape(), a.outSpec(0).dtype, std::move(gx))};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const Layout c = layout(a);
    const DType t = a.outSpec(0).dtype;
    // Plane by plane through kernels::maxPoolBackwardPlane (core/kernels/max_pool.h): offered to
    // the backend (a device reads the indices where they are), else here. The sums run in any
    // order in the storage format (CPU) or the accumulation format (CUDA): γ with u_s.
    const kernels::MaxPoolBackwardModel m{outFormat(a, ctx), c.l.outPlane(), c.l.inPlane()};
    const std::size_t n = static_cast<std::size_t>(c.self.numel());
    std::vector<double> lo(n), hi(n);
    const kernels::ConstIntervalSpan gs{c.grad.lo().data(), c.grad.hi().data()};
    const kernels::ConstIntervalSpan is{c.indices.lo().data(), c.indices.hi().data()};
    const kernels::IntervalSpan out{lo.data(), hi.data()};
    if (n == 0 || !ctx.backend.maxPoolBackward(m, gs, is, c.l.planes, out)) {
      std::vector<double> scratch(
          static_cast<std::size_t>(kernels::maxPoolBackwardScratch(m.inPlane)));
      bool ok = true;
      for (std::int64_t pl = 0; pl < c.l.planes; ++pl)
        ok = kernels::maxPoolBackwardPlane(gs, is, pl, m, out, scratch.data()) && ok;
      if (!ok) reportBadIndex(a, c);
    }
    return {Tensor::interval(c.self.shape(), t, std::move(lo), std::move(hi))};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const Layout c = layout(a);
    const DType t = a.outSpec(0).dtype;
    const Format s = outFormat(a, ctx);
    std::mt19937_64& rng = *ctx.rng;
    const Format acc = (rng() & 1) ? s : accumulationFormat(ctx.precision, t);
    std::vector<std::vector<double>> terms(static_cast<std::size_t>(c.self.numel()));
    forEachIndex(a, c, [&](std::size_t k, std::size_t target) {
      terms[target].push_back(c.grad.values()[k]);
    });
    std::vector<double> gx(terms.size(), 0.0);
    for (std::size_t p = 0; p < terms.size(); ++p)
      if (!terms[p].empty()) gx[p] = roundNearest(randomSum(terms[p], acc, rng), s);
    return {Tensor::point(c.self.shape(), t, std::move(gx))};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> h, OpContext&) const override {
    const Layout c = layout(a);
    std::vector<double> dg(static_cast<std::size_t>(c.grad.numel()), 0.0);
    forEachIndex(a, c, [&](std::size_t k, std::size_t target) { dg[k] = h[0].values()[target]; });
    // The result is linear in grad_output; self only gives the shape; indices are integers.
    return {Tensor::point(c.grad.shape(), c.grad.dtype(), std::move(dg)),
            Tensor::full(c.self.shape(), c.self.dtype(), 0.0), std::nullopt};
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> outs,
                                 OpContext& ctx) const override {
    // The enclosure on the exact inputs contains every execution (localErrorVia's argument).
    return {nn::localErrorFromEnclosure(outs[0], interval(a, ctx)[0])};
  }

 private:
  struct Layout {
    const Tensor& grad;
    const Tensor& self;
    const Tensor& indices;
    PoolLayout l;
  };
  Layout layout(const OpArgs& a) const {
    const Tensor& grad = a.tensor(0);
    const Tensor& self = a.tensor(1);
    const Tensor& indices = a.tensor(7);
    requireFloating(a, grad, "grad_output");
    if (isFloating(indices.dtype()))
      a.fail("indices should be an integer tensor, found " +
             std::string(dtypeName(indices.dtype())));
    PoolLayout l = maxPoolLayout(a, self.shape(), 2, mDims);
    requireOutputShape(a, l, grad.shape());
    if (indices.shape() != grad.shape())
      a.fail("indices should have the shape of grad_output " + shapeString(grad.shape()) +
             ", found " + shapeString(indices.shape()));
    return {grad, self, indices, std::move(l)};
  }
  static void checkIndex(const OpArgs& a, double idx, const PoolLayout& l) {
    if (std::isnan(idx))
      a.fail("an index is NaN, expected an offset in the " + l.inPlaneText() + " input plane");
    if (!(idx >= 0 && idx < static_cast<double>(l.inPlane())))
      a.fail("index " +
             (std::isfinite(idx) ? std::to_string(static_cast<long long>(idx))
                                 : std::string(idx > 0 ? "inf" : "-inf")) +
             " is outside the " + l.inPlaneText() + " input plane");
  }
  /// Fails with the first index that is NaN or a point outside the plane.
  static void reportBadIndex(const OpArgs& a, const Layout& c) {
    for (std::int64_t k = 0; k < c.indices.numel(); ++k) {
      const Interval ix = c.indices.at(k);
      if (!(ix.lo <= ix.hi)) checkIndex(a, std::nan(""), c.l);
      if (ix.lo == ix.hi) checkIndex(a, ix.lo, c.l);
    }
  }
  /// Calls f(flat output k, flat input target) for every output with its point index.
  template <class F>
  static void forEachIndex(const OpArgs& a, const Layout& c, F&& f) {
    for (std::int64_t pl = 0; pl < c.l.planes; ++pl)
      for (std::int64_t o = 0; o < c.l.outPlane(); ++o) {
        const auto k = static_cast<std::size_t>(pl * c.l.outPlane() + o);
        const double idx = c.indices.values()[k];
        checkIndex(a, idx, c.l);
        f(k, static_cast<std::size_t>(pl * c.l.inPlane() + static_cast<std::int64_t>(idx)));
      }
  }

  int mDims;
};

}  // namespace

void registerMaxPoolOps(OpRegistry& r) {
  for (int dims : {2, 3}) {
    const std::string name = "aten.max_pool" + std::to_string(dims) + "d_with_indices";
    r.add(name + ".default", std::make_shared<MaxPoolWithIndicesRule>(dims));
    r.add(name + "_backward.default", std::make_shared<MaxPoolWithIndicesBackwardRule>(dims));
  }
}

}  // namespace lossbound
