// Sliding windows as columns: im2col (F.unfold; the backward of F.fold) and col2im (F.fold; the
// backward of F.unfold). ConvBERT's span-based dynamic convolution reads its windows this way.
//
// aten.im2col(x, kernel_size, dilation, padding, stride): x of shape (N, C, H, W) or (C, H, W)
// becomes columns (N, C·kh·kw, L) or (C·kh·kw, L) with L = oh·ow window positions, oh =
// (H + 2·ph − dh·(kh − 1) − 1) / sh + 1 (ow likewise); row c·kh·kw + i·kw + j at position p·ow + q
// holds x[c, p·sh − ph + i·dh, q·sw − pw + j·dw], or 0 outside the input (im2col.h of
// aten/src/ATen/native). A copy: exact; its vjp is col2im of the gradient.
// aten.col2im(cols, output_size, kernel_size, dilation, padding, stride): the adjoint, each image
// element the sum of the column entries im2col would copy from it. The CPU kernel adds them into
// the image in scalar_t, column row by column row; CUDA's col2im_kernel sums them in accscalar_t
// and stores once: an accumulating scatter onto zeros, whose contract is scatter_writes.h's
// (the order-free sum, |fl(Σ) − Σ| ≤ γ_k·Σ|terms| with partial sums in the storage format,
// Higham 2002 eq. 4.4; a finer accumulator stored once lies inside). Its vjp is im2col.
#include "core/ops/families.h"
#include "core/ops/formats.h"
#include "core/ops/index_map.h"
#include "core/ops/nn_support.h"
#include "core/ops/registry.h"
#include "core/ops/rule_helpers.h"
#include "core/ops/scatter_writes.h"

#include <memory>
#include <string>

namespace lossbound {

namespace {

using namespace ops;

/// The windows of one im2col / col2im node and the map from column elements to image offsets.
struct Windows {
  Shape image, columns;
  /// Column element → image offset, -1 where the window reads padding.
  IndexMap map;
};

/// Reads an int[2] argument of exactly two values.
std::pair<std::int64_t, std::int64_t> pairArg(const OpArgs& a, std::size_t i, const char* name) {
  const std::vector<std::int64_t> v = a.intListArg(i, name);
  if (v.size() != 2)
    a.fail(std::string(name) + " should have 2 values, found " + std::to_string(v.size()));
  return {v[0], v[1]};
}

/// The windows over an image of shape (N, C, H, W) or (C, H, W) (`image`, its rank telling
/// batched from not), reading kernel_size, dilation, padding, stride from positions first, ...
/// (PyTorch's im2col_shape_check: positive kernel, dilation and stride, padding >= 0, windows).
Windows windows(const OpArgs& a, const Shape& image, std::size_t first) {
  const auto [kh, kw] = pairArg(a, first, "kernel_size");
  const auto [dh, dw] = pairArg(a, first + 1, "dilation");
  const auto [ph, pw] = pairArg(a, first + 2, "padding");
  const auto [sh, sw] = pairArg(a, first + 3, "stride");
  const auto both = [](std::int64_t x, std::int64_t y) {
    std::string r(1, '(');
    return r.append(std::to_string(x)).append(", ").append(std::to_string(y)).append(")");
  };
  if (kh <= 0 || kw <= 0) a.fail("kernel_size should be positive, found " + both(kh, kw));
  if (dh <= 0 || dw <= 0) a.fail("dilation should be positive, found " + both(dh, dw));
  if (ph < 0 || pw < 0) a.fail("padding should be non-negative, found " + both(ph, pw));
  if (sh <= 0 || sw <= 0) a.fail("stride should be positive, found " + both(sh, sw));
  const bool batched = image.size() == 4;
  const std::int64_t n = batched ? image[0] : 1, c = image[image.size() - 3];
  const std::int64_t h = image[image.size() - 2], w = image.back();
  if (c <= 0 || h <= 0 || w <= 0)
    a.fail("expected non-zero channels, height and width (a zero batch is allowed), found " +
           shapeString(image));
  const std::int64_t oh = (h + 2 * ph - (dh * (kh - 1) + 1)) / sh + 1;
  const std::int64_t ow = (w + 2 * pw - (dw * (kw - 1) + 1)) / sw + 1;
  if (h + 2 * ph < dh * (kh - 1) + 1 || w + 2 * pw < dw * (kw - 1) + 1 || oh < 1 || ow < 1)
    a.fail("the windows do not fit: a padded " + both(h + 2 * ph, w + 2 * pw) +
           " image and a dilated kernel of " + both(dh * (kh - 1) + 1, dw * (kw - 1) + 1));
  Windows r;
  r.image = image;
  r.columns = batched ? Shape{n, c * kh * kw, oh * ow} : Shape{c * kh * kw, oh * ow};
  r.map.shape = r.columns;
  r.map.offsets.reserve(static_cast<std::size_t>(n * c * kh * kw * oh * ow));
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t ch = 0; ch < c; ++ch)
      for (std::int64_t i = 0; i < kh; ++i)
        for (std::int64_t j = 0; j < kw; ++j)
          for (std::int64_t p = 0; p < oh; ++p)
            for (std::int64_t q = 0; q < ow; ++q) {
              const std::int64_t y = p * sh - ph + i * dh, x = q * sw - pw + j * dw;
              r.map.offsets.push_back(
                  y < 0 || y >= h || x < 0 || x >= w ? -1 : ((b * c + ch) * h + y) * w + x);
            }
  return r;
}

/// im2col's image shape is its operand's.
Windows im2colWindows(const OpArgs& a, const Tensor& x) {
  if (!isFloating(x.dtype()))
    a.fail("expected a floating input, found " + std::string(dtypeName(x.dtype())));
  if (x.rank() != 3 && x.rank() != 4)
    a.fail("expected a 3-d (C, H, W) or 4-d (N, C, H, W) input, found shape " +
           shapeString(x.shape()));
  return windows(a, x.shape(), 1);
}

/// col2im's image shape: (N, C, output_size) from columns (N, C·kh·kw, L) or (C·kh·kw, L).
Windows col2imWindows(const OpArgs& a, const Tensor& cols) {
  if (!isFloating(cols.dtype()))
    a.fail("expected floating columns, found " + std::string(dtypeName(cols.dtype())));
  if (cols.rank() != 2 && cols.rank() != 3)
    a.fail("expected 2-d (C·kh·kw, L) or 3-d (N, C·kh·kw, L) columns, found shape " +
           shapeString(cols.shape()));
  const auto [h, w] = pairArg(a, 1, "output_size");
  const auto [kh, kw] = pairArg(a, 2, "kernel_size");
  const Shape& s = cols.shape();
  const std::int64_t rows = s[s.size() - 2];
  if (h <= 0 || w <= 0)
    a.fail("output_size should be positive, found (" + std::to_string(h) + ", " +
           std::to_string(w) + ")");
  if (kh <= 0 || kw <= 0 || rows <= 0 || rows % (kh * kw) != 0)
    a.fail("the columns' " + std::to_string(rows) +
           " rows should be a multiple of kh·kw = " + std::to_string(kh * kw));
  Shape image{rows / (kh * kw), h, w};
  if (s.size() == 3) image.insert(image.begin(), s[0]);
  Windows r = windows(a, image, 2);
  if (r.columns != s)
    a.fail("the columns should have shape " + shapeString(r.columns) + " for output_size (" +
           std::to_string(h) + ", " + std::to_string(w) + "), found " + shapeString(s));
  return r;
}

/// im2col: an exact copy through the window map (file comment).
class Im2ColRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    return {applyIndexMap(x, im2colWindows(a, x).map, a.outSpec().dtype)};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const Tensor& x = a.tensor(0);
    return {gatherVia(ctx.backend, x, im2colWindows(a, x).map, a.outSpec().dtype)};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    return point(a, ctx);
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    if (!isFloating(x.dtype())) return {std::nullopt};
    return {scatterAddThrough(g[0], im2colWindows(a, x).map, x.shape(), x.dtype())};
  }

  std::vector<Tensor> localError(const OpArgs&, std::span<const Tensor> o,
                                 OpContext&) const override {
    return zeroLocalError(o);
  }
};

