// The binary64 two-pass layer norm's own error (layer_norm_point_error.h). Contract: for finite
// inputs and outputs, every returned bound is >= |point − exact| of its output, where point is
// LayerNormRule::point's binary64 value and exact the real layer norm of the same binary64
// values (Higham 2002, Lemma 3.1 and eq. 4.4 for the recursive sums; u = 2^-53, η = 2^-1074,
// γ_k = k·u/(1 − k·u)). The point rule computes, per row, in binary64 to nearest:
//   s = Σ x_j (left to right), μ̂ = fl(s/n), d̂_j = fl(x_j − μ̂), q = Σ fl(d̂_j²) (left to right),
//   v̂ = fl(q/n), ê = fl(v̂ + eps), r̂ = fl(1/fl(sqrt(ê))), ŷ_j = fl(fl(fl(d̂_j·r̂)·w_j) + b_j);
// exactly: μ = Σx/n, d_j = x_j − μ, S = Σ d_j², V = S/n + eps, r = 1/sqrt(V), y_j = d_j·r·w_j +
// b_j.
// 1. Mean: |s − Σx| <= γ_{n−1}Σ|x| and the division adds u|s/n| + η/2, so with A = Σ|x|/n,
//    |μ̂ − μ| <= Δμ = γ_n·A + η (additions are exact in the subnormal range).
// 2. Centred values: a difference has no underflow error, d̂_j = (x_j − μ̂)(1 + δ), so
//    |d̂_j − d_j| <= E_j = Δμ + u/(1 − u)·|d̂_j|, and |d_j| <= |d̂_j| + E_j.
// 3. Sum of squares: whatever the order and whether the adds are fused, |q − Σ d̂²| <= γ_n·Σ d̂² +
//    n·η (each square may underflow by η/2); d̂_j² = (x_j − μ̂)²(1 + δ)² and, exactly,
//    Σ (x_j − μ̂)² = S + n(μ̂ − μ)², so |Σ d̂² − S| <= c₂·Σ d̂² + nΔμ² with c₂ = (2u + u²)/(1 − u)²;
//    E_q = (γ_n + c₂)·Σ d̂² + nΔμ² + n·η >= |q − S|, and S >= Σ d̂²/(1 + u)² − nΔμ².
// 4. Variance: |v̂ − S/n| <= E_q/n + u·q/n + η/2 and |ê − V| <= that + u(v̂ + eps) =: E_v, with
//    q and v̂ bounded above from Σ d̂² (no recomputation of the point rule's q: its order and
//    fusing do not matter); with V_lo <= V from the lower bound of S and
//    ρ = E_v/V_lo >= |ê − V|/V (required <= 1/2), sqrt(V/ê) lies within ρ of 1
//    (1/sqrt(1 − ρ) <= 1 + ρ for ρ <= 0.618), and the sqrt and the division round by u each:
//    |r̂/r − 1| <= τ = (1 + ρ)(1 + u)/(1 − u) − 1, so |r̂ − r| <= Δr = τ·r̂/(1 − τ).
// 5. Output: fl(d̂·r̂) = d̂r̂(1 + δ1) + ε1, its product with w adds δ2 and ε2 (|ε| <= η/2), the
//    bias add rounds by u|ŷ|/(1 − u) (no underflow error). With |d̂r̂ − dr| <= E_j·r̂ +
//    (|d̂_j| + E_j)·Δr: |ŷ_j − y_j| <= |w_j|[E_j·r̂ + (|d̂_j| + E_j)Δr + (2u + u²)|d̂_j|r̂ + η] +
//    η/2 + u/(1 − u)·|ŷ_j| (w = 1 without a weight; the terms of a missing product or add only
//    loosen it). Every bound is evaluated upward (η/2 is taken as η: 2^-1075 is not a binary64
//    number).
// The mean and rstd outputs are the binary64 μ̂ and r̂: bounds Δμ and Δr.

#include "core/ops/layer_norm_point_error.h"

#include "core/interval/rounding.h"
#include "core/ops/error_bounds.h"

#include <cmath>

