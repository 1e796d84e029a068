// Layer norm ops: native_layer_norm (→ out, mean, rstd) and native_layer_norm_backward
// (→ grad_input, grad_weight, grad_bias, with output_mask).
//
// Error model of "any reasonable implementation" of the row moments (row of n values, compute
// format c = fp32 for fp32/bf16/fp16, fp64 for fp64; u = u_c; A = max|x_j|, W = max x − min x,
// S = Σ(x_j − μ)² exact):
//  (a) two-pass: μ̂ = fl(Σx / n) or Σx·fl(1/n), sum in any order: |μ̂ − μ| ≤ γ_{n+1}·A
//      (Higham 2002, Lemma 3.1 and eq. 4.4); ŝ = Σ fl(fl(x_j − μ̂)²) in any order: with the
//      common e = μ − μ̂ and Σ(x_j − μ) = 0, Σ(x_j − μ + e)² = S + n e², so
//      |ŝ − S| ≤ γ_{n+2}(S + nE²) + nE² (+ n·η_c for underflow in the squares);
//  (b) Welford / Chan–Golub–LeVeque pairwise updating with any combining tree (PyTorch 1.13 CPU
//      RowwiseMoments and the CUDA WelfordOps): combine (n_a, m_a, s_a) with (n_b, m_b, s_b):
//      δ = m_b − m_a, m = m_a + δ·n_b/n, s = s_a + s_b + δ²·n_a n_b/n (or, for a single new
//      element, s += δ·(x − m_new)). Our bound (derived for this model, in the spirit of Chan,
//      Golub, LeVeque 1983, "Algorithms for computing the sample variance", Amer. Stat. 37):
//      each node adds a local mean error ≤ γ_3·W' + u'·(A + E) that reaches the root weighted by
//      n_node / n, and Σ_nodes n_node/n ≤ (n+1)/2 (average leaf depth), so
//        E_w = ((n+1)/2)(γ_3 W + u'A) / (1 − ((n+1)/2)(2γ_3 + u')),  W' = W + 2E;
//      each node's s-increment t = δ²·w, w = n_a n_b/n, is computed with relative error ≤ γ_6
//      (δ's own rounding included) on the computed means, whose difference is off the exact
//      D = M_b − M_a (|D| ≤ W) by |e| ≤ E(n_a) + E(n_b), E(m) = ((m+1)/2)·c0 the same mean
//      bound for a subtree of m leaves, c0 = (γ_3 W + u'A) / (1 − ((n+1)/2)(2γ_3 + u')); so
//      |t̂ − T| ≤ (1 + γ_6)·w·|e|(2W + |e|) + γ_6·w·D², Σ_nodes w·D² = S, and since every pair
//      of leaves meets at exactly one node, Σ_nodes n_a n_b = n(n − 1)/2 for any tree, giving
//      Σ_nodes w·|e| ≤ Z = c0·(n − 1)(n + 2)/2 (also for the element update
//      s += δ·(x − m_new) and mixed trees); with its magnitude term 2u'·W'·(A + E) and the
//      accumulation of the increments (γ_{2n}):
//        B_inc = [γ_6 S + (1 + γ_6)(2W + 2E)·Z + (n−1)·2u'W'(A + E)] / (1 − γ_6),
//        |ŝ − S| ≤ B_inc + γ_{2n}(S + 2B_inc)
//      (the earlier Σ w ≤ (n/2)⌈log2 n⌉ + n with the root error E at every node was ⌈log2 n⌉+2
//      times larger). By Cauchy–Schwarz the first term is also at most
//      (1 + γ_6)·(2·sqrt(Q)·sqrt(S) + Q), Q = c0²(n + 2)²(n − 1)/8 >= Σ_nodes w·e² (Σ w·D² = S),
//      which replaces |D| <= W by the row's own spread: the smaller is used (rstd enclosures
//      6–9× narrower for normal rows of 64–1024 elements, bench/bench_norm.cpp).
//  The enclosure uses E = max(E_tp, E_w) + n·η_c (the divisions fl(Σx/n), fl(δ/k) may underflow,
//  η_c/2 each) and the larger |ŝ − S| bound, so both families (and
//  any mix of their orders) are enclosed.
//  Every one of these algorithms computes ŝ >= 0 (sums of rounded non-negative squares or
//  increments; the element update's δ·(x − m_new) >= 0 since m_new lies between m and x), so the
//  enclosure of ŝ is cut at 0: rstd <= 1/sqrt(eps) stays finite for rows whose enclosures are
//  wider than their spread.
//  Then var = fl(ŝ/n) (≤ 2 roundings, clamped at 0 or not), rstd = 1/sqrt(fl(var + eps)) as
//  two correctly rounded steps or a libm rsqrt (modelUlps(Rsqrt, c)), eps rounded to c;
//  out = ((x − μ̂)·rstd)·w + b (CUDA; also the bracketing (x − μ̂)·(rstd·w)) or the PyTorch CPU
//  form (x·rstd + (−rstd·μ̂))·w + b, whose two products carry errors u·|x|·rstd and u·|μ̂|·rstd
//  (the cancellation is real and enclosed). Each op rounds in c; outputs round to storage.
// Dependency: the centred values x_i − μ are enclosed as the linear combination
// (1 − 1/n)x_i − Σ_{j≠i} x_j / n with exact coefficients (prefix/suffix sums), never as
// X_i − M with M independent of X; the variance uses the centred enclosures.
// Adjoint-weighted local error (adjointLocalError, exact inputs, point outputs y, μ, r): every
// element of a row uses the same computed μ̂ and r̂, δμ = μ̂ − μ, δr = r̂ − r, |δμ| <= Δμ and
// |δr| <= Δr the distances from the point statistics to the far ends of rowMoments' enclosures
// (mean: μ ± meanError in c; rstd: every r̂ the candidate computes) — the moment bounds above,
// reused, not re-derived. With z_j = (x_j − μ̂)·r̂·w_j + b_j (μ̂, r̂ given, exact arithmetic),
// z_j − y_j = w_j[(x_j − μ)δr − r·δμ − δμ·δr] exactly, so for adjoints g
//   |Σ g_j(ŷ_j − y_j)| <= Δr·|Σ g_j w_j (x_j − μ)| + (r·Δμ + Δμ·Δr)·|Σ g_j w_j| + Σ|g_j|·ε̄_j,
// the signed sums enclosed in directed binary64, and ε̄_j >= |ŷ_j − z_j| the rounding of the
// affine part given μ̂, r̂ (P = |x − μ̂|·r̂·|w| <= (|x − μ| + Δμ)·sup r̂·|w|, u = u_c):
//   centred fl(fl(fl(x − μ̂)·r̂)·w) (or (x − μ̂)·fl(r̂·w)): 2 or 3 roundings, γ_3·P (γ_2 without
//   w) (Higham 2002, Lemma 3.1);
//   CPU fl(fl(x·r̂) + fl(−r̂·μ̂)) = ((x − μ̂)r̂ + η)(1 + β), |η| <= H = u(|x| + |μ̂|)r̂, so it is
//   within H(1 + u) + u|x − μ̂|r̂ of (x − μ̂)r̂, and after ·w within
//   |w|[(1 + u)²H + (2u + u²)|x − μ̂|r̂];
//   the larger of the two, + η_c(3 + |w| + r̂ + |x − μ̂| + |x| + |μ̂|) (underflow of the <= 3
//   products, scaled by the later ones; none where the affine part may overflow in c: no
//   adjoint term then), + u(P + |b| + E) for the bias
//   add, + u_s(P + |b| + E) + η_s when the output is stored in a coarser format s, + γ_4^{64}
//   (|x − μ|·r·|w| + |b|) for the binary64 point value y itself. The stored mean and rstd
//   outputs add |g_μ|·|μ̃ − μ| and |g_r|·|r̃ − r| with their own (storage-rounded) enclosures
//   (the triangle inequality: they need not be the μ̂, r̂ used for y). Probabilistic: the two
//   shared terms are the root-sum-squares of the row's individual roundings through δμ and δr
//   (ops::norm::momentSpread, ~√n·u where the worst case is ~n·u; r·δμ + δμ·δr = δμ·r̂ is
//   weighed by sup r̂, so the cross term needs no term of its own), at most the worst-case terms
//   taken as one rounding each, in quadrature across rows, with the per-element terms |g_j|·ε̄_j
//   (added linearly within each binade of x − μ and of the output, where roundings can share an
//   offset; norm_row_adjoint.cpp)
//   (every term is nonnegative and at most its first-order counterpart, so the root of the sum of
//   squares never exceeds the first-order bound). Signed row sums instead of Σ|g_j|·r_j: ~√n
//   tighter. The row's term is ops::norm::normRowAdjoint (core/ops/norm_row_adjoint.cpp), which
//   batch and group norm share with the channel affine form x·α + β.
// Normalized values whatever the enclosures' widths (interval rule): Samuelson's inequality
// (x_j − μ)² <= ((n − 1)/n)·S gives |x_j − μ̂|·r̂ <= (sqrt((n − 1)S/n) + E)·sup r̂(ŝ >= S − B)
// for the row's own S, E and B (the bounds above, which grow with A, W <= sqrt(2S) and S),
// maximized over the enclosure of S on a grid of cells (kernels::normalizedBound); both affine
// forms are also enclosed from it and intersected with their enclosures from x − μ̂ and rstd. Where
// the rows' enclosures are far wider than their spread, the variance's enclosure reaches 0 and
// rstd 1/sqrt(eps), while this keeps a unit-weight output near sqrt(n − 1). Training-mode batch
// norm and group norm use the same bound in each affine form (kernels::affineEnclosure).
// The forward interval rule is the LB_HD row body kernels::layerNormRow
// (core/kernels/layer_norm_row.h), run per row on the host unless the Backend offers
// layerNormRows (the CUDA backend runs the same body on the device).
//
// native_layer_norm_backward (mean and rstd are inputs, saved by the forward): with
// x̂ = (x − mean)·rstd and g = dy·w, the reference formula gI = rstd/n·(n g − Σg − x̂ Σ g x̂)
// and the PyTorch CPU form gI = rstd·g + b·x + c, b = (Σg·mean − Σg x)·rstd³/n,
// c = −b·mean − Σg·rstd/n; every sum is a dot product in any order (Higham 2002, eq. 3.5:
// γ_n Σ|a||b| + n·η); the enclosure is the hull of both forms. grad_weight = Σ_rows dy·x̂,
// grad_bias = Σ_rows dy, in any order. The rows of grad_input and the columns of grad_weight and
// grad_bias are the LB_HD bodies of core/kernels/layer_norm_backward.h, run on the host unless
// the Backend offers layerNormBackwardRows (a device runs the same bodies).

