// Scatters in every domain (scatter_writes.h): overwrite with unspecified winners, accumulation
// under the order-free sum bound (Higham 2002, eq. 4.4).
#include "core/ops/scatter_writes.h"

#include "core/ops/error_bounds.h"
#include "core/ops/formats.h"
#include "core/ops/kernel_offload.h"
#include "core/ops/random_arith.h"

#include <algorithm>

namespace lossbound::ops {

namespace {

/// The writes grouped by target: order[k] indexes writes, targets ascending, write order kept.
std::vector<std::size_t> byTarget(std::span<const ScatterWrite> writes) {
  std::vector<std::size_t> order(writes.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t l, std::size_t r) {
    return writes[l].target < writes[r].target;
  });
  return order;
}

}  // namespace

Tensor scatterPoint(const Tensor& base, const Tensor& src, std::span<const ScatterWrite> writes,
                    ScatterMode mode, DType dtype) {
  std::vector<double> out(base.values().begin(), base.values().end());
  const auto sv = src.values();
  for (const ScatterWrite& w : writes) {
    const auto t = static_cast<std::size_t>(w.target);
    const double v = sv[static_cast<std::size_t>(w.source)];
    out[t] = mode == ScatterMode::Accumulate ? out[t] + v : v;
  }
  return Tensor::point(base.shape(), dtype, std::move(out));
}

Tensor scatterInterval(const Tensor& base, const Tensor& src, std::span<const ScatterWrite> writes,
                       ScatterMode mode, DType dtype, Format store, bool integral) {
  std::vector<double> lo(base.lo().begin(), base.lo().end());
  std::vector<double> hi(base.hi().begin(), base.hi().end());
  const std::vector<std::size_t> order = byTarget(writes);
  for (std::size_t k = 0; k < order.size();) {
    const auto target = writes[order[k]].target;
    std::size_t end = k;
    while (end < order.size() && writes[order[end]].target == target) ++end;
    const auto t = static_cast<std::size_t>(target);
    Interval r = emptyInterval();
    if (mode == ScatterMode::Overwrite) {
      for (std::size_t j = k; j < end; ++j) r = hull(r, src.at(writes[order[j]].source));
    } else {
      // A base element of exactly 0 adds no rounding in any order (x + 0 = x): k terms, not 1 + k.
      SumEnclosure s{{0.0, 0.0}, 0.0};
      const Interval b = base.at(target);
      const bool zeroBase = b.lo == 0.0 && b.hi == 0.0;
      if (!zeroBase) accumulate(s, sanitize(b));
      for (std::size_t j = k; j < end; ++j)
        accumulate(s, sanitize(src.at(writes[order[j]].source)));
      const auto n = static_cast<std::int64_t>(end - k + (zeroBase ? 0 : 1));
      r = integral ? s.sum : roundedSumEnclosure(s, n, store, store);
    }
    lo[t] = r.lo;
    hi[t] = r.hi;
    k = end;
  }
  return Tensor::interval(base.shape(), dtype, std::move(lo), std::move(hi));
}

std::optional<Tensor> offerScatterSum(Backend& backend, const Shape& shape, const Tensor& src,
                                      std::span<const ScatterWrite> writes, DType dtype,
                                      Format store, bool integral) {
  const std::int64_t targets = numel(shape);
  if (targets == 0 || !backend.offersIntervalKernels() ||
      writes.size() % static_cast<std::size_t>(targets) != 0)
    return std::nullopt;
  const auto k = static_cast<std::int64_t>(writes.size()) / targets;
  if (k == 0) return std::nullopt;
  const std::vector<std::size_t> order = byTarget(writes);
  std::vector<std::int64_t> offsets;
  offsets.reserve(static_cast<std::size_t>(targets * k));
  for (std::int64_t t = 0; t < targets; ++t) {
    for (std::int64_t j = 0; j < k; ++j) {
      const ScatterWrite& w = writes[order[static_cast<std::size_t>(t * k + j)]];
      if (w.target != t) return std::nullopt;  // another count per target
      offsets.push_back(w.source);
    }
  }
  const auto rows = offerGather(backend, src, offsets, {targets, k}, src.dtype(), {0.0, 0.0});
  if (!rows) return std::nullopt;
  kernels::SumModel m;
  m.accumulation = store;
  m.storage = store;
  m.exact = integral;
  return offerRowSum(backend, m, *rows, targets, k, shape, dtype);
}

Tensor scatterRandom(const Tensor& base, const Tensor& src, std::span<const ScatterWrite> writes,
                     ScatterMode mode, DType dtype, Format store, Format finer, bool integral,
                     std::mt19937_64& rng) {
  std::vector<double> out(base.values().begin(), base.values().end());
  const auto sv = src.values();
  const std::vector<std::size_t> order = byTarget(writes);
  const Format acc = (rng() & 1) ? finer : store;
  std::vector<double> terms;
  for (std::size_t k = 0; k < order.size();) {
    const auto target = writes[order[k]].target;
    std::size_t end = k;
    while (end < order.size() && writes[order[end]].target == target) ++end;
    const auto t = static_cast<std::size_t>(target);
    if (mode == ScatterMode::Overwrite) {
      const std::size_t pick = k + static_cast<std::size_t>(rng() % (end - k));
      out[t] = sv[static_cast<std::size_t>(writes[order[pick]].source)];
    } else {
      terms.assign(1, out[t]);
      for (std::size_t j = k; j < end; ++j)
        terms.push_back(sv[static_cast<std::size_t>(writes[order[j]].source)]);
      if (integral) {
        double s = 0.0;
        for (double e : terms) s += e;
        out[t] = s;
      } else {
        out[t] = roundNearest(randomSum(terms, acc, rng), store);
      }
    }
    k = end;
  }
  return Tensor::point(base.shape(), dtype, std::move(out));
}

std::pair<Tensor, Tensor> scatterVjp(const Tensor& g, const Shape& baseShape, DType baseDtype,
                                     const Shape& srcShape, DType srcDtype,
                                     std::span<const ScatterWrite> writes, ScatterMode mode) {
  const auto gv = g.values();
  std::vector<double> gb(gv.begin(), gv.end());
  std::vector<double> gs(static_cast<std::size_t>(numel(srcShape)), 0.0);
  if (mode == ScatterMode::Accumulate) {
    for (const ScatterWrite& w : writes)
      gs[static_cast<std::size_t>(w.source)] += gv[static_cast<std::size_t>(w.target)];
  } else {
    // the last write to a target is the one scatterPoint keeps
    std::vector<std::int64_t> winner(gb.size(), -1);
    for (std::size_t k = 0; k < writes.size(); ++k)
      winner[static_cast<std::size_t>(writes[k].target)] = static_cast<std::int64_t>(k);
    for (std::size_t t = 0; t < winner.size(); ++t) {
      if (winner[t] < 0) continue;
      gs[static_cast<std::size_t>(writes[static_cast<std::size_t>(winner[t])].source)] += gv[t];
      gb[t] = 0.0;
    }
  }
  return {Tensor::point(baseShape, baseDtype, std::move(gb)),
          Tensor::point(srcShape, srcDtype, std::move(gs))};
}

}  // namespace lossbound::ops
