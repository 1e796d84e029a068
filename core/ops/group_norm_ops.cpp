// Group norm ops: native_group_norm and native_group_norm_backward. Input x with N·C·HxW
// elements (N×C×*), C = G·D channels in G groups; the D·HxW elements of sample n and group g are
// one contiguous row, m = D·HxW.
//
// Contracts, one line per op:
// - native_group_norm(x, w?, b?, N, C, HxW, G, eps) → (out, mean, rstd): per row (n, g) the mean
//   μ and rstd r = 1/sqrt(var + eps) (biased var) of its m elements, out = (x − μ)·r·w_c + b_c
//   with c the element's channel; mean and rstd have shape N×G.
// - native_group_norm_backward(dy, x, mean, rstd, w?, N, C, HxW, G, mask) → (dx, dw, db), mean
//   and rstd taken as given (the forward's saved values): with ds_{nc} = Σ_hw dy·x, db_{nc} =
//   Σ_hw dy, ds_g = Σ_{c∈g} ds_{nc}·w_c, db_g = Σ_{c∈g} db_{nc}·w_c (w = 1 when None),
//   c2 = (db_g·μ − ds_g)·r³/m, c3 = −c2·μ − db_g·r/m: dx = r·w_c·dy + c2·x + c3 (the exact
//   derivative of the forward in μ, r's closed form), dw_c = Σ_n (ds_{nc} − db_{nc}·μ_{ng})·r_{ng},
//   db_c = Σ_n db_{nc}; outputs masked off are zeros.
//
// Error model and sources (compute format c as for layer norm; "stored statistics" as for batch
// norm, core/ops/batch_norm_ops.cpp: the forward's in the mean/rstd dtype, the backward's in the
// coarsest of the input, statistic and weight dtypes):
//  - the row moments: kernels::rowMoments (core/kernels/layer_norm_row.h), the two-pass and
//    Welford/pairwise bound of core/ops/norm_ops.cpp (PyTorch's CPU RowwiseMoments and the
//    CUDA WelfordOps are the Welford/pairwise family), run on the contiguous row in place;
//  - the affine part: ops::norm::affineEnclosure — the CPU and CUDA kernels compute
//    α = r·w_c, β = b_c − α·μ and y = x·α + β (with or without FMA), the decomposition and the
//    HxW = 1 CUDA kernel ((x − μ)·r)·w + b;
//  - backward: ds_{nc}, db_{nc} in any order (Higham 2002 eq. 3.5 and 4.4), then the group sums
//    as dot products of the computed ds/db with w (eq. 3.5 again, on their enclosures), then the
//    per-row scalars c2 (left to right, as the CPU, CUDA and decomposition all write it, with
//    db·μ − ds in two roundings or one — addcmul/FMA), T = db_g·r/m and c3 = −c2·μ − T in the
//    stat format; per element fl(fl(fl(c1·dy) + fl(c2·x)) + c3) in any bracketing, c1 = fl(r·w):
//    core c1·dy + c2·(x − μ) − T with the same c2 in c2·x and c2·μ (so the cancellation is
//    enclosed through x − μ), plus |error| <= u|c1 dy| + u|c2 x| + u(|c1 dy| + |c2 x|)(1 + u) +
//    u|c3| + u_s|c2 μ| + u_s(|c2 μ|(1 + u_s) + |T|) + 2η + 2η_s, then one rounding;
//    dw_c: Σ_n fl(fl(ds − fl(db·μ))·r) in the stat format, summed in any order; db_c likewise.
// The forward runs each row through kernels::batchNormRowAt (core/kernels/batch_norm_row.h, the
// training form of batch norm with the weight changing every HxW elements), on the host or
// offered to Backend::batchNormRows (a device runs the same body: the same bits).
// Not covered (outside the opmath precision model): the decomposition's bf16 elementwise
// products (dy·x rounded to bf16 before the sum); torch 1.13's bf16 group norm, whose small rows
// accumulate partly in bf16 (mean and rstd 1–2 bf16 ulps off; 2.15 is inside; measured in
// tests/core/ops/test_norm_torch_cases).
// vjp: reverse-mode AD through the formulas (point arithmetic); localError: the interval rule on
// the exact point inputs (ops::norm::localErrorFromInterval); adjointLocalError: a row's shared
// statistics weighed by the signed adjoint sums (ops::norm::normRowAdjoint).

#include "core/backend.h"
#include "core/kernels/batch_norm_row.h"
#include "core/kernels/group_norm_backward.h"
#include "core/kernels/layer_norm_row.h"
#include "core/ops/broadcasting.h"
#include "core/ops/channel_norm_support.h"
#include "core/ops/error_bounds.h"
#include "core/ops/families.h"
#include "core/ops/formats.h"
#include "core/ops/libm_model.h"
#include "core/ops/nn_support.h"
#include "core/ops/norm_row_adjoint.h"
#include "core/ops/random_arith.h"
#include "core/ops/registry.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

