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
#include "core/kernels/interval_gemm.h"
#include "core/ops/broadcasting.h"
#include "core/ops/error_bounds.h"
#include "core/ops/formats.h"
#include "core/ops/random_arith.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <span>
#include <type_traits>
#include <vector>

namespace lossbound::ops {

namespace {

constexpr double kEta64 = 0x1p-1074;

inline bool representable(double x, Format f) { return kernels::gemmRepresentable(x, f); }
inline double roundDownTo(double x, Format f) { return kernels::gemmRoundDown(x, f); }
inline double roundUpTo(double x, Format f) { return kernels::gemmRoundUp(x, f); }

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
    // RN differences, then one ulp up (plus the smallest subnormal) bound the exact ones
    // (kernels::gemmSplit, shared with the device).
    double m = 0.0, r = 0.0;
    if (!kernels::gemmSplit(lo[static_cast<std::size_t>(off + i)],
                            hi[static_cast<std::size_t>(off + i)], in, &m, &r))
      return false;
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
  const kernels::GemmFinish c = intervalGemmFinish(k, gm, bias != nullptr, alpha, beta);
  be.parallelFor(mn, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const auto u = static_cast<std::size_t>(i);
      const Interval e =
          kernels::gemmFinishElement(g1[u], g2[u], points ? 0.0 : g4[u], points, c, bias != nullptr,
                                     bias ? bias[u] : Interval{0.0, 0.0});
      outLo[u] = e.lo;
      outHi[u] = e.hi;
    }
  });
}

