// The matrix-product machinery of gemm.h: the candidate's error model of one product, the
// midpoint–radius interval GEMM, the randomized GEMM and the first-order local error bound.
//
// Interval rule: midpoint–radius on the Backend's round-to-nearest GEMMs (Rump 1999, "Fast and
// parallel interval arithmetic", BIT 39; Revol–Théveny 2013, "Parallel implementation of interval
// matrix multiplication"), 3 GEMMs for interval inputs, 2 for point inputs:
//   g1 = fl(mA·mB), g2 = fl(|mA|·|mB|), g4 = fl(P·Q) with P >= |mA| + rA, Q >= |mB| + rB.
// For nonnegative data any RN evaluation satisfies |g - S| <= γ_k S + kη (η = 2^-1074, the
// underflow term), hence S <= (g + kη)/(1 - γ_k) and S >= (g - kη)/(1 + γ_k). The exact products
// of the enclosures lie in mA·mB ± (|mA| rB + rA Q) and |mA| rB + rA Q <= P·Q - |mA||mB|, so
//   rad = [S4↑ - S2↓] + γ_k^64 S2↑ + kη + γ_k^acc S4↑ + k η_acc      (all rounded upward)
// and the result is [g1 - rad, g1 + rad] rounded outward to the storage format. No rounding
// mode is ever assumed inside the BLAS: the radius is computed from RN results and inflated.
#include "core/ops/gemm.h"

#include "core/backend.h"
#include "core/ops/broadcasting.h"
#include "core/ops/error_bounds.h"
#include "core/ops/formats.h"
#include "core/ops/random_arith.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

