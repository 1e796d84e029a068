// One normalized row's adjoint-weighted local error (norm_row_adjoint.h). The derivation is in
// core/ops/norm_ops.cpp's file comment ("Adjoint-weighted local error"): with μ̂, r̂ the
// candidate's statistics, z_j = (x_j − μ̂)·r̂·w_j + b_j exactly and ε_j = ŷ_j − z_j the affine
// part's rounding, ŷ_j − y_j = w_j[(x_j − μ)δr − r·δμ − δμ·δr] + ε_j, so the row's roundings
// through δμ, δr meet the signed sums Σ g w (x − μ) and Σ g w. This file adds, for batch and
// group norm, the channel affine form of PyTorch's CPU and CUDA kernels, α = fl(r̂·w),
// β = fl(b − fl(μ̂·α)), ŷ = fl(fl(x·α) + β) (or fma(x, α, β): fewer roundings, inside): with
// |e_k| <= u (Higham 2002, Lemma 3.1),
//   x·α(1 + e4) − x·r̂w = x·r̂w[(1 + e1)(1 + e4) − 1],            |·| <= γ_2·|x|r̂|w|,
//   β − (b − μ̂r̂w) = b·e3 − μ̂r̂w[(1 + e1)(1 + e2)(1 + e3) − 1],    |·| <= u|b| + γ_3|μ̂|r̂|w|,
// and the final sum's rounding: |ŷ − z| <= (1 + u)(γ_2|x| + γ_3|μ̂|)r̂|w| + (1 + u)u|b| + u|z|,
// |z| <= |x − μ̂|r̂|w| + |b|.

#include "core/ops/norm_row_adjoint.h"

#include "core/ops/channel_norm_support.h"
#include "core/ops/error_bounds.h"
#include "core/ops/formats.h"
#include "core/ops/nn_support.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace lossbound::ops::norm {

namespace {

/// One element's inputs, adjoint and local bound ε̄ (given the shared μ̂, r̂), and the binades
/// of x − μ and of its affine value z (point statistics).
struct Element {
  double x, w, b, g, e;
  int binadeD, binadeZ;
};

// Returns the probabilistic sum of squares of the per-element terms. In one execution every
// element's affine rounding is a function of its inputs and of the row's shared μ̂, r̂ (and b in
// batch and group norm), so (1) equal (x, w, b) round alike: their adjoints add up, signed,
// before the term is taken (measured: bf16 channels of a few distinct values had 2.7× the
// per-element root-sum-square); and (2) unequal elements whose x − μ̂ (or z) falls in one binade
// can round by one offset: x on the grid of that binade makes fl(x − μ̂)'s error a function of
// μ̂ alone, and a shared β or b does the same to the sums (review counterexample: x on a 2^-20
// grid, μ ≈ 0.3, had 3.4× the per-element root-sum-square). So the terms of a binade pair
// (x − μ, z) are added linearly and the pairs put in quadrature. An element whose x − μ̂ lands in
// the binade next to x − μ's (δμ moves it) is counted in its own pair. Sorts `elements`.
double groupedSquares(std::vector<Element>& elements) {
  const auto key = [](const Element& a) {
    return std::make_tuple(a.binadeD, a.binadeZ, a.x, a.w, a.b);
  };
  std::sort(elements.begin(), elements.end(),
            [&](const Element& a, const Element& b) { return key(a) < key(b); });
  double squares = 0.0, binade = 0.0;
  for (std::size_t i = 0; i < elements.size();) {
    double up = 0.0, down = 0.0;
    std::size_t j = i;
    for (; j < elements.size() && key(elements[j]) == key(elements[i]); ++j) {
      up = add_up(up, elements[j].g);
      down = add_down(down, elements[j].g);
    }
    binade = add_up(binade, mul_up(std::fmax(std::fabs(up), std::fabs(down)), elements[i].e));
    const bool last = j == elements.size() || elements[j].binadeD != elements[i].binadeD ||
                      elements[j].binadeZ != elements[i].binadeZ;
    if (last) {
      squares = add_up(squares, mul_up(binade, binade));
      binade = 0.0;
    }
    i = j;
  }
  return squares;
}

/// Returns the binary exponent of v (0 for 0 and non-finite values).
int binadeOf(double v) { return v == 0.0 || !std::isfinite(v) ? 0 : std::ilogb(v); }

// Distance from a point value to the far end of an enclosure (|v̂ − v| for every v̂ in it).
double far(Interval e, double v) { return std::fmax(sub_up(e.hi, v), sub_up(v, e.lo)); }

}  // namespace