/// col2im: an accumulating scatter of the columns onto a zero image (file comment).
class Col2ImRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const Parts p = parts(a);
    return {scatterPoint(p.zeros, p.cols, p.writes, ScatterMode::Accumulate, a.outSpec().dtype)};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const Parts p = parts(a);
    const DType t = a.outSpec().dtype;
    const Format f = outFormat(a, ctx);
    // Non-overlapping windows (kernel = stride, F.fold of patches) give every image element the
    // same number of terms: gathered into rows and summed by the backend.
    if (auto r =
            offerScatterSum(ctx.backend, p.zeros.shape(), p.cols, p.writes, t, f, isIntegral(t)))
      return {std::move(*r)};
    return {
        scatterInterval(p.zeros, p.cols, p.writes, ScatterMode::Accumulate, t, f, isIntegral(t))};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const Parts p = parts(a);
    const DType t = a.outSpec().dtype;
    return {scatterRandom(p.zeros, p.cols, p.writes, ScatterMode::Accumulate, t, outFormat(a, ctx),
                          accumulationFormat(ctx.precision, t), isIntegral(t), *ctx.rng)};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Parts p = parts(a);
    if (!isFloating(p.cols.dtype())) return {std::nullopt};
    auto [gBase, gCols] = scatterVjp(g[0], p.zeros.shape(), p.zeros.dtype(), p.cols.shape(),
                                     p.cols.dtype(), p.writes, ScatterMode::Accumulate);
    return {std::move(gCols)};
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    if (isIntegral(a.outSpec().dtype)) return zeroLocalError(o);
    return nn::localErrorVia(*this, a, o, ctx);
  }

 private:
  struct Parts {
    const Tensor& cols;
    Tensor zeros;
    std::vector<ScatterWrite> writes;
  };
  static Parts parts(const OpArgs& a) {
    const Tensor& cols = a.tensor(0);
    const Windows w = col2imWindows(a, cols);
    std::vector<ScatterWrite> writes;
    writes.reserve(w.map.offsets.size());
    for (std::size_t k = 0; k < w.map.offsets.size(); ++k)
      if (w.map.offsets[k] >= 0) writes.push_back({w.map.offsets[k], static_cast<std::int64_t>(k)});
    return {cols, Tensor::full(w.image, a.outSpec().dtype, 0.0), std::move(writes)};
  }
};

}  // namespace

void registerIm2ColOps(OpRegistry& r) {
  r.add("aten.im2col.default", std::make_shared<const Im2ColRule>());
  r.add("aten.col2im.default", std::make_shared<const Col2ImRule>());
}

}  // namespace lossbound