#include "core/backend.h"
#include "core/kernels/layer_norm_backward.h"
#include "core/kernels/layer_norm_row.h"
#include "core/ops/channel_norm_support.h"
#include "core/ops/error_bounds.h"
#include "core/ops/families.h"
#include "core/ops/formats.h"
#include "core/ops/layer_norm_point_error.h"
#include "core/ops/libm_model.h"
#include "core/ops/nn_support.h"
#include "core/ops/norm_row_adjoint.h"
#include "core/ops/random_arith.h"
#include "core/ops/registry.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

namespace lossbound {

namespace {

using namespace ops;
using namespace ops::nn;
using ops::norm::randomMoments;

/// The row structure of a layer norm: `rows` rows of n elements (the normalized trailing dims).
struct LnShape {
  std::int64_t rows = 0, n = 1;
  Shape statShape;  // input shape with the normalized dims set to 1
  Shape normShape;
};

LnShape lnShape(const OpArgs& a, const Tensor& x, std::size_t normPos) {
  LnShape s;
  s.normShape = a.intListArg(normPos, "normalized_shape");
  const auto k = s.normShape.size();
  if (k > x.shape().size())
    a.fail("normalized_shape " + shapeString(s.normShape) + " is longer than the input shape " +
           shapeString(x.shape()));
  for (std::size_t d = 0; d < k; ++d)
    if (x.shape()[x.shape().size() - k + d] != s.normShape[d])
      a.fail("normalized_shape " + shapeString(s.normShape) +
             " does not match the trailing dims of " + shapeString(x.shape()));
  s.n = numel(s.normShape);
  s.statShape = x.shape();
  for (std::size_t d = 0; d < k; ++d) s.statShape[x.shape().size() - k + d] = 1;
  s.rows = s.n == 0 ? numel(s.statShape) : x.numel() / s.n;
  return s;
}

const Tensor* optTensor(const OpArgs& a, std::size_t pos, std::int64_t n) {
  if (!a.isTensor(pos)) return nullptr;
  const Tensor& t = a.tensor(pos);
  if (t.numel() != n)
    a.fail("weight/bias should have " + std::to_string(n) + " elements, found " +
           shapeString(t.shape()));
  return &t;
}

double epsArg(const OpArgs& a, std::size_t pos) { return a.numberArg(pos, "eps"); }

// ---------------------------------------------------------------------------------------------
// Forward: the formula in a point-like domain (binary64 or AD), two-pass.

template <class D>
void forwardFormula(const D& d, const std::vector<typename D::V>& x,
                    const std::vector<typename D::V>* w, const std::vector<typename D::V>* b,
                    std::int64_t rows, std::int64_t n, double eps, std::vector<typename D::V>& out,
                    std::vector<typename D::V>& mean, std::vector<typename D::V>& rstd) {
  using V = typename D::V;
  out.assign(x.size(), d.lit(0.0));
  mean.assign(static_cast<std::size_t>(rows), d.lit(0.0));
  rstd.assign(static_cast<std::size_t>(rows), d.lit(0.0));
  const V nv = d.lit(static_cast<double>(n));
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto base = static_cast<std::size_t>(r * n);
    V s = d.lit(0.0);
    for (std::int64_t j = 0; j < n; ++j) s = d.add(s, x[base + static_cast<std::size_t>(j)]);
    const V mu = d.div(s, nv);
    V ss = d.lit(0.0);
    for (std::int64_t j = 0; j < n; ++j)
      ss = d.add(ss, d.sqr(d.sub(x[base + static_cast<std::size_t>(j)], mu)));
    const V rs = d.div(d.lit(1.0), d.sqrtV(d.add(d.div(ss, nv), d.lit(eps))));
    mean[static_cast<std::size_t>(r)] = mu;
    rstd[static_cast<std::size_t>(r)] = rs;
    for (std::int64_t j = 0; j < n; ++j) {
      const auto i = base + static_cast<std::size_t>(j);
      V y = d.mul(d.sub(x[i], mu), rs);
      if (w) y = d.mul(y, (*w)[static_cast<std::size_t>(j)]);
      if (b) y = d.add(y, (*b)[static_cast<std::size_t>(j)]);
      out[i] = y;
    }
  }
}

/// native_layer_norm(x, normalized_shape, weight, bias, eps) → (out, mean, rstd): point by the
/// two-pass formula, interval by kernels::layerNormRow, random by randomMoments, vjp by AD
/// through the point formula, localError from the enclosure on exact inputs.
class LayerNormRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    const LnShape s = lnShape(a, x, 1);
    const Tensor* w = optTensor(a, 2, s.n);
    const Tensor* b = optTensor(a, 3, s.n);
    const PointDomain d;
    std::vector<double> xv(x.values().begin(), x.values().end()), wv, bv, out, mean, rstd;
    if (w) wv.assign(w->values().begin(), w->values().end());
    if (b) bv.assign(b->values().begin(), b->values().end());
    forwardFormula(d, xv, w ? &wv : nullptr, b ? &bv : nullptr, s.rows, s.n, epsArg(a, 4), out,
                   mean, rstd);
    if (s.n == 0) std::fill(mean.begin(), mean.end(), std::nan(""));
    return std::vector<Tensor>{Tensor::point(x.shape(), a.outSpec(0).dtype, out),
                               Tensor::point(s.statShape, a.outSpec(1).dtype, mean),
                               Tensor::point(s.statShape, a.outSpec(2).dtype, rstd)};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const Tensor& x = a.tensor(0);
    const LnShape s = lnShape(a, x, 1);
    const Tensor* w = optTensor(a, 2, s.n);
    const Tensor* b = optTensor(a, 3, s.n);
    const Format c = accumulationFormat(ctx.precision, a.outSpec(0).dtype);
    const kernels::LayerNormModel model{.compute = c,
                                        .outStorage = outFormat(a, ctx, 0),
                                        .meanStorage = outFormat(a, ctx, 1),
                                        .rstdStorage = outFormat(a, ctx, 2),
                                        .eps = epsArg(a, 4),
                                        .rsqrtUlps = modelUlps(LibmFn::Rsqrt, c)};
    std::vector<double> oLo(static_cast<std::size_t>(x.numel())), oHi(oLo.size()),
        mLo(static_cast<std::size_t>(s.rows)), mHi(mLo.size()), rLo(mLo.size()), rHi(mLo.size());
    const kernels::ConstIntervalSpan xs{x.lo().data(), x.hi().data()};
    const kernels::ConstIntervalSpan ws =
        w ? kernels::ConstIntervalSpan{w->lo().data(), w->hi().data()}
          : kernels::ConstIntervalSpan{};
    const kernels::ConstIntervalSpan bs =
        b ? kernels::ConstIntervalSpan{b->lo().data(), b->hi().data()}
          : kernels::ConstIntervalSpan{};
    if (!ctx.backend.layerNormRows(model, xs, ws, bs, {oLo.data(), oHi.data()},
                                   {mLo.data(), mHi.data()}, {rLo.data(), rHi.data()}, s.rows,
                                   s.n)) {
      ctx.backend.parallelFor(s.rows, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t r = begin; r < end; ++r) {
          const std::int64_t o = r * s.n;
          Interval mean, rstd;
          kernels::layerNormRow(xs.lo + o, xs.hi + o, s.n, ws.lo, ws.hi, bs.lo, bs.hi, model,
                                oLo.data() + o, oHi.data() + o, &mean, &rstd);
          mLo[static_cast<std::size_t>(r)] = mean.lo;
          mHi[static_cast<std::size_t>(r)] = mean.hi;
          rLo[static_cast<std::size_t>(r)] = rstd.lo;
          rHi[static_cast<std::size_t>(r)] = rstd.hi;
        }
      });
    }
    return std::vector<Tensor>{
        Tensor::interval(x.shape(), a.outSpec(0).dtype, std::move(oLo), std::move(oHi)),
        Tensor::interval(s.statShape, a.outSpec(1).dtype, std::move(mLo), std::move(mHi)),
        Tensor::interval(s.statShape, a.outSpec(2).dtype, std::move(rLo), std::move(rHi))};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const Tensor& x = a.tensor(0);
    const LnShape s = lnShape(a, x, 1);
    const Tensor* w = optTensor(a, 2, s.n);
    const Tensor* b = optTensor(a, 3, s.n);
    const Format c = accumulationFormat(ctx.precision, a.outSpec(0).dtype);
    const Format so = outFormat(a, ctx, 0), sm = outFormat(a, ctx, 1), sr = outFormat(a, ctx, 2);
    const RandomDomain d{c, ctx.rng};
    std::mt19937_64& rng = *ctx.rng;
    const double eps = roundNearest(epsArg(a, 4), c);
    std::vector<double> out(static_cast<std::size_t>(x.numel())),
        mean(static_cast<std::size_t>(s.rows)), rstd(mean.size());
    for (std::int64_t r = 0; r < s.rows; ++r) {
      if (s.n == 0) {
        mean[static_cast<std::size_t>(r)] = std::nan("");
        continue;
      }
      std::vector<double> row(static_cast<std::size_t>(s.n));
      for (std::int64_t j = 0; j < s.n; ++j)
        row[static_cast<std::size_t>(j)] = x.values()[static_cast<std::size_t>(r * s.n + j)];
      const auto [mu, m2] = randomMoments(row, c, rng);
      const double nd = static_cast<double>(s.n);
      double var = (rng() & 1) ? d.div(m2, nd) : d.mul(m2, roundNearest(1.0 / nd, c));
      if (rng() & 1) var = std::max(var, 0.0);
      const double ve = d.add(var, eps);
      const double rs =
          (rng() & 1) ? d.div(1.0, roundNearest(std::sqrt(ve), c))
                      : perturbUlps(1.0 / std::sqrt(ve), publishedUlps(LibmFn::Rsqrt, c), c, rng);
      const int form = static_cast<int>(rng() % 3);
      const double negRmu = -d.mul(rs, mu);
      for (std::int64_t j = 0; j < s.n; ++j) {
        const double xv = row[static_cast<std::size_t>(j)];
        const double dj = d.sub(xv, mu);
        double y;
        if (form == 0)
          y = w ? d.mul(d.mul(dj, rs), w->values()[static_cast<std::size_t>(j)]) : d.mul(dj, rs);
        else if (form == 1)
          y = w ? d.mul(dj, d.mul(rs, w->values()[static_cast<std::size_t>(j)])) : d.mul(dj, rs);
        else {
          y = d.add(d.mul(xv, rs), negRmu);
          if (w) y = d.mul(y, w->values()[static_cast<std::size_t>(j)]);
        }
        if (b) y = d.add(y, b->values()[static_cast<std::size_t>(j)]);
        out[static_cast<std::size_t>(r * s.n + j)] = roundNearest(y, so);
      }
      mean[static_cast<std::size_t>(r)] = roundNearest(mu, sm);
      rstd[static_cast<std::size_t>(r)] = roundNearest(rs, sr);
    }
    return std::vector<Tensor>{Tensor::point(x.shape(), a.outSpec(0).dtype, out),
                               Tensor::point(s.statShape, a.outSpec(1).dtype, mean),
                               Tensor::point(s.statShape, a.outSpec(2).dtype, rstd)};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    // Reverse-mode AD through the two-pass formula (the same as point()).
    const Tensor& x = a.tensor(0);
    const LnShape s = lnShape(a, x, 1);
    const Tensor* w = optTensor(a, 2, s.n);
    const Tensor* b = optTensor(a, 3, s.n);
    Tape tape;
    const AdDomain d{&tape};
    std::vector<Var> xv, wv, bv, out, mean, rstd;
    for (double v : x.values()) xv.push_back(d.leaf(v));
    if (w)
      for (double v : w->values()) wv.push_back(d.leaf(v));
    if (b)
      for (double v : b->values()) bv.push_back(d.leaf(v));
    forwardFormula(d, xv, w ? &wv : nullptr, b ? &bv : nullptr, s.rows, s.n, epsArg(a, 4), out,
                   mean, rstd);
    std::vector<std::pair<int, double>> seeds;
    for (std::size_t i = 0; i < out.size(); ++i) seeds.emplace_back(out[i].id, g[0].values()[i]);
    for (std::size_t i = 0; i < mean.size(); ++i) {
      if (g.size() > 1 && g[1].numel() == static_cast<std::int64_t>(mean.size()))
        seeds.emplace_back(mean[i].id, g[1].values()[i]);
      if (g.size() > 2 && g[2].numel() == static_cast<std::int64_t>(rstd.size()))
        seeds.emplace_back(rstd[i].id, g[2].values()[i]);
    }
    const auto adj = tape.backward(seeds);
    auto grads = [&](const std::vector<Var>& v, const Tensor& t) {
      std::vector<double> gv(v.size());
      for (std::size_t i = 0; i < v.size(); ++i) gv[i] = adj[static_cast<std::size_t>(v[i].id)];
      return Tensor::point(t.shape(), t.dtype(), gv);
    };
    std::vector<std::optional<Tensor>> res{grads(xv, x)};
    if (w) res.emplace_back(grads(wv, *w));
    if (b) res.emplace_back(grads(bv, *b));
    return res;
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    return localErrorVia(*this, a, o, ctx);
  }

  // The binary64 point value's own error in closed form (core/ops/layer_norm_point_error.cpp);
  // empty (→ the binary64 model's adjoint term) where it has none.
  std::vector<Tensor> pointError(const OpArgs& a, std::span<const Tensor> o) const override {
    const Tensor& x = a.tensor(0);
    const LnShape s = lnShape(a, x, 1);
    const Tensor* w = optTensor(a, 2, s.n);
    const Tensor* b = optTensor(a, 3, s.n);
    if (o.size() < 3 || x.isInterval() || (w && w->isInterval()) || (b && b->isInterval()))
      return {};
    auto e = ops::norm::layerNormPointErrors(x.values().data(), w ? w->values().data() : nullptr,
                                             b ? b->values().data() : nullptr, s.rows, s.n,
                                             epsArg(a, 4), o[0].values().data(),
                                             o[1].values().data(), o[2].values().data());
    if (!e) return {};
    return std::vector<Tensor>{Tensor::point(x.shape(), o[0].dtype(), std::move(e->out)),
                               Tensor::point(s.statShape, o[1].dtype(), std::move(e->mean)),
                               Tensor::point(s.statShape, o[2].dtype(), std::move(e->rstd))};
  }

  // The row statistics are shared by the whole row: weighed by the signed adjoint sums (file
  // comment, "Adjoint-weighted local error"); nullopt (→ localError) when a row has no bound.
  std::optional<AdjointLocalError> adjointLocalError(const OpArgs& a, std::span<const Tensor> o,
                                                     std::span<const Tensor> g,
                                                     OpContext& ctx) const override {
    const Tensor& x = a.tensor(0);
    const LnShape s = lnShape(a, x, 1);
    const Tensor* w = optTensor(a, 2, s.n);
    const Tensor* b = optTensor(a, 3, s.n);
    if (s.n == 0 || o.size() < 3 || g.size() < 3) return std::nullopt;
    const Format c = accumulationFormat(ctx.precision, a.outSpec(0).dtype);
    const ops::norm::NormRowModel m{
        kernels::RowMomentsModel{c, epsArg(a, 4), modelUlps(LibmFn::Rsqrt, c), Format::Fp64},
        outFormat(a, ctx, 0),
        outFormat(a, ctx, 1),
        outFormat(a, ctx, 2),
        false,
        !ctx.boundOnly};
    const auto xv = x.values(), g0 = g[0].values();
    return ops::norm::normRowsAdjoint(s.rows, m, o, g, [&](std::int64_t r) {
      const auto off = static_cast<std::size_t>(r * s.n);
      return ops::norm::NormRow{xv.data() + off, g0.data() + off, w ? w->values().data() : nullptr,
                                b ? b->values().data() : nullptr, s.n};
    });
  }
};