std::optional<AdjointLocalError> normRowAdjoint(const NormRow& row, const NormRowModel& m,
                                                std::vector<double>& scratch) {
  using nn::mag;
  const Format c = m.moments.compute;
  const double u = unitRoundoff(c), etaC = smallestSubnormal(c);
  const double uS = unitRoundoff(m.out) > u ? unitRoundoff(m.out) : 0.0;
  const double etaS = uS > 0.0 ? smallestSubnormal(m.out) : 0.0;
  const double gk = gammaUp(row.w ? 3 : 2, u);  // centred forms: 2 or 3 roundings
  const double g2 = gammaUp(2, u), g3 = gammaUp(3, u), onePlusU = add_up(1.0, u);
  const double onePlusU2 = mul_up(onePlusU, onePlusU);
  const double twoUu = add_up(2.0 * u, mul_up(u, u));
  const double g64 = gammaUp(4, 0x1p-53);  // the binary64 point evaluation of y (≤ 4 ops)
  const double bigC = 0.25 * largestFinite(c);
  const std::int64_t n = row.n;
  scratch.resize(2 * static_cast<std::size_t>(n));
  const kernels::RowMoments mo =
      kernels::rowMoments(row.x, row.x, n, m.moments, scratch.data(), scratch.data() + n);
  const double muPt = row.mean, rPt = row.rstd;
  if (!mo.bounded || !std::isfinite(muPt) || !std::isfinite(rPt)) return std::nullopt;
  // Shared: δμ = μ̂ − μ, δr = r̂ − r against the point statistics (the mean enclosure is
  // μ ± meanError in c, RowMoments; the rstd enclosure is every r̂ the candidate computes).
  const double dMu = far(mo.mean, muPt), dR = far(mo.rstd, rPt);
  const double rHat = mag(mo.rstd), muHat = mag(mo.mean);
  if (!std::isfinite(dMu) || !std::isfinite(dR) || !std::isfinite(rHat)) return std::nullopt;
  Interval s1{0.0, 0.0}, s2{0.0, 0.0};  // Σ g w (x − μ), Σ g w, enclosed
  double perElement = 0.0;
  std::vector<Element> elements;  // for the probabilistic per-element terms, grouped below
  elements.reserve(static_cast<std::size_t>(n));
  for (std::int64_t j = 0; j < n; ++j) {
    const double gj = row.g[j];
    if (gj == 0.0) continue;
    const double xj = row.x[j];
    const double wj = row.w ? row.w[j] : 1.0, aw = std::fabs(wj);
    const double bj = row.b ? std::fabs(row.b[j]) : 0.0;
    const Interval dj{sub_down(xj, muPt), sub_up(xj, muPt)};  // x − μ exactly
    const Interval gw = lossbound::mul(Interval{gj, gj}, Interval{wj, wj});
    s1 = lossbound::add(s1, lossbound::mul(gw, dj));
    s2 = lossbound::add(s2, gw);
    // ε̄_j: the affine part given μ̂ and r̂, |x − μ̂| ≤ |x − μ| + δμ.
    const double dHat = mul_up(add_up(mag(dj), dMu), rHat);  // |x − μ̂|·r̂
    const double p = mul_up(dHat, aw);
    const double centred = mul_up(gk, p);
    double cpu = 0.0;
    if (m.channelForm) {
      const double inner =
          mul_up(add_up(mul_up(g2, std::fabs(xj)), mul_up(g3, muHat)), mul_up(rHat, aw));
      cpu = add_up(add_up(mul_up(onePlusU, inner), mul_up(mul_up(onePlusU, u), bj)),
                   mul_up(u, add_up(p, bj)));
    } else {
      const double h = mul_up(u, mul_up(add_up(std::fabs(xj), muHat), rHat));
      cpu = row.w ? mul_up(aw, add_up(mul_up(onePlusU2, h), mul_up(twoUu, dHat)))
                  : add_up(mul_up(onePlusU, h), mul_up(u, dHat));
    }
    // Overflow in c (x·α, β, the centred products): no bound here (the interval rule's
    // enclosure is entire there too).
    const double scale = mul_up(std::fmax(1.0, rHat), std::fmax(1.0, aw));
    const double dAbs = add_up(mag(dj), dMu);  // >= |x − μ̂|
    if (!(add_up(mul_up(add_up(add_up(std::fabs(xj), muHat), dAbs), scale), bj) < bigC))
      return std::nullopt;
    double e = std::fmax(centred, cpu);
    // Underflow: each of the <= 3 products of a form may round by η_c in absolute terms, and the
    // later products scale that error: by |w| (fl(t·r̂)·w, layer norm's CPU form), by r̂
    // (fl(w·t)·r̂), by |x − μ̂| (t·fl(r̂·w)), by |x| + |μ̂| (α = fl(r̂·w) in x·α and μ̂·α).
    e = add_up(e, mul_up(etaC, add_up(add_up(3.0, add_up(aw, rHat)),
                                      add_up(dAbs, add_up(std::fabs(xj), muHat)))));
    if (row.b) e = add_up(e, mul_up(u, add_up(add_up(p, bj), e)));
    if (uS > 0.0) e = add_up(e, add_up(mul_up(uS, add_up(add_up(p, bj), e)), etaS));
    // The point value's own binary64 rounding (y = ((x − μ)·r)·w + b in 4 operations).
    const double pPt = mul_up(mul_up(mag(dj), rPt), aw);
    e = add_up(e, add_up(mul_up(g64, add_up(pPt, bj)), 4.0 * 0x1p-1074));
    const double t = mul_up(std::fabs(gj), e);
    perElement = add_up(perElement, t);
    if (!m.probabilistic) continue;
    const double z = (xj - muPt) * rPt * wj + (row.b ? row.b[j] : 0.0);
    elements.push_back({xj, wj, row.b ? row.b[j] : 0.0, gj, e, binadeOf(xj - muPt), binadeOf(z)});
  }
  // Δy_j = w_j[(x_j − μ)·δr − r·δμ − δμ·δr] + ε_j, so |Σ g Δy| ≤ δr|Σ g w (x − μ)| +
  // (r δμ + δμ δr)|Σ g w| + Σ|g| ε̄_j; the shared terms are one rounding each per row.
  const double sh1 = mul_up(dR, mag(s1));
  const double sh2 = mul_up(add_up(mul_up(dMu, rPt), mul_up(dMu, dR)), mag(s2));
  // The stored mean and rstd outputs: their own errors, not assumed to be the ones used.
  const double tm = row.gMean == 0.0
                        ? 0.0
                        : mul_up(std::fabs(row.gMean), far(roundOutward(mo.mean, m.mean), muPt));
  const double tr = row.gRstd == 0.0
                        ? 0.0
                        : mul_up(std::fabs(row.gRstd), far(roundOutward(mo.rstd, m.rstd), rPt));
  AdjointLocalError res;
  res.bound = add_up(add_up(add_up(sh1, sh2), perElement), add_up(tm, tr));
  if (!m.probabilistic) return res;
  const double perSquares = groupedSquares(elements);
  // Probabilistic: δμ and δr are sums of the row's individual roundings (momentSpread). Exactly,
  // Σ g Δy = δr·Σ g w (x − μ) − δμ·r̂·Σ g w + Σ g ε with r̂ = r + δr <= sup r̂: the δμ·δr term
  // is inside the second, weighed by sup r̂, and needs no term of its own. The same roundings
  // reach δμ and δr, so 2(a² + b²) >= (a + b)². Never above the worst-case shared terms, which
  // come from the same roundings: (sh1 + sh2)².
  const MomentSpread sp = momentSpread(row.x, n, mo, m.moments.eps, c, m.moments.rsqrtUlps);
  const double pr1 = mul_up(sp.rstd, mag(s1)), pr2 = mul_up(mul_up(sp.mean, rHat), mag(s2));
  const double shared = std::fmin(mul_up(add_up(sh1, sh2), add_up(sh1, sh2)),
                                  mul_up(2.0, add_up(mul_up(pr1, pr1), mul_up(pr2, pr2))));
  res.sumSquares = add_up(add_up(shared, perSquares), add_up(mul_up(tm, tm), mul_up(tr, tr)));
  return res;
}

}  // namespace lossbound::ops::norm
