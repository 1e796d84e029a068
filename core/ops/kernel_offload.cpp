#include "core/ops/kernel_offload.h"

#include "core/kernels/nll_loss.h"
#include "core/ops/broadcasting.h"

#include <cmath>
#include <vector>

namespace lossbound::ops {

namespace {

/// True when the backend offers kernels and every endpoint of every tensor is finite.
bool offerable(const Backend& backend, std::initializer_list<const Tensor*> tensors) {
  if (!backend.offersIntervalKernels()) return false;
  for (const Tensor* t : tensors) {
    for (double v : t->lo())
      if (!std::isfinite(v)) return false;
    if (t->isInterval())
      for (double v : t->hi())
        if (!std::isfinite(v)) return false;
  }
  return true;
}

kernels::ConstIntervalSpan span(const Tensor& t) { return {t.lo().data(), t.hi().data()}; }

/// True when `small` broadcast to `shape` only repeats along leading dims: after dropping its
/// leading 1s it equals the trailing dims of `shape` (so element i reads small[i mod numel]).
bool repeatsAlongLeadingDims(const Shape& small, const Shape& shape) {
  std::size_t first = 0;
  while (first < small.size() && small[first] == 1) ++first;
  const std::size_t k = small.size() - first;
  if (k > shape.size()) return false;
  for (std::size_t d = 0; d < k; ++d)
    if (small[first + d] != shape[shape.size() - k + d]) return false;
  return true;
}

/// Returns the interval tensor of a hook's result; a NaN endpoint (which the bodies never give,
/// but a device libm might) becomes the entire line, as ops::tensorElement does on the host.
Tensor resultTensor(const Shape& shape, DType dtype, std::vector<double> lo,
                    std::vector<double> hi) {
  for (std::size_t i = 0; i < lo.size(); ++i)
    if (std::isnan(lo[i]) || std::isnan(hi[i])) {
      lo[i] = -HUGE_VAL;
      hi[i] = HUGE_VAL;
    }
  return Tensor::interval(shape, dtype, std::move(lo), std::move(hi));
}

}  // namespace

namespace {

/// Returns t (one of the operands `index` broadcasts, at position `which`) gathered to the
/// broadcast shape by the backend's gather hook (moving values is exact, so an elementwise body
/// then pairs the very values the host loop pairs), or nothing when the hook declines.
std::optional<Tensor> offerExpanded(Backend& backend, const BroadcastIndex& index, int which,
                                    const Tensor& t, const Shape& shape) {
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(index.size()));
  BroadcastIndex::Cursor at(index);
  for (std::size_t i = 0; i < offsets.size(); ++i, at.next())
    offsets[i] = at[static_cast<std::size_t>(which)];
  return offerGather(backend, t, offsets, shape, t.dtype(), {0.0, 0.0});
}

/// offerBinary for any other broadcast: each operand without the broadcast shape is gathered to
/// it first (offerExpanded), then one elementwise call.
std::optional<Tensor> offerBroadcastBinary(Backend& backend, kernels::BinaryOp op,
                                           const kernels::ElementwiseModel& model, const Tensor& x,
                                           const Tensor& y, const Shape& shape, DType dtype) {
  const std::int64_t n = numel(shape);
  if (n == 0) return std::nullopt;
  const BroadcastIndex index(shape, {x.shape(), y.shape()});
  std::optional<Tensor> gx, gy;
  if (x.shape() != shape && !(gx = offerExpanded(backend, index, 0, x, shape))) return std::nullopt;
  if (y.shape() != shape && !(gy = offerExpanded(backend, index, 1, y, shape))) return std::nullopt;
  const Tensor& a = gx ? *gx : x;
  const Tensor& b = gy ? *gy : y;
  std::vector<double> lo(static_cast<std::size_t>(n)), hi(static_cast<std::size_t>(n));
  if (!backend.binary(op, model, span(a), span(b), n, {lo.data(), hi.data()}, n))
    return std::nullopt;
  return resultTensor(shape, dtype, std::move(lo), std::move(hi));
}

}  // namespace

std::optional<Tensor> offerUnary(Backend& backend, kernels::UnaryOp op,
                                 const kernels::ElementwiseModel& model, const Tensor& x,
                                 DType dtype) {
  if (!offerable(backend, {&x})) return std::nullopt;
  const auto n = static_cast<std::size_t>(x.numel());
  std::vector<double> lo(n), hi(n);
  if (!backend.unary(op, model, span(x), {lo.data(), hi.data()}, x.numel())) return std::nullopt;
  return resultTensor(x.shape(), dtype, std::move(lo), std::move(hi));
}

