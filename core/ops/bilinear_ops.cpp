// Bilinear upsampling: upsample_bilinear2d (.vec, .default) and its backward.
//
// PyTorch (CPU and CUDA): per output index o along a dim, the source position
// src = scale·o (align_corners) or max(scale·(o + 0.5) − 0.5, 0), scale = (in − 1)/(out − 1)
// (align_corners; 0 when out = 1), 1/scale_factor or in/out, all in the opmath format; then
// i = min(floor(src), in − 1), λ = clamp(src − i, 0, 1), i1 = i + (i < in − 1), weights 1 − λ
// and λ. The output is Σ of the four products of the two dims' weights with the inputs, bracketed
// as h0·(w0·x00 + w1·x01) + h1·(w0·x10 + w1·x11) or as (h·w)·x summed (CPU vectorized paths),
// in opmath, stored once. The backward adds each output's weighted gradient to its inputs, in
// any order (CPU loops, CUDA atomics).
//
// Contract (interval): u is the coarser of opmath and storage (PyTorch 1.13's CPU kernel computes
// 16-bit tensors in their own type; CUDA's backward rounds each term to storage). The computed
// src lies within δ = 8u'(|src| + 1) of the binary64 one (the roundings of the scale, the product
// and the shift, and the binary64 one's own; u' = max(u, 2^-24): 2.x's CPU floors an fp64
// position in float); the CPU kernel also copies (src = o) where a dim keeps its size, CUDA only
// where both do, so such a dim has both candidates. The interpolation is continuous in src, so
// every index a candidate may pick is listed with the hull of its weights over the candidates (0
// for an index only some choices read). The output encloses Σ W ⊗ x over the listed pairs
// (outward), ± γ_7(u)·Σ|W||x| (two 1 − λ, h·w, ·x and three additions: the longest path of either
// bracketing), rounded outward to storage; the backward encloses, per input, Σ W ⊗ g over its m
// listed terms ± γ_{m+4}(u)·Σ|W||g|, with the underflow of each term. random: one execution in
// opmath with either bracketing (the backward: a random order); point: binary64, the CPU's copy
// where a dim keeps its size. vjp: the transposed weights. localError: the distance of the point
// value to the enclosure on exact inputs.
#include "core/interval/rounding.h"
#include "core/ops/arg_readers.h"
#include "core/ops/error_bounds.h"
#include "core/ops/families.h"
#include "core/ops/formats.h"
#include "core/ops/nn_support.h"
#include "core/ops/registry.h"
#include "core/ops/resample_maps.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>

namespace lossbound {

namespace {

using namespace ops;

/// One dim's resampling: sizes, align_corners and the scale factor if given.
struct Axis {
  std::int64_t in = 0, out = 0;
  bool alignCorners = false;
  std::optional<double> scaleFactor;