namespace lossbound {

namespace {

using namespace ops;
using namespace ops::nn;
using namespace ops::norm;

/// The group layout: rows (n, g) of m = D·HxW contiguous elements; element j of a row belongs to
/// channel g·D + j / HxW.
struct GnLayout {
  std::int64_t samples = 0, channels = 0, spatial = 0, groups = 1;
  /// Returns the channels per group.
  std::int64_t perGroup() const { return channels / groups; }
  /// Returns the elements per row.
  std::int64_t m() const { return perGroup() * spatial; }
  /// Returns the number of rows.
  std::int64_t rows() const { return samples * groups; }
  /// Returns the channel of element j of row r.
  std::int64_t channel(std::int64_t r, std::int64_t j) const {
    return (r % groups) * perGroup() + j / spatial;
  }
};

GnLayout gnLayout(const OpArgs& a, const Tensor& x, std::size_t pos) {
  GnLayout l;
  l.samples = a.intArg(pos, "N");
  l.channels = a.intArg(pos + 1, "C");
  l.spatial = a.intArg(pos + 2, "HxW");
  l.groups = a.intArg(pos + 3, "group");
  if (l.samples < 0 || l.channels < 0 || l.spatial < 0 || l.groups <= 0 ||
      l.channels % l.groups != 0)
    a.fail("group norm expects N, C, HxW >= 0 and C divisible by group > 0, found N=" +
           std::to_string(l.samples) + " C=" + std::to_string(l.channels) +
           " HxW=" + std::to_string(l.spatial) + " group=" + std::to_string(l.groups));
  if (x.numel() != l.samples * l.channels * l.spatial)
    a.fail("input " + shapeString(x.shape()) + " should have N·C·HxW = " +
           std::to_string(l.samples * l.channels * l.spatial) + " elements");
  return l;
}

const Tensor* channelTensor(const OpArgs& a, std::size_t pos, std::int64_t c, const char* what) {
  if (!a.isTensor(pos)) return nullptr;
  const Tensor& t = a.tensor(pos);
  if (t.numel() != c)
    a.fail(std::string(what) + " should have " + std::to_string(c) + " elements (one per " +
           "channel), found " + shapeString(t.shape()));
  return &t;
}

std::vector<double> valuesOf(const Tensor* t) {
  return t ? std::vector<double>(t->values().begin(), t->values().end()) : std::vector<double>{};
}

Format storageOf(const OpContext& ctx, DType t) {
  return isIntegral(t) ? Format::Fp64 : ctx.precision.storageFor(t);
}

// ---------------------------------------------------------------------------------------------
// native_group_norm(x, w?, b?, N, C, HxW, group, eps)

struct GnArgs {
  const Tensor *x = nullptr, *w = nullptr, *b = nullptr;
  GnLayout l;
  double eps = 1e-5;
};

GnArgs gnArgs(const OpArgs& a) {
  GnArgs r;
  r.x = &a.tensor(0);
  r.l = gnLayout(a, *r.x, 3);
  r.w = channelTensor(a, 1, r.l.channels, "weight");
  r.b = channelTensor(a, 2, r.l.channels, "bias");
  r.eps = a.numberArg(7, "eps");
  return r;
}

/// The forward in a point-like domain (binary64 or AD), two-pass.
template <class D>
void gnForwardFormula(const D& d, const GnArgs& ga, const std::vector<typename D::V>& x,
                      const std::vector<typename D::V>* w, const std::vector<typename D::V>* b,
                      std::vector<typename D::V>& out, std::vector<typename D::V>& mean,
                      std::vector<typename D::V>& rstd) {
  using V = typename D::V;
  const GnLayout& l = ga.l;
  const std::int64_t m = l.m();
  out.assign(x.size(), d.lit(0.0));
  mean.assign(static_cast<std::size_t>(l.rows()), d.lit(0.0));
  rstd.assign(mean.size(), d.lit(0.0));
  const V mv = d.lit(static_cast<double>(m)), eps = d.lit(ga.eps), one = d.lit(1.0);
  for (std::int64_t r = 0; r < l.rows(); ++r) {
    const auto base = static_cast<std::size_t>(r * m);
    V s = d.lit(0.0), ss = d.lit(0.0);
    for (std::int64_t j = 0; j < m; ++j) s = d.add(s, x[base + static_cast<std::size_t>(j)]);
    const V mu = d.div(s, mv);
    for (std::int64_t j = 0; j < m; ++j)
      ss = d.add(ss, d.sqr(d.sub(x[base + static_cast<std::size_t>(j)], mu)));
    const V rs = d.div(one, d.sqrtV(d.add(d.div(ss, mv), eps)));
    mean[static_cast<std::size_t>(r)] = mu;
    rstd[static_cast<std::size_t>(r)] = rs;
    for (std::int64_t j = 0; j < m; ++j) {
      const auto i = base + static_cast<std::size_t>(j);
      const auto c = static_cast<std::size_t>(l.channel(r, j));
      V y = d.mul(d.sub(x[i], mu), rs);
      if (w) y = d.mul(y, (*w)[c]);
      if (b) y = d.add(y, (*b)[c]);
      out[i] = y;
    }
  }
}

class GroupNormForwardRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const GnArgs ga = gnArgs(a);
    const PointDomain d;
    const std::vector<double> x = valuesOf(ga.x), w = valuesOf(ga.w), b = valuesOf(ga.b);
    std::vector<double> out, mean, rstd;
    gnForwardFormula(d, ga, x, ga.w ? &w : nullptr, ga.b ? &b : nullptr, out, mean, rstd);
    const Shape st{ga.l.samples, ga.l.groups};
    return {Tensor::point(ga.x->shape(), a.outSpec(0).dtype, std::move(out)),
            Tensor::point(st, a.outSpec(1).dtype, std::move(mean)),
            Tensor::point(st, a.outSpec(2).dtype, std::move(rstd))};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const GnArgs ga = gnArgs(a);
    const GnLayout& l = ga.l;
    const Format c = accumulationFormat(ctx.precision, a.outSpec(0).dtype);
    const Format sOut = outFormat(a, ctx, 0), sMean = outFormat(a, ctx, 1),
                 sRstd = outFormat(a, ctx, 2);
    const Format stat = coarser(coarser(c, sMean), sRstd);  // the statistics' dtypes
    const kernels::RowMomentsModel moments{c, ga.eps, modelUlps(LibmFn::Rsqrt, c), stat};
    kernels::BatchNormModel model{moments, sOut, sMean, sRstd, true};
    model.groups = l.groups;
    model.spatial = l.spatial;
    // Each row (n, g) through the body a device runs too (kernels::batchNormRowAt): offered to
    // the backend's row kernel, or run here row by row. The body rounds every result to its
    // storage format, so its outputs are the tensors as they are.
    const auto rows = static_cast<std::size_t>(l.rows());
    const auto n = static_cast<std::size_t>(ga.x->numel());
    std::vector<double> olo(n), ohi(n), mlo(rows), mhi(rows), rlo(rows), rhi(rows);
    auto spanOf = [](const Tensor* t) {
      return t ? kernels::ConstIntervalSpan{t->lo().data(), t->hi().data()}
               : kernels::ConstIntervalSpan{};
    };
    const kernels::ConstIntervalSpan x = spanOf(ga.x), w = spanOf(ga.w), b = spanOf(ga.b);
    const kernels::IntervalSpan out{olo.data(), ohi.data()};
    const bool offered =
        l.rows() > 0 && l.m() > 0 && ctx.backend.offersIntervalKernels() &&
        ctx.backend.batchNormRows(model, x, w, b, {}, {}, out, {mlo.data(), mhi.data()},
                                  {rlo.data(), rhi.data()}, l.rows(), l.m());
    if (!offered)
      ctx.backend.parallelFor(l.rows(), [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t r = begin; r < end; ++r) {
          Interval mean, rstd;
          kernels::batchNormRowAt(model, r, l.m(), x, w, b, {}, {}, out, &mean, &rstd);
          const auto ru = static_cast<std::size_t>(r);
          mlo[ru] = mean.lo;
          mhi[ru] = mean.hi;
          rlo[ru] = rstd.lo;
          rhi[ru] = rstd.hi;
        }
      });
    const Shape st{l.samples, l.groups};
    return {Tensor::interval(ga.x->shape(), a.outSpec(0).dtype, std::move(olo), std::move(ohi)),
            Tensor::interval(st, a.outSpec(1).dtype, std::move(mlo), std::move(mhi)),
            Tensor::interval(st, a.outSpec(2).dtype, std::move(rlo), std::move(rhi))};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const GnArgs ga = gnArgs(a);
    const GnLayout& l = ga.l;
    const Format c = accumulationFormat(ctx.precision, a.outSpec(0).dtype);
    const Format sOut = outFormat(a, ctx, 0), sMean = outFormat(a, ctx, 1),
                 sRstd = outFormat(a, ctx, 2);
    const Format stat = coarser(coarser(c, sMean), sRstd);  // the statistics' dtypes
    const bool storable = unitRoundoff(stat) > unitRoundoff(c);
    std::mt19937_64& rng = *ctx.rng;
    const std::int64_t m = l.m();
    std::vector<double> out(static_cast<std::size_t>(ga.x->numel())),
        mean(static_cast<std::size_t>(l.rows())), rstd(mean.size());
    const AffineForm form = randomAffineForm(rng);
    const bool storeAB = rng() & 1;
    const auto xv = ga.x->values();
    for (std::int64_t r = 0; r < l.rows(); ++r) {
      const auto ru = static_cast<std::size_t>(r);
      if (m == 0) {
        mean[ru] = rstd[ru] = std::nan("");
        continue;
      }
      std::vector<double> row(xv.begin() + r * m, xv.begin() + (r + 1) * m);
      const auto [mu, m2] = randomMoments(row, c, rng, stat);
      const double md = static_cast<double>(m);
      double var =
          (rng() & 1) ? roundNearest(m2 / md, c) : roundNearest(m2 * roundNearest(1.0 / md, c), c);
      if (rng() & 1) var = std::max(var, 0.0);
      const double rs = randomRsqrt(var, ga.eps, c, rng);
      const double muUse = storable && (rng() & 1) ? roundNearest(mu, stat) : mu;
      const double rUse = storable && (rng() & 1) ? roundNearest(rs, stat) : rs;
      for (std::int64_t j = 0; j < m; ++j) {
        const std::int64_t ch = l.channel(r, j);
        const double* w = ga.w ? &ga.w->values()[static_cast<std::size_t>(ch)] : nullptr;
        const double* b = ga.b ? &ga.b->values()[static_cast<std::size_t>(ch)] : nullptr;
        out[static_cast<std::size_t>(r * m + j)] =
            roundNearest(randomAffine(row[static_cast<std::size_t>(j)], muUse, rUse, w, b, form, c,
                                      stat, storeAB),
                         sOut);
      }
      mean[ru] = roundNearest(mu, sMean);
      rstd[ru] = roundNearest(rs, sRstd);
    }
    const Shape st{l.samples, l.groups};
    return {Tensor::point(ga.x->shape(), a.outSpec(0).dtype, std::move(out)),
            Tensor::point(st, a.outSpec(1).dtype, std::move(mean)),
            Tensor::point(st, a.outSpec(2).dtype, std::move(rstd))};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    const GnArgs ga = gnArgs(a);
    Tape tape;
    const AdDomain d{&tape};
    auto leaves = [&](const Tensor* t) {
      std::vector<Var> v;
      if (t)
        for (double x : t->values()) v.push_back(d.leaf(x));
      return v;
    };
    const std::vector<Var> x = leaves(ga.x), w = leaves(ga.w), b = leaves(ga.b);
    std::vector<Var> out, mean, rstd;
    gnForwardFormula(d, ga, x, ga.w ? &w : nullptr, ga.b ? &b : nullptr, out, mean, rstd);
    std::vector<std::pair<int, double>> seeds;
    const std::vector<Var>* outs[3] = {&out, &mean, &rstd};
    for (std::size_t k = 0; k < 3 && k < g.size(); ++k)
      if (g[k].numel() == static_cast<std::int64_t>(outs[k]->size()))
        for (std::size_t i = 0; i < outs[k]->size(); ++i)
          seeds.emplace_back((*outs[k])[i].id, g[k].values()[i]);
    const auto adj = tape.backward(seeds);
    std::map<const Tensor*, Tensor> grads;
    auto grad = [&](const std::vector<Var>& v, const Tensor* t) {
      if (!t) return;
      std::vector<double> gv(v.size());
      for (std::size_t i = 0; i < v.size(); ++i) gv[i] = adj[static_cast<std::size_t>(v[i].id)];
      grads.emplace(t, Tensor::point(t->shape(), t->dtype(), std::move(gv)));
    };
    grad(x, ga.x);
    grad(w, ga.w);
    grad(b, ga.b);
    std::vector<std::optional<Tensor>> res;
    for (const Tensor* t : a.tensorInputs()) {
      const auto it = grads.find(t);
      res.emplace_back(it != grads.end() ? std::optional<Tensor>(it->second)
                                         : std::optional<Tensor>(zerosLike(*t, t->dtype())));
    }
    return res;
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> outputs,
                                 OpContext& ctx) const override {
    return localErrorFromInterval(*this, a, outputs, ctx);
  }

  // A row's mean and rstd are shared by its m elements, weighed by the signed adjoint sums
  // (ops::norm::normRowAdjoint with the channel affine form, as batch norm). nullopt
  // (→ localError): statistics stored coarser than c, or a row without a bound.
  std::optional<AdjointLocalError> adjointLocalError(const OpArgs& a, std::span<const Tensor> o,
                                                     std::span<const Tensor> g,
                                                     OpContext& ctx) const override {
    const GnArgs ga = gnArgs(a);
    const GnLayout& l = ga.l;
    const std::int64_t m = l.m();
    if (m == 0 || o.size() < 3 || g.size() < 3) return std::nullopt;
    const Format c = accumulationFormat(ctx.precision, a.outSpec(0).dtype);
    const Format sMean = outFormat(a, ctx, 1), sRstd = outFormat(a, ctx, 2);
    if (coarser(coarser(c, sMean), sRstd) != c) return std::nullopt;
    const NormRowModel model{kernels::RowMomentsModel{c, ga.eps, modelUlps(LibmFn::Rsqrt, c), c},
                             outFormat(a, ctx, 0),
                             sMean,
                             sRstd,
                             true,
                             !ctx.boundOnly};
    const auto xv = ga.x->values(), g0 = g[0].values();
    const auto mu = static_cast<std::size_t>(m);
    std::vector<double> w(ga.w ? mu : 0), b(ga.b ? mu : 0);
    return normRowsAdjoint(l.rows(), model, o, g, [&](std::int64_t r) {
      const auto off = static_cast<std::size_t>(r) * mu;
      for (std::int64_t j = 0; j < m; ++j) {
        const auto ch = static_cast<std::size_t>(l.channel(r, j));
        if (ga.w) w[static_cast<std::size_t>(j)] = ga.w->values()[ch];
        if (ga.b) b[static_cast<std::size_t>(j)] = ga.b->values()[ch];
      }
      return NormRow{xv.data() + off, g0.data() + off, ga.w ? w.data() : nullptr,
                     ga.b ? b.data() : nullptr, m};
    });
  }
};

