#pragma once
// The forward layer norm of one row (aten.native_layer_norm → out, mean, rstd) as an LB_HD kernel
// body: the CPU rule (core/ops/norm_ops.cpp) runs it per row on the host, the CUDA backend per row
// on the device (gpu/interval_kernels.cu), and tests/ compare the two bit for bit. The error model
// (two-pass and Welford/pairwise moments in any order, two rstd variants, the centred and the
// PyTorch CPU affine forms) and the source of every bound are in the file comment of
// core/ops/norm_ops.cpp; this file is its arithmetic, operation for operation.
// The moment part is its own body, rowMoments, which batch norm (one row per channel, gathered)
// and group norm (one row per sample and group) reuse with their own affine parts
// (core/ops/channel_norm_support.h).
//
// Only correctly rounded operations enter (directed +, −, ×, ÷, sqrt of core/interval and outward
// rounding to formats; the candidate's rsqrt is modelled by widening the exact value, not by
// calling a libm), so the host emulation and the device intrinsics give the same bits.

#include "core/interval/hd.h"
#include "core/interval/interval.h"
#include "core/interval/precision.h"
#include "core/interval/rounding.h"
#include "core/kernels/kernel_bodies.h"

#include <cstdint>

namespace lossbound::kernels {

/// How the candidate computes a layer norm: compute format c (PyTorch's accumulation type: fp32
/// for fp32/bf16/fp16, fp64 for fp64), the storage formats of the three outputs, eps as the
/// Python scalar, and the error of the candidate's rsqrt (ops::modelUlps(LibmFn::Rsqrt, c)).
struct LayerNormModel {
  Format compute = Format::Fp64;
  Format outStorage = Format::Fp64;
  Format meanStorage = Format::Fp64;
  Format rstdStorage = Format::Fp64;
  double eps = 1e-5;
  int rsqrtUlps = 0;
};

namespace layer_norm_detail {

/// Returns ⌈log2 n⌉ for n >= 1, exactly (integer arithmetic; the CPU rule used
/// std::ceil(std::log2(n)), which gives the same value for every n below 2^46, and no row is
/// that long).
LB_HD inline double ceilLog2(std::int64_t n) {
  int k = 0;
  while (k < 62 && (std::int64_t{1} << k) < n) ++k;
  return static_cast<double>(k);
}

/// Writes the "no bound" result: every output entire.
LB_HD inline void entireRow(std::int64_t n, double* ylo, double* yhi, Interval* mean,
                            Interval* rstd) {
  for (std::int64_t j = 0; j < n; ++j) {
    ylo[j] = -interval_detail::inf();
    yhi[j] = interval_detail::inf();
  }
  *mean = entireInterval();
  *rstd = entireInterval();
}

}  // namespace layer_norm_detail

/// How the candidate computes the moments of one row (mean, biased variance, rstd): compute
/// format c, eps as the Python scalar, the error of its rsqrt (ops::modelUlps(LibmFn::Rsqrt, c)),
/// and the format it may store the row's statistics in before using them again (PyTorch's batch
/// norm CPU kernels keep the sum, the mean and the sum of squared deviations in the input or
/// parameter dtype on some paths). Fp64, or any format no coarser than c, means "never stored".
struct RowMomentsModel {
  Format compute = Format::Fp64;
  double eps = 1e-5;
  int rsqrtUlps = 0;
  Format statStorage = Format::Fp64;
};

/// The error bounds of the moments of a row of n values with max|x_j| <= a, range
/// max x − min x <= wr and S = Σ(x_j − μ)² <= s, under model m (the two-pass and Welford/pairwise
/// bounds of core/ops/norm_ops.cpp's file comment, for any order): every mean the candidate uses
/// is within `mean` of μ, every sum of squared deviations ŝ within `m2` of S. Each bound grows
/// with a, w and s, so the bounds of a box of rows hold for every row in it. Not bounded (rows
/// too long for the format): both infinite.
struct MomentErrors {
  double mean;  ///< |μ̂' − μ| for every mean μ̂' used afterwards (stored in statStorage or not)
  double m2;     ///< |ŝ − S| before any storage rounding of ŝ
  bool bounded;  ///< false: the row is too long for the format's bound
};

/// Returns the MomentErrors of rows with max|x| <= a, range <= wr and Σ(x − μ)² <= s (see above).
LB_HD inline MomentErrors momentErrors(double a, double wr, double s, std::int64_t n,
                                       const RowMomentsModel& m) {
  const double inf = interval_detail::inf();
  const double nd = static_cast<double>(n);
  const double u = unitRoundoff(m.compute), eta = smallestSubnormal(m.compute);
  const double uP = div_up(u, sub_down(1.0, u));  // u / (1 − u)
  const double g3 = gammaUp(3.0, u);
  const double half = (nd + 1.0) / 2.0;
  const double den = sub_down(1.0, mul_up(half, add_up(2.0 * g3, uP)));
  if (!(den > 0.5)) return MomentErrors{inf, inf, false};  // rows too long for the format
  const double eTp = mul_up(gammaUp(static_cast<double>(n + 1), u), a);
  const double eW = div_up(mul_up(half, add_up(mul_up(g3, wr), mul_up(uP, a))), den);
  // + n·η: fl(Σx/n), Σx·fl(1/n) and each of Welford's fl(δ/k) may underflow, η/2 each.
  const double eComputed = add_up(eTp < eW ? eW : eTp, mul_up(nd, eta));  // std::max(eTp, eW)
  // A statistic stored in a coarser format s before it is used again: the mean as fl_s(μ̂) or
  // fl_s(fl_s(Σx)/n), each within γ_2(s)·(A + E) + 2η_s more of μ (|μ̂| <= A + E). Only the
  // two-pass algorithm reuses a stored mean (its second pass); Welford's updates never do.
  // rowMoments rounds the sum of squared deviations outward to s.
  const bool stored = unitRoundoff(m.statStorage) > u;
  const double e = eComputed;
  const double eS =
      stored ? add_up(e, add_up(mul_up(gammaUp(2.0, unitRoundoff(m.statStorage)), add_up(a, e)),
                                2.0 * smallestSubnormal(m.statStorage)))
             : e;
  const double nE2 = mul_up(nd, mul_up(eS, eS));
  // Sum of squared deviations: two-pass (with the possibly stored mean) and Welford bounds.
  const double bTp = add_up(mul_up(gammaUp(static_cast<double>(n + 2), u), add_up(s, nE2)), nE2);
  // Welford/pairwise: Σ_nodes |t̂ − T| over the combining tree (t = δ²·n_a·n_b/n, T its exact
  // value with the exact node means): a node's mean error is at most E(m) = ((m + 1)/2)·c0 for
  // its m leaves (the eW recursion on the subtree), and Σ_nodes n_a·n_b = n(n − 1)/2 over any
  // binary tree (every pair of leaves meets at one node), so Σ_nodes w·|e_ab| <= Z =
  // c0·(n − 1)(n + 2)/2, also for PyTorch's element update s += δ·(x − m_new) and mixed trees.
  const double wp = add_up(wr, 2.0 * e);
  const double g6 = gammaUp(6.0, u);
  const double c0 = div_up(add_up(mul_up(g3, wr), mul_up(uP, a)), den);
  const double z = mul_up(c0, 0.5 * mul_up(nd - 1.0, nd + 2.0));
  // The same increments by Cauchy–Schwarz: Σ w·|e|·(2|D| + |e|) <= 2·sqrt(Σ w e²)·sqrt(Σ w D²)
  // + Σ w e², with Σ_nodes w·D² = S (the exact pairwise identity, Chan–Golub–LeVeque 1983) and
  // |e| <= E(n_a) + E(n_b) <= c0·(m + 2)/2 at a node of m = n_a + n_b leaves, so
  // Σ w e² <= (c0²/4)·Σ n_a n_b (m + 2)²/m <= Q = c0²·(n + 2)²(n − 1)/8 ((m + 2)²/m grows for
  // m >= 2, Σ n_a n_b = n(n − 1)/2). |D| <= W made the first form ~W/σ times larger (and its
  // relative error of S grew with (W/σ)²); the smaller of the two is used.
  const double q =
      mul_up(mul_up(c0, c0), div_up(mul_up(mul_up(nd + 2.0, nd + 2.0), nd - 1.0), 8.0));
  const double viaRange = mul_up(add_up(2.0 * wr, 2.0 * e), z);
  const double viaS = add_up(mul_up(2.0, mul_up(sqrt_up(q), sqrt_up(s))), q);
  double bInc = add_up(mul_up(g6, s), mul_up(add_up(1.0, g6), viaS < viaRange ? viaS : viaRange));
  bInc = add_up(bInc, mul_up(nd - 1.0, mul_up(2.0 * uP, mul_up(wp, add_up(a, e)))));
  bInc = div_up(bInc, sub_down(1.0, g6));
  const double bW =
      add_up(bInc, mul_up(gammaUp(static_cast<double>(2 * n), u), add_up(s, 2.0 * bInc)));
  const double bS = add_up(bTp < bW ? bW : bTp, mul_up(nd, eta));  // std::max(bTp, bW)
  return MomentErrors{eS, bS, true};
}

/// The biased variance fl(ŝ/n) (≤ 2 roundings, *var) and every rstd 1/sqrt(fl(var + eps)) the
/// candidate computes (two correctly rounded steps, or an rsqrt within m.rsqrtUlps ulps; eps
/// rounded to c) for every ŝ in m2 (already rounded to statStorage where the model stores it).
/// Both grow with m2 (rstd falls), so a point m2 = [s, s] bounds every ŝ >= s.
LB_HD inline Interval rstdOfM2(Interval m2, std::int64_t n, const RowMomentsModel& m,
                               Interval* var) {
  const ComputeDomain d{m.compute};
  const double u = unitRoundoff(m.compute);
  const double nd = static_cast<double>(n);
  const Interval f2{mul_down(sub_down(1.0, u), sub_down(1.0, u)),
                    mul_up(add_up(1.0, u), add_up(1.0, u))};
  *var = d.round(lossbound::mul(lossbound::div(m2, Interval{nd, nd}), f2));
  const Interval ve = d.add(*var, scalarEnclosure(m.eps, m.compute));
  if (ve.lo <= 0.0) return Interval{0.0, interval_detail::inf()};
  const Interval twoStep = d.div(Interval{1.0, 1.0}, d.round(lossbound::sqrt(ve)));
  const Interval libm = d.round(
      widenUlps(lossbound::div(Interval{1.0, 1.0}, lossbound::sqrt(ve)), m.rsqrtUlps, m.compute));
  Interval r = hull(twoStep, libm);
  // ŝ (or var + eps) may overflow c: the candidate then holds var = inf and rstd = 0.
  if (!(m2.hi <= largestFinite(m.compute)) || !(ve.hi <= largestFinite(m.compute))) {
    var->hi = interval_detail::inf();
    r.lo = 0.0;
  }
  return r;
}

/// The enclosures of one row's moments as the candidate computes them (in the compute format,
/// before any storage rounding of the outputs).
struct RowMoments {
  Interval mean;      ///< every mean μ̂ the candidate computes (or stores in statStorage)
  Interval rstd;      ///< every 1/sqrt(var + eps) it computes
  Interval var;       ///< every biased variance fl(ŝ/n)
  Interval m2;        ///< every sum of squared deviations ŝ (stored in statStorage if coarser)
  double meanError;   ///< |μ̂' − μ| <= meanError for every mean μ̂' the candidate uses
                      ///< afterwards (μ̂, or μ̂ stored in statStorage), μ the exact mean of x
  bool bounded;       ///< false: no bound (n == 0, a non-finite x, a row too long for c)
  double absMax;      ///< A >= max|x_j| over the box of rows
  double range;       ///< W >= max x − min x over the box
  double ssLo, ssHi;  ///< S = Σ(x_j − μ)² in [ssLo, ssHi] for every row in the box
};

/// Encloses the moments of one row x[0..n) (interval endpoints xlo/xhi) under model m, for the
/// two-pass and the Welford/pairwise algorithms in any order (the bound of core/ops/norm_ops.cpp's
/// file comment), and writes the exact centred values x_j − μ of the same x, enclosed without
/// the dependency between x_j and μ, to clo/chi (n each; also used as scratch for suffix sums;
/// they must not alias the inputs). When the result is not bounded, every field is entire and
/// clo/chi are unspecified.
LB_HD inline RowMoments rowMoments(const double* xlo, const double* xhi, std::int64_t n,
                                   const RowMomentsModel& m, double* clo, double* chi) {
  using namespace layer_norm_detail;
  const double inf = interval_detail::inf();
  const double nd = static_cast<double>(n);
  const ComputeDomain d{m.compute};
  const double u = unitRoundoff(m.compute);
  RowMoments res{entireInterval(),
                 entireInterval(),
                 entireInterval(),
                 entireInterval(),
                 inf,
                 false,
                 inf,
                 inf,
                 0.0,
                 inf};
  if (n == 0) return res;
  // A = max|x_j|, W = max x − min x; a non-finite endpoint leaves nothing to bound.
  double a = 0.0, mn = inf, mx = -inf;
  for (std::int64_t j = 0; j < n; ++j) {
    if (!isFiniteValue(xlo[j]) || !isFiniteValue(xhi[j])) return res;
    const double mj = magnitude(Interval{xlo[j], xhi[j]});
    a = a < mj ? mj : a;             // std::max(a, mj)
    mn = xlo[j] < mn ? xlo[j] : mn;  // std::min(mn, lo)
    mx = mx < xhi[j] ? xhi[j] : mx;  // std::max(mx, hi)
  }
  const double wr = sub_up(mx, mn);
  // Exact sum and centred values (1 − 1/n)x_i − Σ_{j≠i} x_j / n from prefix and suffix sums: the
  // total first, then the suffix sums Σ_{k>j} x_k into c[j], then one forward pass that replaces
  // c[j] by the centred value (the same additions in the same order as separate arrays).
  Interval total{0.0, 0.0};
  for (std::int64_t j = 0; j < n; ++j) total = lossbound::add(total, Interval{xlo[j], xhi[j]});
  Interval suffix{0.0, 0.0};
  for (std::int64_t j = n; j-- > 0;) {
    clo[j] = suffix.lo;
    chi[j] = suffix.hi;
    suffix = lossbound::add(suffix, Interval{xlo[j], xhi[j]});
  }
  const Interval nI{nd, nd};
  const Interval mu = lossbound::div(total, nI);
  const Interval k1 = lossbound::sub(Interval{1.0, 1.0}, lossbound::div(Interval{1.0, 1.0}, nI));
  Interval prefix{0.0, 0.0};
  double sLo = 0.0, sHi = 0.0;
  for (std::int64_t j = 0; j < n; ++j) {
    const Interval xj{xlo[j], xhi[j]};
    Interval cen =
        lossbound::sub(lossbound::mul(xj, k1),
                       lossbound::div(lossbound::add(prefix, Interval{clo[j], chi[j]}), nI));
    cen = intersect(cen, lossbound::sub(xj, mu));  // both enclose x_j − μ
    const Interval sq = lossbound::sqr(cen);
    sLo = add_down(sLo, sq.lo);
    sHi = add_up(sHi, sq.hi);
    clo[j] = cen.lo;
    chi[j] = cen.hi;
    prefix = lossbound::add(prefix, xj);
  }
  const MomentErrors me = momentErrors(a, wr, sHi, n, m);
  if (!me.bounded) return res;  // rows too long for the format: no bound
  const bool stored = unitRoundoff(m.statStorage) > u;
  const double eS = me.mean, bS = me.m2;
  // Every modelled algorithm computes ŝ >= 0: the two-pass sum adds rounded squares, the pairwise
  // combination adds rounded δ²·n_a·n_b/n, and the element update s += δ·(x − m_new) has
  // δ·(x − m_new) >= 0 (for k >= 2 elements m_new = fl(m + fl(δ/k)) lies between m and x, and
  // rounding to nearest is monotone), so the enclosure is cut at 0. This keeps var + eps >= eps
  // and rstd finite for rows whose interval spread exceeds their deviation bound.
  Interval m2{sub_down(sLo, bS), add_up(sHi, bS)};
  if (m2.lo < 0.0) m2.lo = 0.0;
  if (stored) m2 = roundOutward(m2, m.statStorage);
  Interval var;
  const Interval r = rstdOfM2(m2, n, m, &var);
  res.mean = d.round(Interval{sub_down(mu.lo, eS), add_up(mu.hi, eS)});
  res.rstd = r;
  res.var = var;
  res.m2 = m2;
  res.meanError = eS;
  res.bounded = true;
  res.absMax = a;
  res.range = wr;
  res.ssLo = sLo;
  res.ssHi = sHi;
  return res;
}

/// Returns P >= |x_j − μ̂|·r̂ for every element j, every row x in the box that rowMoments
/// enclosed as mo (under the same model m), and every mean μ̂ and rstd r̂ the candidate computes
/// from x; infinite when there is no such bound (mo not bounded, eps <= 0, an infinite S).
/// Samuelson's inequality (x_j − μ)² <= ((n − 1)/n)·S (P. A. Samuelson, "How deviant can you
/// be?", JASA 63, 1968) with |μ̂ − μ| <= E and r̂ falling with ŝ >= S − B gives, for a row with
/// Σ(x − μ)² = S,
///   |x_j − μ̂|·r̂ <= (sqrt((n − 1)S/n) + E(S))·R(max(0, S − B(S))),
/// E, B the momentErrors of rows with max|x| <= A, range <= min(W, sqrt(2S)) (the range is
/// (max − μ) + (μ − min), whose squares sum to at most S) and Σ(x − μ)² <= S, and R(s) the upper
/// end of rstdOfM2([s, s]). On a cell S ∈ [S_a, S_b] the first factor is at most its value at
/// S_b and the second at most R(max(0, S_a − B(S_b))); the cells cover [ssLo, ssHi], the first
/// up to n·eps·1e-6 (where sqrt((n − 1)S/n)·R < 1e-3·sqrt(n)), 4,096 at most. Returns infinity
/// as soon as the bound reaches cap (the caller's bound without it, which it cannot improve).
/// This bounds the normalized value whatever the widths of x's enclosures: for unit weights a
/// layer norm's output is within ~sqrt(n − 1) of zero even where the interval inputs are wide.
LB_HD inline double normalizedBound(const RowMoments& mo, std::int64_t n, const RowMomentsModel& m,
                                    double cap = interval_detail::inf()) {
  const double inf = interval_detail::inf();
  if (!mo.bounded || !(m.eps > 0.0) || !isFiniteValue(mo.ssHi) || n < 1) return inf;
  const double nd = static_cast<double>(n);
  const double alpha = div_up(nd - 1.0, nd);
  const bool stored = unitRoundoff(m.statStorage) > unitRoundoff(m.compute);
  // Any ratios > 1 are sound: 2 where the bound is far below its maximum (below n·eps/64, where
  // sqrt((n − 1)S/n)·R <= sqrt(n)/8 and the E(S)·R term takes its value at the cell's end
  // anyway), ~2^(1/16) above (a cell's bound is within ~2^(1/32) of the function's maximum in it
  // where B << S).
  const double fine = 1.0442737824274139, coarseUntil = mul_up(nd, m.eps) / 64.0;
  double sA = mo.ssLo;
  double sB = mul_up(mul_up(nd, m.eps), 1e-6);
  if (sB <= sA) sB = mul_up(sA, sA < coarseUntil ? 2.0 : fine);
  double p = 0.0;
  for (int cell = 0;; ++cell) {
    if (sB >= mo.ssHi || cell == 4095) sB = mo.ssHi;  // the last cell ends at ssHi
    const double wb = sqrt_up(mul_up(2.0, sB));
    const MomentErrors me = momentErrors(mo.absMax, mo.range < wb ? mo.range : wb, sB, n, m);
    if (!me.bounded) return inf;
    const double num = add_up(sqrt_up(mul_up(alpha, sB)), me.mean);
    const double low = sub_down(sA, me.m2);
    Interval m2{low < 0.0 ? 0.0 : low, low < 0.0 ? 0.0 : low};
    if (stored) m2 = roundOutward(m2, m.statStorage);
    Interval var;
    const double r = rstdOfM2(m2, n, m, &var).hi;
    if (!isFiniteValue(r) || !isFiniteValue(num)) return inf;
    const double pc = mul_up(num, r);
    p = p < pc ? pc : p;         // std::max(p, pc)
    if (!(p < cap)) return inf;  // no tighter than the caller's own bound: not worth the cells
    if (sB == mo.ssHi) break;
    sA = sB;
    sB = mul_up(sB, sB < coarseUntil ? 2.0 : fine);
  }
  return p;
}

/// Encloses every (out, mean, rstd) the candidate can store for one row x[0..n) (interval
/// endpoints xlo/xhi, weight w and bias b per element, each optional: wlo == nullptr or
/// blo == nullptr for None), under model m, rounded outward to the storage formats. A non-finite
/// x endpoint, or a row too long for the format's bound, makes every output entire; n == 0 gives
/// entire mean and rstd. The result arrays ylo/yhi (n each) are also the body's scratch (suffix
/// sums, then centred values), so it needs no other memory; they must not alias the inputs.
LB_HD inline void layerNormRow(const double* xlo, const double* xhi, std::int64_t n,
                               const double* wlo, const double* whi, const double* blo,
                               const double* bhi, const LayerNormModel& m, double* ylo, double* yhi,
                               Interval* mean, Interval* rstd) {
  using namespace layer_norm_detail;
  const ComputeDomain d{m.compute};
  const double u = unitRoundoff(m.compute);
  const double uP = div_up(u, sub_down(1.0, u));  // u / (1 − u)
  const RowMoments mo = rowMoments(
      xlo, xhi, n, RowMomentsModel{m.compute, m.eps, m.rsqrtUlps, Format::Fp64}, ylo, yhi);
  if (!mo.bounded) {
    entireRow(n, ylo, yhi, mean, rstd);
    return;
  }
  const double e = mo.meanError;
  const Interval r = mo.rstd, meanHat = mo.mean;
  const Interval eI{-e, e};
  const double inf = interval_detail::inf(), eta = smallestSubnormal(m.compute);
  const Interval rel{sub_down(1.0, u), add_up(1.0, u)};
  // The bound the enclosures below give without normalizedBound (|x − μ̂| <= D, r̂ <= sup r, and
  // the CPU form's error): a P above it would not narrow any element, so its cells stop there.
  double maxD = 0.0;
  for (std::int64_t j = 0; j < n; ++j) {
    const double dm = add_up(magnitude(Interval{ylo[j], yhi[j]}), e);
    maxD = maxD < dm ? dm : maxD;  // std::max(maxD, dm)
  }
  const double cap = mul_up(
      add_up(mul_up(maxD, r.hi), mul_up(uP, mul_up(add_up(mo.absMax, magnitude(meanHat)), r.hi))),
      mul_up(rel.hi, rel.hi));
  const double p =
      normalizedBound(mo, n, RowMomentsModel{m.compute, m.eps, m.rsqrtUlps, Format::Fp64}, cap);
  for (std::int64_t j = 0; j < n; ++j) {
    const Interval dj = lossbound::add(Interval{ylo[j], yhi[j]}, eI);  // x_j − μ̂ exactly
    // Centred form: fl(fl(x − μ̂)·rstd).
    const Interval v1 = d.mul(d.round(dj), r);
    // CPU form: fl(fl(x·r) + fl(−r·μ̂)) = (x − μ̂)r + errors u(|x| + |μ̂|)r, then one rounding.
    const double err2 =
        add_up(mul_up(uP, mul_up(add_up(magnitude(Interval{xlo[j], xhi[j]}), magnitude(meanHat)),
                                 magnitude(r))),
               eta);  // + η: the two products may underflow, η/2 each
    const Interval pr = lossbound::mul(dj, r);
    const Interval v2 = d.round(lossbound::mul(Interval{sub_down(pr.lo, err2), add_up(pr.hi, err2)},
                                               Interval{sub_down(1.0, u), add_up(1.0, u)}));
    Interval y = hull(v1, v2);
    // The same forms from |x − μ̂|·r̂ <= P (normalizedBound): fl(x − μ̂) is (x − μ̂)(1 + δ) (a
    // difference never underflows), so the centred form is fl(t(1 + δ)) with |t| <= P; the CPU
    // form is fl(t + η₁ + η₂), |η₁| <= u|x|·r̂ + η/2, |η₂| <= u|μ̂|·r̂ + η/2 (Higham 2002, §2.2,
    // with underflow). Both enclose every computed value, so their intersection does too.
    const Interval t{-p, p};
    if (p < inf) {
      const Interval centred = d.round(lossbound::mul(t, rel));
      const double h = add_up(
          mul_up(uP, mul_up(add_up(magnitude(Interval{xlo[j], xhi[j]}), magnitude(meanHat)), r.hi)),
          eta);
      y = intersect(y, hull(centred, d.round(Interval{sub_down(t.lo, h), add_up(t.hi, h)})));
    }
    if (wlo) {
      const Interval wj{wlo[j], whi[j]};
      Interval rw = d.mul(d.round(dj), d.mul(r, wj));  // d·(r·w)
      if (p < inf) {
        // fl(fl(x − μ̂)·fl(r̂·w)) = t(1 + δ₁)·w(1 + δ₂) + fl(x − μ̂)·ε, |ε| <= η/2.
        const double h = mul_up(magnitude(d.round(dj)), 0.5 * eta);
        const Interval tw = lossbound::mul(lossbound::mul(lossbound::mul(t, rel), wj), rel);
        rw = intersect(rw, d.round(Interval{sub_down(tw.lo, h), add_up(tw.hi, h)}));
      }
      y = hull(d.mul(y, wj), rw);  // (d·r)·w or d·(r·w)
    }
    if (blo) y = d.add(y, Interval{blo[j], bhi[j]});
    y = roundOutward(y, m.outStorage);
    ylo[j] = y.lo;
    yhi[j] = y.hi;
  }
  *mean = roundOutward(meanHat, m.meanStorage);
  *rstd = roundOutward(r, m.rstdStorage);
}

}  // namespace lossbound::kernels