  /// The scale in binary64 (the candidate rounds it to opmath).
  double scale() const {
    if (alignCorners)
      return out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
    if (scaleFactor && *scaleFactor > 0) return 1.0 / *scaleFactor;
    return static_cast<double>(in) / static_cast<double>(out);
  }
  /// The source position of output o by the formula, every operation rounded to nearest in f
  /// (Fp64: binary64); `copy`: PyTorch's CPU kernel, which reads o where out == in.
  double source(std::int64_t o, Format f, bool copy = true) const {
    if (copy && out == in) return static_cast<double>(o);
    const double s = roundNearest(scale(), f), od = static_cast<double>(o);
    if (alignCorners) return roundNearest(s * od, f);
    const double v = roundNearest(roundNearest(s * (od + 0.5), f) - 0.5, f);
    return v < 0 ? 0.0 : v;
  }
};

/// One weight of an output: input index and the weight's enclosure.
struct Tap {
  std::int64_t index;
  Interval weight;
};

/// The point taps (binary64) of output o.
std::array<std::pair<std::int64_t, double>, 2> pointTaps(const Axis& a, std::int64_t o, Format f) {
  const double src = a.source(o, f);
  const std::int64_t i =
      std::min<std::int64_t>(static_cast<std::int64_t>(std::floor(src)), a.in - 1);
  const double lambda = std::clamp(roundNearest(src - static_cast<double>(i), f), 0.0, 1.0);
  const std::int64_t i1 = i + (i < a.in - 1 ? 1 : 0);
  return {{{i, roundNearest(1.0 - lambda, f)}, {i1, lambda}}};
}

/// Adds the tap lists of every floor a source position within δ = 8u(|src| + 1) of `src` may
/// take (at most two, src being within 2δ of an integer); an index read twice (i1 == i at the
/// last row) gets the sum of its weights.
void addCandidates(const Axis& a, double src, double u, std::vector<std::vector<Tap>>& out) {
  const double delta = mul_up(8.0 * u, add_up(std::fabs(src), 1.0));
  double lo = sub_down(src, delta), hi = add_up(src, delta);
  if (!a.alignCorners) {
    lo = std::max(lo, 0.0);
    hi = std::max(hi, 0.0);
  }
  const std::int64_t first = std::min<std::int64_t>(static_cast<std::int64_t>(std::floor(lo)),
                                                    a.in - 1),
                     last = std::min<std::int64_t>(static_cast<std::int64_t>(std::floor(hi)),
                                                   a.in - 1);
  for (std::int64_t i = std::max<std::int64_t>(first, 0); i <= last; ++i) {
    const double id = static_cast<double>(i);
    const Interval lambda{std::clamp(sub_down(std::max(lo, id), id), 0.0, 1.0),
                          std::clamp(sub_up(std::min(hi, id + 1.0), id), 0.0, 1.0)};
    const Interval w0 = sub(lossbound::point(1.0), lambda);
    const std::int64_t i1 = i + (i < a.in - 1 ? 1 : 0);
    if (i1 == i)
      out.push_back({{i, add(w0, lambda)}});
    else
      out.push_back({{i, w0}, {i1, lambda}});
  }
}

/// Per index read by some candidate, the hull of its weights over the candidates (0 where a
/// candidate does not read it).
std::vector<Tap> mergeCandidates(const std::vector<std::vector<Tap>>& candidates) {
  std::vector<Tap> taps;
  for (const auto& cand : candidates)
    for (const Tap& t : cand) {
      if (std::any_of(taps.begin(), taps.end(), [&](const Tap& u) { return u.index == t.index; }))
        continue;
      Interval w = emptyInterval();
      for (const auto& other : candidates) {
        const auto it = std::find_if(other.begin(), other.end(),
                                     [&](const Tap& u) { return u.index == t.index; });
        w = hull(w, it == other.end() ? lossbound::point(0.0) : it->weight);
      }
      taps.push_back({t.index, w});
    }
  return taps;
}

/// The taps every candidate may use for output o: each index with the hull of its weights.
std::vector<Tap> intervalTaps(const Axis& a, std::int64_t o, double u) {
  std::vector<std::vector<Tap>> candidates;
  addCandidates(a, a.source(o, Format::Fp64, false), u, candidates);
  // The CPU kernel copies where out == in (CUDA only when both dims keep their size).
  if (a.out == a.in) addCandidates(a, static_cast<double>(o), 0.0, candidates);
  return mergeCandidates(candidates);
}

/// The geometry of a node: the input shape (N, C, H, W) and the two axes.
struct Bilinear {
  Shape in, out;
  Axis h, w;
};

/// Reads the forward's geometry (input shape `in`): output_size (argument 1) or the scale
/// factors (.vec: the list at 3; .default: scales_h, scales_w at 3, 4), align_corners at 2.
Bilinear forwardGeometry(const OpArgs& a, const Shape& in) {
  if (in.size() != 4) a.fail("upsample_bilinear2d expects a 4-D input, found " + shapeString(in));
  Bilinear b;
  b.in = in;
  const auto scales = upsampleScales(a, 3, 3, 2);
  b.out = in;
  if (a.arg(1).kind == IrValue::Kind::List) {
    const auto size = a.intListArg(1, "output_size");
    if (size.size() != 2) a.fail("upsample_bilinear2d: output_size should have 2 entries");
    b.out[2] = size[0];
    b.out[3] = size[1];
  } else {
    for (std::size_t k = 0; k < 2; ++k) {
      if (!scales[k] || !(*scales[k] > 0))
        a.fail("upsample_bilinear2d: neither an output size nor a positive scale factor");
      b.out[2 + k] = scaledSize(a, in[2 + k], *scales[k]);
    }
  }
  const bool align = a.boolArg(2, "align_corners");
  for (std::size_t k = 0; k < 2; ++k)
    if (b.in[2 + k] <= 0 || b.out[2 + k] <= 0)
      a.fail("upsample_bilinear2d: empty spatial dims " + shapeString(b.in) + " -> " +
             shapeString(b.out));
  b.h = {b.in[2], b.out[2], align, scales[0]};
  b.w = {b.in[3], b.out[3], align, scales[1]};
  return b;
}

/// The backward's geometry: input_size (argument 2), output_size (1), align_corners (3), the
/// scale factors (.vec: the list at 4; .default: 4, 5).
Bilinear backwardGeometry(const OpArgs& a) {
  const Shape in = a.intListArg(2, "input_size");
  if (in.size() != 4) a.fail("upsample_bilinear2d_backward: input_size should have 4 entries");
  Bilinear b;
  b.in = in;
  b.out = a.tensor(0).shape();
  if (b.out.size() != 4 || b.out[0] != in[0] || b.out[1] != in[1])
    a.fail("upsample_bilinear2d_backward: grad_output " + shapeString(b.out) +
           " does not match input_size " + shapeString(in));
  for (std::size_t k = 2; k < 4; ++k)
    if (in[k] <= 0 || b.out[k] <= 0)
      a.fail("upsample_bilinear2d_backward: empty spatial dims: input_size " + shapeString(in) +
             ", grad_output " + shapeString(b.out));
  if (a.arg(1).kind == IrValue::Kind::List &&
      a.intListArg(1, "output_size") != std::vector<std::int64_t>{b.out[2], b.out[3]})
    a.fail("upsample_bilinear2d_backward: output_size " +
           shapeString(a.intListArg(1, "output_size")) + " does not match grad_output " +
           shapeString(b.out));
  const auto scales = upsampleScales(a, 4, 4, 2);
  const bool align = a.boolArg(3, "align_corners");
  b.h = {in[2], b.out[2], align, scales[0]};
  b.w = {in[3], b.out[3], align, scales[1]};
  return b;
}

/// The planes and per-plane offsets of a geometry.
struct Planes {
  std::int64_t count, inPlane, outPlane;
};
Planes planes(const Bilinear& b) {
  return {b.in[0] * b.in[1], b.in[2] * b.in[3], b.out[2] * b.out[3]};
}

/// Point weights of every output of a plane: four (input offset, weight) pairs, in binary64
/// (f = Fp64) or as the candidate computes them (f = opmath).
std::vector<std::array<std::pair<std::int64_t, double>, 4>> pointWeights(const Bilinear& b,
                                                                         Format f) {
  std::vector<std::array<std::pair<std::int64_t, double>, 4>> out;
  out.reserve(static_cast<std::size_t>(b.out[2] * b.out[3]));
  for (std::int64_t y = 0; y < b.out[2]; ++y) {
    const auto th = pointTaps(b.h, y, f);
    for (std::int64_t x = 0; x < b.out[3]; ++x) {
      const auto tw = pointTaps(b.w, x, f);
      std::array<std::pair<std::int64_t, double>, 4> e{};
      for (int r = 0; r < 2; ++r)
        for (int c = 0; c < 2; ++c)
          e[static_cast<std::size_t>(r * 2 + c)] = {
              th[static_cast<std::size_t>(r)].first * b.in[3] +
                  tw[static_cast<std::size_t>(c)].first,
              th[static_cast<std::size_t>(r)].second * tw[static_cast<std::size_t>(c)].second};
      out.push_back(e);
    }
  }
  return out;
}

/// Interval taps of every output of a plane: (input offset, weight enclosure) lists.
std::vector<std::vector<Tap>> intervalWeights(const Bilinear& b, double u) {
  std::vector<std::vector<Tap>> out;
  std::vector<std::vector<Tap>> rows;
  for (std::int64_t y = 0; y < b.out[2]; ++y) rows.push_back(intervalTaps(b.h, y, u));
  std::vector<std::vector<Tap>> cols;
  for (std::int64_t x = 0; x < b.out[3]; ++x) cols.push_back(intervalTaps(b.w, x, u));
  for (const auto& r : rows)
    for (const auto& c : cols) {
      std::vector<Tap> e;
      for (const Tap& th : r)
        for (const Tap& tw : c)
          e.push_back({th.index * b.in[3] + tw.index, mul(th.weight, tw.weight)});
      out.push_back(std::move(e));
    }
  return out;
}

/// The coarser of two formats: 16-bit tensors may have their positions, weights and sums
/// computed in the 16-bit type (PyTorch 1.13's CPU kernel), which the opmath model would miss.
Format coarser(Format a, Format b) { return unitRoundoff(a) >= unitRoundoff(b) ? a : b; }

/// The source margin's unit: at least float's, as PyTorch 2.x's CPU kernel floors the binary64
/// position of an fp64 tensor in float (floorf).
double indexMargin(double u) { return std::max(u, 0x1p-24); }

/// Binary64 interpolation of every plane of `in` (b.in's shape) to b.out's: the forward's point,
/// and the backward's adjoint.
std::vector<double> interpolate(const Bilinear& b, std::span<const double> in) {
  const Planes p = planes(b);
  const auto wts = pointWeights(b, Format::Fp64);
  std::vector<double> out(static_cast<std::size_t>(p.count * p.outPlane));
  for (std::int64_t pl = 0; pl < p.count; ++pl)
    for (std::size_t o = 0; o < wts.size(); ++o) {
      double s = 0;
      for (const auto& [off, w] : wts[o])
        s += w * in[static_cast<std::size_t>(pl * p.inPlane + off)];
      out[static_cast<std::size_t>(pl * p.outPlane) + o] = s;
    }
  return out;
}

/// Binary64 transpose of interpolate: each output's value times its weights added to its inputs,
/// in output order (the forward's adjoint, and the backward's point).
std::vector<double> spread(const Bilinear& b, std::span<const double> out) {
  const Planes p = planes(b);
  const auto wts = pointWeights(b, Format::Fp64);
  std::vector<double> in(static_cast<std::size_t>(p.count * p.inPlane), 0.0);
  for (std::int64_t pl = 0; pl < p.count; ++pl)
    for (std::size_t o = 0; o < wts.size(); ++o)
      for (const auto& [off, w] : wts[o])
        in[static_cast<std::size_t>(pl * p.inPlane + off)] +=
            w * out[static_cast<std::size_t>(pl * p.outPlane) + o];
  return in;
}

/// upsample_bilinear2d (.vec, .default): the file comment's contract.
class BilinearRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    const Bilinear b = forwardGeometry(a, x.shape());
    return {Tensor::point(b.out, a.outSpec().dtype, interpolate(b, x.values()))};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const Tensor& x = a.tensor(0);
    requireFloating(a, x);
    const Bilinear b = forwardGeometry(a, x.shape());
    const Planes p = planes(b);
    const Format st = outFormat(a, ctx), op = coarser(opmathFormat(ctx.precision, x.dtype()), st);
    const double u = unitRoundoff(op), g7 = gammaUp(7, u);
    const auto taps = intervalWeights(b, indexMargin(u));
    std::vector<double> lo(static_cast<std::size_t>(p.count * p.outPlane)), hi(lo.size());
    for (std::int64_t pl = 0; pl < p.count; ++pl)
      for (std::size_t o = 0; o < taps.size(); ++o) {
        Interval s = lossbound::point(0.0);
        double mag = 0;
        for (const Tap& t : taps[o]) {
          const Interval v = x.at(pl * p.inPlane + t.index);
          const Interval term = mul(t.weight, v);
          s = add(s, term);
          mag = add_up(mag, mul_up(nn::mag(t.weight), nn::mag(v)));
        }
        const double e = add_up(mul_up(g7, mag), 4.0 * smallestSubnormal(op));
        const Interval r = roundOutward(Interval{sub_down(s.lo, e), add_up(s.hi, e)}, st);
        const auto k = static_cast<std::size_t>(pl * p.outPlane) + o;
        lo[k] = r.lo;
        hi[k] = r.hi;
      }
    return {Tensor::interval(b.out, a.outSpec().dtype, std::move(lo), std::move(hi))};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const Tensor& x = a.tensor(0);
    const Bilinear b = forwardGeometry(a, x.shape());
    const Planes p = planes(b);
    const Format op = opmathFormat(ctx.precision, x.dtype()), st = outFormat(a, ctx);
    const auto wts = pointWeights(b, op);  // 1 − λ, λ as the kernel computes them
    const auto rn = [op](double v) { return roundNearest(v, op); };
    std::vector<double> out(static_cast<std::size_t>(p.count * p.outPlane));
    const auto xv = x.values();
    const bool nested = (*ctx.rng)() & 1;
    for (std::int64_t pl = 0; pl < p.count; ++pl)
      for (std::size_t o = 0; o < wts.size(); ++o) {
        const auto& e = wts[o];
        const auto val = [&](std::size_t t) {
          return xv[static_cast<std::size_t>(pl * p.inPlane + e[t].first)];
        };
        double s;
        if (nested) {  // h0·(w0·x00 + w1·x01) + h1·(w0·x10 + w1·x11), from the 1-D weights
          const auto th = pointTaps(b.h, static_cast<std::int64_t>(o) / b.out[3], op);
          const auto tw = pointTaps(b.w, static_cast<std::int64_t>(o) % b.out[3], op);
          const double r0 = rn(rn(tw[0].second * val(0)) + rn(tw[1].second * val(1)));
          const double r1 = rn(rn(tw[0].second * val(2)) + rn(tw[1].second * val(3)));
          s = rn(rn(th[0].second * r0) + rn(th[1].second * r1));
        } else {  // (h·w)·x summed in a random order
          std::array<std::size_t, 4> order{0, 1, 2, 3};
          std::shuffle(order.begin(), order.end(), *ctx.rng);
          s = 0;
          for (std::size_t t : order) s = rn(s + rn(rn(e[t].second) * val(t)));
        }
        out[static_cast<std::size_t>(pl * p.outPlane) + o] = roundNearest(s, st);
      }
    return {Tensor::point(b.out, a.outSpec().dtype, std::move(out))};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    const Bilinear b = forwardGeometry(a, x.shape());
    std::vector<std::optional<Tensor>> out(a.tensorInputs().size());
    out[0] = Tensor::point(x.shape(), x.dtype(), spread(b, g[0].values()));
    return out;
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    return nn::localErrorVia(*this, a, o, ctx);
  }