// ---------------------------------------------------------------------------------------------
// native_group_norm_backward(dy, x, mean, rstd, w?, N, C, HxW, group, mask)

struct GnBwdArgs {
  const Tensor *dy = nullptr, *x = nullptr, *mean = nullptr, *rstd = nullptr, *w = nullptr;
  GnLayout l;
  std::vector<bool> mask;
};

GnBwdArgs gnBwdArgs(const OpArgs& a) {
  GnBwdArgs r;
  r.dy = &a.tensor(0);
  r.x = &a.tensor(1);
  r.mean = &a.tensor(2);
  r.rstd = &a.tensor(3);
  r.l = gnLayout(a, *r.x, 5);
  if (r.dy->shape() != r.x->shape())
    a.fail("grad_out " + shapeString(r.dy->shape()) + " should have the shape of input " +
           shapeString(r.x->shape()));
  if (r.mean->numel() != r.l.rows() || r.rstd->numel() != r.l.rows())
    a.fail("mean and rstd should have N·group = " + std::to_string(r.l.rows()) +
           " elements, found " + shapeString(r.mean->shape()) + " and " +
           shapeString(r.rstd->shape()));
  r.w = channelTensor(a, 4, r.l.channels, "weight");
  r.mask = outputMask(a, 9);
  return r;
}

