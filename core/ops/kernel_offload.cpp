#include "core/ops/kernel_offload.h"

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

}  // namespace

std::optional<Tensor> offerUnary(Backend& backend, kernels::UnaryOp op,
                                 const kernels::ElementwiseModel& model, const Tensor& x,
                                 DType dtype) {
  if (!offerable(backend, {&x})) return std::nullopt;
  const auto n = static_cast<std::size_t>(x.numel());
  std::vector<double> lo(n), hi(n);
  if (!backend.unary(op, model, span(x), {lo.data(), hi.data()}, x.numel())) return std::nullopt;
  return Tensor::interval(x.shape(), dtype, std::move(lo), std::move(hi));
}

std::optional<Tensor> offerBinary(Backend& backend, kernels::BinaryOp op,
                                  const kernels::ElementwiseModel& model, const Tensor& x,
                                  const Tensor& y, const Shape& shape, DType dtype) {
  if (x.shape() != shape || !(y.shape() == shape || y.numel() == 1) ||
      !offerable(backend, {&x, &y}))
    return std::nullopt;
  const auto n = static_cast<std::size_t>(x.numel());
  std::vector<double> lo(n), hi(n);
  if (!backend.binary(op, model, span(x), span(y), y.numel(), {lo.data(), hi.data()}, x.numel()))
    return std::nullopt;
  return Tensor::interval(x.shape(), dtype, std::move(lo), std::move(hi));
}

std::optional<Tensor> offerRowSum(Backend& backend, const kernels::SumModel& model,
                                  const Tensor& x, std::int64_t rows, std::int64_t cols,
                                  const Shape& shape, DType dtype) {
  if (rows * cols != x.numel() || !offerable(backend, {&x})) return std::nullopt;
  const auto n = static_cast<std::size_t>(rows);
  std::vector<double> lo(n), hi(n);
  if (!backend.rowSum(span(x), {lo.data(), hi.data()}, rows, cols, model)) return std::nullopt;
  return Tensor::interval(shape, dtype, std::move(lo), std::move(hi));
}

}  // namespace lossbound::ops