kernels::GemmFinish intervalGemmFinish(std::int64_t k, const GemmModel& gm, bool bias, double alpha,
                                       double beta) {
  kernels::GemmFinish c;
  const double g64 = gammaUp(k, 0x1p-53);
  c.kEta = mul_up(static_cast<double>(k), kEta64);
  c.up = div_up(1.0, sub_down(1.0, g64));               // 1/(1 - γ_k) rounded up
  const double down = div_down(1.0, add_up(1.0, g64));  // 1/(1 + γ_k) rounded down
  const std::int64_t terms = k + (bias ? 2 : 0) + (alpha != 1.0 ? 1 : 0);
  c.gAcc = gammaUp(terms, gm.uAcc);
  const double kEtaAcc = mul_up(static_cast<double>(k), smallestSubnormal(gm.acc));
  c.maxAcc = largestFinite(gm.acc);
  c.al = alpha == 1.0 ? Interval{1.0, 1.0} : scalarEnclosure(alpha, gm.acc);
  c.be = beta == 1.0 ? Interval{1.0, 1.0} : scalarEnclosure(beta, gm.acc);
  c.alpha = alpha;
  c.beta = beta;
  c.absAlpha = std::max(std::fabs(c.al.lo), std::fabs(c.al.hi));
  c.absBeta = std::max(std::fabs(c.be.lo), std::fabs(c.be.hi));
  // The radius is evaluated in round-to-nearest on nonnegative terms (the only subtraction,
  // S4↑ - S2↓, is of an upper and a lower bound and is then inflated): an RN evaluation of <= 8
  // operations on nonnegative numbers is below the exact value by at most a factor (1 - u)^8
  // plus 8 halves of 2^-1074 (Higham 2002, §2.1 model with underflow), hence the inflation by
  // kernels::kGemmRadInflate >= (1 - u)^-8 and the floor kRadFloor >= 8·2^-1075. Only the final
  // endpoints g1 ∓ rad use directed rounding (kernels::gemmFinishElement).
  // k = 0: every term is an exact 0 (the empty product), so no underflow floor either.
  c.kRadFloor = k == 0 ? 0.0 : 0x1p-1060;
  c.cMid = mul_up(g64, c.up);  // γ_k^64 / (1 - γ_k)
  c.cAcc = mul_up(mul_up(c.gAcc, c.absAlpha), c.up);
  c.cEtaMid = add_up(mul_up(c.kEta, g64), c.kEta);
  c.cEtaAcc = mul_up(c.absAlpha, kEtaAcc);
  // S4↑ and S2↓ evaluated in RN: two RN operations move a nonnegative value by at most a factor
  // (1 ± u)², absorbed by the extra 2^-50 in the constants.
  c.upRN = mul_up(c.up, 1.0 + 0x1p-50);
  c.downRN = mul_down(down, 1.0 - 0x1p-50);
  c.plain = alpha == 1.0 && !bias;
  c.out = gm.out;
  return c;
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

/// Row i of a (m×k) times b (k×n), the k terms walked in the order `perm`, every step rounded to
/// nearest in the accumulation format as T (float for fp32, double for fp64: their own RN
/// arithmetic and fma are the model's mulIn, addIn and fmaIn for operands of that format): acc
/// starts at `first` (the bias as a term) or at the first product, then either fma(a, b, acc) or
/// acc + RN(a·b) per term.
template <typename T>
void chainRow(const double* a, const double* b, std::int64_t n, std::span<const std::size_t> perm,
              bool fused, const double* first, std::vector<T>& acc) {
  acc.assign(static_cast<std::size_t>(n), T(0));
  std::size_t p = 0;
  if (first) {
    for (std::int64_t j = 0; j < n; ++j)
      acc[static_cast<std::size_t>(j)] = static_cast<T>(
          roundNearest(first[j], std::is_same_v<T, float> ? Format::Fp32 : Format::Fp64));
  } else if (!perm.empty()) {
    const T av = static_cast<T>(a[perm[0]]);
    const double* br = b + static_cast<std::int64_t>(perm[0]) * n;
    for (std::int64_t j = 0; j < n; ++j)
      acc[static_cast<std::size_t>(j)] = av * static_cast<T>(br[j]);
    p = 1;
  }
  for (; p < perm.size(); ++p) {
    const T av = static_cast<T>(a[perm[p]]);
    const double* br = b + static_cast<std::int64_t>(perm[p]) * n;
    T* c = acc.data();
    if (fused) {
      for (std::int64_t j = 0; j < n; ++j) c[j] = std::fma(av, static_cast<T>(br[j]), c[j]);
    } else {
      for (std::int64_t j = 0; j < n; ++j) {
        const T t = av * static_cast<T>(br[j]);  // RN_T(a·b): the product rounded first
        c[j] = c[j] + t;
      }
    }
  }
}

/// GemmOrder::PerProduct on inputs already rounded (a: m×k, b: k×n row-major).
void productOrderGemm(const std::vector<double>& a, const std::vector<double>& b, std::int64_t m,
                      std::int64_t k, std::int64_t n, const GemmModel& gm, const double* bias,
                      double alpha, double beta, double al, double bl, std::mt19937_64& rng,
                      double* out) {
  std::vector<std::size_t> perm(static_cast<std::size_t>(k));
  std::iota(perm.begin(), perm.end(), std::size_t{0});
  std::shuffle(perm.begin(), perm.end(), rng);
  const bool fused = rng() & 1;
  const bool biasTerm = bias && alpha == 1.0 && beta == 1.0 && (rng() & 1);
  // float's and double's own arithmetic are the model's in fp32 and fp64 for operands of that
  // format (inputs rounded to bf16, fp16 or tf32 are floats too); randomGemm sends no other model.
  const bool asFloat = gm.acc == Format::Fp32;
  std::vector<float> accF;
  std::vector<double> accD;
  for (std::int64_t i = 0; i < m; ++i) {
    const double* row = a.data() + i * k;
    const double* first = biasTerm ? bias + i * n : nullptr;
    if (asFloat)
      chainRow<float>(row, b.data(), n, perm, fused, first, accF);
    else
      chainRow<double>(row, b.data(), n, perm, fused, first, accD);
    for (std::int64_t j = 0; j < n; ++j) {
      const auto u = static_cast<std::size_t>(i * n + j);
      double r = asFloat ? static_cast<double>(accF[static_cast<std::size_t>(j)])
                         : accD[static_cast<std::size_t>(j)];
      if (!biasTerm) {
        if (alpha != 1.0) r = mulIn(al, r, gm.acc);
        if (bias) r = addIn(r, beta == 1.0 ? bias[u] : mulIn(bl, bias[u], gm.acc), gm.acc);
      }
      out[u] = roundNearest(r, gm.out);
    }
  }
}

}  // namespace