/// The backward in a point-like domain (binary64 or AD), in the ds/db form of the file comment.
template <class D>
void gnBackwardFormula(const D& d, const GnBwdArgs& ga, const std::vector<typename D::V>& dy,
                       const std::vector<typename D::V>& x, const std::vector<typename D::V>& mean,
                       const std::vector<typename D::V>& rstd, const std::vector<typename D::V>* w,
                       std::vector<typename D::V>& dx, std::vector<typename D::V>& dw,
                       std::vector<typename D::V>& db) {
  using V = typename D::V;
  const GnLayout& l = ga.l;
  const std::int64_t m = l.m(), hw = l.spatial, dg = l.perGroup();
  dx.assign(x.size(), d.lit(0.0));
  dw.assign(static_cast<std::size_t>(l.channels), d.lit(0.0));
  db.assign(dw.size(), d.lit(0.0));
  const V s = d.lit(1.0 / static_cast<double>(m));
  for (std::int64_t r = 0; r < l.rows(); ++r) {
    const auto ru = static_cast<std::size_t>(r);
    const V mu = mean[ru], rs = rstd[ru];
    const std::int64_t n = r / l.groups;
    V dsG = d.lit(0.0), dbG = d.lit(0.0);
    for (std::int64_t cg = 0; cg < dg; ++cg) {
      const std::int64_t c = (r % l.groups) * dg + cg;
      V ds = d.lit(0.0), dbc = d.lit(0.0);
      for (std::int64_t k = 0; k < hw; ++k) {
        const auto i = static_cast<std::size_t>((n * l.channels + c) * hw + k);
        ds = d.add(ds, d.mul(dy[i], x[i]));
        dbc = d.add(dbc, dy[i]);
      }
      const auto cu = static_cast<std::size_t>(c);
      dw[cu] = d.add(dw[cu], d.mul(d.sub(ds, d.mul(dbc, mu)), rs));
      db[cu] = d.add(db[cu], dbc);
      dsG = d.add(dsG, w ? d.mul(ds, (*w)[cu]) : ds);
      dbG = d.add(dbG, w ? d.mul(dbc, (*w)[cu]) : dbc);
    }
    const V c2 = d.mul(d.mul(d.mul(d.mul(d.sub(d.mul(dbG, mu), dsG), rs), rs), rs), s);
    const V c3 = d.sub(d.mul(d.sub(d.lit(0.0), c2), mu), d.mul(d.mul(dbG, rs), s));
    for (std::int64_t j = 0; j < m; ++j) {
      const auto i = static_cast<std::size_t>(r * m + j);
      const std::int64_t c = l.channel(r, j);
      const V c1 = w ? d.mul(rs, (*w)[static_cast<std::size_t>(c)]) : rs;
      dx[i] = d.add(d.add(d.mul(c1, dy[i]), d.mul(c2, x[i])), c3);
    }
  }
}

class GroupNormBackwardRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const GnBwdArgs ga = gnBwdArgs(a);
    const PointDomain d;
    const std::vector<double> w = valuesOf(ga.w);
    std::vector<double> dx, dw, db;
    gnBackwardFormula(d, ga, valuesOf(ga.dy), valuesOf(ga.x), valuesOf(ga.mean), valuesOf(ga.rstd),
                      ga.w ? &w : nullptr, dx, dw, db);
    return results(a, ga, std::move(dx), std::move(dw), std::move(db));
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const GnBwdArgs ga = gnBwdArgs(a);
    const GnLayout& l = ga.l;
    const DType t0 = outDtypeOr(a, 0, ga.x->dtype()), t1 = outDtypeOr(a, 1, t0),
                t2 = outDtypeOr(a, 2, t0);
    const Format c = accumulationFormat(ctx.precision, t0);
    const Format stat = statFormat(ctx, ga, c);
    kernels::GroupNormBackwardModel m;
    m.compute = c;
    m.stat = stat;
    m.u = unitRoundoff(c) * (ctx.precision.truncatingAccumulation ? 2.0 : 1.0);
    m.eta = smallestSubnormal(c);
    m.uS = std::fmax(m.u, statRoundoff(c, stat));
    m.etaS = std::fmax(m.eta, smallestSubnormal(stat));
    m.samples = l.samples;
    m.channels = l.channels;
    m.spatial = l.spatial;
    m.groups = l.groups;
    m.inputStorage = storageOf(ctx, t0);
    m.weightStorage = storageOf(ctx, t1);
    m.biasStorage = storageOf(ctx, t2);
    const std::size_t nx = static_cast<std::size_t>(ga.x->numel()),
                      nch = static_cast<std::size_t>(l.channels);
    std::vector<double> dxLo(nx), dxHi(nx), dwLo(nch), dwHi(nch), dbLo(nch), dbHi(nch);
    auto span = [](const Tensor* t) -> kernels::ConstIntervalSpan {
      return t ? kernels::ConstIntervalSpan{t->lo().data(), t->hi().data()}
               : kernels::ConstIntervalSpan{};
    };
    const kernels::ConstIntervalSpan dy = span(ga.dy), x = span(ga.x), mean = span(ga.mean),
                                     rstd = span(ga.rstd), w = span(ga.w);
    const kernels::IntervalSpan dx{dxLo.data(), dxHi.data()}, dw{dwLo.data(), dwHi.data()},
        db{dbLo.data(), dbHi.data()};
    // The passes of core/kernels/group_norm_backward.h: offered to the backend (a device runs
    // them where the tensors are), else here, the sums and the rows in parallel.
    if (nx == 0 || nch == 0 ||
        !ctx.backend.groupNormBackward(m, dy, x, mean, rstd, w, dx, dw, db)) {
      const std::int64_t nc = l.samples * l.channels;
      std::vector<double> scratch(static_cast<std::size_t>(kernels::groupNormBackwardScratch(m)));
      const kernels::IntervalSpan ds{scratch.data(), scratch.data() + nc},
          dbs{scratch.data() + 2 * nc, scratch.data() + 3 * nc};
      const kernels::ConstIntervalSpan dsC{ds.lo, ds.hi}, dbC{dbs.lo, dbs.hi};
      ctx.backend.parallelFor(nc, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t q = begin; q < end; ++q)
          kernels::groupNormChannelSums(m, q, dy, x, ds, dbs);
      });
      for (std::int64_t ch = 0; ch < l.channels; ++ch)
        kernels::groupNormWeightColumn(m, ch, dsC, dbC, mean, rstd, dw, db);
      ctx.backend.parallelFor(l.rows(), [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t r = begin; r < end; ++r)
          kernels::groupNormBackwardRow(m, r, dy, x, mean, rstd, w, dsC, dbC, dx);
      });
    }
    const Shape cs{l.channels};
    std::vector<Tensor> out{Tensor::interval(ga.x->shape(), t0, std::move(dxLo), std::move(dxHi)),
                            Tensor::interval(cs, t1, std::move(dwLo), std::move(dwHi)),
                            Tensor::interval(cs, t2, std::move(dbLo), std::move(dbHi))};
    for (std::size_t k = 0; k < 3; ++k)
      if (!ga.mask[k]) out[k] = zerosLike(out[k], out[k].dtype()).toInterval();
    return out;
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const GnBwdArgs ga = gnBwdArgs(a);
    const GnLayout& l = ga.l;
    const DType t0 = outDtypeOr(a, 0, ga.x->dtype());
    const Format c = accumulationFormat(ctx.precision, t0);
    const Format stat = statFormat(ctx, ga, c);
    const bool storable = unitRoundoff(stat) > unitRoundoff(c);
    std::mt19937_64& rng = *ctx.rng;
    auto rn = [c](double v) { return roundNearest(v, c); };
    auto st = [&](double v) {
      const double r = roundNearest(v, c);
      return storable && (rng() & 1) ? roundNearest(r, stat) : r;
    };
    const std::int64_t m = l.m(), hw = l.spatial, dg = l.perGroup();
    const std::int64_t nc = l.samples * l.channels;
    const auto dyv = ga.dy->values(), xv = ga.x->values();
    std::vector<double> dsA(static_cast<std::size_t>(nc)), dbA(dsA.size()), scratch;
    for (std::int64_t q = 0; q < nc; ++q) {
      std::vector<double> a1(dyv.begin() + q * hw, dyv.begin() + (q + 1) * hw),
          b1(xv.begin() + q * hw, xv.begin() + (q + 1) * hw);
      dsA[static_cast<std::size_t>(q)] = st(randomDot(a1, b1, c, rng, scratch));
      dbA[static_cast<std::size_t>(q)] = st(randomSum(a1, c, rng));
    }
    std::vector<double> dw(static_cast<std::size_t>(l.channels)), db(dw.size());
    for (std::int64_t ch = 0; ch < l.channels; ++ch) {
      std::vector<double> tw, tb;
      const std::int64_t g = dg > 0 ? ch / dg : 0;
      for (std::int64_t n = 0; n < l.samples; ++n) {
        const auto q = static_cast<std::size_t>(n * l.channels + ch);
        const auto r = static_cast<std::size_t>(n * l.groups + g);
        tw.push_back(st(st(dsA[q] - st(dbA[q] * ga.mean->values()[r])) * ga.rstd->values()[r]));
        tb.push_back(dbA[q]);
      }
      dw[static_cast<std::size_t>(ch)] = st(randomSum(tw, c, rng));
      db[static_cast<std::size_t>(ch)] = st(randomSum(tb, c, rng));
    }
    std::vector<double> dx(static_cast<std::size_t>(ga.x->numel()));
    const int bracket = static_cast<int>(rng() % 3);
    const bool fmaQ = rng() & 1;
    const double md = static_cast<double>(m);
    for (std::int64_t r = 0; r < l.rows() && m > 0; ++r) {
      const std::int64_t n = r / l.groups, g = r % l.groups;
      const double mu = ga.mean->values()[static_cast<std::size_t>(r)],
                   rs = ga.rstd->values()[static_cast<std::size_t>(r)];
      std::vector<double> dsc, dbc, wc;
      for (std::int64_t cg = 0; cg < dg; ++cg) {
        const std::int64_t ch = g * dg + cg;
        const auto q = static_cast<std::size_t>(n * l.channels + ch);
        dsc.push_back(dsA[q]);
        dbc.push_back(dbA[q]);
        wc.push_back(ga.w ? ga.w->values()[static_cast<std::size_t>(ch)] : 1.0);
      }
      const double dsG = st(ga.w ? randomDot(dsc, wc, c, rng, scratch) : randomSum(dsc, c, rng));
      const double dbG = st(ga.w ? randomDot(dbc, wc, c, rng, scratch) : randomSum(dbc, c, rng));
      const double s = (rng() & 1) ? st(1.0 / md) : roundNearest(1.0 / md, stat);
      // The per-row scalars may be stored (st); intermediate products stay in c.
      const double q = fmaQ ? rn(dbG * mu - dsG) : rn(rn(dbG * mu) - dsG);
      const double c2 = st(rn(rn(rn(q * rs) * rs) * rs) * s);
      const double c3 = st(rn(-c2 * mu) - st(rn(dbG * rs) * s));
      for (std::int64_t j = 0; j < m; ++j) {
        const auto i = static_cast<std::size_t>(r * m + j);
        const std::int64_t ch = l.channel(r, j);
        const double c1 = ga.w ? st(rs * ga.w->values()[static_cast<std::size_t>(ch)]) : rs;
        const double p1 = rn(c1 * dyv[i]);
        switch (bracket) {
          case 0:
            dx[i] = rn(rn(p1 + rn(c2 * xv[i])) + c3);
            break;
          case 1:
            dx[i] = rn(p1 + rn(rn(c2 * xv[i]) + c3));
            break;
          default:
            dx[i] = rn(fmaIn(c2, xv[i], p1, c) + c3);
            break;
        }
      }
    }
    const Format s0 = storageOf(ctx, t0), s1 = storageOf(ctx, outDtypeOr(a, 1, t0)),
                 s2 = storageOf(ctx, outDtypeOr(a, 2, t0));
    for (double& v : dx) v = roundNearest(v, s0);
    for (double& v : dw) v = roundNearest(v, s1);
    for (double& v : db) v = roundNearest(v, s2);
    return results(a, ga, std::move(dx), std::move(dw), std::move(db));
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> h, OpContext&) const override {
    const GnBwdArgs ga = gnBwdArgs(a);
    Tape tape;
    const AdDomain d{&tape};
    std::map<const Tensor*, std::vector<Var>> leafOf;
    auto leaves = [&](const Tensor* t) -> const std::vector<Var>& {
      auto [it, fresh] = leafOf.try_emplace(t);
      if (fresh && t)
        for (double x : t->values()) it->second.push_back(d.leaf(x));
      return it->second;
    };
    const std::vector<Var>& dy = leaves(ga.dy);
    const std::vector<Var>& x = leaves(ga.x);
    const std::vector<Var>& mean = leaves(ga.mean);
    const std::vector<Var>& rstd = leaves(ga.rstd);
    const std::vector<Var>& w = leaves(ga.w);
    std::vector<Var> dx, dw, db;
    gnBackwardFormula(d, ga, dy, x, mean, rstd, ga.w ? &w : nullptr, dx, dw, db);
    std::vector<std::pair<int, double>> seeds;
    const std::vector<Var>* outs[3] = {&dx, &dw, &db};
    for (std::size_t k = 0; k < 3 && k < h.size(); ++k)
      if (ga.mask[k] && h[k].numel() == static_cast<std::int64_t>(outs[k]->size()))
        for (std::size_t i = 0; i < outs[k]->size(); ++i)
          seeds.emplace_back((*outs[k])[i].id, h[k].values()[i]);
    const auto adj = tape.backward(seeds);
    std::vector<std::optional<Tensor>> res;
    for (const Tensor* t : a.tensorInputs()) {
      const auto it = leafOf.find(t);
      if (it == leafOf.end()) {
        res.emplace_back(zerosLike(*t, t->dtype()));
        continue;
      }
      std::vector<double> gv(it->second.size());
      for (std::size_t i = 0; i < gv.size(); ++i)
        gv[i] = adj[static_cast<std::size_t>(it->second[i].id)];
      res.emplace_back(Tensor::point(t->shape(), t->dtype(), std::move(gv)));
    }
    return res;
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> outputs,
                                 OpContext& ctx) const override {
    return localErrorFromInterval(*this, a, outputs, ctx);
  }

 private:
  /// The coarsest of the input, statistic and parameter formats (file comment).
  static Format statFormat(const OpContext& ctx, const GnBwdArgs& ga, Format c) {
    Format s = coarser(c, storageOf(ctx, ga.x->dtype()));
    s = coarser(s, storageOf(ctx, ga.mean->dtype()));
    if (ga.w) s = coarser(s, storageOf(ctx, ga.w->dtype()));
    return s;
  }
  static std::vector<Tensor> results(const OpArgs& a, const GnBwdArgs& ga, std::vector<double> dx,
                                     std::vector<double> dw, std::vector<double> db) {
    const DType t0 = outDtypeOr(a, 0, ga.x->dtype());
    const Shape cs{ga.l.channels};
    std::vector<Tensor> out{Tensor::point(ga.x->shape(), t0, std::move(dx)),
                            Tensor::point(cs, outDtypeOr(a, 1, t0), std::move(dw)),
                            Tensor::point(cs, outDtypeOr(a, 2, t0), std::move(db))};
    for (std::size_t k = 0; k < 3; ++k)
      if (!ga.mask[k]) out[k] = zerosLike(out[k], out[k].dtype());
    return out;
  }
};

}  // namespace

void registerGroupNormOps(OpRegistry& r) {
  r.add("aten.native_group_norm", std::make_shared<GroupNormForwardRule>());
  r.add("aten.native_group_norm_backward", std::make_shared<GroupNormBackwardRule>());
}

}  // namespace lossbound