// ---------------------------------------------------------------------------------------------
// native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, mask)

struct BwdArgs {
  LnShape s;
  const Tensor *dy, *x, *mean, *rstd, *w;
  std::vector<bool> mask;
};

BwdArgs bwdArgs(const OpArgs& a) {
  BwdArgs r;
  r.dy = &a.tensor(0);
  r.x = &a.tensor(1);
  r.s = lnShape(a, *r.x, 2);
  if (r.dy->shape() != r.x->shape())
    a.fail("grad_out " + shapeString(r.dy->shape()) + " should match input " +
           shapeString(r.x->shape()));
  r.mean = &a.tensor(3);
  r.rstd = &a.tensor(4);
  if (r.mean->numel() != r.s.rows || r.rstd->numel() != r.s.rows)
    a.fail("mean and rstd should have " + std::to_string(r.s.rows) + " elements");
  r.w = optTensor(a, 5, r.s.n);
  r.mask = {true, true, true};
  if (a.arg(7).kind == IrValue::Kind::List)
    for (std::size_t k = 0; k < 3 && k < a.arg(7).list.size(); ++k)
      r.mask[k] = a.arg(7).list[k].boolValue;
  return r;
}

/// The reference formula in a point-like domain (binary64 or AD): gI, gW, gB.
template <class D>
void backwardFormula(const D& d, const BwdArgs& ba, const std::vector<typename D::V>& dy,
                     const std::vector<typename D::V>& x, const std::vector<typename D::V>& mean,
                     const std::vector<typename D::V>& rstd, const std::vector<typename D::V>* w,
                     std::vector<typename D::V>& gi, std::vector<typename D::V>& gw,
                     std::vector<typename D::V>& gb) {
  using V = typename D::V;
  const std::int64_t n = ba.s.n;
  gi.assign(x.size(), d.lit(0.0));
  gw.assign(static_cast<std::size_t>(n), d.lit(0.0));
  gb.assign(static_cast<std::size_t>(n), d.lit(0.0));
  const V nv = d.lit(static_cast<double>(n));
  for (std::int64_t r = 0; r < ba.s.rows; ++r) {
    const auto base = static_cast<std::size_t>(r * n);
    const V mu = mean[static_cast<std::size_t>(r)], rs = rstd[static_cast<std::size_t>(r)];
    V sg = d.lit(0.0), sgx = d.lit(0.0);
    std::vector<V> xh(static_cast<std::size_t>(n)), g(static_cast<std::size_t>(n));
    for (std::int64_t j = 0; j < n; ++j) {
      const auto i = base + static_cast<std::size_t>(j), jj = static_cast<std::size_t>(j);
      xh[jj] = d.mul(d.sub(x[i], mu), rs);
      g[jj] = w ? d.mul(dy[i], (*w)[jj]) : dy[i];
      sg = d.add(sg, g[jj]);
      sgx = d.add(sgx, d.mul(g[jj], xh[jj]));
      gw[jj] = d.add(gw[jj], d.mul(dy[i], xh[jj]));
      gb[jj] = d.add(gb[jj], dy[i]);
    }
    for (std::int64_t j = 0; j < n; ++j) {
      const auto jj = static_cast<std::size_t>(j);
      const V t = d.sub(d.sub(d.mul(nv, g[jj]), sg), d.mul(xh[jj], sgx));
      gi[base + jj] = d.mul(d.div(rs, nv), t);
    }
  }
}

