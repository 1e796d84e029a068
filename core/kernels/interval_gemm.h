#pragma once
// The per-element arithmetic of the CPU interval GEMM (core/ops/gemm.cpp, intervalGemm) as LB_HD
// bodies, so that the host rule, the Backend::intervalGemm hook and the device-resident replay
// run the very same operations: the midpoint–radius split of one operand element and the
// finishing of one result element from the three round-to-nearest GEMM results (Rump 1999;
// Revol–Théveny 2013; the bound and its constants are derived in core/ops/gemm.cpp). The
// constants are computed once per product on the host (ops::intervalGemmFinish).

#include "core/interval/interval.h"
#include "core/interval/precision.h"
#include "core/interval/rounding.h"
#include "core/kernels/kernel_bodies.h"

namespace lossbound::kernels {

/// The per-product constants of gemmFinishElement (see core/ops/gemm.cpp for each).
struct GemmFinish {
  double kEta = 0, cMid = 0, cEtaMid = 0, cAcc = 0, cEtaAcc = 0, gAcc = 0, up = 0;
  double upRN = 0, downRN = 0, maxAcc = 0, kRadFloor = 0, absAlpha = 1, absBeta = 1;
  double alpha = 1, beta = 1;
  Interval al{1.0, 1.0}, be{1.0, 1.0};
  bool plain = true;  ///< alpha == 1 and no bias
  Format out = Format::Fp64;
};

/// The inflation of RN-evaluated radii (core/ops/gemm.cpp): (1 − u)^-8 and more.
inline constexpr double kGemmRadInflate = 1.0 + 0x1p-45;

/// Returns RD_f(x) (fp32 through the RN cast and one step back, as the CPU rule does).
LB_HD inline double gemmRoundDown(double x, Format f) {
  if (f == Format::Fp64) return x;
  if (f == Format::Fp32 && ::fabs(x) < 3.4e38) {
    const float r = static_cast<float>(x);
    return static_cast<double>(r) > x ? static_cast<double>(::nextafterf(r, -HUGE_VALF))
                                      : static_cast<double>(r);
  }
  return roundToFormat(x, f, RoundingDirection::Down);
}
/// Returns RU_f(x).
LB_HD inline double gemmRoundUp(double x, Format f) { return -gemmRoundDown(-x, f); }

/// Returns true when x is exactly representable in f.
LB_HD inline bool gemmRepresentable(double x, Format f) {
  if (f == Format::Fp64) return true;
  if (f == Format::Fp32)
    return ::fabs(x) <= 3.4028234663852886e38 && static_cast<double>(static_cast<float>(x)) == x;
  return roundToFormat(x, f, RoundingDirection::Nearest) == x;
}

/// Splits one operand element [lo, hi], rounded outward to `in`, into midpoint *m and radius *r
/// (RN differences, then one ulp up plus the smallest subnormal); returns false when an endpoint
/// is not finite.
LB_HD inline bool gemmSplit(double lo, double hi, Format in, double* m, double* r) {
  Interval x{lo, hi};
  if (in != Format::Fp64) x = Interval{gemmRoundDown(x.lo, in), gemmRoundUp(x.hi, in)};
  if (!isFiniteValue(x.lo) || !isFiniteValue(x.hi)) return false;
  const double c = midpoint(x);
  const double a = x.hi - c, b = c - x.lo;
  *m = c;
  *r = x.lo == x.hi ? 0.0 : (a < b ? b : a) * (1.0 + 0x1p-52) + 0x1p-1074;
  return true;
}

/// Returns the enclosure of result element u from the RN GEMM results g1 = mA·mB, g2 = |mA|·|mB|
/// and g4 = P·Q (unused when `points`), the optional bias element, rounded outward to c.out.
LB_HD inline Interval gemmFinishElement(double g1, double g2, double g4, bool points,
                                        const GemmFinish& c, bool hasBias, Interval bias) {
  const double inf = interval_detail::inf();
  const double g2e = g2 + c.kEta;  // nonnegative: RN sum, inflated below
  double width = 0.0, s4 = g2e;
  if (!points) {
    s4 = g4 + c.kEta;
    const double s4up = s4 * c.upRN;
    const double s2lo = (g2 - c.kEta) * c.downRN;
    const double s2down = 0.0 < s2lo ? s2lo : 0.0;
    width = s4up - s2down;
  }
  const double radP = (width + c.cMid * g2e + c.cEtaMid) * kGemmRadInflate + c.kRadFloor;
  if (c.plain && isFiniteValue(g1)) {
    const double rad = radP + (c.cAcc * s4 + c.cEtaAcc) * kGemmRadInflate + c.kRadFloor;
    const double magnitude = c.absAlpha * s4 * c.up;
    Interval e{sub_down(g1, rad), add_up(g1, rad)};
    if (!(magnitude * (1.0 + c.gAcc) * kGemmRadInflate < c.maxAcc) || !isFiniteValue(rad))
      e = entireInterval();
    return Interval{gemmRoundDown(e.lo, c.out), gemmRoundUp(e.hi, c.out)};
  }
  Interval exact{sub_down(g1, radP), add_up(g1, radP)};
  if (!isFiniteValue(g1) || !isFiniteValue(radP)) exact = entireInterval();
  if (c.alpha != 1.0) exact = mul(c.al, exact);
  double cand = c.cAcc * s4 + c.cEtaAcc;
  double magnitude = c.absAlpha * s4 * c.up;
  if (hasBias && (bias.lo == inf || bias.lo == -inf) && bias.lo == bias.hi &&
      (c.be.lo > 0 || c.be.hi < 0) && isFiniteValue(g1) && isFiniteValue(radP) &&
      magnitude * (1.0 + c.gAcc) * kGemmRadInflate < c.maxAcc) {
    // An exact infinite bias: the finite products can neither overflow nor cancel it.
    const double v = (c.be.lo > 0) == (bias.lo > 0) ? inf : -inf;
    return Interval{v, v};
  }
  if (hasBias) {
    exact = add(exact, c.beta == 1.0 ? bias : mul(c.be, bias));
    const double bl = ::fabs(bias.lo), bh = ::fabs(bias.hi);
    const double absBias = c.absBeta * (bl < bh ? bh : bl);
    cand += c.gAcc * absBias;
    magnitude += absBias;
  }
  cand = cand * kGemmRadInflate + c.kRadFloor;
  exact = Interval{sub_down(exact.lo, cand), add_up(exact.hi, cand)};
  if (!(magnitude * (1.0 + c.gAcc) * kGemmRadInflate < c.maxAcc)) exact = entireInterval();
  return Interval{gemmRoundDown(exact.lo, c.out), gemmRoundUp(exact.hi, c.out)};
}

}  // namespace lossbound::kernels