namespace lossbound::ops::norm {

std::optional<LayerNormPointErrors> layerNormPointErrors(const double* x, const double* w,
                                                         const double* b, std::int64_t rows,
                                                         std::int64_t n, double eps,
                                                         const double* y, const double* mean,
                                                         const double* rstd) {
  constexpr double u = 0x1p-53, eta = 0x1p-1074;
  if (n <= 0 || !std::isfinite(eps) || eps < 0.0) return std::nullopt;
  const double nd = static_cast<double>(n);
  const double gn = gammaUp(n, u);
  const double u1 = div_up(u, sub_down(1.0, u));                    // u/(1 − u)
  const double twoU = add_up(2.0 * u, mul_up(u, u));                // 2u + u²
  const double uRatio = div_up(add_up(1.0, u), sub_down(1.0, u));   // (1 + u)/(1 − u)
  const double onePlusU2 = mul_up(add_up(1.0, u), add_up(1.0, u));  // (1 + u)²
  const double c2 =
      div_up(twoU, mul_down(sub_down(1.0, u), sub_down(1.0, u)));  // (2u + u²)/(1 − u)²
  LayerNormPointErrors e;
  e.out.resize(static_cast<std::size_t>(rows * n));
  e.mean.resize(static_cast<std::size_t>(rows));
  e.rstd.resize(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto o = static_cast<std::size_t>(r * n);
    const double mu = mean[r], rs = rstd[r];
    if (!std::isfinite(mu) || !std::isfinite(rs)) return std::nullopt;
    double absSum = 0.0;
    for (std::int64_t j = 0; j < n; ++j) absSum = add_up(absSum, std::fabs(x[o + j]));
    if (!std::isfinite(absSum)) return std::nullopt;
    const double dMu = add_up(mul_up(gn, div_up(absSum, nd)), eta);  // step 1
    // Step 3: Σ d̂² bracketed, and |q − S| <= E_q.
    double sq = 0.0, sqDown = 0.0;
    for (std::int64_t j = 0; j < n; ++j) {
      const double d = x[o + j] - mu;  // d̂_j, as the point rule computes it
      sq = add_up(sq, mul_up(d, d));
      sqDown = add_down(sqDown, mul_down(d, d));
    }
    const double nMu2 = mul_up(nd, mul_up(dMu, dMu));  // n·Δμ²
    const double eq = add_up(add_up(mul_up(add_up(gn, c2), sq), nMu2), mul_up(nd, eta));
    // Step 4: v̂ and ê bounded from q <= qUp; V from below by S >= Σ d̂²/(1 + u)² − nΔμ².
    const double qUp = add_up(mul_up(sq, add_up(1.0, gn)), mul_up(nd, eta));
    const double vUp = add_up(mul_up(div_up(qUp, nd), add_up(1.0, u)), eta);
    const double ev = add_up(add_up(div_up(eq, nd), mul_up(u, div_up(qUp, nd))),
                             add_up(eta, mul_up(u, add_up(vUp, eps))));
    const double sLow = std::fmax(0.0, sub_down(div_down(sqDown, onePlusU2), nMu2));
    const double floorV = add_down(div_down(sLow, nd), eps);
    if (!std::isfinite(ev) || !(floorV > 0.0)) return std::nullopt;
    const double rho = div_up(ev, floorV);
    if (!(rho <= 0.5)) return std::nullopt;
    const double tau = sub_up(mul_up(add_up(1.0, rho), uRatio), 1.0);
    const double dR = div_up(mul_up(tau, rs), sub_down(1.0, tau));
    if (!std::isfinite(dR)) return std::nullopt;
    e.mean[static_cast<std::size_t>(r)] = dMu;
    e.rstd[static_cast<std::size_t>(r)] = dR;
    // Step 5.
    for (std::int64_t j = 0; j < n; ++j) {
      const double d = std::fabs(x[o + j] - mu);
      const double ej = add_up(dMu, mul_up(u1, d));
      const double aw = w ? std::fabs(w[j]) : 1.0;
      const double inner = add_up(add_up(mul_up(ej, rs), mul_up(add_up(d, ej), dR)),
                                  add_up(mul_up(twoU, mul_up(d, rs)), eta));
      const double ej5 = add_up(add_up(mul_up(aw, inner), eta), mul_up(u1, std::fabs(y[o + j])));
      if (!std::isfinite(ej5) || (b && !std::isfinite(b[j]))) return std::nullopt;
      e.out[o + static_cast<std::size_t>(j)] = ej5;
    }
  }
  return e;
}

}  // namespace lossbound::ops::norm
