#pragma once
// The softmax / log-softmax row body: the interval rule of core/ops/softmax_ops.cpp for one row,
// as an LB_HD inline function built only from core/interval (no std::vector, no exceptions, no
// host-only library calls), so that the CPU rule, the CUDA kernel (gpu/interval_kernels.cu) and
// the host tests run the same code. The error model and the dependency-aware enclosure it
// implements are documented at the top of core/ops/softmax_ops.cpp (Blanchard, Higham, Higham
// 2021, IMA J. Numer. Anal. 41(4), §2–3; Higham 2002, Lemma 3.1).
//
// On the host the result is bit-identical to the former std::vector implementation of the rule
// (the same operations in the same order); on a device the libm inside elementaryDown/Up is
// CUDA's, so the bounds may differ by the libm margins (both are enclosures).

#include "core/interval/elementary.h"
#include "core/interval/hd.h"
#include "core/interval/interval.h"
#include "core/interval/precision.h"
#include "core/interval/rounding.h"
#include "core/kernels/kernel_bodies.h"

#include <cstdint>

namespace lossbound::kernels {

/// Bounds of the softmax error model for one op (built once per op by the CPU rule's modelFor).
struct SoftmaxModel {
  Format c = Format::Fp64;  ///< compute format
  Format s = Format::Fp64;  ///< storage format of the output
  double u = 0x1p-53;       ///< unit roundoff of c
  double uAcc = 0x1p-53;    ///< unit roundoff of the sums (2u with truncating accumulation)
  double eta = 0x1p-1074;   ///< smallest subnormal of c
  int kExp = 0, kLog = 0;   ///< modelUlps of exp and log in c
  double beta = 0.0;        ///< relative error of exp: 2·kExp·u (with the ulp slack of widenUlps)
  double etaExp = 0.0;      ///< absolute error of exp: kExp·eta
  double noShiftT = 0.0;    ///< rows with every |x| <= T may be computed without the max shift
};

/// Returns the model for compute format c, storage format s, truncating accumulation or not, and
/// the model ulps of exp and log in c (ops::modelUlps). Host and device give the same fields:
/// noShiftT = floor(ln(max_c) / 4) is far from an integer for every format.
LB_HD inline SoftmaxModel makeSoftmaxModel(Format c, Format s, bool truncating, int kExp,
                                           int kLog) {
  SoftmaxModel m;
  m.s = s;
  m.c = c;
  m.u = unitRoundoff(c);
  m.uAcc = m.u * (truncating ? 2.0 : 1.0);
  m.eta = smallestSubnormal(c);
  m.kExp = kExp;
  m.kLog = kLog;
  // Same relative size of an ulp as widenUlps (libm_model.h): 2u per ulp, with slack 2^-10.
  m.beta = mul_up(mul_up(2.0 * m.kExp, m.u), 1.0 + 0x1p-10);
  m.etaExp = mul_up(static_cast<double>(m.kExp), m.eta);
  m.noShiftT = ::floor(::log(largestFinite(c)) / 4.0);
  return m;
}

/// Returns the number of doubles of scratch softmaxRow needs for a row of n elements: 5n + 2.
LB_HD inline std::int64_t softmaxRowScratch(std::int64_t n) { return 5 * n + 2; }

namespace softmax_detail {

/// std::max(a, b) bit for bit (a < b ? b : a: with signed zeros it returns a).
LB_HD inline double maxOf(double a, double b) { return a < b ? b : a; }
/// Returns true for an exact −inf entry (a causal or padding mask).
LB_HD inline bool isMasked(double lo, double hi) {
  return lo == -interval_detail::inf() && hi == -interval_detail::inf();
}
/// Returns a / b rounded up for a, b >= 0, with 0/0 = 0 and a/0 = inf/b = inf.
LB_HD inline double divUpSafe(double a, double b) {
  if (a == 0.0) return 0.0;
  if (b == 0.0 || a == interval_detail::inf()) return interval_detail::inf();
  return div_up(a, b);
}
/// Returns a / b rounded down for a, b >= 0, with 0/b = a/inf = 0 and a/0 = inf.
LB_HD inline double divDownSafe(double a, double b) {
  if (a == 0.0 || b == interval_detail::inf()) return 0.0;
  if (b == 0.0) return interval_detail::inf();
  return div_down(a, b);
}

}  // namespace softmax_detail

/// Encloses one log-softmax output y_i = fl(fl(x_i − m) − L) or fl(x_i − fl(m + L)), L = log_c(S)
/// with S in [sLo, sHi], directly from d_i = x_i − m (r = u·|d_i| its rounding; d_i <= 0 with the
/// max shift) without the dependency between x_i and S: wide, but finite wherever S > 0 is
/// bounded away from 0, which the dependency-aware bound is not when exp underflows across a
/// wide row. The entire line when sLo <= 0.
LB_HD inline Interval logSoftmaxDirect(double xlo, double xhi, Interval shift, bool noShift,
                                       double sLo, double sHi, double r, const SoftmaxModel& m) {
  const double inf = interval_detail::inf();
  if (!(sLo > 0.0)) return Interval{-inf, inf};
  const Interval logS = lossbound::log(Interval{sLo, sHi});
  const double relLog = mul_up(mul_up(2.0 * m.kLog, m.u), 1.0 + 0x1p-10);
  const double eLog =
      add_up(mul_up(relLog, magnitude(logS)), mul_up(static_cast<double>(m.kLog), m.eta));
  const Interval l{sub_down(logS.lo, eLog), add_up(logS.hi, eLog)};  // the computed L
  double dLo = sub_down(sub_down(xlo, shift.hi), r);
  double dHi = add_up(sub_up(xhi, shift.lo), r);
  if (!noShift) dHi = dHi < 0.0 ? dHi : 0.0;  // x_i <= m, and rounding is monotone
  const double eMl = mul_up(m.u, add_up(magnitude(shift), magnitude(l)));  // fl(m + L) variant
  const Interval base{sub_down(sub_down(dLo, l.hi), eMl), add_up(sub_up(dHi, l.lo), eMl)};
  return lossbound::mul(base, Interval{sub_down(1.0, m.u), add_up(1.0, m.u)});
}

/// Encloses softmax (log == false) or log-softmax of one row x[0..n) under model m into y.
/// Entries that are exactly −inf (a causal or padding mask) are taken out of the row:
/// fl(−inf − m) = −inf and exp(−inf) = 0 exactly in IEEE 754 (§9.2 special cases), and adding an
/// exact 0 to a sum is exact, so they give exactly 0 (log-softmax: −inf) and leave the other
/// entries' bounds as for the shorter row. A row that is all −inf (NaN in PyTorch), or that has
/// any other non-finite endpoint, gives the entire line everywhere, masked entries included.
/// `scratch` holds softmaxRowScratch(n) doubles (per-entry magnitudes, bounds of the shifted
/// exponentials, suffix sums); y may not alias x. With `needed` (n flags, or null: all), an
/// entry whose flag is 0 is not enclosed (its y is left as it was; the row's sums still cover it):
/// a caller that weighs the outputs by adjoints skips the zero ones (cross-entropy reads one).
LB_HD inline void softmaxRow(const double* xlo, const double* xhi, std::int64_t n,
                             const SoftmaxModel& m, bool log, double* ylo, double* yhi,
                             double* scratch, const unsigned char* needed = nullptr) {
  using namespace softmax_detail;
  const double inf = interval_detail::inf();
  if (n <= 0) return;
  const double maskedValue = log ? -inf : 0.0;
  // The kept entries (not masked): count, finiteness, and the maxima of their endpoints.
  std::int64_t k = 0;
  bool allFinite = true;
  double maxLo = -inf, maxHi = -inf, maxMag = 0.0;
  for (std::int64_t j = 0; j < n; ++j) {
    if (isMasked(xlo[j], xhi[j])) continue;
    ++k;
    if (!allFinite) continue;
    if (!isFiniteValue(xlo[j]) || !isFiniteValue(xhi[j])) {
      allFinite = false;  // unbounded input: no bound
      continue;
    }
    maxLo = maxOf(maxLo, xlo[j]);
    maxHi = maxOf(maxHi, xhi[j]);
    maxMag = maxOf(maxMag, magnitude(Interval{xlo[j], xhi[j]}));
  }
  if (k == 0 || !allFinite) {
    // No bound for any entry, masked ones included: when a kept entry may be +inf the row max is
    // +inf, fl(+inf − +inf) is NaN and so is the sum, which makes every output NaN (0/NaN).
    for (std::int64_t j = 0; j < n; ++j) {
      ylo[j] = -inf;
      yhi[j] = inf;
    }
    return;
  }
  const bool noShift = maxMag <= m.noShiftT;
  Interval shift{maxLo, maxHi};
  if (noShift) shift = hull(shift, Interval{0.0, 0.0});
  const double c0 = maxHi;
  const double gamma = gammaUp(static_cast<double>(k - 1), m.uAcc);
  const double tLo = sub_down(1.0, gamma), tHi = add_up(1.0, gamma);

  // Scratch, indexed by the position in the row (masked slots unused): u·|x_j − m|, the bounds of
  // q_j = exp(x_j − c0 ± u|x_j − m|), and suffix sums of the q_j over the kept entries.
  double* magd = scratch;
  double* pLo = scratch + n;
  double* pHi = scratch + 2 * n;
  double* sufLo = scratch + 3 * n;      // n + 1 entries
  double* sufHi = scratch + 4 * n + 1;  // n + 1 entries
  for (std::int64_t j = 0; j < n; ++j) {
    if (isMasked(xlo[j], xhi[j])) continue;
    // |α_j (x_j − m)| <= u·|x_j − m|; when |x_j − m| passes the largest double (an fp64 row
    // masked with finfo.min), u·|x_j| + u·|m| bounds it without overflow.
    const double d = magnitude(lossbound::sub(Interval{xlo[j], xhi[j]}, shift));
    magd[j] = isFiniteValue(d) ? mul_up(m.u, d)
                               : add_up(mul_up(m.u, magnitude(Interval{xlo[j], xhi[j]})),
                                        mul_up(m.u, magnitude(shift)));
    const double r = magd[j];
    pLo[j] = maxOf(0.0, elementaryDown(Elementary::Exp, sub_down(sub_down(xlo[j], c0), r)));
    pHi[j] = elementaryUp(Elementary::Exp, add_up(sub_up(xhi[j], c0), r));
  }
  // Sums of all q_j but one: suffix sums here, prefix sums running in the last loop (directed).
  sufLo[n] = 0.0;
  sufHi[n] = 0.0;
  for (std::int64_t j = n; j-- > 0;) {
    const bool skip = isMasked(xlo[j], xhi[j]);
    sufLo[j] = skip ? sufLo[j + 1] : add_down(sufLo[j + 1], pLo[j]);
    sufHi[j] = skip ? sufHi[j + 1] : add_up(sufHi[j + 1], pHi[j]);
  }

  // Log-softmax only: an enclosure of S itself, for the error of log_c(S) and of m + L.
  double eLogCommon = 0.0;
  double sLo = 0.0, sHi = 0.0;
  if (log) {
    for (std::int64_t j = 0; j < n; ++j) {
      if (isMasked(xlo[j], xhi[j])) continue;
      const double r = magd[j];
      const double lo =
          mul_down(elementaryDown(Elementary::Exp, sub_down(sub_down(xlo[j], shift.hi), r)),
                   sub_down(1.0, m.beta));
      sLo = add_down(sLo, maxOf(0.0, sub_down(lo, m.etaExp)));
      const double hi = elementaryUp(Elementary::Exp, add_up(sub_up(xhi[j], shift.lo), r));
      sHi = add_up(sHi, add_up(mul_up(hi, add_up(1.0, m.beta)), m.etaExp));
    }
    sLo = mul_down(sLo, tLo);
    sHi = mul_up(sHi, tHi);
    // With the max shift, S is at least the max entry's exp(x_max − m) = exp(0), an exp result
    // within the model's error of 1: a sum of non-negative terms never falls below one of them
    // under monotone rounding. Without it, rows wider than the exponent range left sLo = 0.
    // Likewise every term is exp(d_j) with d_j <= 0, within the model's error of at most 1, so
    // S <= k·((1 + β) + η_exp) accumulated, where exp(x_j.hi − m.lo) overflowed.
    if (!noShift) {
      sLo = maxOf(sLo, sub_down(sub_down(1.0, m.beta), m.etaExp));
      const double cap =
          mul_up(mul_up(static_cast<double>(k), add_up(add_up(1.0, m.beta), m.etaExp)), tHi);
      sHi = sHi < cap ? sHi : cap;
    }
    const double ls = sLo > 0.0 ? magnitude(lossbound::log(Interval{sLo, sHi})) : inf;  // |log S|
    const double relLog = mul_up(mul_up(2.0 * m.kLog, m.u), 1.0 + 0x1p-10);
    const double etaLog = mul_up(static_cast<double>(m.kLog), m.eta);
    const double eLog = add_up(mul_up(relLog, ls), etaLog);          // |L − log S|
    const double magL = add_up(ls, eLog);                            // |L|
    const double eMl = mul_up(m.u, add_up(magnitude(shift), magL));  // |fl(m + L) − (m + L)|
    eLogCommon = add_up(eLog, eMl);
  }

  const double nm1 = static_cast<double>(k - 1);
  double preLo = 0.0, preHi = 0.0;  // sums of the q_j of the kept entries before i
  // Softmax only, computed when first needed: a lower bound of S for the absolute bound below.
  double sumLoAbs = -1.0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (isMasked(xlo[i], xhi[i])) {
      ylo[i] = maskedValue;
      yhi[i] = maskedValue;
      continue;
    }
    if (needed && !needed[i]) {  // not enclosed; the prefix sums still take it, in order
      preLo = add_down(preLo, pLo[i]);
      preHi = add_up(preHi, pHi[i]);
      continue;
    }
    const double r = magd[i];
    // ε_i bounds η_exp / P_i, P_i = exp(d_i) >= exp(x_i.lo − m.hi − u|d_i|).
    const double eps =
        mul_up(m.etaExp, elementaryUp(Elementary::Exp, add_up(sub_up(shift.hi, xlo[i]), r)));
    const double aLo = maxOf(0.0, sub_down(sub_down(1.0, m.beta), eps));
    const double aHi = add_up(add_up(1.0, m.beta), eps);
    double qLo = 0.0, qHi = 0.0;  // bounds of Σ_{j≠i} e_j t_j / P_i
    if (k > 1) {
      const double slex = add_down(preLo, sufLo[i + 1]);
      const double shex = add_up(preHi, sufHi[i + 1]);
      const double lo =
          sub_down(divDownSafe(mul_down(sub_down(1.0, m.beta), slex), pHi[i]), mul_up(nm1, eps));
      qLo = mul_down(tLo, maxOf(0.0, lo));
      qHi = mul_up(tHi,
                   add_up(divUpSafe(mul_up(add_up(1.0, m.beta), shex), pLo[i]), mul_up(nm1, eps)));
      if (qHi != qHi) qHi = inf;
      if (qLo != qLo) qLo = 0.0;
    }
    preLo = add_down(preLo, pLo[i]);
    preHi = add_up(preHi, pHi[i]);
    Interval r2;
    if (!log) {
      const double yLo = aLo == 0.0 ? 0.0 : div_down(1.0, add_up(tHi, divUpSafe(qHi, aLo)));
      double yHi = div_up(1.0, add_down(tLo, divDownSafe(qLo, aHi)));
      if (aLo == 0.0) {
        // The relative bound fails where exp(x_i − m) may underflow (ε_i >= 1 − β: a finite mask
        // such as finfo.min added to a logit): use y_i <= e_i / S with the absolute error of exp,
        // e_i <= exp(x_i − m + |α_i d_i|)(1 + β) + η_exp at m = shift.lo and
        // S >= t_lo Σ_j (exp(x_j − m − |α_j d_j|)(1 − β) − η_exp)₊ at m = shift.hi (e_i falls
        // and S falls as m grows, so the pair bounds e_i / S for every m in shift).
        if (sumLoAbs < 0.0) {
          sumLoAbs = 0.0;
          for (std::int64_t j = 0; j < n; ++j) {
            if (isMasked(xlo[j], xhi[j])) continue;
            const double rj = magd[j];
            const double e =
                mul_down(elementaryDown(Elementary::Exp, sub_down(sub_down(xlo[j], shift.hi), rj)),
                         sub_down(1.0, m.beta));
            sumLoAbs = add_down(sumLoAbs, maxOf(0.0, sub_down(e, m.etaExp)));
          }
          sumLoAbs = mul_down(sumLoAbs, tLo);
        }
        const double eHi =
            add_up(mul_up(elementaryUp(Elementary::Exp, add_up(sub_up(xhi[i], shift.lo), r)),
                          add_up(1.0, m.beta)),
                   m.etaExp);
        const double alt = divUpSafe(eHi, sumLoAbs);
        yHi = alt < yHi ? alt : yHi;
      }
      const double f2Lo = mul_down(sub_down(1.0, m.u), sub_down(1.0, m.u));
      const double f2Hi = mul_up(add_up(1.0, m.u), add_up(1.0, m.u));
      r2 = Interval{maxOf(0.0, mul_down(yLo, f2Lo)), mul_up(yHi, f2Hi)};
    } else {
      // S / P_i = a_i t_i + Q_i / P_i; y_i = −log(S / P_i) + errors.
      const double zLo = add_down(mul_down(aLo, tLo), qLo);
      const double zHi = add_up(mul_up(aHi, tHi), qHi);
      const Interval lz = zLo > 0.0 ? lossbound::log(Interval{zLo, zHi})
                                    : Interval{-inf, lossbound::log(Interval{zHi, zHi}).hi};
      const double e = add_up(eLogCommon, r);  // + |α_i d_i| of the fl(x_i − fl(m + L)) variant
      const Interval base{sub_down(-lz.hi, e), add_up(-lz.lo, e)};
      r2 = lossbound::mul(base, Interval{sub_down(1.0, m.u), add_up(1.0, m.u)});
      r2 = intersect(r2, logSoftmaxDirect(xlo[i], xhi[i], shift, noShift, sLo, sHi, r, m));
    }
    const Interval y = roundOutward(r2, m.s);
    ylo[i] = y.lo;
    yhi[i] = y.hi;
  }
}

