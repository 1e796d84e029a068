// Log-softmax's local error in closed form (log_softmax_local_error.h). Contract: for a row of
// finite or −inf inputs with a finite maximum, every written r_i is >= |y_i − ŷ_i| for every
// execution y of the model of softmax_ops.cpp (round to nearest) and ŷ the binary64 point output.
// Sources: Higham 2002, "Accuracy and Stability of Numerical Algorithms" 2nd ed., Lemma 3.1 and
// §4.2 (sums in any order, γ_k = k·u/(1 − k·u)); Blanchard, Higham, Higham 2021, "Accurately
// computing the log-sum-exp and softmax functions", IMA J. Numer. Anal. 41(4), §2 (the shifted
// log-sum-exp's error: u·Σ p_j|d_j| through the sum, plus the log's).
//
// Notation: the kept entries j (x_j > −inf), k of them, M = max x_j, a_j = M − x_j >= 0,
// X = Σ_j exp(−a_j) >= 1 (the maximum's term is exp(0) = 1), and the exact output
// y*_i = x_i − M − ln X. u, η: unit roundoff and smallest subnormal of the compute format c;
// β, η_e: exp's relative and absolute error in c; γ = γ_{k−1}; masked entries are exact (−inf).
// 1. Shifted form (m = M). d_j = fl(x_j − M) = −a_j + δ_j, |δ_j| <= t_j = u·a_j + η (η: the
//    inputs need not lie in c). e_j = exp_c(d_j) lies within β·exp(d_j) + η_e of exp(d_j), and
//    exp(−a_j)e^{−t_j} <= exp(d_j) <= exp(−a_j)e^{t_j}; S = Σ e_j(1 + θ_j), |θ_j| <= γ, e_j >= 0:
//      S <= (1 + γ)((1 + β)(X + D⁺) + kη_e),  D⁺ = Σ exp(−a_j)(e^{t_j} − 1),
//      S >= (1 − γ)((1 − β)(X − D⁻) − kη_e),  D⁻ = Σ exp(−a_j)t_j >= Σ exp(−a_j)(1 − e^{−t_j}).
//    As ln(1 + z) <= z: ln S − ln X <= S_hi/X − 1 = Λ⁺ and ln X − ln S <= X/S_lo − 1 = Λ⁻ (which
//    needs S_lo > 0); Λ = max(Λ⁺, Λ⁻), with X >= X_lo in the ratios.
//    L = log_c(S) is within ε_L = 2·k_log·u(1 + 2^-10)·|ln S| + k_log·η of ln S (the kernel's log
//    model), |ln S| <= ln X + Λ, |L| <= |ln S| + ε_L.
//    Form A, v_i = d_i − L: |v_i − y*_i| <= t_i + ε_L + Λ. Form B, v_i = x_i − fl(M + L):
//    |v_i − y*_i| <= u(|M| + |L|) + η + ε_L + Λ.
// 2. Unshifted form (m = 0, allowed when every |x_j| <= T): d_j = fl(x_j) = x_j + δ_j with
//    |δ_j| <= t0_j = u|x_j| + η (the inputs are binary64 replay values, not always in c),
//    S0* = X·e^M, and the same two inequalities with D0± (t0 for t) over X give Λ0; L0 =
//    log_c(S0) is within ε_L0 (|ln S0| <= |ln X + M| + Λ0); form A, v_i = d_i − L0, gives
//    |v_i − y*_i| <= t0_i + ε_L0 + Λ0 and form B (fl(0 + L0) = L0) the same without t0_i.
// 3. E_i = the largest of the forms' bounds: v_i lies in [y*_lo − E_i, y*_hi + E_i] (y*_i =
//    −a_i − ln X with binary64 bounds of a_i and ln X). Rounding to nearest is monotone and fixes
//    the numbers of its format, so the stored RN_s(RN_c(v_i)) lies between the same roundings of
//    those two ends (binary64 numbers), and r_i is the farther one's distance from ŷ_i. A row is
//    declined where an end rounds to ±inf, or where d_i = fl(x_i − M) or fl(M + L) may overflow
//    (a_i + t_i or |M| + |L| near c's largest finite value): a finite mask such as finfo.min,
//    which the interval rows then bound.
// Binary64 evaluation: glibc's exp, expm1 and log are within 1 ulp (its libm-test-ulps for
// x86_64); each is charged 2 ulps, 2^-51 relative, plus 2^-1074 absolute; X's k terms are summed
// in long double (x87, 64-bit significand: the sum is within (k − 1)·2^-64 relative, Higham 2002
// eq. 4.4, charged k·2^-63), everything else is rounded outward (add_up, add_down, …). Terms with
// a_j(1 − u) >= 746 are below 2^-1076 and count as 2^-1074 in the upper sums and 0 in the lower.