void randomGemm(const Tensor& A, std::int64_t aOff, const Tensor& B, std::int64_t bOff,
                std::int64_t m, std::int64_t k, std::int64_t n, const GemmModel& gm,
                const double* bias, double alpha, double beta, std::mt19937_64& rng, double* out,
                GemmOrder order) {
  const bool truncate = gm.in == Format::Tf32 && (rng() & 1);
  std::vector<double> a, b;
  roundInputs(A.values(), aOff, m * k, gm.in, truncate, a);
  roundInputs(B.values(), bOff, k * n, gm.in, truncate, b);
  // One order per product where float's or double's arithmetic is the model's (every model
  // gemmModel makes); any other accumulation keeps the per-element draws.
  const bool ownArithmetic =
      gm.acc == Format::Fp64 || (gm.acc == Format::Fp32 && gm.in != Format::Fp64);
  if (order == GemmOrder::PerProduct && ownArithmetic) {
    const double al = randomScalar(alpha, gm.acc, rng), bl = randomScalar(beta, gm.acc, rng);
    productOrderGemm(a, b, m, k, n, gm, bias, alpha, beta, al, bl, rng, out);
    return;
  }
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

GemmLocalBound::GemmLocalBound(const GemmModel& gm, std::int64_t k, std::int64_t terms, double beta)
    : mModel(gm) {
  // γ for the accumulation, plus the input rounding (|Ã B̃ - A B| <= (2e + e²)|A||B| with
  // e = 2u_in: truncation moves a value by up to one ulp) when the input format is coarser than
  // the storage format (tf32), plus the RN slack of the binary64 |A||B| itself (γ_k^64).
  const double uIn = gm.in == gm.out ? 0.0 : 2 * unitRoundoff(gm.in);
  mG64 = gammaUp(k + 1, 0x1p-53);
  mRel = add_up(add_up(gammaUp(terms, gm.uAcc), mul_up(uIn, 2.0 + uIn)), mG64);
  mEta = mul_up(static_cast<double>(k), smallestSubnormal(gm.acc));
  // The signed-sum form. The result sums t = k (+1 with a bias) leaves z (the products, rounded
  // or fused, and the bias) over a binary tree of t − 1 additions in any order and bracketing.
  // Unrolling ŝ_v = σ_v(1 + ε_v), σ_v = ŝ_l + ŝ_r, gives ŝ − s = Σ_i z_i δ_i + Σ_v ε_v σ_v, so
  // |ŝ − s| <= u·Σ|z| + u·Σ_v |σ_v|; |σ_v| <= |s_v| + γ_t·Σ|z| (the children's own errors, Higham
  // 2002 eq. 4.4), and s_v, the exact sum of a subset of the z, lies in [−Σ⁻, Σ⁺] (the negative
  // and positive parts): |ŝ − s| <= u(1 + (t − 1)γ_t)·Σ|z| + (t − 1)·u·max(Σ⁺, Σ⁻), with
  // max(Σ⁺, Σ⁻) = (Σ|z| + |s|)/2; subnormal products add k·η as before. Not with an alpha
  // scaling (a rounding outside the tree), a beta != 1 (the bias leaf fl(fl(β)·b) rounds twice,
  // more than the u·|z| a leaf is allowed) or input rounding (tf32: the z are not the products).
  const std::int64_t extra = terms - k;  // 2 for a bias, +1 for alpha != 1 (gemmTerms)
  const std::int64_t leaves = k + (extra >= 2 ? 1 : 0);
  mSigned = extra % 2 == 0 && (extra < 2 || beta == 1.0) && uIn == 0.0 && leaves >= 1;
  if (mSigned) {
    const double nodes = static_cast<double>(leaves - 1);
    mLeafRel = mul_up(gm.uAcc, add_up(1.0, mul_up(nodes, gammaUp(leaves, gm.uAcc))));
    mNodes = mul_up(nodes, gm.uAcc);
  }
}

double GemmLocalBound::operator()(double magnitude, double y) const {
  // With accumulation in the storage format the last rounding of the sum is the storage
  // rounding, already inside γ; otherwise the fp32 result is rounded once more to bf16/fp16.
  const double store = mModel.acc == mModel.out ? 0.0 : roundingError(y, mModel.out, mModel.out);
  // Every term is nonnegative and at most 14 operations deep, evaluated to nearest: each
  // operation is within a factor 1 ± 2^-53 of its exact value, so the result times 1 + 2^-48
  // (itself rounded), plus 16 subnormals for the underflow of these operations, is an upper
  // bound. (Directed operations cost ~9% of a first-order replay here: this runs for every GEMM
  // element.)
  constexpr double kUp = 1.0 + 0x1p-48, kTiny = 16 * 0x1p-1074;
  const double worst = (mRel * magnitude + mEta) + store;
  if (!mSigned) return worst * kUp + kTiny;
  // Σ|z| and s from their binary64 values: |A||B| and y are within γ_{k+1}^{64}·Σ|z| of them.
  const double absSum = magnitude * (1.0 + mG64);
  const double s = std::fabs(y) + mG64 * absSum;
  const double side = std::fmin(absSum, 0.5 * (absSum + s));  // max(Σ⁺, Σ⁻)
  const double signedForm = ((mLeafRel * absSum + mNodes * side) + mEta) + store;
  return std::fmin(worst, signedForm) * kUp + kTiny;  // fmin: a NaN y leaves the first form
}

GemmSpreadBound::GemmSpreadBound(const GemmModel& gm, std::int64_t k, std::int64_t terms,
                                 bool truncating, double alpha, double beta)
    : mWorst(gm, k, terms, beta), mModel(gm) {
  const double gT = gammaUp(terms, gm.uAcc);
  mApplies = !truncating && alpha == 1.0 && gT < 1.0;
  mSlack64 = add_up(1.0, gammaUp(k + 1, 0x1p-53));  // the RN |A||B| itself
  mRss = mul_up(mul_up(gm.uAcc, sqrt_up(static_cast<double>(terms))), add_up(1.0, gT));
  const double uIn = gm.in == gm.out ? 0.0 : 2 * unitRoundoff(gm.in);
  mInRel = mul_up(uIn, 2.0 + uIn);
  mEta = mul_up(static_cast<double>(k), smallestSubnormal(gm.acc));
}

double GemmSpreadBound::operator()(double magnitude, double y) const {
  if (!mApplies) return mWorst(magnitude, y);
  if (mModel.acc == mModel.out) {
    // No storage rounding: sqrt(sum²) is the sum itself. Every term is nonnegative and 5
    // operations deep, evaluated to nearest, so the result times 1 + 2^-48 plus 16 subnormals (the
    // underflow of the products) is an upper bound, as in GemmLocalBound (this runs for every
    // GEMM element; directed operations cost ~3% of a first-order replay here).
    constexpr double kUp = 1.0 + 0x1p-48, kTiny = 16 * 0x1p-1074;
    const double mag = magnitude * mSlack64;
    const double c = ((mRss * mag + mInRel * mag) + mEta) * kUp + kTiny;
    return std::fmin(c, mWorst(magnitude, y));  // never above the worst case
  }
  const double mag = mul_up(magnitude, mSlack64);
  const double sum = mul_up(mRss, mag);
  const double store = mModel.acc == mModel.out ? 0.0 : roundingError(y, mModel.out, mModel.out);
  const double c = add_up(
      add_up(sqrt_up(add_up(mul_up(sum, sum), mul_up(store, store))), mul_up(mInRel, mag)), mEta);
  return std::fmin(c, mWorst(magnitude, y));  // never above the worst case
}

}  // namespace lossbound::ops