 private:
  static void requireFloating(const OpArgs& a, const Tensor& x) {
    if (!isFloating(x.dtype()))
      a.fail("upsample_bilinear2d needs a floating tensor, found " +
             std::string(dtypeName(x.dtype())));
  }
};

/// upsample_bilinear2d_backward (.vec, .default): the file comment's contract.
class BilinearBackwardRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const Bilinear b = backwardGeometry(a);
    return {Tensor::point(b.in, a.outSpec().dtype, spread(b, a.tensor(0).values()))};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const Tensor& g = a.tensor(0);
    const Bilinear b = backwardGeometry(a);
    const Planes p = planes(b);
    const Format st = outFormat(a, ctx), op = coarser(opmathFormat(ctx.precision, g.dtype()), st);
    const double u = unitRoundoff(op);
    const auto taps = intervalWeights(b, indexMargin(u));
    const auto n = static_cast<std::size_t>(p.count * p.inPlane);
    std::vector<Interval> sum(n, lossbound::point(0.0));
    std::vector<double> mag(n, 0.0);
    std::vector<std::int64_t> terms(n, 0);
    for (std::int64_t pl = 0; pl < p.count; ++pl)
      for (std::size_t o = 0; o < taps.size(); ++o) {
        const Interval gv = g.at(pl * p.outPlane + static_cast<std::int64_t>(o));
        for (const Tap& t : taps[o]) {
          const auto k = static_cast<std::size_t>(pl * p.inPlane + t.index);
          sum[k] = add(sum[k], mul(t.weight, gv));
          mag[k] = add_up(mag[k], mul_up(nn::mag(t.weight), nn::mag(gv)));
          ++terms[k];
        }
      }
    std::vector<double> lo(n), hi(n);
    const double eta =
        smallestSubnormal(op);  // op is the coarser: CUDA rounds each term to storage
    for (std::size_t k = 0; k < n; ++k) {
      const double e = add_up(mul_up(gammaUp(terms[k] + 4, u), mag[k]),
                              mul_up(static_cast<double>(terms[k]), eta));
      const Interval r = roundOutward(Interval{sub_down(sum[k].lo, e), add_up(sum[k].hi, e)}, st);
      lo[k] = r.lo;
      hi[k] = r.hi;
    }
    return {Tensor::interval(b.in, a.outSpec().dtype, std::move(lo), std::move(hi))};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const Bilinear b = backwardGeometry(a);
    const Format op = opmathFormat(ctx.precision, a.tensor(0).dtype());
    const Format acc = unitRoundoff(op) >= unitRoundoff(outFormat(a, ctx)) ? op : outFormat(a, ctx);
    std::vector<Tensor> r = {scatter(a, b, pointWeights(b, op), *ctx.rng, acc)};
    r[0] = roundNearestTensor(r[0], outFormat(a, ctx));
    return r;
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> gg, OpContext&) const override {
    // The adjoint of the scatter: the forward interpolation of the incoming gradient.
    const Bilinear b = backwardGeometry(a);
    std::vector<std::optional<Tensor>> r(a.tensorInputs().size());
    r[0] = Tensor::point(a.tensor(0).shape(), a.tensor(0).dtype(), interpolate(b, gg[0].values()));
    return r;
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    return nn::localErrorVia(*this, a, o, ctx);
  }

 private:
  /// One execution: each output's weighted gradient added to its inputs, the terms of every
  /// input in a random order with each product and sum rounded in f.
  static Tensor scatter(const OpArgs& a, const Bilinear& b,
                        const std::vector<std::array<std::pair<std::int64_t, double>, 4>>& wts,
                        std::mt19937_64& rng, Format f) {
    const Tensor& g = a.tensor(0);
    const Planes p = planes(b);
    const auto gv = g.values();
    std::vector<std::vector<double>> terms(static_cast<std::size_t>(p.count * p.inPlane));
    for (std::int64_t pl = 0; pl < p.count; ++pl)
      for (std::size_t o = 0; o < wts.size(); ++o)
        for (const auto& [off, w] : wts[o]) {
          const double v = gv[static_cast<std::size_t>(pl * p.outPlane) + o];
          terms[static_cast<std::size_t>(pl * p.inPlane + off)].push_back(roundNearest(w * v, f));
        }
    std::vector<double> out(terms.size(), 0.0);
    for (std::size_t k = 0; k < terms.size(); ++k) {
      std::shuffle(terms[k].begin(), terms[k].end(), rng);
      for (double t : terms[k]) out[k] = roundNearest(out[k] + t, f);
    }
    return Tensor::point(b.in, a.outSpec().dtype, std::move(out));
  }
};

}  // namespace

void registerBilinearOps(OpRegistry& r) {
  const auto fwd = std::make_shared<const BilinearRule>();
  r.add("aten.upsample_bilinear2d.vec", fwd);
  r.add("aten.upsample_bilinear2d.default", fwd);
  const auto back = std::make_shared<const BilinearBackwardRule>();
  r.add("aten.upsample_bilinear2d_backward.vec", back);
  r.add("aten.upsample_bilinear2d_backward.default", back);
}

}  // namespace lossbound