#include "core/ops/log_softmax_local_error.h"

#include "core/interval/precision.h"
#include "core/interval/rounding.h"
#include "core/ops/error_bounds.h"
#include "core/ops/formats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lossbound::ops {

namespace {

constexpr double kRel = 0x1p-51;     // glibc's exp, expm1, log: charged 2 ulps (2^-52 each)
constexpr double kTiny = 0x1p-1074;  // and one subnormal step

double expUp(double v) { return add_up(mul_up(std::exp(v), 1.0 + kRel), kTiny); }
double expDown(double v) {
  return std::fmax(0.0, sub_down(mul_down(std::exp(v), 1.0 - kRel), kTiny));
}
double expm1Up(double v) { return add_up(mul_up(std::expm1(v), 1.0 + kRel), kTiny); }  // v >= 0
double logErr(double l) { return add_up(mul_up(std::fabs(l), kRel), kTiny); }
double logUp(double v) { return add_up(std::log(v), logErr(std::log(v))); }
double logDown(double v) { return sub_down(std::log(v), logErr(std::log(v))); }

/// max(S_hi/X − 1, X/S_lo − 1) from the two inequalities of step 1: dPlus/X and dMinus/X are the
/// D± terms over X, etaK = kη_e/X; nullopt-like NaN when S_lo > 0 cannot be shown.
double relativeSumError(double gamma, double beta, double dPlus, double dMinus, double etaK) {
  const double gUp = add_up(1.0, gamma), gDown = sub_down(1.0, gamma);
  const double up = sub_up(
      add_up(mul_up(mul_up(gUp, add_up(1.0, beta)), add_up(1.0, dPlus)), mul_up(gUp, etaK)), 1.0);
  const double z =
      mul_down(gDown, sub_down(mul_down(sub_down(1.0, beta), sub_down(1.0, dMinus)), etaK));
  if (!(z > 0.0)) return std::numeric_limits<double>::quiet_NaN();
  return std::fmax(up, sub_up(div_up(1.0, z), 1.0));
}

/// RN_s(RN_c(v)): an end of the pre-rounding range taken to the stored grid.
double stored(double v, const kernels::SoftmaxModel& m) {
  return roundNearest(roundNearest(v, m.c), m.s);
}

}  // namespace

