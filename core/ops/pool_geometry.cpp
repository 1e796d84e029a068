#include "core/ops/pool_geometry.h"

#include <algorithm>
#include <array>
#include <optional>
#include <string>

namespace lossbound::ops {

namespace {

/// Per-dim values of the pooled dims (D, H, W), of which the first `dims` are used.
using Dims = std::array<std::int64_t, 3>;

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

/// "(a, b)" or "(a, b, c)", joined by `sep`.
std::string listText(const Dims& v, int n, const char* open = "(", const char* sep = ", ",
                     const char* close = ")") {
  std::string r(open);
  for (int i = 0; i < n; ++i) r.append(i ? sep : "").append(std::to_string(v[i]));
  return r.append(close);
}

/// The planes and the pooled extents of an N-d pooling node (N = 2: H, W; N = 3: D, H, W).
struct Geometry {
  int dims;
  Dims size{}, out{};
  PoolLayout layout;

  Geometry(const OpArgs& a, const Shape& in, int n) : dims(n) {
    const std::size_t r = in.size();
    if (r != static_cast<std::size_t>(n + 1) && r != static_cast<std::size_t>(n + 2))
      a.fail(n == 3 ? "expected a 4-d (C, D, H, W) or 5-d (N, C, D, H, W) input, found shape " +
                          shapeString(in)
                    : "expected a 3-d (C, H, W) or 4-d (N, C, H, W) input, found shape " +
                          shapeString(in));
    for (int i = 0; i < n; ++i) size[i] = in[r - static_cast<std::size_t>(n - i)];
    if (std::any_of(size.begin(), size.begin() + n, [](std::int64_t s) { return s <= 0; }))
      a.fail(std::string(n == 3 ? "expected non-empty D, H and W" : "expected non-empty H and W") +
             ", found shape " + shapeString(in));
    layout.dims = n;
    layout.inShape = in;
    layout.planes = 1;
    for (std::size_t d = 0; d + static_cast<std::size_t>(n) < r; ++d) layout.planes *= in[d];
  }

  /// An int[N] argument: one value for every dim or N values; an empty list gives `empty`.
  Dims arg(const OpArgs& a, std::size_t i, std::string_view name,
           std::vector<std::int64_t> fallback, std::optional<Dims> empty = {}) const {
    const std::vector<std::int64_t> v = a.intListArg(i, name, fallback);
    if (v.empty() && empty) return *empty;
    Dims r{1, 1, 1};
    if (v.size() == 1)
      std::fill(r.begin(), r.begin() + dims, v[0]);
    else if (v.size() == static_cast<std::size_t>(dims))
      std::copy(v.begin(), v.end(), r.begin());
    else
      a.fail(std::string(name) + " should have 1 or " + std::to_string(dims) + " values, found " +
             std::to_string(v.size()));
    return r;
  }

  /// What PyTorch checks (positive sizes, padding at most half the kernel), then the output
  /// extents, which must not be empty.
  void setOutput(const OpArgs& a, const Dims& k, const Dims& s, const Dims& p, const Dims& d,
                 bool ceil) {
    const auto positive = [&](const Dims& v, const char* name) {
      for (int i = 0; i < dims; ++i)
        if (v[i] <= 0)
          a.fail(std::string(name) + " should be positive, found " + listText(v, dims));
    };
    positive(k, "kernel_size");
    positive(s, "stride");
    positive(d, "dilation");
    for (int i = 0; i < dims; ++i)
      if (p[i] < 0 || p[i] > k[i] / 2)
        a.fail("padding should be between 0 and half the kernel size, found " + listText(p, dims) +
               " for kernel " + listText(k, dims));
    for (int i = 0; i < dims; ++i) out[i] = outputSize(size[i], k[i], p[i], s[i], d[i], ceil);
    if (std::any_of(out.begin(), out.begin() + dims, [](std::int64_t o) { return o <= 0; }))
      a.fail("the pooled output would be empty " + listText(out, dims, "(", " x ") + " for input " +
             shapeString(layout.inShape));
    PoolLayout& l = layout;
    const std::size_t r = l.inShape.size();
    l.outShape = l.inShape;
    for (int i = 0; i < dims; ++i) l.outShape[r - static_cast<std::size_t>(dims - i)] = out[i];
    const int o = 3 - dims;  // inD and outD stay 1 in 2-d pooling
    l.inD = dims == 3 ? size[0] : 1;
    l.outD = dims == 3 ? out[0] : 1;
    l.inH = size[1 - o];
    l.inW = size[2 - o];
    l.outH = out[1 - o];
    l.outW = out[2 - o];
  }

  /// Returns the plane offset of position x: row-major over the pooled dims.
  std::int64_t offset(const Dims& x) const {
    std::int64_t off = 0;
    for (int i = 0; i < dims; ++i) off = off * size[i] + x[i];
    return off;
  }

  /// Calls f(o) for every output position o in row-major order.
  template <class F>
  void forEachOutput(F&& f) const {
    Dims o{0, 0, 0};
    for (;;) {
      f(o);
      int i = dims - 1;
      for (; i >= 0; --i) {
        if (++o[i] < out[i]) break;
        o[i] = 0;
      }
      if (i < 0) return;
    }
  }