namespace lossbound::ops {

namespace {

constexpr double kEta64 = 0x1p-1074;

/// Returns true when x is exactly representable in f (fast path for fp32).
inline bool representable(double x, Format f) {
  if (f == Format::Fp64) return true;
  if (f == Format::Fp32)
    return std::fabs(x) <= 3.4028234663852886e38 && static_cast<double>(static_cast<float>(x)) == x;
  return roundToFormat(x, f, RoundingDirection::Nearest) == x;
}

/// Returns RD_f(x) / RU_f(x) quickly for fp32 (RN cast, then one step when it went the wrong
/// way); other formats through roundToFormat.
inline double roundDownTo(double x, Format f) {
  if (f == Format::Fp64) return x;
  if (f == Format::Fp32 && std::fabs(x) < 3.4e38) {
    const float r = static_cast<float>(x);
    return static_cast<double>(r) > x ? static_cast<double>(std::nextafterf(r, -HUGE_VALF))
                                      : static_cast<double>(r);
  }
  return roundToFormat(x, f, RoundingDirection::Down);
}
inline double roundUpTo(double x, Format f) { return -roundDownTo(-x, f); }

/// Midpoint and radius of an enclosure rounded outward to `in`; returns false if any endpoint
/// is not finite. Radii are rounded up so that [m - r, m + r] contains [lo, hi]. When the input
/// is a point tensor whose values are representable in `in`, sets `direct` to its storage
/// (no copy) and leaves mid/rad empty.
bool midRad(const Tensor& t, std::int64_t off, std::int64_t len, Format in,
            std::vector<double>& mid, std::vector<double>& rad, bool& isPoint,
            const double*& direct) {
  const auto lo = t.lo(), hi = t.hi();
  direct = nullptr;
  if (!t.isInterval()) {
    bool ok = true;
    for (std::int64_t i = 0; i < len && ok; ++i) {
      const double v = lo[static_cast<std::size_t>(off + i)];
      ok = std::isfinite(v) && representable(v, in);
    }
    if (ok) {
      direct = lo.data() + off;
      isPoint = true;
      return true;
    }
  }
  mid.resize(static_cast<std::size_t>(len));
  rad.resize(static_cast<std::size_t>(len));
  isPoint = true;
  for (std::int64_t i = 0; i < len; ++i) {
    Interval x{lo[static_cast<std::size_t>(off + i)], hi[static_cast<std::size_t>(off + i)]};
    if (in != Format::Fp64) x = Interval{roundDownTo(x.lo, in), roundUpTo(x.hi, in)};
    if (!std::isfinite(x.lo) || !std::isfinite(x.hi)) return false;
    const double m = midpoint(x);
    // RN differences, then one ulp up (plus the smallest subnormal) bound the exact ones.
    const double r =
        x.lo == x.hi ? 0.0 : std::max(x.hi - m, m - x.lo) * (1.0 + 0x1p-52) + 0x1p-1074;
    mid[static_cast<std::size_t>(i)] = m;
    rad[static_cast<std::size_t>(i)] = r;
    if (r != 0.0) isPoint = false;
  }
  return true;
}

}  // namespace

GemmModel gemmModel(const PrecisionModel& pm, DType t) {
  GemmModel g;
  g.in = pm.matmulInputFor(t);
  g.acc = accumulationFormat(pm, t);
  g.out = pm.storageFor(t);
  g.uAcc = pm.accumulationRoundoff(t);
  return g;
}

std::int64_t gemmTerms(std::int64_t k, bool bias, double alpha) {
  return k + (bias ? 2 : 0) + (alpha != 1.0 ? 1 : 0);
}

void intervalGemm(Backend& be, const Tensor& A, std::int64_t aOff, const Tensor& B,
                  std::int64_t bOff, std::int64_t m, std::int64_t k, std::int64_t n,
                  const GemmModel& gm, const Interval* bias, double alpha, double beta,
                  double* outLo, double* outHi) {
  const std::int64_t mn = m * n;
  std::vector<double> mA, rA, mB, rB;
  bool pA = true, pB = true;
  const double *dA = nullptr, *dB = nullptr;
  const bool finite = midRad(A, aOff, m * k, gm.in, mA, rA, pA, dA) &&
                      midRad(B, bOff, k * n, gm.in, mB, rB, pB, dB);
  if (!finite) {
    std::fill(outLo, outLo + mn, -kInf);
    std::fill(outHi, outHi + mn, kInf);
    return;
  }
  const double* ma = dA ? dA : mA.data();
  const double* mb = dB ? dB : mB.data();
  std::vector<double> g1(static_cast<std::size_t>(mn)), g2(g1.size()), g4;
  be.gemm(ma, mb, g1.data(), m, k, n, false);
  be.gemm(ma, mb, g2.data(), m, k, n, true);
  const bool points = pA && pB;
  if (!points) {
    // P = |mA| + rA, Q = |mB| + rB rounded up.
    std::vector<double> P(static_cast<std::size_t>(m * k)), Q(static_cast<std::size_t>(k * n));
    for (std::size_t i = 0; i < P.size(); ++i)
      P[i] = dA ? std::fabs(ma[i]) : add_up(std::fabs(ma[i]), rA[i]);
    for (std::size_t i = 0; i < Q.size(); ++i)
      Q[i] = dB ? std::fabs(mb[i]) : add_up(std::fabs(mb[i]), rB[i]);
    g4.resize(g1.size());
    be.gemm(P.data(), Q.data(), g4.data(), m, k, n, false);
  }
  const double g64 = gammaUp(k, 0x1p-53);
  const double kEta = mul_up(static_cast<double>(k), kEta64);
  const double up = div_up(1.0, sub_down(1.0, g64));    // 1/(1 - γ_k) rounded up
  const double down = div_down(1.0, add_up(1.0, g64));  // 1/(1 + γ_k) rounded down
  const std::int64_t terms = k + (bias ? 2 : 0) + (alpha != 1.0 ? 1 : 0);
  const double gAcc = gammaUp(terms, gm.uAcc);
  const double kEtaAcc = mul_up(static_cast<double>(k), smallestSubnormal(gm.acc));
  const double maxAcc = largestFinite(gm.acc);
  const Interval al = alpha == 1.0 ? Interval{1.0, 1.0} : scalarEnclosure(alpha, gm.acc);
  const Interval be_ = beta == 1.0 ? Interval{1.0, 1.0} : scalarEnclosure(beta, gm.acc);
  const double absAlpha = std::max(std::fabs(al.lo), std::fabs(al.hi));
  const double absBeta = std::max(std::fabs(be_.lo), std::fabs(be_.hi));
  // The radius below is evaluated in round-to-nearest on nonnegative terms (the only subtraction,
  // S4↑ - S2↓, is of an upper and a lower bound and is then inflated): an RN evaluation of <= 8
  // operations on nonnegative numbers is below the exact value by at most a factor (1 - u)^8
  // plus 8 halves of 2^-1074 (Higham 2002, §2.1 model with underflow), hence the inflation by
  // kRadInflate >= (1 - u)^-8 and the floor kRadFloor >= 8·2^-1075. Only the final endpoints
  // g1 ∓ rad use directed rounding.
  constexpr double kRadInflate = 1.0 + 0x1p-45;
  // k = 0: every term is an exact 0 (the empty product), so no underflow floor either.
  const double kRadFloor = k == 0 ? 0.0 : 0x1p-1060;
  const double cMid = mul_up(g64, up);  // γ_k^64 / (1 - γ_k)
  const double cAcc = mul_up(mul_up(gAcc, absAlpha), up);
  const double cEtaMid = add_up(mul_up(kEta, g64), kEta);
  const double cEtaAcc = mul_up(absAlpha, kEtaAcc);
  // S4↑ and S2↓ evaluated in RN: two RN operations move a nonnegative value by at most a factor
  // (1 ± u)², absorbed by the extra 2^-50 in the constants.
  const double upRN = mul_up(up, 1.0 + 0x1p-50);
  const double downRN = mul_down(down, 1.0 - 0x1p-50);
  const bool plain = alpha == 1.0 && !bias;
  be.parallelFor(mn, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const auto u = static_cast<std::size_t>(i);
      const double g2e = g2[u] + kEta;  // nonnegative: RN sum, inflated below
      double width = 0.0, s4 = g2e;
      if (!points) {
        s4 = g4[u] + kEta;
        const double s4up = s4 * upRN;
        const double s2down = std::max(0.0, (g2[u] - kEta) * downRN);
        width = s4up - s2down;  // >= (S4↑ - S2↓)(1 - u), covered by kRadInflate
      }
      // The exact product of the rounded inputs: g1 ± (width + γ64·S2↑ + kη).
      const double radP = (width + cMid * g2e + cEtaMid) * kRadInflate + kRadFloor;
      if (plain && std::isfinite(g1[u])) {
        // One outward step for the common mm case: g1 ± (radP + candidate rounding).
        const double rad = radP + (cAcc * s4 + cEtaAcc) * kRadInflate + kRadFloor;
        const double magnitude = absAlpha * s4 * up;
        Interval e{sub_down(g1[u], rad), add_up(g1[u], rad)};
        if (!(magnitude * (1.0 + gAcc) * kRadInflate < maxAcc) || !std::isfinite(rad))
          e = entireInterval();
        outLo[u] = roundDownTo(e.lo, gm.out);
        outHi[u] = roundUpTo(e.hi, gm.out);
        continue;
      }
      Interval exact{sub_down(g1[u], radP), add_up(g1[u], radP)};
      if (!std::isfinite(g1[u]) || !std::isfinite(radP)) exact = entireInterval();
      if (alpha != 1.0) exact = mul(al, exact);
      // The candidate's rounding: γ_terms^acc·(|alpha|·S4↑ + |beta|·|bias|) + |alpha|·kη_acc.
      double cand = cAcc * s4 + cEtaAcc;
      double magnitude = absAlpha * s4 * up;
      if (bias && std::isinf(bias[u].lo) && bias[u].lo == bias[u].hi &&
          (be_.lo > 0 || be_.hi < 0) && std::isfinite(g1[u]) && std::isfinite(radP) &&
          magnitude * (1.0 + gAcc) * kRadInflate < maxAcc) {
        // An exact infinite bias (an attention mask's −inf, held as that IEEE value): the finite
        // products can neither overflow (the magnitude check) nor cancel it, so every order and
        // bracketing gives that infinity times the sign of beta.
        outLo[u] = outHi[u] = (be_.lo > 0) == (bias[u].lo > 0) ? kInf : -kInf;
        continue;
      }
      if (bias) {
        exact = add(exact, beta == 1.0 ? bias[u] : mul(be_, bias[u]));
        const double absBias = absBeta * std::max(std::fabs(bias[u].lo), std::fabs(bias[u].hi));
        cand += gAcc * absBias;
        magnitude += absBias;
      }
      cand = cand * kRadInflate + kRadFloor;
      exact = Interval{sub_down(exact.lo, cand), add_up(exact.hi, cand)};
      // Partial sums are bounded by (1 + γ)·magnitude: beyond the accumulator's range the
      // candidate may overflow.
      if (!(magnitude * (1.0 + gAcc) * kRadInflate < maxAcc)) exact = entireInterval();
      outLo[u] = roundDownTo(exact.lo, gm.out);
      outHi[u] = roundUpTo(exact.hi, gm.out);
    }
  });
}