/// native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias,
/// output_mask) → (grad_input, grad_weight, grad_bias): the hull of the reference and the CPU
/// form (file comment), vjp by AD through the reference formula, localError from the enclosure.
class LayerNormBackwardRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const BwdArgs ba = bwdArgs(a);
    const PointDomain d;
    auto vec = [](const Tensor* t) {
      return std::vector<double>(t->values().begin(), t->values().end());
    };
    std::vector<double> wv, gi, gw, gb;
    if (ba.w) wv = vec(ba.w);
    backwardFormula(d, ba, vec(ba.dy), vec(ba.x), vec(ba.mean), vec(ba.rstd), ba.w ? &wv : nullptr,
                    gi, gw, gb);
    const DType t = dtypeOf(a, 0, ba.x->dtype());
    std::vector<Tensor> out{Tensor::point(ba.x->shape(), t, gi),
                            Tensor::point(shapeW(ba), dtypeOf(a, 1, t), gw),
                            Tensor::point(shapeW(ba), dtypeOf(a, 2, t), gb)};
    for (std::size_t k = 0; k < 3; ++k)
      if (!ba.mask[k]) out[k] = zerosLike(out[k], out[k].dtype());
    return out;
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const BwdArgs ba = bwdArgs(a);
    const DType t = dtypeOf(a, 0, ba.x->dtype());
    const Format c = accumulationFormat(ctx.precision, t);
    kernels::LayerNormBackwardModel md;
    md.compute = c;
    md.u = unitRoundoff(c) * (ctx.precision.truncatingAccumulation ? 2.0 : 1.0);
    md.eta = smallestSubnormal(c);
    md.inputStorage = outFormat(a, ctx, 0);
    md.weightStorage = a.node().outputs.size() > 1 ? outFormat(a, ctx, 1) : md.inputStorage;
    md.biasStorage = a.node().outputs.size() > 2 ? outFormat(a, ctx, 2) : md.inputStorage;
    const std::int64_t n = ba.s.n, rows = ba.s.rows;
    const auto nu = static_cast<std::size_t>(n);
    std::vector<double> giLo(static_cast<std::size_t>(ba.x->numel())), giHi(giLo.size()), gwLo(nu),
        gwHi(nu), gbLo(nu), gbHi(nu);
    auto spanOf = [](const Tensor* p) {
      return p ? kernels::ConstIntervalSpan{p->lo().data(), p->hi().data()}
               : kernels::ConstIntervalSpan{};
    };
    const kernels::ConstIntervalSpan dy = spanOf(ba.dy), x = spanOf(ba.x), mean = spanOf(ba.mean),
                                     rstd = spanOf(ba.rstd), w = spanOf(ba.w);
    // The rows of grad_input and the columns of grad_weight/grad_bias through the bodies of
    // core/kernels/layer_norm_backward.h: offered to the backend (a device runs the same bodies),
    // else run here.
    const bool offered = rows > 0 && n > 0 &&
                         ctx.backend.layerNormBackwardRows(
                             md, dy, x, mean, rstd, w, {giLo.data(), giHi.data()},
                             {gwLo.data(), gwHi.data()}, {gbLo.data(), gbHi.data()}, rows, n);
    if (!offered) {
      ctx.backend.parallelFor(rows, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t r = begin; r < end; ++r) {
          const std::int64_t o = r * n;
          kernels::layerNormBackwardRow(dy.lo + o, dy.hi + o, x.lo + o, x.hi + o,
                                        Interval{mean.lo[r], mean.hi[r]},
                                        Interval{rstd.lo[r], rstd.hi[r]}, w.lo, w.hi, n, md,
                                        giLo.data() + o, giHi.data() + o);
        }
      });
      for (std::int64_t j = 0; j < n; ++j) {
        Interval gw, gb;
        kernels::layerNormBackwardColumn(dy.lo, dy.hi, x.lo, x.hi, mean.lo, mean.hi, rstd.lo,
                                         rstd.hi, rows, n, j, md, &gw, &gb);
        const auto ju = static_cast<std::size_t>(j);
        gwLo[ju] = gw.lo;
        gwHi[ju] = gw.hi;
        gbLo[ju] = gb.lo;
        gbHi[ju] = gb.hi;
      }
    }
    std::vector<Tensor> out{
        Tensor::interval(ba.x->shape(), t, std::move(giLo), std::move(giHi)),
        Tensor::interval(shapeW(ba), dtypeOf(a, 1, t), std::move(gwLo), std::move(gwHi)),
        Tensor::interval(shapeW(ba), dtypeOf(a, 2, t), std::move(gbLo), std::move(gbHi))};
    for (std::size_t k = 0; k < 3; ++k)
      if (!ba.mask[k]) out[k] = zerosLike(out[k], out[k].dtype()).toInterval();
    return out;
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const BwdArgs ba = bwdArgs(a);
    const DType t = dtypeOf(a, 0, ba.x->dtype());
    const Format c = accumulationFormat(ctx.precision, t);
    const RandomDomain d{c, ctx.rng};
    std::mt19937_64& rng = *ctx.rng;
    const std::int64_t n = ba.s.n;
    const double nd = static_cast<double>(n), invN = roundNearest(1.0 / nd, c);
    const bool cpuForm = rng() & 1;
    std::vector<double> gi(static_cast<std::size_t>(ba.x->numel())), scratch,
        g(static_cast<std::size_t>(n)), xh(g.size()), xr(g.size()), dyr(g.size()),
        wv(g.size(), 1.0);
    std::vector<std::vector<double>> gwT(static_cast<std::size_t>(n)), gbT(g.size());
    if (ba.w) wv.assign(ba.w->values().begin(), ba.w->values().end());
    for (std::int64_t r = 0; r < ba.s.rows; ++r) {
      const double mu = ba.mean->values()[static_cast<std::size_t>(r)],
                   rs = ba.rstd->values()[static_cast<std::size_t>(r)];
      for (std::int64_t j = 0; j < n; ++j) {
        const auto jj = static_cast<std::size_t>(j);
        const auto i = static_cast<std::size_t>(r * n + j);
        xr[jj] = ba.x->values()[i];
        dyr[jj] = ba.dy->values()[i];
        xh[jj] = d.mul(d.sub(xr[jj], mu), rs);
        gwT[jj].push_back(d.mul(dyr[jj], xh[jj]));
        gbT[jj].push_back(dyr[jj]);
      }
      const double sg = ba.w ? randomDot(dyr, wv, c, rng, scratch) : [&] {
        std::vector<double> t2 = dyr;
        return randomSum(t2, c, rng);
      }();
      for (std::int64_t j = 0; j < n; ++j)
        g[static_cast<std::size_t>(j)] =
            ba.w ? d.mul(dyr[static_cast<std::size_t>(j)], wv[static_cast<std::size_t>(j)])
                 : dyr[static_cast<std::size_t>(j)];
      const double sgx = randomDot(g, xh, c, rng, scratch);
      const double sgX = randomDot(g, xr, c, rng, scratch);
      for (std::int64_t j = 0; j < n; ++j) {
        const auto jj = static_cast<std::size_t>(j);
        double v;
        if (cpuForm) {
          const double rs3 = d.mul(d.mul(rs, rs), rs);
          const double bb = d.mul(d.mul(d.sub(d.mul(sg, mu), sgX), rs3), invN);
          const double cc = d.sub(d.mul(-bb, mu), d.mul(d.mul(sg, rs), invN));
          v = d.add(d.add(d.mul(rs, g[jj]), d.mul(bb, xr[jj])), cc);
        } else {
          const double tt = d.sub(d.sub(d.mul(nd, g[jj]), sg), d.mul(xh[jj], sgx));
          v = d.mul(d.div(rs, nd), tt);
        }
        gi[static_cast<std::size_t>(r * n + j)] = v;
      }
    }
    const Format s0 = outFormat(a, ctx, 0);
    const Format s1 = a.node().outputs.size() > 1 ? outFormat(a, ctx, 1) : s0;
    const Format s2 = a.node().outputs.size() > 2 ? outFormat(a, ctx, 2) : s0;
    std::vector<double> gw(static_cast<std::size_t>(n)), gb(gw.size());
    for (std::size_t j = 0; j < gw.size(); ++j) {
      gw[j] = roundNearest(randomSum(gwT[j], c, rng), s1);
      gb[j] = roundNearest(randomSum(gbT[j], c, rng), s2);
    }
    for (double& v : gi) v = roundNearest(v, s0);
    std::vector<Tensor> out{Tensor::point(ba.x->shape(), t, gi),
                            Tensor::point(shapeW(ba), dtypeOf(a, 1, t), gw),
                            Tensor::point(shapeW(ba), dtypeOf(a, 2, t), gb)};
    for (std::size_t k = 0; k < 3; ++k)
      if (!ba.mask[k]) out[k] = zerosLike(out[k], out[k].dtype());
    return out;
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> h, OpContext&) const override {
    const BwdArgs ba = bwdArgs(a);
    Tape tape;
    const AdDomain d{&tape};
    auto leaves = [&](const Tensor* t) {
      std::vector<Var> v;
      for (double x : t->values()) v.push_back(d.leaf(x));
      return v;
    };
    const auto dy = leaves(ba.dy), x = leaves(ba.x), mean = leaves(ba.mean), rstd = leaves(ba.rstd);
    std::vector<Var> wv, gi, gw, gb;
    if (ba.w) wv = leaves(ba.w);
    backwardFormula(d, ba, dy, x, mean, rstd, ba.w ? &wv : nullptr, gi, gw, gb);
    std::vector<std::pair<int, double>> seeds;
    const std::vector<Var>* outs[3] = {&gi, &gw, &gb};
    for (std::size_t k = 0; k < 3 && k < h.size(); ++k)
      if (ba.mask[k])
        for (std::size_t i = 0; i < outs[k]->size(); ++i)
          seeds.emplace_back((*outs[k])[i].id, h[k].values()[i]);
    const auto adj = tape.backward(seeds);
    auto grads = [&](const std::vector<Var>& v, const Tensor* t) {
      std::vector<double> g(v.size());
      for (std::size_t i = 0; i < v.size(); ++i) g[i] = adj[static_cast<std::size_t>(v[i].id)];
      return Tensor::point(t->shape(), t->dtype(), g);
    };
    std::vector<std::optional<Tensor>> res{grads(dy, ba.dy), grads(x, ba.x), grads(mean, ba.mean),
                                           grads(rstd, ba.rstd)};
    if (ba.w) res.emplace_back(grads(wv, ba.w));
    if (a.isTensor(6))
      res.emplace_back(zerosLike(a.tensor(6), a.tensor(6).dtype()));  // bias: unused
    return res;
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    return localErrorVia(*this, a, o, ctx);
  }

 private:
  /// Returns the shape of grad_weight and grad_bias (the weight shape, else normalized_shape).
  static Shape shapeW(const BwdArgs& ba) { return ba.w ? ba.w->shape() : ba.s.normShape; }

  /// Returns the traced dtype of output k, or `fallback` when the node has fewer outputs.
  static DType dtypeOf(const OpArgs& a, std::size_t k, DType fallback) {
    return a.node().outputs.size() > k ? a.outSpec(k).dtype : fallback;
  }
};

}  // namespace

void registerNormOps(OpRegistry& r) {
  r.add("aten.native_layer_norm", std::make_shared<const LayerNormRule>());
  r.add("aten.native_layer_norm_backward", std::make_shared<const LayerNormBackwardRule>());
}

}  // namespace lossbound