  /// Appends the offsets of the positions lo ≤ x < hi (steps st per dim) in scan order: the
  /// first pooled dim outermost, the last innermost, as the kernels' loops run.
  void appendBox(const Dims& lo, const Dims& hi, const Dims& st,
                 std::vector<std::int64_t>& offsets) const {
    for (int i = 0; i < dims; ++i)
      if (lo[i] >= hi[i]) return;
    Dims x = lo;
    for (;;) {
      offsets.push_back(offset(x));
      int i = dims - 1;
      for (; i >= 0; --i) {
        x[i] += st[i];
        if (x[i] < hi[i]) break;
        x[i] = lo[i];
      }
      if (i < 0) return;
    }
  }
};

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

PoolLayout maxPoolLayout(const OpArgs& a, const Shape& in, std::size_t first, int dims) {
  Geometry g(a, in, dims);
  const Dims k = g.arg(a, first, "kernel_size", {});
  const Dims s = g.arg(a, first + 1, "stride", {}, k);
  const Dims p = g.arg(a, first + 2, "padding", {0});
  const Dims d = g.arg(a, first + 3, "dilation", {1});
  g.setOutput(a, k, s, p, d, a.boolArg(first + 4, "ceil_mode", false));
  // The kernels' loops (CPU cpu_max_pool and DilatedMaxPool3d.cpp, CUDA max_pool_forward_nchw):
  // in each dim the window starts at o·stride − pad, moves into the input by whole dilation steps
  // and ends at the input's edge.
  g.forEachOutput([&](const Dims& o) {
    Dims lo{}, hi{};
    for (int i = 0; i < dims; ++i) {
      lo[i] = o[i] * s[i] - p[i];
      hi[i] = std::min(lo[i] + (k[i] - 1) * d[i] + 1, g.size[i]);
      while (lo[i] < 0) lo[i] += d[i];
    }
    PoolWindow win;
    win.start = g.offset(lo);
    g.appendBox(lo, hi, d, win.offsets);
    g.layout.windows.push_back(std::move(win));
  });
  return std::move(g.layout);
}

PoolLayout avgPoolLayout(const OpArgs& a, const Shape& in, std::size_t first, int dims) {
  Geometry g(a, in, dims);
  const Dims k = g.arg(a, first, "kernel_size", {});
  const Dims s = g.arg(a, first + 1, "stride", {}, k);
  const Dims p = g.arg(a, first + 2, "padding", {0});
  const bool ceil = a.boolArg(first + 3, "ceil_mode", false);
  const bool countPad = a.boolArg(first + 4, "count_include_pad", true);
  const std::int64_t override = a.intArg(first + 5, "divisor_override", 0);
  g.setOutput(a, k, s, p, {1, 1, 1}, ceil);
  // avg_pool3d's pool3d_shape_check (check_input_size): no kernel larger than its dim, padding or
  // not.
  for (int i = 0; dims == 3 && i < 3; ++i)
    if (g.size[i] < k[i])
      a.fail("the input volume " + listText(g.size, 3, "(", " x ") +
             " is smaller than the kernel " + listText(k, 3));
  // CPU cpu_avg_pool / cpu_avg_pool3d, CUDA avg_pool2d_out_cuda_frame / avg_pool3d_cuda_update_
  // output: pool_size counts the padding inside the window (clipped at input + pad), the sum runs
  // over the window clipped to the input.
  const Dims one{1, 1, 1};
  g.forEachOutput([&](const Dims& o) {
    Dims lo{}, hi{};
    std::int64_t poolSize = 1, inside = 1;
    for (int i = 0; i < dims; ++i) {
      lo[i] = o[i] * s[i] - p[i];
      hi[i] = std::min(lo[i] + k[i], g.size[i] + p[i]);
      poolSize *= hi[i] - lo[i];
      lo[i] = std::max<std::int64_t>(lo[i], 0);
      hi[i] = std::min(hi[i], g.size[i]);
      inside *= std::max<std::int64_t>(hi[i] - lo[i], 0);
    }
    PoolWindow win;
    g.appendBox(lo, hi, one, win.offsets);
    if (!win.offsets.empty()) {
      win.divisor = override != 0 ? override : (countPad ? poolSize : inside);
      // The last two pooled dims' extents (read only by adaptive pooling's divisions).
      win.kH = hi[dims - 2] - lo[dims - 2];
      win.kW = hi[dims - 1] - lo[dims - 1];
    }
    g.layout.windows.push_back(std::move(win));
  });
  return std::move(g.layout);
}

PoolLayout adaptivePoolLayout(const OpArgs& a, const Shape& in, std::int64_t oH, std::int64_t oW) {
  Geometry g(a, in, 2);
  if (oH <= 0 || oW <= 0)
    a.fail("output_size should be positive, found (" + std::to_string(oH) + ", " +
           std::to_string(oW) + ")");
  PoolLayout& l = g.layout;
  l.inH = g.size[0];
  l.inW = g.size[1];
  l.outH = oH;
  l.outW = oW;
  l.outShape = l.inShape;
  l.outShape[l.outShape.size() - 2] = oH;
  l.outShape[l.outShape.size() - 1] = oW;
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
  return std::move(l);
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
