// Prefix sums: cumsum (and cumsum_, which gets a fresh value here like every in-place op).
//
// aten.cumsum(x, dim, dtype): y_i = Σ_{j<=i} x_j along dim. Order model: each prefix is a sum of
// its i + 1 terms in any order and bracketing, every addition correctly rounded in the
// accumulation format acc (fp32 for bf16/fp16, else the storage format F), then rounded to F:
// |fl(y_i) − y_i| <= γ_i Σ_{j<=i}|x_j| (Higham 2002, eq. 4.4 for any summation tree;
// Jeannerod–Rump 2013: i·u suffices). This holds for the sequential scan of PyTorch's CPU kernel
// (which accumulates in at::acc_type: double for float, float for bf16/fp16 — finer than acc, so
// within the same bound) and for the work-efficient parallel scans of the CUDA kernels, whose
// prefixes are sums of disjoint partial sums (each term once). A dtype argument casts x first
// (correctly rounded: enclosed by roundOutward to F). Integer cumsums are exact. The vjp is the
// reversed cumsum of the gradient; the local error is the distance of the binary64 prefix to its
// enclosure on exact inputs.
#include "core/ops/error_bounds.h"
#include "core/ops/families.h"
#include "core/ops/formats.h"
#include "core/ops/index_map.h"
#include "core/ops/nn_support.h"
#include "core/ops/random_arith.h"
#include "core/ops/registry.h"
#include "core/ops/rule_helpers.h"

#include <memory>
#include <vector>

namespace lossbound {

namespace {

using namespace ops;

/// The lines of a scan along one dim: line k starts at offset start[k], elements `stride` apart.
struct ScanLayout {
  std::vector<std::int64_t> start;
  std::int64_t length = 0, stride = 1;
};

ScanLayout scanLayout(const Shape& s, int dim) {
  ScanLayout l;
  if (s.empty()) {
    l.start = {0};
    l.length = 1;
    return l;
  }
  const auto du = static_cast<std::size_t>(dim);
  l.length = s[du];
  l.stride = contiguousStrides(s)[du];
  const std::int64_t outer = numel(Shape(s.begin(), s.begin() + dim));
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t in = 0; in < l.stride; ++in) l.start.push_back(o * l.length * l.stride + in);
  if (l.length == 0) l.start.clear();
  return l;
}

/// cumsum(x, dim, dtype): each prefix under the order-free sum bound (file comment).
class CumsumRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    const ScanLayout l = layout(a);
    std::vector<double> out(static_cast<std::size_t>(x.numel()));
    const auto v = x.values();
    for (std::int64_t s : l.start) {
      double acc = 0.0;
      for (std::int64_t i = 0; i < l.length; ++i) {
        const auto k = static_cast<std::size_t>(s + i * l.stride);
        acc += v[k];
        out[k] = acc;
      }
    }
    return {Tensor::point(x.shape(), a.outSpec().dtype, std::move(out))};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const DType t = a.outSpec().dtype;
    const bool integral = isIntegral(t);
    const Format store = outFormat(a, ctx), acc = accumulationFormat(ctx.precision, t);
    const Tensor x = integral ? a.tensor(0) : roundOutwardTensor(a.tensor(0), store);
    const ScanLayout l = layout(a);
    std::vector<double> lo(static_cast<std::size_t>(x.numel())), hi(lo.size());
    for (std::int64_t s : l.start) {
      SumEnclosure sum{{0.0, 0.0}, 0.0};
      for (std::int64_t i = 0; i < l.length; ++i) {
        const auto k = static_cast<std::size_t>(s + i * l.stride);
        accumulate(sum, sanitize(x.at(static_cast<std::int64_t>(k))));
        const Interval r = integral ? sum.sum
                                    : roundedSumEnclosure(sum, i + 1, acc, store,
                                                          ctx.precision.truncatingAccumulation);
        lo[k] = r.lo;
        hi[k] = r.hi;
      }
    }
    return {Tensor::interval(x.shape(), t, std::move(lo), std::move(hi))};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const DType t = a.outSpec().dtype;
    if (isIntegral(t)) return point(a, ctx);
    std::mt19937_64& rng = *ctx.rng;
    const Format store = outFormat(a, ctx), acc = accumulationFormat(ctx.precision, t);
    const Tensor x = roundNearestTensor(a.tensor(0), store);
    const ScanLayout l = layout(a);
    // sequential scan in acc or in a finer format (the CPU kernel's double for float), or every
    // prefix summed on its own in a random order and bracketing
    const int mode = static_cast<int>(rng() % 3);
    const Format seqFormat = mode == 1 ? Format::Fp64 : acc;
    std::vector<double> out(static_cast<std::size_t>(x.numel())), terms;
    const auto v = x.values();
    for (std::int64_t s : l.start) {
      double run = 0.0;
      for (std::int64_t i = 0; i < l.length; ++i) {
        const auto k = static_cast<std::size_t>(s + i * l.stride);
        if (mode < 2) {
          run = addIn(run, v[k], seqFormat);
          out[k] = roundNearest(run, store);
        } else {
          terms.clear();
          for (std::int64_t j = 0; j <= i; ++j)
            terms.push_back(v[static_cast<std::size_t>(s + j * l.stride)]);
          out[k] = roundNearest(randomSum(terms, acc, rng), store);
        }
      }
    }
    return {Tensor::point(x.shape(), t, std::move(out))};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    if (!isFloating(x.dtype())) return {std::nullopt};
    const ScanLayout l = layout(a);
    std::vector<double> gx(static_cast<std::size_t>(x.numel()));
    const auto gv = g[0].values();
    for (std::int64_t s : l.start) {
      double run = 0.0;
      for (std::int64_t i = l.length - 1; i >= 0; --i) {
        const auto k = static_cast<std::size_t>(s + i * l.stride);
        run += gv[k];
        gx[k] = run;
      }
    }
    return {Tensor::point(x.shape(), x.dtype(), std::move(gx))};
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    if (isIntegral(a.outSpec().dtype)) return zeroLocalError(o);
    return nn::localErrorVia(*this, a, o, ctx);
  }

 private:
  static ScanLayout layout(const OpArgs& a) {
    const Tensor& x = a.tensor(0);
    const std::size_t rank = x.shape().empty() ? 1 : x.shape().size();
    return scanLayout(x.shape(), dimArg(a, 1, "dim", rank));
  }
};

}  // namespace

void registerCumsumOps(OpRegistry& r) {
  const auto cumsum = std::make_shared<const CumsumRule>();
  r.add("aten.cumsum.default", cumsum);
  r.add("aten.cumsum_.default", cumsum);
}

}  // namespace lossbound
