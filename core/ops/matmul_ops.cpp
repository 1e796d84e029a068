// Matrix products: mm, addmm, bmm, mv, matmul (1-D/2-D/N-D with batch broadcasting), dot.
//
// Error model of "any reasonable implementation": the inputs are rounded to the matmul input
// format (tf32, or the storage format) with any direction (round-to-nearest, or truncation on
// tensor cores); the k products are accumulated in the accumulation format (fp32 for
// bf16/fp16/tf32, else the storage format) in any order and bracketing, with or without FMA,
// any split-K blocking; the bias of addmm is one more term; the result is rounded to the storage
// format. Then |fl(A·B) - Ã·B̃| <= γ_k^acc |Ã|·|B̃| + k·η_acc (Higham 2002, eq. 3.5, any order;
// Jeannerod–Rump 2013: k·u suffices) where Ã, B̃ are the rounded inputs.
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
#include "core/backend.h"
#include "core/ops/broadcasting.h"
#include "core/ops/error_bounds.h"
#include "core/ops/families.h"
#include "core/ops/formats.h"
#include "core/ops/random_arith.h"
#include "core/ops/registry.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

namespace lossbound {

namespace {

using namespace ops;

constexpr double kInf = __builtin_huge_val();
constexpr double kEta64 = 0x1p-1074;

/// How the candidate computed one matrix product.
struct GemmModel {
  Format in;    // inputs rounded to this format before the products
  Format acc;   // accumulation format
  Format out;   // storage format of the result
  double uAcc;  // accumulation unit roundoff (2u for truncating accumulation)
};

GemmModel gemmModel(const OpArgs& a, const OpContext& ctx) {
  const DType t = a.outSpec().dtype;
  if (!isFloating(t)) a.fail("integer matrix products are not supported");
  GemmModel g;
  g.in = ctx.precision.matmulInputFor(t);
  g.acc = accumulationFormat(ctx.precision, t);
  g.out = ctx.precision.storageFor(t);
  g.uAcc = ctx.precision.accumulationRoundoff(t);
  return g;
}

/// The layout of a (batched, broadcast) product: per output batch, the offsets of the A and B
/// matrices; 1-D operands are promoted and squeezed as torch.matmul does.
struct MatmulPlan {
  std::int64_t m = 0, k = 0, n = 0;
  std::vector<std::int64_t> aOff, bOff;  // element offsets per output batch
  Shape outShape;
  Shape aBatch, bBatch, outBatch;
};

MatmulPlan planMatmul(const OpArgs& args, const Shape& as, const Shape& bs) {
  if (as.empty() || bs.empty()) args.fail("matmul operands must have at least one dimension");
  MatmulPlan p;
  Shape a = as, b = bs;
  const bool aVec = a.size() == 1, bVec = b.size() == 1;
  if (aVec) a.insert(a.begin(), 1);
  if (bVec) b.push_back(1);
  p.m = a[a.size() - 2];
  p.k = a.back();
  p.n = b.back();
  if (b[b.size() - 2] != p.k)
    args.fail("matrix product of shapes " + shapeString(as) + " and " + shapeString(bs) +
              ": inner dimensions " + std::to_string(p.k) + " and " +
              std::to_string(b[b.size() - 2]) + " differ");
  p.aBatch = Shape(a.begin(), a.end() - 2);
  p.bBatch = Shape(b.begin(), b.end() - 2);
  const auto ob = broadcastShapes(p.aBatch, p.bBatch);
  if (!ob)
    args.fail("batch dimensions " + shapeString(p.aBatch) + " and " + shapeString(p.bBatch) +
              " do not broadcast");
  p.outBatch = *ob;
  const BroadcastIndex ix(p.outBatch, {p.aBatch, p.bBatch});
  std::int64_t off[2];
  for (std::int64_t i = 0; i < ix.size(); ++i) {
    ix.offsets(i, off);
    p.aOff.push_back(off[0] * p.m * p.k);
    p.bOff.push_back(off[1] * p.k * p.n);
  }
  p.outShape = p.outBatch;
  if (!aVec) p.outShape.push_back(p.m);
  if (!bVec) p.outShape.push_back(p.n);
  return p;
}

/// Checks the ranks torch requires for mm (2, 2), bmm (3, 3, equal batch), dot (1, 1).
void checkRanks(const OpArgs& a, const Tensor& x, const Tensor& y, int rank, bool sameBatch) {
  if (x.rank() != rank || y.rank() != rank)
    a.fail("expected two " + std::to_string(rank) + "-D operands, found shapes " +
           shapeString(x.shape()) + " and " + shapeString(y.shape()));
  if (sameBatch && x.shape()[0] != y.shape()[0])
    a.fail("batch sizes differ: " + shapeString(x.shape()) + " and " + shapeString(y.shape()));
}

// ---------------------------------------------------------------------------------------------
// The interval kernel

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

/// Encloses C = alpha·(A·B) + beta·bias for one m×k×n product (bias may be null) as every value
/// the candidate can produce, rounded outward to the storage format.
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
// Rules

enum class Kind { Mm, Bmm, Mv, Matmul, Dot, Addmm };

/// mm bmm mv matmul dot addmm: the midpoint–radius enclosure of the file comment on the Backend's
/// GEMMs; random with random input rounding, order and blocking; localError γ_k|A||B| + kη.
class MatmulRule final : public OpRule {
 public:
  explicit MatmulRule(Kind kind) : mKind(kind) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext& ctx) const override {
    const MatmulPlan p = plan(a);
    const Tensor &x = a.tensor(aIdx()), &y = a.tensor(bIdx());
    const std::int64_t mn = p.m * p.n;
    std::vector<double> out(
        static_cast<std::size_t>(mn * static_cast<std::int64_t>(p.aOff.size())));
    for (std::size_t bi = 0; bi < p.aOff.size(); ++bi)
      ctx.backend.gemm(x.values().data() + p.aOff[bi], y.values().data() + p.bOff[bi],
                       out.data() + static_cast<std::int64_t>(bi) * mn, p.m, p.k, p.n, false);
    if (const auto b = bias(a, p)) {
      const double al = alpha(a), be = beta(a);
      for (std::int64_t i = 0; i < mn; ++i)
        out[static_cast<std::size_t>(i)] =
            al * out[static_cast<std::size_t>(i)] + be * b->values()[static_cast<std::size_t>(i)];
    }
    return {Tensor::point(p.outShape, a.outSpec().dtype, std::move(out))};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const MatmulPlan p = plan(a);
    const GemmModel gm = gemmModel(a, ctx);
    const Tensor &x = a.tensor(aIdx()), &y = a.tensor(bIdx());
    const std::int64_t mn = p.m * p.n;
    const auto total = static_cast<std::size_t>(mn * static_cast<std::int64_t>(p.aOff.size()));
    std::vector<double> lo(total), hi(total);
    std::vector<Interval> biasIv;
    if (const auto b = bias(a, p)) {
      biasIv.resize(static_cast<std::size_t>(mn));
      for (std::int64_t i = 0; i < mn; ++i) biasIv[static_cast<std::size_t>(i)] = b->at(i);
    }
    for (std::size_t bi = 0; bi < p.aOff.size(); ++bi) {
      const std::int64_t o = static_cast<std::int64_t>(bi) * mn;
      intervalGemm(ctx.backend, x, p.aOff[bi], y, p.bOff[bi], p.m, p.k, p.n, gm,
                   biasIv.empty() ? nullptr : biasIv.data(), alpha(a), beta(a), lo.data() + o,
                   hi.data() + o);
    }
    return {Tensor::interval(p.outShape, a.outSpec().dtype, std::move(lo), std::move(hi))};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const MatmulPlan p = plan(a);
    const GemmModel gm = gemmModel(a, ctx);
    const Tensor &x = a.tensor(aIdx()), &y = a.tensor(bIdx());
    const std::int64_t mn = p.m * p.n;
    std::vector<double> out(
        static_cast<std::size_t>(mn * static_cast<std::int64_t>(p.aOff.size())));
    const auto b = bias(a, p);
    for (std::size_t bi = 0; bi < p.aOff.size(); ++bi)
      randomGemm(x, p.aOff[bi], y, p.bOff[bi], p.m, p.k, p.n, gm, b ? b->values().data() : nullptr,
                 alpha(a), beta(a), *ctx.rng, out.data() + static_cast<std::int64_t>(bi) * mn);
    return {Tensor::point(p.outShape, a.outSpec().dtype, std::move(out))};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext& ctx) const override {
    const MatmulPlan p = plan(a);
    const Tensor &x = a.tensor(aIdx()), &y = a.tensor(bIdx());
    const double al = alpha(a);
    // Per output batch: gA += al·G·Bᵀ, gB += al·Aᵀ·G, accumulated into the (broadcast) batch.
    std::vector<double> ga(static_cast<std::size_t>(x.numel()), 0.0),
        gb(static_cast<std::size_t>(y.numel()), 0.0);
    const std::int64_t m = p.m, k = p.k, n = p.n;
    std::vector<double> bt(static_cast<std::size_t>(k * n)), at(static_cast<std::size_t>(m * k));
    std::vector<double> tmpA(static_cast<std::size_t>(m * k)),
        tmpB(static_cast<std::size_t>(k * n));
    const auto gv = g[0].values();
    for (std::size_t bi = 0; bi < p.aOff.size(); ++bi) {
      const double* A = x.values().data() + p.aOff[bi];
      const double* B = y.values().data() + p.bOff[bi];
      const double* G = gv.data() + static_cast<std::int64_t>(bi) * m * n;
      for (std::int64_t i = 0; i < k; ++i)
        for (std::int64_t j = 0; j < n; ++j) bt[static_cast<std::size_t>(j * k + i)] = B[i * n + j];
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < k; ++j) at[static_cast<std::size_t>(j * m + i)] = A[i * k + j];
      ctx.backend.gemm(G, bt.data(), tmpA.data(), m, n, k, false);
      ctx.backend.gemm(at.data(), G, tmpB.data(), k, m, n, false);
      for (std::size_t i = 0; i < tmpA.size(); ++i)
        ga[static_cast<std::size_t>(p.aOff[bi]) + i] += al * tmpA[i];
      for (std::size_t i = 0; i < tmpB.size(); ++i)
        gb[static_cast<std::size_t>(p.bOff[bi]) + i] += al * tmpB[i];
    }
    std::vector<std::optional<Tensor>> out;
    if (mKind == Kind::Addmm) {
      const double be = beta(a);
      const Tensor gs = mapPoint(g[0], g[0].dtype(), [be](double v) { return be * v; });
      out.emplace_back(sumToShape(gs, a.tensor(0).shape()).withDtype(a.tensor(0).dtype()));
    }
    out.emplace_back(Tensor::point(x.shape(), x.dtype(), std::move(ga)));
    out.emplace_back(Tensor::point(y.shape(), y.dtype(), std::move(gb)));
    return out;
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> outs,
                                 OpContext& ctx) const override {
    const MatmulPlan p = plan(a);
    const GemmModel gm = gemmModel(a, ctx);
    const Tensor &x = a.tensor(aIdx()), &y = a.tensor(bIdx());
    const std::int64_t mn = p.m * p.n;
    std::vector<double> absProd(
        static_cast<std::size_t>(mn * static_cast<std::int64_t>(p.aOff.size())));
    for (std::size_t bi = 0; bi < p.aOff.size(); ++bi)
      ctx.backend.gemm(x.values().data() + p.aOff[bi], y.values().data() + p.bOff[bi],
                       absProd.data() + static_cast<std::int64_t>(bi) * mn, p.m, p.k, p.n, true);
    const auto b = bias(a, p);
    const double al = std::fabs(alpha(a)), be = std::fabs(beta(a));
    const std::int64_t terms = p.k + (b ? 2 : 0) + (alpha(a) != 1.0 ? 1 : 0);
    // γ for the accumulation, plus the input rounding (|Ã B̃ - A B| <= (2e + e²)|A||B| with
    // e = 2u_in: truncation moves a value by up to one ulp) when the input format is coarser than
    // the storage format (tf32), plus the RN slack of the binary64 |A||B| itself (γ_k^64).
    const double uIn = gm.in == gm.out ? 0.0 : 2 * unitRoundoff(gm.in);
    const double rel =
        add_up(add_up(gammaUp(terms, gm.uAcc), mul_up(uIn, 2.0 + uIn)), gammaUp(p.k + 1, 0x1p-53));
    const double eta = mul_up(static_cast<double>(p.k), smallestSubnormal(gm.acc));
    std::vector<double> out(absProd.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      double mag = mul_up(al, absProd[i]);
      if (b)
        mag = add_up(mag, mul_up(be, std::fabs(b->values()[i % static_cast<std::size_t>(mn)])));
      const double y0 = outs[0].values()[i];
      out[i] = add_up(add_up(mul_up(rel, mag), eta),
                      gm.acc == gm.out ? 0.0 : roundingError(y0, gm.out, gm.out));
    }
    return {Tensor::point(outs[0].shape(), outs[0].dtype(), std::move(out))};
  }

