// Index maps of value-moving ops and the argument readers they share (index_map.h).
#include "core/ops/index_map.h"

#include "core/ops/kernel_offload.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

namespace lossbound::ops {

IndexMap stridedMap(const Shape& sizes, const std::vector<std::int64_t>& strides,
                    std::int64_t base) {
  IndexMap m{sizes, std::vector<std::int64_t>(static_cast<std::size_t>(numel(sizes)))};
  for (std::size_t i = 0; i < m.offsets.size(); ++i) {
    std::int64_t rem = static_cast<std::int64_t>(i), off = base;
    for (int d = static_cast<int>(sizes.size()) - 1; d >= 0; --d) {
      const auto du = static_cast<std::size_t>(d);
      off += (rem % sizes[du]) * strides[du];
      rem /= sizes[du];
    }
    m.offsets[i] = off;
  }
  return m;
}

IndexMap identityMap(const Shape& s) {
  IndexMap m{s, std::vector<std::int64_t>(static_cast<std::size_t>(numel(s)))};
  std::iota(m.offsets.begin(), m.offsets.end(), std::int64_t{0});
  return m;
}

Tensor applyIndexMap(const Tensor& x, const IndexMap& m, DType dtype, Interval fill) {
  std::vector<double> lo(m.offsets.size(), fill.lo), hi;
  for (std::size_t i = 0; i < lo.size(); ++i)
    if (m.offsets[i] >= 0) lo[i] = x.lo()[static_cast<std::size_t>(m.offsets[i])];
  if (!x.isInterval() && fill.lo == fill.hi) return Tensor::point(m.shape, dtype, std::move(lo));
  hi.assign(lo.size(), fill.hi);
  for (std::size_t i = 0; i < hi.size(); ++i)
    if (m.offsets[i] >= 0) hi[i] = x.hi()[static_cast<std::size_t>(m.offsets[i])];
  return Tensor::interval(m.shape, dtype, std::move(lo), std::move(hi));
}

Tensor gatherVia(Backend& backend, const Tensor& x, const IndexMap& m, DType dtype, Interval fill) {
  if (auto r = offerGather(backend, x, m.offsets, m.shape, dtype, fill)) return std::move(*r);
  return applyIndexMap(x, m, dtype, fill);
}

Tensor scatterAddThrough(const Tensor& grad, const IndexMap& m, const Shape& in, DType dtype) {
  std::vector<double> out(static_cast<std::size_t>(numel(in)), 0.0);
  for (std::size_t i = 0; i < m.offsets.size(); ++i)
    if (m.offsets[i] >= 0) out[static_cast<std::size_t>(m.offsets[i])] += grad.values()[i];
  return Tensor::point(in, dtype, std::move(out));
}

int dimArg(const OpArgs& a, std::size_t i, std::string_view name, std::size_t rank,
           std::optional<std::int64_t> fallback) {
  try {
    return normalizeDim(a.intArg(i, name, fallback), rank);
  } catch (const std::out_of_range& e) {
    a.fail(e.what());
  }
}

SliceBounds sliceBounds(const OpArgs& a, std::size_t startIdx, std::int64_t extent) {
  const std::int64_t step = a.intArg(startIdx + 2, "step", 1);
  if (step <= 0) a.fail("slice step must be positive");
  auto clampIndex = [extent](std::int64_t v) {
    if (v < 0) v += extent;
    return std::clamp<std::int64_t>(v, 0, extent);
  };
  const std::int64_t start = clampIndex(a.intArg(startIdx, "start", 0));
  const std::int64_t end =
      clampIndex(a.intArg(startIdx + 1, "end", std::numeric_limits<std::int64_t>::max()));
  const std::int64_t len = end > start ? (end - start + step - 1) / step : 0;
  return {start, len, step};
}

IndexMap sliceMap(const Shape& s, int dim, const SliceBounds& b) {
  const auto st = contiguousStrides(s);
  Shape out = s;
  std::vector<std::int64_t> strides = st;
  out[static_cast<std::size_t>(dim)] = b.len;
  strides[static_cast<std::size_t>(dim)] = st[static_cast<std::size_t>(dim)] * b.step;
  return stridedMap(out, strides, b.start * st[static_cast<std::size_t>(dim)]);
}

IndexMap selectMap(const OpArgs& a, const Shape& s, std::size_t dimIdx) {
  if (s.empty()) a.fail("select() of a 0-d tensor");
  const int dim = dimArg(a, dimIdx, "dim", s.size());
  std::int64_t index = a.intArg(dimIdx + 1, "index");
  const std::int64_t extent = s[static_cast<std::size_t>(dim)];
  if (index < -extent || index >= extent)
    a.fail("select: index " + std::to_string(index) + " out of range for dimension of size " +
           std::to_string(extent));
  if (index < 0) index += extent;
  const auto st = contiguousStrides(s);
  Shape out = s;
  std::vector<std::int64_t> strides = st;
  out.erase(out.begin() + dim);
  strides.erase(strides.begin() + dim);
  return stridedMap(out, strides, index * st[static_cast<std::size_t>(dim)]);
}

std::vector<std::int64_t> exactIndices(const OpArgs& a, const Tensor& t, std::string_view what) {
  if (isFloating(t.dtype()))
    a.fail(std::string(what) + " must be an integer or bool tensor, found " +
           std::string(dtypeName(t.dtype())));
  std::vector<std::int64_t> out(static_cast<std::size_t>(t.numel()));
  const auto lo = t.lo(), hi = t.hi();
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (lo[i] != hi[i] || !std::isfinite(lo[i]))
      a.fail(std::string(what) + " element " + std::to_string(i) + " is not exactly known ([" +
             std::to_string(lo[i]) + ", " + std::to_string(hi[i]) +
             "]: it depends on rounded values, or on an order of equal values the kernels leave "
             "open); this op needs exact indices");
    out[i] = static_cast<std::int64_t>(lo[i]);
  }
  return out;
}

}  // namespace lossbound::ops
