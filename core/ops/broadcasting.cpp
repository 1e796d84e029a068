// PyTorch broadcasting: index maps, materialized broadcasts, gradient reduction to a shape.
#include "core/ops/broadcasting.h"

#include <stdexcept>
#include <string>

namespace lossbound::ops {

Shape broadcastAll(const OpArgs& args, const std::vector<Shape>& shapes) {
  Shape s;
  bool first = true;
  for (const Shape& x : shapes) {
    if (first) {
      s = x;
      first = false;
      continue;
    }
    const auto b = broadcastShapes(s, x);
    if (!b) args.fail("shapes " + shapeString(s) + " and " + shapeString(x) + " do not broadcast");
    s = *b;
  }
  return s;
}

BroadcastIndex::BroadcastIndex(const Shape& out, const std::vector<Shape>& inputs)
    : mOut(out), mSize(numel(out)) {
  const std::size_t r = out.size();
  for (const Shape& in : inputs) {
    if (in.size() > r)  // a caller's bug: no input outranks the broadcast shape
      throw std::invalid_argument("cannot broadcast shape " + shapeString(in) + " to " +
                                  shapeString(out));
    std::vector<std::int64_t> st(r, 0);
    const auto cs = contiguousStrides(in);
    const std::size_t lead = r - in.size();
    for (std::size_t d = 0; d < in.size(); ++d)
      st[lead + d] = (in[d] == 1 && out[lead + d] != 1) ? 0 : cs[d];
    if (in != out) mTrivial = false;
    mStrides.push_back(std::move(st));
  }
}

void BroadcastIndex::offsets(std::int64_t i, std::int64_t* offsets) const {
  const std::size_t nIn = mStrides.size();
  if (mTrivial) {
    for (std::size_t k = 0; k < nIn; ++k) offsets[k] = i;
    return;
  }
  for (std::size_t k = 0; k < nIn; ++k) offsets[k] = 0;
  std::int64_t rem = i;
  for (int d = static_cast<int>(mOut.size()) - 1; d >= 0; --d) {
    const std::int64_t extent = mOut[static_cast<std::size_t>(d)];
    const std::int64_t idx = extent == 0 ? 0 : rem % extent;
    rem = extent == 0 ? 0 : rem / extent;
    for (std::size_t k = 0; k < nIn; ++k)
      offsets[k] += idx * mStrides[k][static_cast<std::size_t>(d)];
  }
}

void BroadcastIndex::Cursor::next() {
  const std::size_t nIn = mOffsets.size();
  if (mIx.mTrivial) {
    for (std::size_t k = 0; k < nIn; ++k) ++mOffsets[k];
    return;
  }
  for (std::size_t d = mIndex.size(); d-- > 0;) {
    for (std::size_t k = 0; k < nIn; ++k) mOffsets[k] += mIx.mStrides[k][d];
    if (++mIndex[d] < mIx.mOut[d]) return;
    for (std::size_t k = 0; k < nIn; ++k) mOffsets[k] -= mIx.mStrides[k][d] * mIx.mOut[d];
    mIndex[d] = 0;
  }
}

Tensor broadcastTo(const OpArgs& args, const Tensor& x, const Shape& s) {
  const auto b = broadcastShapes(x.shape(), s);
  if (!b || *b != s)
    args.fail("cannot broadcast shape " + shapeString(x.shape()) + " to " + shapeString(s));
  if (x.shape() == s) return x;
  const BroadcastIndex ix(s, {x.shape()});
  const auto n = static_cast<std::size_t>(ix.size());
  std::vector<double> lo(n), hi;
  if (x.isInterval()) hi.resize(n);
  BroadcastIndex::Cursor at(ix);
  for (std::size_t i = 0; i < n; ++i, at.next()) {
    lo[i] = x.lo()[at[0]];
    if (x.isInterval()) hi[i] = x.hi()[at[0]];
  }
  if (x.isInterval()) return Tensor::interval(s, x.dtype(), std::move(lo), std::move(hi));
  return Tensor::point(s, x.dtype(), std::move(lo));
}

Tensor sumToShape(const Tensor& g, const Shape& s) {
  if (g.shape() == s) return g;
  const Shape& gs = g.shape();
  // Output element offsets: the input shape aligned right, broadcast dims summed.
  const BroadcastIndex ix(gs, {s});
  std::vector<double> out(static_cast<std::size_t>(numel(s)), 0.0);
  const auto v = g.values();
  BroadcastIndex::Cursor at(ix);
  for (std::int64_t i = 0; i < ix.size(); ++i, at.next())
    out[static_cast<std::size_t>(at[0])] += v[static_cast<std::size_t>(i)];
  return Tensor::point(s, g.dtype(), std::move(out));
}

}  // namespace lossbound::ops