std::optional<Tensor> offerBinary(Backend& backend, kernels::BinaryOp op,
                                  const kernels::ElementwiseModel& model, const Tensor& x,
                                  const Tensor& y, const Shape& shape, DType dtype) {
  using kernels::BinaryOp;
  const bool commutative =
      op == BinaryOp::Add || op == BinaryOp::Mul || op == BinaryOp::Eq || op == BinaryOp::Ne;
  const bool swap = x.shape() != shape && commutative;
  const Tensor& full = swap ? y : x;
  const Tensor& other = swap ? x : y;
  if (other.numel() == 0 || !offerable(backend, {&x, &y})) return std::nullopt;
  if (full.shape() != shape || !repeatsAlongLeadingDims(other.shape(), shape))
    return offerBroadcastBinary(backend, op, model, x, y, shape, dtype);
  const auto n = static_cast<std::size_t>(full.numel());
  std::vector<double> lo(n), hi(n);
  if (!backend.binary(op, model, span(full), span(other), other.numel(), {lo.data(), hi.data()},
                      full.numel()))
    return std::nullopt;
  return resultTensor(shape, dtype, std::move(lo), std::move(hi));
}

std::optional<Tensor> offerSelect(Backend& backend, const kernels::ElementwiseModel& model,
                                  const Tensor& cond, const Tensor& a, const Tensor& b,
                                  const Shape& shape, DType dtype) {
  if (!backend.offersIntervalKernels()) return std::nullopt;
  const auto n = static_cast<std::size_t>(numel(shape));
  if (n == 0) return std::nullopt;
  // An operand that does not repeat along leading dims is gathered to the full shape first.
  const Tensor* in[3] = {&cond, &a, &b};
  std::optional<Tensor> expanded[3];
  std::optional<BroadcastIndex> index;
  for (int k = 0; k < 3; ++k) {
    if (in[k]->numel() == 0) return std::nullopt;
    if (repeatsAlongLeadingDims(in[k]->shape(), shape)) continue;
    if (!index) index.emplace(shape, std::vector<Shape>{cond.shape(), a.shape(), b.shape()});
    if (!(expanded[k] = offerExpanded(backend, *index, k, *in[k], shape))) return std::nullopt;
    in[k] = &*expanded[k];
  }
  std::vector<double> lo(n), hi(n);
  if (!backend.select(model, span(*in[0]), in[0]->numel(), span(*in[1]), in[1]->numel(),
                      span(*in[2]), in[2]->numel(), {lo.data(), hi.data()}, numel(shape)))
    return std::nullopt;
  return resultTensor(shape, dtype, std::move(lo), std::move(hi));
}

std::optional<Tensor> offerTakeRows(Backend& backend, const kernels::ElementwiseModel& model,
                                    const Tensor& table, const Tensor& index, const Shape& shape,
                                    DType dtype, bool keepPoint) {
  if (!offerable(backend, {&table}) || table.rank() < 1 || table.shape()[0] == 0 ||
      index.numel() == 0)
    return std::nullopt;
  const auto n = static_cast<std::size_t>(numel(shape));
  // A point result is one array written as both endpoints (a point table's rows, exact).
  const bool point = keepPoint && !table.isInterval();
  std::vector<double> lo(n), hi(point ? 0 : n);
  const std::int64_t rows = table.shape()[0];
  // The index values are the lower endpoints, as the host rule reads them (integers are exact).
  if (!backend.takeRows(model, span(table), rows, table.numel() / rows, index.values().data(),
                        index.numel(), {lo.data(), point ? lo.data() : hi.data()}))
    return std::nullopt;
  if (point) return Tensor::point(shape, dtype, std::move(lo));
  return Tensor::interval(shape, dtype, std::move(lo), std::move(hi));
}

std::optional<std::vector<Tensor>> offerNllLoss(Backend& backend,
                                                const kernels::NllLossModel& model, const Tensor& x,
                                                const Tensor& target, const Tensor* weight,
                                                std::int64_t batch, const Shape& outShape, DType t0,
                                                DType t1) {
  if (!offerable(backend, {&x}) || (weight && !offerable(backend, {weight})) || target.numel() == 0)
    return std::nullopt;
  const std::size_t n = model.reduction == 0 ? static_cast<std::size_t>(numel(outShape)) : 1;
  std::vector<double> lo(n), hi(n), twLo(1), twHi(1);
  if (!backend.nllLoss(model, span(x), target.values().data(),
                       weight ? span(*weight) : kernels::ConstIntervalSpan{}, batch,
                       {lo.data(), hi.data()}, {twLo.data(), twHi.data()}))
    return std::nullopt;
  std::vector<Tensor> r;
  r.push_back(
      resultTensor(model.reduction == 0 ? outShape : Shape{}, t0, std::move(lo), std::move(hi)));
  r.push_back(resultTensor({}, t1, std::move(twLo), std::move(twHi)));
  return r;
}