/// Encloses one row of _softmax_backward_data (log == false: gI = y·(g − Σ_j g_j y_j), or
/// y·g − y·s) or _log_softmax_backward_data (log == true: gI = g − exp_c(y)·Σ_j g_j) for the
/// row's grad g and forward output y (n elements each) under m, stored in m.s: the sum in any
/// order in c with the order-free bound γ_{n−1}Σ|g| (Higham 2002, eq. 4.4) or γ_nΣ|g·y| + n·η
/// (eq. 3.5), then each element in c (ComputeDomain; exp within m.kExp ulps). The rule of
/// core/ops/softmax_ops.cpp (file comment: the formulas PyTorch's kernels use).
LB_HD inline void softmaxBackwardRow(const double* glo, const double* ghi, const double* ylo,
                                     const double* yhi, std::int64_t n, bool log,
                                     const SoftmaxModel& m, double* olo, double* ohi) {
  const ComputeDomain d{m.c};
  Interval s{0.0, 0.0};
  double absSum = 0.0;
  for (std::int64_t j = 0; j < n; ++j) {
    const Interval g{glo[j], ghi[j]};
    const Interval t = log ? g : lossbound::mul(g, Interval{ylo[j], yhi[j]});
    s = lossbound::add(s, t);
    absSum = add_up(absSum, magnitude(t));
  }
  const double nd = static_cast<double>(n);
  const double err =
      log ? sumErrorBound(nd, absSum, m.uAcc) : dotErrorBound(nd, absSum, m.uAcc, m.eta);
  s = d.round(Interval{sub_down(s.lo, err), add_up(s.hi, err)});
  for (std::int64_t j = 0; j < n; ++j) {
    const Interval g{glo[j], ghi[j]}, y{ylo[j], yhi[j]};
    const Interval v = log ? d.sub(g, d.mul(d.exp(y, m.kExp), s))
                           : hull(d.mul(y, d.sub(g, s)), d.sub(d.mul(y, g), d.mul(y, s)));
    const Interval r = roundOutward(v, m.s);
    olo[j] = r.lo;
    ohi[j] = r.hi;
  }
}

}  // namespace lossbound::kernels
