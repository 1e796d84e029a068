#include "core/ops/pool_geometry.h"

#include <algorithm>
#include <array>
#include <optional>
#include <string>

namespace lossbound::ops {

namespace {

/// The planes and spatial extents of a 3-d or 4-d pooling input.
PoolLayout spatial(const OpArgs& a, const Shape& in) {
  if (in.size() != 3 && in.size() != 4)
    a.fail("expected a 3-d (C, H, W) or 4-d (N, C, H, W) input, found shape " + shapeString(in));
  PoolLayout l;
  l.inShape = in;
  l.inH = in[in.size() - 2];
  l.inW = in[in.size() - 1];
  if (l.inH <= 0 || l.inW <= 0)
    a.fail("expected non-empty H and W, found shape " + shapeString(in));
  l.planes = 1;
  for (std::size_t d = 0; d + 2 < in.size(); ++d) l.planes *= in[d];
  return l;
}

void setOutput(PoolLayout& l) {
  l.outShape = l.inShape;
  l.outShape[l.outShape.size() - 2] = l.outH;
  l.outShape[l.outShape.size() - 1] = l.outW;
}

/// An int[2] argument: one value for both dims or (h, w); an empty list gives `empty`.
struct Pair {
  std::int64_t h, w;
};
Pair pairArg(const OpArgs& a, std::size_t i, std::string_view name,
             std::vector<std::int64_t> fallback, std::optional<Pair> empty = std::nullopt) {
  const std::vector<std::int64_t> v = a.intListArg(i, name, fallback);
  if (v.empty() && empty) return *empty;
  if (v.size() == 1) return {v[0], v[0]};
  if (v.size() == 2) return {v[0], v[1]};
  a.fail(std::string(name) + " should have 1 or 2 values, found " + std::to_string(v.size()));
}

std::int64_t floorDiv(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/// pooling_output_shape of aten/src/ATen/native/Pool.h.
std::int64_t outputSize(std::int64_t in, std::int64_t k, std::int64_t pad, std::int64_t stride,
                        std::int64_t dilation, bool ceil) {
  std::int64_t out =
      floorDiv(in + 2 * pad - dilation * (k - 1) - 1 + (ceil ? stride - 1 : 0), stride) + 1;
  // In ceil mode the last window must start inside the input or its left padding.
  if (ceil && (out - 1) * stride >= in + pad) --out;
  return out;
}

void checkPool(const OpArgs& a, Pair k, Pair s, Pair p, Pair d) {
  if (k.h <= 0 || k.w <= 0)
    a.fail("kernel_size should be positive, found (" + std::to_string(k.h) + ", " +
           std::to_string(k.w) + ")");
  if (s.h <= 0 || s.w <= 0)
    a.fail("stride should be positive, found (" + std::to_string(s.h) + ", " + std::to_string(s.w) +
           ")");
  if (d.h <= 0 || d.w <= 0)
    a.fail("dilation should be positive, found (" + std::to_string(d.h) + ", " +
           std::to_string(d.w) + ")");
  if (p.h < 0 || p.w < 0 || p.h > k.h / 2 || p.w > k.w / 2)
    a.fail("padding should be between 0 and half the kernel size, found (" + std::to_string(p.h) +
           ", " + std::to_string(p.w) + ") for kernel (" + std::to_string(k.h) + ", " +
           std::to_string(k.w) + ")");
}

void checkOutput(const OpArgs& a, const PoolLayout& l) {
  if (l.outH <= 0 || l.outW <= 0)
    a.fail("the pooled output would be empty (" + std::to_string(l.outH) + " x " +
           std::to_string(l.outW) + ") for input " + shapeString(l.inShape));
}

}  // namespace

std::vector<std::vector<std::int64_t>> PoolLayout::inverse() const {
  std::vector<std::vector<std::int64_t>> inv(static_cast<std::size_t>(inPlane()));
  for (std::size_t o = 0; o < windows.size(); ++o)
    for (std::int64_t off : windows[o].offsets)
      inv[static_cast<std::size_t>(off)].push_back(static_cast<std::int64_t>(o));
  return inv;
}

std::string PoolLayout::inPlaneText() const {
  const std::string hw = std::to_string(inH) + " x " + std::to_string(inW);
  return dims == 3 ? std::to_string(inD) + " x " + hw : hw;
}

namespace {

/// An int[3] argument: one value for every dim or (d, h, w); an empty list gives `empty`.
std::array<std::int64_t, 3> tripleArg(const OpArgs& a, std::size_t i, std::string_view name,
                                      std::vector<std::int64_t> fallback,
                                      std::optional<std::array<std::int64_t, 3>> empty = {}) {
  const std::vector<std::int64_t> v = a.intListArg(i, name, fallback);
  if (v.empty() && empty) return *empty;
  if (v.size() == 1) return {v[0], v[0], v[0]};
  if (v.size() == 3) return {v[0], v[1], v[2]};
  a.fail(std::string(name) + " should have 1 or 3 values, found " + std::to_string(v.size()));
}

std::string tripleText(const std::array<std::int64_t, 3>& t) {
  std::string r(1, '(');
  for (int i = 0; i < 3; ++i) r.append(i ? ", " : "").append(std::to_string(t[i]));
  return r.append(")");
}

/// max_pool3d_with_indices: the 2-d layout's rules with a depth.
PoolLayout maxPool3dLayout(const OpArgs& a, const Shape& in, std::size_t first) {
  if (in.size() != 4 && in.size() != 5)
    a.fail("expected a 4-d (C, D, H, W) or 5-d (N, C, D, H, W) input, found shape " +
           shapeString(in));
  const std::size_t n = in.size();
  PoolLayout l;
  l.dims = 3;
  l.inShape = in;
  const std::array<std::int64_t, 3> size{in[n - 3], in[n - 2], in[n - 1]};
  if (size[0] <= 0 || size[1] <= 0 || size[2] <= 0)
    a.fail("expected non-empty D, H and W, found shape " + shapeString(in));
  l.planes = 1;
  for (std::size_t d = 0; d + 3 < n; ++d) l.planes *= in[d];
  const auto k = tripleArg(a, first, "kernel_size", {});
  const auto s = tripleArg(a, first + 1, "stride", {}, k);
  const auto p = tripleArg(a, first + 2, "padding", {0});
  const auto d = tripleArg(a, first + 3, "dilation", {1});
  const bool ceil = a.boolArg(first + 4, "ceil_mode", false);
  std::array<std::int64_t, 3> out{};
  for (int i = 0; i < 3; ++i) {
    if (k[i] <= 0) a.fail("kernel_size should be positive, found " + tripleText(k));
    if (s[i] <= 0) a.fail("stride should be positive, found " + tripleText(s));
    if (d[i] <= 0) a.fail("dilation should be positive, found " + tripleText(d));
    if (p[i] < 0 || p[i] > k[i] / 2)
      a.fail("padding should be between 0 and half the kernel size, found " + tripleText(p) +
             " for kernel " + tripleText(k));
    out[i] = outputSize(size[i], k[i], p[i], s[i], d[i], ceil);
    if (out[i] <= 0)
      a.fail("the pooled output would be empty (" + std::to_string(out[0]) + " x " +
             std::to_string(out[1]) + " x " + std::to_string(out[2]) + ") for input " +
             shapeString(in));
  }
  l.inD = size[0];
  l.inH = size[1];
  l.inW = size[2];
  l.outD = out[0];
  l.outH = out[1];
  l.outW = out[2];
  l.outShape = in;
  l.outShape[n - 3] = out[0];
  l.outShape[n - 2] = out[1];
  l.outShape[n - 1] = out[2];
  // DilatedMaxPool3d.cpp's loops: each dim's window starts at o·stride − pad, moves into the
  // input by whole dilation steps and ends at the input's edge; the index is (z·H + y)·W + x.
  std::array<std::int64_t, 3> o{}, lo{}, hi{};
  for (o[0] = 0; o[0] < out[0]; ++o[0])
    for (o[1] = 0; o[1] < out[1]; ++o[1])
      for (o[2] = 0; o[2] < out[2]; ++o[2]) {
        for (int i = 0; i < 3; ++i) {
          lo[i] = o[i] * s[i] - p[i];
          hi[i] = std::min(lo[i] + (k[i] - 1) * d[i] + 1, size[i]);
          while (lo[i] < 0) lo[i] += d[i];
        }
        PoolWindow win;
        win.start = (lo[0] * l.inH + lo[1]) * l.inW + lo[2];
        for (std::int64_t z = lo[0]; z < hi[0]; z += d[0])
          for (std::int64_t y = lo[1]; y < hi[1]; y += d[1])
            for (std::int64_t x = lo[2]; x < hi[2]; x += d[2])
              win.offsets.push_back((z * l.inH + y) * l.inW + x);
        l.windows.push_back(std::move(win));
      }
  return l;
}

}  // namespace

PoolLayout maxPoolLayout(const OpArgs& a, const Shape& in, std::size_t first, int dims) {
  if (dims == 3) return maxPool3dLayout(a, in, first);
  PoolLayout l = spatial(a, in);
  const Pair k = pairArg(a, first, "kernel_size", {});
  const Pair s = pairArg(a, first + 1, "stride", {}, k);
  const Pair p = pairArg(a, first + 2, "padding", {0});
  const Pair d = pairArg(a, first + 3, "dilation", {1});
  const bool ceil = a.boolArg(first + 4, "ceil_mode", false);
  checkPool(a, k, s, p, d);
  l.outH = outputSize(l.inH, k.h, p.h, s.h, d.h, ceil);
  l.outW = outputSize(l.inW, k.w, p.w, s.w, d.w, ceil);
  checkOutput(a, l);
  setOutput(l);
  // The kernels' loops (CPU cpu_max_pool, CUDA max_pool_forward_nchw): the window starts at
  // o·stride − pad, moves into the input by whole dilation steps and ends at the input's edge.
  for (std::int64_t oh = 0; oh < l.outH; ++oh)
    for (std::int64_t ow = 0; ow < l.outW; ++ow) {
      std::int64_t h0 = oh * s.h - p.h, w0 = ow * s.w - p.w;
      const std::int64_t h1 = std::min(h0 + (k.h - 1) * d.h + 1, l.inH);
      const std::int64_t w1 = std::min(w0 + (k.w - 1) * d.w + 1, l.inW);
      while (h0 < 0) h0 += d.h;
      while (w0 < 0) w0 += d.w;
      PoolWindow win;
      win.start = h0 * l.inW + w0;
      for (std::int64_t h = h0; h < h1; h += d.h)
        for (std::int64_t w = w0; w < w1; w += d.w) win.offsets.push_back(h * l.inW + w);
      l.windows.push_back(std::move(win));
    }
  return l;
}

PoolLayout avgPoolLayout(const OpArgs& a, const Shape& in, std::size_t first) {
  PoolLayout l = spatial(a, in);
  const Pair k = pairArg(a, first, "kernel_size", {});
  const Pair s = pairArg(a, first + 1, "stride", {}, k);
  const Pair p = pairArg(a, first + 2, "padding", {0});
  const bool ceil = a.boolArg(first + 3, "ceil_mode", false);
  const bool countPad = a.boolArg(first + 4, "count_include_pad", true);
  const std::int64_t override = a.intArg(first + 5, "divisor_override", 0);
  checkPool(a, k, s, p, {1, 1});
  l.outH = outputSize(l.inH, k.h, p.h, s.h, 1, ceil);
  l.outW = outputSize(l.inW, k.w, p.w, s.w, 1, ceil);
  checkOutput(a, l);
  setOutput(l);
  // CPU cpu_avg_pool and CUDA avg_pool2d_out_cuda_frame: pool_size counts the padding inside
  // the window (clipped at input + pad), the sum runs over the window clipped to the input.
  for (std::int64_t oh = 0; oh < l.outH; ++oh)
    for (std::int64_t ow = 0; ow < l.outW; ++ow) {
      std::int64_t h0 = oh * s.h - p.h, w0 = ow * s.w - p.w;
      std::int64_t h1 = std::min(h0 + k.h, l.inH + p.h), w1 = std::min(w0 + k.w, l.inW + p.w);
      const std::int64_t poolSize = (h1 - h0) * (w1 - w0);
      h0 = std::max<std::int64_t>(h0, 0);
      w0 = std::max<std::int64_t>(w0, 0);
      h1 = std::min(h1, l.inH);
      w1 = std::min(w1, l.inW);
      PoolWindow win;
      if (h0 < h1 && w0 < w1) {
        for (std::int64_t h = h0; h < h1; ++h)
          for (std::int64_t w = w0; w < w1; ++w) win.offsets.push_back(h * l.inW + w);
        win.divisor = override != 0 ? override : (countPad ? poolSize : (h1 - h0) * (w1 - w0));
        win.kH = h1 - h0;
        win.kW = w1 - w0;
      }
      l.windows.push_back(std::move(win));
    }
  return l;
}

PoolLayout adaptivePoolLayout(const OpArgs& a, const Shape& in, std::int64_t oH, std::int64_t oW) {
  PoolLayout l = spatial(a, in);
  if (oH <= 0 || oW <= 0)
    a.fail("output_size should be positive, found (" + std::to_string(oH) + ", " +
           std::to_string(oW) + ")");
  l.outH = oH;
  l.outW = oW;
  setOutput(l);
  const auto start = [](std::int64_t o, std::int64_t out, std::int64_t size) {
    return (o * size) / out;
  };
  const auto end = [](std::int64_t o, std::int64_t out, std::int64_t size) {
    return ((o + 1) * size + out - 1) / out;
  };
  for (std::int64_t oh = 0; oh < oH; ++oh)
    for (std::int64_t ow = 0; ow < oW; ++ow) {
      const std::int64_t h0 = start(oh, oH, l.inH), h1 = end(oh, oH, l.inH);
      const std::int64_t w0 = start(ow, oW, l.inW), w1 = end(ow, oW, l.inW);
      PoolWindow win;
      for (std::int64_t h = h0; h < h1; ++h)
        for (std::int64_t w = w0; w < w1; ++w) win.offsets.push_back(h * l.inW + w);
      win.kH = h1 - h0;
      win.kW = w1 - w0;
      win.divisor = win.kH * win.kW;
      l.windows.push_back(std::move(win));
    }
  return l;
}

void requireOutputShape(const OpArgs& a, const PoolLayout& l, const Shape& grad) {
  if (grad != l.outShape)
    a.fail("grad_output should have the pooled shape " + shapeString(l.outShape) + ", found " +
           shapeString(grad));
}

std::int64_t PoolLayout::windowSize() const {
  std::int64_t k = 0;
  for (const PoolWindow& w : windows) k = std::max(k, static_cast<std::int64_t>(w.offsets.size()));
  return k;
}

std::vector<double> PoolLayout::windowOffsets() const {
  const std::size_t k = static_cast<std::size_t>(windowSize());
  std::vector<double> off(windows.size() * k, -1.0);
  for (std::size_t o = 0; o < windows.size(); ++o)
    for (std::size_t i = 0; i < windows[o].offsets.size(); ++i)
      off[o * k + i] = static_cast<double>(windows[o].offsets[i]);
  return off;
}

void windowElements(const Tensor& x, const PoolLayout& l, std::int64_t pl, const double* off,
                    std::int64_t k, double* lo, double* hi) {
  for (std::int64_t i = 0; i < k; ++i)
    if (off[i] >= 0.0) {
      const Interval e = x.at(pl * l.inPlane() + static_cast<std::int64_t>(off[i]));
      lo[i] = e.lo;
      hi[i] = e.hi;
    }
}

}  // namespace lossbound::ops