std::optional<Tensor> offerNllLossBackward(Backend& backend, const kernels::NllLossModel& model,
                                           const Tensor& g, const Tensor& target,
                                           const Tensor* weight, const Tensor& tw,
                                           std::int64_t batch, const Shape& shape, DType dtype) {
  if (!offerable(backend, {&g, &tw}) || (weight && !offerable(backend, {weight})) ||
      target.numel() == 0 || tw.numel() != 1)
    return std::nullopt;
  const auto n = static_cast<std::size_t>(numel(shape));
  std::vector<double> lo(n), hi(n);
  if (!backend.nllLossBackward(model, span(g), target.values().data(),
                               weight ? span(*weight) : kernels::ConstIntervalSpan{}, span(tw),
                               batch, {lo.data(), hi.data()}))
    return std::nullopt;
  return resultTensor(shape, dtype, std::move(lo), std::move(hi));
}

namespace {

/// Gathers every plane's pooling windows of x into rows of k (offsets: windows·k plane offsets,
/// -1 past a window's end, which reads 0): planes·windows rows; nothing when the backend declines
/// or x is not offerable.
std::optional<Tensor> offerWindowRows(Backend& backend, const Tensor& x, std::int64_t planes,
                                      std::int64_t inPlane, std::int64_t windows, std::int64_t k,
                                      const std::vector<double>& offsets) {
  const std::int64_t count = planes * windows;
  if (k == 0 || count == 0 || !offerable(backend, {&x})) return std::nullopt;
  std::vector<std::int64_t> map(static_cast<std::size_t>(count * k), -1);
  for (std::int64_t pl = 0; pl < planes; ++pl)
    for (std::int64_t o = 0; o < windows; ++o)
      for (std::int64_t i = 0; i < k; ++i) {
        const double off = offsets[static_cast<std::size_t>(o * k + i)];
        if (off >= 0.0)
          map[static_cast<std::size_t>((pl * windows + o) * k + i)] =
              pl * inPlane + static_cast<std::int64_t>(off);
      }
  return offerGather(backend, x, map, {count, k}, x.dtype(), {0.0, 0.0});
}

}  // namespace

std::optional<std::vector<Tensor>> offerMaxPool(Backend& backend, const Tensor& x,
                                                std::int64_t planes, std::int64_t inPlane,
                                                std::int64_t windows, std::int64_t k,
                                                const std::vector<double>& offsets,
                                                const std::vector<double>& starts, Format s,
                                                const Shape& shape, DType dtype) {
  const std::int64_t count = planes * windows;
  const auto rows = offerWindowRows(backend, x, planes, inPlane, windows, k, offsets);
  if (!rows) return std::nullopt;
  const auto n = static_cast<std::size_t>(count);
  std::vector<double> vlo(n), vhi(n), ilo(n), ihi(n);
  if (!backend.maxPoolRows(span(*rows), offsets.data(), starts.data(), count, windows, k, s,
                           {vlo.data(), vhi.data()}, {ilo.data(), ihi.data()}))
    return std::nullopt;
  std::vector<Tensor> r;
  r.push_back(resultTensor(shape, dtype, std::move(vlo), std::move(vhi)));
  r.push_back(Tensor::interval(shape, DType::Int64, std::move(ilo), std::move(ihi)));
  return r;
}

std::optional<Tensor> offerAvgPool(Backend& backend, const Tensor& x, std::int64_t planes,
                                   std::int64_t inPlane, std::int64_t windows, std::int64_t k,
                                   const std::vector<double>& offsets,
                                   const std::vector<double>& params,
                                   const kernels::AvgPoolModel& model, const Shape& shape,
                                   DType dtype) {
  const std::int64_t count = planes * windows;
  const auto rows = offerWindowRows(backend, x, planes, inPlane, windows, k, offsets);
  if (!rows) return std::nullopt;
  std::vector<double> lo(static_cast<std::size_t>(count)), hi(lo.size());
  if (!backend.avgPoolRows(span(*rows), offsets.data(), params.data(), count, windows, k, model,
                           {lo.data(), hi.data()}))
    return std::nullopt;
  return resultTensor(shape, dtype, std::move(lo), std::move(hi));
}