bool logSoftmaxRowLocalErrors(const double* x, const double* yPoint, std::int64_t n,
                              const kernels::SoftmaxModel& m, const unsigned char* needed,
                              double* r) {
  const double inf = std::numeric_limits<double>::infinity();
  if (n <= 0) return true;
  if (m.uAcc != m.u) return false;  // truncating sums: not this model
  double mx = -inf, maxMag = 0.0;
  std::int64_t k = 0;
  for (std::int64_t j = 0; j < n; ++j) {
    if (std::isnan(x[j]) || x[j] == inf) return false;
    if (x[j] == -inf) continue;
    ++k;
    mx = std::fmax(mx, x[j]);
    maxMag = std::fmax(maxMag, std::fabs(x[j]));
  }
  if (k == 0) return false;  // every entry masked: PyTorch gives NaN
  const double u = m.u, etaC = m.eta;
  // X's bounds and D± over the kept entries, and the unshifted form's D± (t0_j = u|x_j| + η) when
  // that form is allowed (then every |x_j| <= T).
  const bool unshiftedForm = maxMag <= m.noShiftT;
  static_assert(std::numeric_limits<long double>::digits >= 64,
                "X's sums assume an x87 (or wider) long double");
  long double sumLo = 0.0L, sumHi = 0.0L;
  double xHi = 0.0, dPlus = 0.0, dMinus = 0.0, dPlus0 = 0.0, dMinus0 = 0.0;
  for (std::int64_t j = 0; j < n; ++j) {
    if (x[j] == -inf) continue;
    const double aLo = sub_down(mx, x[j]), aHi = sub_up(mx, x[j]);
    if (mul_down(aLo, sub_down(1.0, u)) >= 746.0) {  // exp(−a_j(1 − u)) < 2^-1076
      xHi = add_up(xHi, kTiny);
      dPlus = add_up(dPlus, kTiny);
      dMinus = add_up(dMinus, kTiny);
      continue;  // (never in the unshifted form: there a_j <= 2T)
    }
    const double eHi = expUp(-aLo);
    sumLo += static_cast<long double>(expDown(-aHi));
    sumHi += static_cast<long double>(eHi);
    const double t = add_up(mul_up(u, aHi), etaC);
    dPlus = add_up(dPlus, mul_up(eHi, expm1Up(t)));
    dMinus = add_up(dMinus, mul_up(eHi, t));
    if (unshiftedForm) {
      const double t0 = add_up(mul_up(u, std::fabs(x[j])), etaC);
      dPlus0 = add_up(dPlus0, mul_up(eHi, expm1Up(t0)));
      dMinus0 = add_up(dMinus0, mul_up(eHi, t0));
    }
  }
  // The long double sums' error, then outward to binary64; X >= 1 exactly (the maximum's term).
  const long double g = static_cast<long double>(k) * 0x1p-63L;
  const long double sumLoBound = sumLo * (1.0L - g), sumHiBound = sumHi * (1.0L + g);
  double xLo = static_cast<double>(sumLoBound), h = static_cast<double>(sumHiBound);
  if (static_cast<long double>(xLo) > sumLoBound) xLo = std::nextafter(xLo, -inf);
  if (static_cast<long double>(h) < sumHiBound) h = std::nextafter(h, inf);
  xLo = std::fmax(xLo, 1.0);
  xHi = add_up(xHi, h);  // xHi held the terms below 2^-1076
  const double gamma = gammaUp(k - 1, m.uAcc);
  const double etaK = div_up(mul_up(static_cast<double>(k), m.etaExp), xLo);
  const double lambda =
      relativeSumError(gamma, m.beta, div_up(dPlus, xLo), div_up(dMinus, xLo), etaK);
  if (std::isnan(lambda) || !std::isfinite(xHi)) return false;
  const double lnXHi = std::fmax(0.0, logUp(xHi)), lnXLo = std::fmax(0.0, logDown(xLo));
  const double relLog = mul_up(mul_up(2.0 * m.kLog, u), 1.0 + 0x1p-10);
  const double etaLog = mul_up(static_cast<double>(m.kLog), etaC);
  const double lnS = add_up(lnXHi, lambda);
  const double eL = add_up(mul_up(relLog, lnS), etaLog);
  const double shared = add_up(eL, lambda);  // ε_L + Λ
  const double bigC = largestFinite(m.c);
  const double mPlusL = add_up(std::fabs(mx), add_up(lnS, eL));  // >= |M + L|
  if (!(mPlusL < mul_down(bigC, 0.5))) return false;             // fl(M + L) may overflow
  const double formB = add_up(mul_up(u, mPlusL), etaC);
  double unshifted = -1.0;  // ε_L0 + Λ0, when the unshifted form is allowed
  if (unshiftedForm) {
    const double s0Lo = mul_down(xLo, expDown(mx));
    if (!(s0Lo > 0.0)) return false;
    const double lambda0 =
        relativeSumError(gamma, m.beta, div_up(dPlus0, xLo), div_up(dMinus0, xLo),
                         div_up(mul_up(static_cast<double>(k), m.etaExp), s0Lo));
    if (std::isnan(lambda0)) return false;
    const double hi = add_up(lnXHi, mx), lo = add_down(lnXLo, mx);
    const double lnS0 = add_up(std::fmax(std::fabs(hi), std::fabs(lo)), lambda0);
    unshifted = add_up(add_up(mul_up(relLog, lnS0), etaLog), lambda0);
  }
  for (std::int64_t i = 0; i < n; ++i) {
    if (needed && !needed[i]) continue;
    if (x[i] == -inf) {  // masked: −inf exactly in every execution and in the point
      if (yPoint[i] != -inf) return false;
      r[i] = 0.0;
      continue;
    }
    if (!std::isfinite(yPoint[i])) return false;
    const double aLo = sub_down(mx, x[i]), aHi = sub_up(mx, x[i]);
    const double formA = add_up(mul_up(u, aHi), etaC);
    double e = add_up(shared, std::fmax(formA, formB));
    if (unshifted >= 0.0)
      e = std::fmax(e, add_up(unshifted, add_up(mul_up(u, std::fabs(x[i])), etaC)));
    if (!(add_up(aHi, formA) < mul_down(bigC, 0.5))) return false;  // d_i may overflow
    const double lo = stored(sub_down(-add_up(aHi, lnXHi), e), m);  // y*_lo − E_i, rounded
    const double hi = stored(add_up(sub_up(-aLo, lnXLo), e), m);    // y*_hi + E_i, rounded
    const double d = std::fmax(sub_up(hi, yPoint[i]), sub_up(yPoint[i], lo));
    if (!std::isfinite(d)) return false;
    r[i] = std::fmax(d, 0.0);
  }
  return true;
}

}  // namespace lossbound::ops