 private:
  std::size_t aIdx() const { return mKind == Kind::Addmm ? 1 : 0; }

  std::size_t bIdx() const { return mKind == Kind::Addmm ? 2 : 1; }

  MatmulPlan plan(const OpArgs& a) const {
    const Tensor &x = a.tensor(aIdx()), &y = a.tensor(bIdx());
    switch (mKind) {
      case Kind::Mm:
      case Kind::Addmm:
        checkRanks(a, x, y, 2, false);
        break;
      case Kind::Bmm:
        checkRanks(a, x, y, 3, true);
        break;
      case Kind::Dot:
        checkRanks(a, x, y, 1, false);
        break;
      case Kind::Mv:
        if (x.rank() != 2 || y.rank() != 1)
          a.fail("expected a 2-D matrix and a 1-D vector, found shapes " + shapeString(x.shape()) +
                 " and " + shapeString(y.shape()));
        break;
      case Kind::Matmul:
        break;
    }
    return planMatmul(a, x.shape(), y.shape());
  }

  double alpha(const OpArgs& a) const {
    return mKind == Kind::Addmm ? a.numberArg(4, "alpha", 1.0) : 1.0;
  }

  double beta(const OpArgs& a) const {
    return mKind == Kind::Addmm ? a.numberArg(3, "beta", 1.0) : 1.0;
  }

  /// The bias broadcast to [m, n] (addmm only).
  std::optional<Tensor> bias(const OpArgs& a, const MatmulPlan& p) const {
    if (mKind != Kind::Addmm) return std::nullopt;
    return broadcastTo(a, a.tensor(0), Shape{p.m, p.n});
  }

  Kind mKind;
};

}  // namespace

void registerMatmulOps(OpRegistry& r) {
  r.add("aten.mm.default", std::make_shared<const MatmulRule>(Kind::Mm));
  r.add("aten.bmm.default", std::make_shared<const MatmulRule>(Kind::Bmm));
  r.add("aten.matmul.default", std::make_shared<const MatmulRule>(Kind::Matmul));
  r.add("aten.dot.default", std::make_shared<const MatmulRule>(Kind::Dot));
  r.add("aten.mv.default", std::make_shared<const MatmulRule>(Kind::Mv));
  r.add("aten.addmm.default", std::make_shared<const MatmulRule>(Kind::Addmm));
}

}  // namespace lossbound
