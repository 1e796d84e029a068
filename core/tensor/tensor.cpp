#include "core/tensor/tensor.h"

#include <stdexcept>
#include <string>

namespace lossbound {

namespace {
void checkSize(const Shape& shape, std::size_t n) {
  if (static_cast<std::int64_t>(n) != lossbound::numel(shape))
    throw std::invalid_argument("tensor of shape " + shapeString(shape) + " needs " +
                                std::to_string(lossbound::numel(shape)) + " values, got " +
                                std::to_string(n));
}
}  // namespace

Tensor::Tensor() : mShape{0}, mLo(std::make_shared<std::vector<double>>()) {}

Tensor Tensor::point(Shape shape, DType dtype, std::vector<double> values) {
  checkSize(shape, values.size());
  Tensor t;
  t.mShape = std::move(shape);
  t.mDtype = dtype;
  t.mLo = std::make_shared<std::vector<double>>(std::move(values));
  return t;
}

Tensor Tensor::interval(Shape shape, DType dtype, std::vector<double> lo, std::vector<double> hi) {
  checkSize(shape, lo.size());
  checkSize(shape, hi.size());
  for (std::size_t i = 0; i < lo.size(); ++i)
    if (!(lo[i] <= hi[i]))
      throw std::invalid_argument("interval tensor element " + std::to_string(i) +
                                  " has lo > hi or a NaN endpoint");
  Tensor t;
  t.mShape = std::move(shape);
  t.mDtype = dtype;
  t.mLo = std::make_shared<std::vector<double>>(std::move(lo));
  t.mHi = std::make_shared<std::vector<double>>(std::move(hi));
  return t;
}

Tensor Tensor::full(Shape shape, DType dtype, double value) {
  const auto n = static_cast<std::size_t>(lossbound::numel(shape));
  return point(std::move(shape), dtype, std::vector<double>(n, value));
}

Tensor Tensor::scalar(double value, DType dtype) { return point({}, dtype, {value}); }

std::span<double> Tensor::mutableLo() {
  if (mLo.use_count() > 1) mLo = std::make_shared<std::vector<double>>(*mLo);
  return *mLo;
}

std::span<double> Tensor::mutableHi() {
  if (!mHi) throw std::logic_error("mutableHi() on a point tensor");
  if (mHi.use_count() > 1) mHi = std::make_shared<std::vector<double>>(*mHi);
  return *mHi;
}

Tensor Tensor::toInterval() const {
  if (isInterval()) return *this;
  Tensor t = *this;
  t.mHi = std::make_shared<std::vector<double>>(*mLo);
  return t;
}

Tensor Tensor::midpoint() const {
  if (!isInterval()) return *this;
  std::vector<double> m(mLo->size());
  for (std::size_t i = 0; i < m.size(); ++i)
    m[i] = lossbound::midpoint(Interval{(*mLo)[i], (*mHi)[i]});
  return point(mShape, mDtype, std::move(m));
}

Tensor Tensor::withDtype(DType dtype) const {
  Tensor t = *this;
  t.mDtype = dtype;
  return t;
}

Tensor Tensor::reshaped(Shape shape) const {
  if (lossbound::numel(shape) != numel())
    throw std::invalid_argument("cannot reshape " + shapeString(mShape) + " to " +
                                shapeString(shape));
  Tensor t = *this;
  t.mShape = std::move(shape);
  return t;
}

}  // namespace lossbound
