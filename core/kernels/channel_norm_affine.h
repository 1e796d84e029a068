#pragma once
// The per-element affine part of batch norm and group norm, y = (x − μ̂)·r·w + b, as an LB_HD
// kernel body (the host rules in core/ops/batch_norm_ops.cpp and group_norm_ops.cpp call it per
// element; a CUDA backend can run the same body next to kernels::rowMoments), and the formats
// per-channel statistics may be stored in. The forms, the error terms and their sources are in
// the file comment of core/ops/batch_norm_ops.cpp.

#include "core/interval/hd.h"
#include "core/interval/interval.h"
#include "core/interval/precision.h"
#include "core/interval/rounding.h"
#include "core/kernels/kernel_bodies.h"

namespace lossbound::kernels {

/// Returns s when it is coarser than c (larger unit roundoff), else c: the format per-channel
/// statistics are enclosed in when the candidate may store them in s before using them again.
LB_HD inline Format coarser(Format c, Format s) {
  return unitRoundoff(s) > unitRoundoff(c) ? s : c;
}

/// Returns the relative error bound of one operation computed in c whose result may then be
/// stored in s: u_c, or 2·u_s when s is coarser (RN_s(RN_c(v)) is a neighbour of v in s).
LB_HD inline double statRoundoff(Format c, Format s) {
  return unitRoundoff(s) > unitRoundoff(c) ? 2.0 * unitRoundoff(s) : unitRoundoff(c);
}

/// The per-channel operands of the affine part y = (x − μ̂)·r·w + b, as enclosures of the values
/// the candidate uses (mean and rstd possibly stored in a coarser format first).
struct AffineChannel {
  Interval mean{0.0, 0.0};  ///< every μ̂ used (magnitudes only: x − μ̂ is passed per element)
  Interval rstd{1.0, 1.0};  ///< every r used
  Interval weight{1.0, 1.0};  ///< w (when hasWeight)
  Interval bias{0.0, 0.0};    ///< b (when hasBias)
  bool hasWeight = false;
  bool hasBias = false;
};

/// Encloses y for one element in compute format c, as the hull of the forms PyTorch's kernels
/// use: ((x − μ̂)·r)·w + b (decompositions, layer-norm style), (w·(x − μ̂))·r + b (CUDA batch
/// norm), (x − μ̂)·(r·w) + b, and the CPU form x·α + β with α = fl(r·w), β = fl(b − fl(μ̂·α))
/// (with or without FMA; α and β possibly stored in `stat`; entire when β may overflow there).
/// `x` is the input element and `centred` an enclosure of x − μ̂ for every used μ̂ (without the
/// dependency between them). The result is in c, before the storage rounding of the output.
/// `normalized` >= |x − μ̂|·r for every used μ̂ and r (kernels::normalizedBound, times the
/// storage of r), when known: each form is then also enclosed from t = (x − μ̂)·r, |t| <= it, and
/// the narrower enclosure kept (both hold, so their intersection does).
LB_HD inline Interval affineEnclosure(Interval x, Interval centred, const AffineChannel& ch,
                                      Format c, Format stat,
                                      double normalized = interval_detail::inf()) {
  const ComputeDomain d{c};
  const double u = unitRoundoff(c), eta = smallestSubnormal(c);
  const double uS = statRoundoff(c, stat);
  const double etaS2 = smallestSubnormal(coarser(c, stat));
  const double etaS = eta < etaS2 ? etaS2 : eta;  // max(η_c, η_stat)
  // The centred forms, every operation enclosed and rounded outward to c.
  const Interval dj = d.round(centred);  // fl(x − μ̂)
  Interval y = d.mul(dj, ch.rstd);
  if (ch.hasWeight) {
    const Interval f1 = d.mul(y, ch.weight);                   // ((x − μ̂)·r)·w
    const Interval f2 = d.mul(d.mul(ch.weight, dj), ch.rstd);  // (w·(x − μ̂))·r
    const Interval f3 = d.mul(dj, d.mul(ch.rstd, ch.weight));  // (x − μ̂)·(r·w)
    y = hull(hull(f1, f2), f3);
  }
  const bool viaT = normalized < interval_detail::inf();
  const Interval t{-normalized, normalized};
  const Interval w1 = ch.hasWeight ? ch.weight : Interval{1.0, 1.0};
  // |x − μ̂| for the underflow terms below (a product's absolute error, later scaled).
  const double dMag = add_up(magnitude(x), magnitude(ch.mean));
  // w·(x − μ̂) (CUDA's form) may overflow where t·w does not: then no enclosure from t.
  if (viaT && mul_up(magnitude(w1), dMag) <= largestFinite(c)) {
    // Every centred form is a chain of fl(x − μ̂) (relative: a difference never underflows) and
    // two products in c (each within u relative and η/2 absolute, scaled by at most r and |w|
    // afterwards, or, for fl(r·w), by |x − μ̂|): t·w·(1 + θ), |θ| <= γ_3 (Higham 2002, Lemma 3.1),
    // plus η·(1 + |x − μ̂| + (1 + r)(1 + |w|)).
    const double g3 = gammaUp(3.0, u);
    const double h = mul_up(eta, add_up(add_up(1.0, dMag), mul_up(add_up(1.0, magnitude(ch.rstd)),
                                                                  add_up(1.0, magnitude(w1)))));
    const Interval tw =
        lossbound::mul(lossbound::mul(t, w1), Interval{sub_down(1.0, g3), add_up(1.0, g3)});
    y = intersect(y, d.round(Interval{sub_down(tw.lo, h), add_up(tw.hi, h)}));
  }
  if (ch.hasBias) y = d.add(y, ch.bias);
  // The CPU form fl(fl(x·α) + β), β = fl(b − fl(μ̂·α)): with the same α in both products it is
  // (x − μ̂)·α + b + x·α·δ1 − μ̂·α·δ2 + δ3·(b − μ̂·α(1 + δ2)), then one rounding δ4; |δ1|, |δ4| <=
  // u, |δ2|, |δ3| <= u_stat (β and the product may be stored), plus underflow in the two
  // products (additions are exact in the subnormal range). FMA drops δ1.
  Interval alpha = ch.hasWeight ? d.mul(ch.rstd, ch.weight) : ch.rstd;
  if (unitRoundoff(stat) > u) alpha = hull(alpha, roundOutward(alpha, stat));
  const double ma = magnitude(alpha), mm = magnitude(ch.mean);
  const double mua = mul_up(mm, ma);
  double err =
      add_up(mul_up(u, mul_up(magnitude(x), ma)), add_up(mul_up(uS, mua), add_up(eta, etaS)));
  if (ch.hasBias)
    err = add_up(
        err, add_up(mul_up(uS, add_up(magnitude(ch.bias), mul_up(mua, add_up(1.0, uS)))), etaS));
  // β may overflow where it is stored (stat): the candidate then holds ±inf.
  const double betaMag =
      mul_up(add_up(ch.hasBias ? magnitude(ch.bias) : 0.0, mua), add_up(1.0, uS));
  if (!(betaMag <= largestFinite(coarser(c, stat)))) return entireInterval();
  // So may fl(x·α): the candidate then holds ±inf.
  if (!(mul_up(mul_up(magnitude(x), ma), add_up(1.0, u)) <= largestFinite(c)))
    return entireInterval();
  Interval core = lossbound::mul(centred, alpha);
  if (viaT) {
    // (x − μ̂)·α with α = fl(r·w), maybe stored: r·w·(1 + θ) + ε, |θ| <= uS, |ε| <= η_S
    // (statRoundoff; η_c/2 + η_s/2), so t·w·(1 + θ) + |x − μ̂|·η_S.
    const double h = mul_up(dMag, etaS);
    const Interval tw =
        lossbound::mul(lossbound::mul(t, w1), Interval{sub_down(1.0, uS), add_up(1.0, uS)});
    core = intersect(core, Interval{sub_down(tw.lo, h), add_up(tw.hi, h)});
  }
  if (ch.hasBias) core = lossbound::add(core, ch.bias);
  const Interval cpu =
      d.round(lossbound::mul(Interval{sub_down(core.lo, err), add_up(core.hi, err)},
                             Interval{sub_down(1.0, u), add_up(1.0, u)}));
  return hull(y, cpu);
}

}  // namespace lossbound::kernels