// ---------------------------------------------------------------------------------------------
// The random kernel

namespace {

/// Rounds a matrix to the input format as a candidate does (RN, or truncation for tf32 on
/// tensor cores), into `dst`.
void roundInputs(std::span<const double> src, std::int64_t off, std::int64_t len, Format in,
                 bool truncate, std::vector<double>& dst) {
  dst.resize(static_cast<std::size_t>(len));
  for (std::int64_t i = 0; i < len; ++i) {
    const double v = src[static_cast<std::size_t>(off + i)];
    dst[static_cast<std::size_t>(i)] =
        in == Format::Fp64 ? v : (truncate ? roundTowardZero(v, in) : roundNearest(v, in));
  }
}

}  // namespace

void randomGemm(const Tensor& A, std::int64_t aOff, const Tensor& B, std::int64_t bOff,
                std::int64_t m, std::int64_t k, std::int64_t n, const GemmModel& gm,
                const double* bias, double alpha, double beta, std::mt19937_64& rng, double* out) {
  const bool truncate = gm.in == Format::Tf32 && (rng() & 1);
  std::vector<double> a, b;
  roundInputs(A.values(), aOff, m * k, gm.in, truncate, a);
  roundInputs(B.values(), bOff, k * n, gm.in, truncate, b);
  std::vector<double> bt(static_cast<std::size_t>(k * n));
  for (std::int64_t i = 0; i < k; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      bt[static_cast<std::size_t>(j * k + i)] = b[static_cast<std::size_t>(i * n + j)];
  const double al = randomScalar(alpha, gm.acc, rng), bl = randomScalar(beta, gm.acc, rng);
  std::vector<double> scratch, ra(static_cast<std::size_t>(k + 1)),
      rb(static_cast<std::size_t>(k + 1));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      const std::span<const double> row(a.data() + i * k, static_cast<std::size_t>(k));
      const std::span<const double> col(bt.data() + j * k, static_cast<std::size_t>(k));
      double r;
      const auto u = static_cast<std::size_t>(i * n + j);
      if (bias && alpha == 1.0 && beta == 1.0 && (rng() & 1)) {
        // the bias as one more term of the accumulation (C initialised with the bias)
        std::copy(row.begin(), row.end(), ra.begin());
        std::copy(col.begin(), col.end(), rb.begin());
        ra[static_cast<std::size_t>(k)] = bias[u];
        rb[static_cast<std::size_t>(k)] = 1.0;
        r = randomDot(ra, rb, gm.acc, rng, scratch);
      } else {
        r = randomDot(row, col, gm.acc, rng, scratch);
        if (alpha != 1.0) r = mulIn(al, r, gm.acc);
        if (bias) r = addIn(r, beta == 1.0 ? bias[u] : mulIn(bl, bias[u], gm.acc), gm.acc);
      }
      out[u] = roundNearest(r, gm.out);
    }
}

