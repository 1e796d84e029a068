#pragma once
// PyTorch broadcasting over point and interval tensors: the broadcast shape, the index map from
// output elements to input offsets, elementwise maps of one to three operands, materializing a
// broadcast, and reducing a gradient back to a broadcast input's shape.

#include "core/interval/interval.h"
#include "core/ops/op_rule.h"
#include "core/tensor/tensor.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace lossbound::ops {

/// Returns the broadcast shape of the given shapes; calls args.fail() when they do not broadcast.
Shape broadcastAll(const OpArgs& args, const std::vector<Shape>& shapes);

/// Maps output flat indices of a broadcast shape to flat offsets in each input (row-major).
class BroadcastIndex {
 public:
  /// Prepares the mapping from `out` (the broadcast shape) to each of `inputs`.
  BroadcastIndex(const Shape& out, const std::vector<Shape>& inputs);
  /// Returns the number of output elements.
  std::int64_t size() const { return mSize; }
  /// Writes the offset of output element i in every input to offsets[0..inputs).
  void offsets(std::int64_t i, std::int64_t* offsets) const;
  /// Returns true when every input has the output shape (offset == i).
  bool trivial() const { return mTrivial; }

  /// Walks the output elements in row-major order, keeping every input's offset: offsets()
  /// without a division per element.
  class Cursor {
   public:
    explicit Cursor(const BroadcastIndex& ix)
        : mIx(ix), mIndex(ix.mOut.size(), 0), mOffsets(ix.mStrides.size(), 0) {}
    /// Returns the offset of the current output element in input k.
    std::int64_t operator[](std::size_t k) const { return mOffsets[k]; }
    /// Moves to the next output element (after the last one the offsets are meaningless).
    void next();

   private:
    const BroadcastIndex& mIx;
    std::vector<std::int64_t> mIndex, mOffsets;
  };

 private:
  Shape mOut;
  std::vector<std::vector<std::int64_t>> mStrides;  // per input, per output dim (0 if broadcast)
  std::int64_t mSize = 0;
  bool mTrivial = true;
};

/// Returns a point tensor of shape broadcast(x) with f(x_i) (f: double → double).
template <typename F>
Tensor mapPoint(const Tensor& x, DType dtype, F&& f) {
  std::vector<double> out(static_cast<std::size_t>(x.numel()));
  const auto v = x.values();
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = f(v[i]);
  return Tensor::point(x.shape(), dtype, std::move(out));
}

/// Returns r with NaN endpoints replaced by the entire line. Unlike sanitize(), an exact ±inf point
/// is kept: in a tensor it is the IEEE value the candidate holds (a -inf attention mask), exact in
/// every format; the scalar core's reading "overflowed past DBL_MAX" would lose that exactness.
inline Interval tensorElement(Interval r) { return hasNan(r) ? entireInterval() : r; }

/// Returns an interval tensor with f(x_i) (f: Interval → Interval).
template <typename F>
Tensor mapInterval(const Tensor& x, DType dtype, F&& f) {
  const auto n = static_cast<std::size_t>(x.numel());
  std::vector<double> lo(n), hi(n);
  for (std::size_t i = 0; i < n; ++i) {
    const Interval r = tensorElement(f(x.at(static_cast<std::int64_t>(i))));
    lo[i] = r.lo;
    hi[i] = r.hi;
  }
  return Tensor::interval(x.shape(), dtype, std::move(lo), std::move(hi));
}

/// Returns a point tensor of the broadcast shape of a, b with f(a_i, b_i); fails on mismatch.
template <typename F>
Tensor mapPoint2(const OpArgs& args, const Tensor& a, const Tensor& b, DType dtype, F&& f) {
  const Shape s = broadcastAll(args, {a.shape(), b.shape()});
  const BroadcastIndex ix(s, {a.shape(), b.shape()});
  std::vector<double> out(static_cast<std::size_t>(ix.size()));
  const auto av = a.values(), bv = b.values();
  BroadcastIndex::Cursor at(ix);
  for (std::int64_t i = 0; i < ix.size(); ++i, at.next())
    out[static_cast<std::size_t>(i)] = f(av[at[0]], bv[at[1]]);
  return Tensor::point(s, dtype, std::move(out));
}

/// Returns an interval tensor of the broadcast shape of a, b with f(a_i, b_i) (Intervals).
template <typename F>
Tensor mapInterval2(const OpArgs& args, const Tensor& a, const Tensor& b, DType dtype, F&& f) {
  const Shape s = broadcastAll(args, {a.shape(), b.shape()});
  const BroadcastIndex ix(s, {a.shape(), b.shape()});
  std::vector<double> lo(static_cast<std::size_t>(ix.size())), hi(lo.size());
  BroadcastIndex::Cursor at(ix);
  for (std::int64_t i = 0; i < ix.size(); ++i, at.next()) {
    const Interval r = tensorElement(f(a.at(at[0]), b.at(at[1])));
    lo[static_cast<std::size_t>(i)] = r.lo;
    hi[static_cast<std::size_t>(i)] = r.hi;
  }
  return Tensor::interval(s, dtype, std::move(lo), std::move(hi));
}

/// Returns a point tensor of the broadcast shape of a, b, c with f(a_i, b_i, c_i).
template <typename F>
Tensor mapPoint3(const OpArgs& args, const Tensor& a, const Tensor& b, const Tensor& c, DType dtype,
                 F&& f) {
  const Shape s = broadcastAll(args, {a.shape(), b.shape(), c.shape()});
  const BroadcastIndex ix(s, {a.shape(), b.shape(), c.shape()});
  std::vector<double> out(static_cast<std::size_t>(ix.size()));
  const auto av = a.values(), bv = b.values(), cv = c.values();
  BroadcastIndex::Cursor at(ix);
  for (std::int64_t i = 0; i < ix.size(); ++i, at.next())
    out[static_cast<std::size_t>(i)] = f(av[at[0]], bv[at[1]], cv[at[2]]);
  return Tensor::point(s, dtype, std::move(out));
}

/// Returns an interval tensor of the broadcast shape of a, b, c with f(a_i, b_i, c_i).
template <typename F>
Tensor mapInterval3(const OpArgs& args, const Tensor& a, const Tensor& b, const Tensor& c,
                    DType dtype, F&& f) {
  const Shape s = broadcastAll(args, {a.shape(), b.shape(), c.shape()});
  const BroadcastIndex ix(s, {a.shape(), b.shape(), c.shape()});
  std::vector<double> lo(static_cast<std::size_t>(ix.size())), hi(lo.size());
  BroadcastIndex::Cursor at(ix);
  for (std::int64_t i = 0; i < ix.size(); ++i, at.next()) {
    const Interval r = tensorElement(f(a.at(at[0]), b.at(at[1]), c.at(at[2])));
    lo[static_cast<std::size_t>(i)] = r.lo;
    hi[static_cast<std::size_t>(i)] = r.hi;
  }
  return Tensor::interval(s, dtype, std::move(lo), std::move(hi));
}

/// Returns x broadcast (materialized) to shape `s`; fails through args when it does not fit.
Tensor broadcastTo(const OpArgs& args, const Tensor& x, const Shape& s);
/// Returns g summed over the dimensions that broadcasting added or expanded to reach g's shape
/// from `s` (the gradient of an input of shape s); point arithmetic.
Tensor sumToShape(const Tensor& g, const Shape& s);

}  // namespace lossbound::ops