namespace {

/// offerGather with `fill` of 1 or n elements (fillPoint: its hi is its lo).
std::optional<Tensor> offerGatherFill(Backend& backend, const Tensor& x,
                                      const std::vector<std::int64_t>& offsets, const Shape& shape,
                                      DType dtype, kernels::ConstIntervalSpan fill,
                                      std::int64_t fillCount, bool fillPoint) {
  if (!backend.offersIntervalKernels() || offsets.empty()) return std::nullopt;
  std::vector<double> index(offsets.size());
  for (std::size_t i = 0; i < offsets.size(); ++i) index[i] = static_cast<double>(offsets[i]);
  const bool point = !x.isInterval() && fillPoint;
  const auto n = static_cast<std::int64_t>(offsets.size());
  std::vector<double> lo(offsets.size()), hi(point ? 0 : offsets.size());
  const kernels::IntervalSpan out{lo.data(), point ? lo.data() : hi.data()};
  if (!backend.gather(span(x), x.numel(), index.data(), fill, fillCount, out, n))
    return std::nullopt;
  if (point) return Tensor::point(shape, dtype, std::move(lo));
  return Tensor::interval(shape, dtype, std::move(lo), std::move(hi));
}

}  // namespace

std::optional<Tensor> offerGatherOver(Backend& backend, const Tensor& x,
                                      const std::vector<std::int64_t>& offsets, const Tensor& base,
                                      DType dtype) {
  if (base.numel() != static_cast<std::int64_t>(offsets.size())) return std::nullopt;
  return offerGatherFill(backend, x, offsets, base.shape(), dtype, span(base), base.numel(),
                         !base.isInterval());
}

std::optional<Tensor> offerGather(Backend& backend, const Tensor& x,
                                  const std::vector<std::int64_t>& offsets, const Shape& shape,
                                  DType dtype, Interval fill) {
  return offerGatherFill(backend, x, offsets, shape, dtype, {&fill.lo, &fill.hi}, 1,
                         fill.lo == fill.hi);
}

std::optional<Tensor> offerRowSum(Backend& backend, const kernels::SumModel& model, const Tensor& x,
                                  std::int64_t rows, std::int64_t cols, const Shape& shape,
                                  DType dtype) {
  if (rows * cols != x.numel() || !offerable(backend, {&x})) return std::nullopt;
  const auto n = static_cast<std::size_t>(rows);
  std::vector<double> lo(n), hi(n);
  if (!backend.rowSum(span(x), {lo.data(), hi.data()}, rows, cols, model)) return std::nullopt;
  return resultTensor(shape, dtype, std::move(lo), std::move(hi));
}

namespace {

/// True when the reduced elements of output i are x[i·n, (i+1)·n): rows of a rows×n matrix.
bool rowsAreContiguous(const ReductionLayout& l, std::int64_t n) {
  for (std::int64_t j = 0; j < n; ++j)
    if (l.inner[static_cast<std::size_t>(j)] != j) return false;
  for (std::size_t i = 0; i < l.outer.size(); ++i)
    if (l.outer[i] != static_cast<std::int64_t>(i) * n) return false;
  return true;
}

}  // namespace

std::optional<Tensor> offerReduction(Backend& backend, const kernels::SumModel& model,
                                     const Tensor& x, const ReductionLayout& l, const Shape& shape,
                                     DType dtype) {
  const auto n = static_cast<std::int64_t>(l.inner.size());
  const auto rows = static_cast<std::int64_t>(l.outer.size());
  if (n == 0 || !backend.offersIntervalKernels()) return std::nullopt;
  if (rowsAreContiguous(l, n)) return offerRowSum(backend, model, x, rows, n, shape, dtype);
  // Reduced dims that are not the trailing ones (a bias gradient: a sum over the batch).
  std::vector<std::int64_t> offsets;
  offsets.reserve(static_cast<std::size_t>(rows * n));
  for (std::int64_t o : l.outer)
    for (std::int64_t off : l.inner) offsets.push_back(o + off);
  if (auto g = offerGather(backend, x, offsets, {rows, n}, x.dtype(), {0.0, 0.0}))
    return offerRowSum(backend, model, *g, rows, n, shape, dtype);
  return std::nullopt;
}

}  // namespace lossbound::ops