// ---------------------------------------------------------------------------------------------
// The local error

GemmLocalBound::GemmLocalBound(const GemmModel& gm, std::int64_t k, std::int64_t terms)
    : mModel(gm) {
  // γ for the accumulation, plus the input rounding (|Ã B̃ - A B| <= (2e + e²)|A||B| with
  // e = 2u_in: truncation moves a value by up to one ulp) when the input format is coarser than
  // the storage format (tf32), plus the RN slack of the binary64 |A||B| itself (γ_k^64).
  const double uIn = gm.in == gm.out ? 0.0 : 2 * unitRoundoff(gm.in);
  mRel = add_up(add_up(gammaUp(terms, gm.uAcc), mul_up(uIn, 2.0 + uIn)), gammaUp(k + 1, 0x1p-53));
  mEta = mul_up(static_cast<double>(k), smallestSubnormal(gm.acc));
}

double GemmLocalBound::operator()(double magnitude, double y) const {
  // With accumulation in the storage format the last rounding of the sum is the storage
  // rounding, already inside γ; otherwise the fp32 result is rounded once more to bf16/fp16.
  return add_up(add_up(mul_up(mRel, magnitude), mEta),
                mModel.acc == mModel.out ? 0.0 : roundingError(y, mModel.out, mModel.out));
}

}  // namespace lossbound::ops
