#pragma once
// Dense tensors of binary64 values, row-major and contiguous. A tensor is either a *point* tensor
// (one value per element) or an *interval* tensor (lo and hi per element; endpoints stored as two
// arrays). Integer and bool tensors use the same storage (exact for |v| < 2^53); their dtype says
// what the candidate stores. Copies share storage; writing through a mutable accessor copies
// first (copy on write), so a Tensor behaves as a value.

#include "core/interval/interval.h"
#include "core/tensor/dtype.h"
#include "core/tensor/shape.h"

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace lossbound {

/// A dense point or interval tensor with binary64 storage.
class Tensor {
 public:
  /// Creates an empty 0-element float32 point tensor of shape [0].
  Tensor();

  /// Returns a point tensor; throws std::invalid_argument if values.size() != numel(shape).
  static Tensor point(Shape shape, DType dtype, std::vector<double> values);
  /// Returns an interval tensor; throws std::invalid_argument on size mismatch or lo > hi.
  static Tensor interval(Shape shape, DType dtype, std::vector<double> lo, std::vector<double> hi);
  /// Returns a point tensor filled with `value`.
  static Tensor full(Shape shape, DType dtype, double value);
  /// Returns a 0-d point tensor.
  static Tensor scalar(double value, DType dtype = DType::Float64);

  /// Returns the shape.
  const Shape& shape() const { return mShape; }
  /// Returns the dtype.
  DType dtype() const { return mDtype; }
  /// Returns the number of elements.
  std::int64_t numel() const { return static_cast<std::int64_t>(mLo->size()); }
  /// Returns the rank (0 for a scalar).
  int rank() const { return static_cast<int>(mShape.size()); }
  /// Returns true for an interval tensor.
  bool isInterval() const { return static_cast<bool>(mHi); }

  /// Returns the values of a point tensor (the lower endpoints of an interval tensor).
  std::span<const double> values() const { return *mLo; }
  /// Returns the lower endpoints (the values of a point tensor).
  std::span<const double> lo() const { return *mLo; }
  /// Returns the upper endpoints (the values of a point tensor).
  std::span<const double> hi() const { return mHi ? std::span<const double>(*mHi) : *mLo; }
  /// Returns element i (flat, row-major) as an interval (degenerate for point tensors).
  Interval at(std::int64_t i) const { return {(*mLo)[i], mHi ? (*mHi)[i] : (*mLo)[i]}; }

  /// Returns writable values / lower endpoints (copies shared storage first).
  std::span<double> mutableLo();
  /// Returns writable upper endpoints; the tensor must be an interval tensor.
  std::span<double> mutableHi();

  /// Returns this tensor as an interval tensor (degenerate intervals for a point tensor).
  Tensor toInterval() const;
  /// Returns the point tensor of midpoints (the values themselves for a point tensor).
  Tensor midpoint() const;
  /// Returns the same data with another dtype label (no rounding is applied).
  Tensor withDtype(DType dtype) const;
  /// Returns the same data with another shape of equal numel; throws std::invalid_argument.
  Tensor reshaped(Shape shape) const;

 private:
  Shape mShape;
  DType mDtype = DType::Float32;
  std::shared_ptr<std::vector<double>> mLo;
  std::shared_ptr<std::vector<double>> mHi;  // null for point tensors
};

}  // namespace lossbound
