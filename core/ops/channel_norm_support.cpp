#include "core/ops/channel_norm_support.h"

#include "core/kernels/batch_norm_row.h"
#include "core/ops/broadcasting.h"
#include "core/ops/error_bounds.h"
#include "core/ops/formats.h"
#include "core/ops/libm_model.h"
#include "core/ops/nn_support.h"
#include "core/ops/random_arith.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace lossbound::ops::norm {

std::pair<double, double> randomMoments(std::vector<double> x, Format c, std::mt19937_64& rng,
                                        Format stat) {
  const std::size_t n = x.size();
  const bool storable = unitRoundoff(stat) > unitRoundoff(c);
  const int algo = static_cast<int>(rng() % 3);
  if (algo == 0) {
    std::vector<double> t = x;
    const double s = randomSum(t, c, rng);
    double mu = (rng() & 1) ? roundNearest(s / static_cast<double>(n), c)
                            : roundNearest(s * roundNearest(1.0 / static_cast<double>(n), c), c);
    if (storable) {
      // The mean stored before the second pass: fl_s(μ̂), or fl_s(fl_s(Σx)/n) (at::mean).
      const int k = static_cast<int>(rng() % 3);
      if (k == 1) mu = roundNearest(mu, stat);
      if (k == 2)
        mu = roundNearest(roundNearest(roundNearest(s, stat) / static_cast<double>(n), c), stat);
    }
    for (std::size_t j = 0; j < n; ++j) {
      const double dj = roundNearest(x[j] - mu, c);
      t[j] = roundNearest(dj * dj, c);
    }
    double m2 = randomSum(t, c, rng);
    if (storable && (rng() & 1)) m2 = roundNearest(m2, stat);
    return {mu, m2};
  }
  std::shuffle(x.begin(), x.end(), rng);
  struct M {
    double n, m, s;
  };
  auto combine = [&](const M& a, const M& b) {
    const double nn = a.n + b.n;
    const double cc = roundNearest(b.n / nn, c);
    const double delta = roundNearest(b.m - a.m, c);
    const double m = roundNearest(a.m + roundNearest(cc * delta, c), c);
    const double t = roundNearest(roundNearest(roundNearest(delta * delta, c) * cc, c) * a.n, c);
    return M{nn, m, roundNearest(a.s + roundNearest(b.s + t, c), c)};
  };
  if (algo == 1) {  // Welford, PyTorch element update: m += δ/k; s += δ·(x − m_new)
    M acc{1, x[0], 0};
    for (std::size_t k = 1; k < n; ++k) {
      const double kk = static_cast<double>(k + 1);
      const double delta = roundNearest(x[k] - acc.m, c);
      const double m =
          (rng() & 1) ? roundNearest(acc.m + roundNearest(delta / kk, c), c)
                      : roundNearest(acc.m + roundNearest(delta * roundNearest(1.0 / kk, c), c), c);
      const double s = roundNearest(acc.s + roundNearest(delta * roundNearest(x[k] - m, c), c), c);
      acc = M{kk, m, s};
    }
    if (storable && (rng() & 1)) acc.s = roundNearest(acc.s, stat);
    return {acc.m, acc.s};
  }
  // A random combining tree: split the (shuffled) range at a uniform point, recursively (expected
  // depth O(log n), O(n) work, so rows of 10^6 elements stay cheap).
  std::function<M(std::size_t, std::size_t)> tree = [&](std::size_t lo, std::size_t hi) -> M {
    if (hi - lo == 1) return M{1, x[lo], 0};
    const std::size_t mid = lo + 1 + static_cast<std::size_t>(rng() % (hi - lo - 1));
    const M left = tree(lo, mid);
    const M right = tree(mid, hi);
    return combine(left, right);
  };
  M root = tree(0, n);
  if (storable && (rng() & 1)) root.s = roundNearest(root.s, stat);
  return {root.m, root.s};
}

Interval rsqrtEnclosure(Interval var, double eps, Format c) {
  // The body a device runs too (core/kernels/batch_norm_row.h).
  return kernels::rsqrtEnclosure(var, eps, c, modelUlps(LibmFn::Rsqrt, c));
}

// momentSpread: the probabilistic method's model (Higham & Mary 2019, §2: every rounding a
// (1 + δ_i) factor, |δ_i| <= u, the δ_i independent and mean-zero) makes each computed statistic,
// to first order, exact + Σ δ_i·c_i, which the method bounds by λ·sqrt(Σ c_i²) with its one λ
// (Hoeffding). The |c_i| below are u × the magnitude of the rounded value × the statistic's
// sensitivity to it, for every algorithm randomMoments executes (A = max|x|, W = max x − min x,
// S = Σ(x − μ)² <= mo.m2.hi, n elements):
// - the mean. Two-pass: n − 1 additions (sensitivity 1/n) of partial sums, the j-th largest at
//   most P_{n−j+1} (the sum of the n − j + 1 largest |x|; ops::partialSumsRootSquares), and the
//   division, one or two roundings <= u·A: Σc² <= (u/n)²·Σ_k P_k² + (2uA)². Welford's element
//   update m += (x − m)/k and the tree's m = m_a + (n_b/n)(m_b − m_a): a perturbation of the
//   mean of an accumulator of k elements reaches the result times k/n (each later update keeps
//   the share n_a/n of its first operand), and each of the n − 1 updates rounds a difference
//   <= W, one or two quotients or products <= W and the sum <= A, all on that accumulator:
//   Σc² <= (u(A + 3W))²·Σ_nodes (k/n)² <= (u(A + 3W))²·Σ_{k=2..n} (k/n)² (the j-th largest
//   internal node of any tree holds at most n − j + 1 leaves).
// - S. Two-pass: the differences (2u·d²) and the squares (u·d²) give Σc² <= 9u²S'² (Σd⁴ <= S'²,
//   S' = Σ(x − μ̂)² <= mo.m2.hi), the n − 1 additions (n − 1)(uS')²; the mean's error enters S'
//   as n(μ̂ − μ)² (Σ(x − μ) = 0): second order, but it dominates near-constant rows, so it is
//   added linearly, with |μ̂ − μ| at most the mean enclosure's width or 8 mean spreads.
//   Near-constant rows (W < 8nuA) also keep the mean's worst case: their sums stagnate and the
//   roundings share a sign. Welford and trees: each increment t (Σt = S, Chan, Golub & LeVeque
//   1983) is hit by at most 6 roundings, 36u²S²; 2(n − 1) additions <= uS; and a rounding ε of the
//   mean of an accumulator of k elements is, for the rest of the algorithm (exact), a shift of
//   those k elements, which moves S by 2ε·Σ_acc(x − μ), |Σ_acc(x − μ)| <= D_k = the larger of the
//   sums of the k largest positive and negative parts of x − μ (any k-subset; D_k <= sqrt(k·S),
//   Cauchy–Schwarz, the bound used before), nondecreasing in k; the accumulators' sizes are those
//   of a tree's nodes, at most n − j + 1 for the j-th largest, and Welford's element updates have
//   one of each size: Σc² <= 4u²(A + 3W)²·Σ_{k=1..n} D_k². A rounding that reaches S both ways (the
//   difference δ) is counted in each, and (a + b)² <= 2(a² + b²) covers that: the Welford sum is
//   doubled.
// - rstd r = (fl(S/n) + eps)^(-1/2): the sensitivity to the variance is ½r³; the variance takes
//   S's spread / n, one or two roundings <= u·v, eps read in c (<= u·eps), the addition
//   <= u(v + eps); the rsqrt itself max(ulps, 2)·2u·r (two rounded steps or a libm result). r, v
//   are their enclosures' upper ends (first order at the exact values, which they bound).
// Returns Σ_{k=1..n} D_k² with D_k >= |Σ_{j in J}(x_j − μ)| for every k-subset J (μ the exact
// mean): the larger of the sums of the k largest positive and of the k largest negative parts of
// x − μ, from binary64 deviations, each widened by the binary64 mean's error γ_{n+1}·Σ|x|/n and
// its own rounding.
double subsetSumSquares(const double* x, std::int64_t n) {
  long double sum = 0.0L, absSum = 0.0L;
  for (std::int64_t j = 0; j < n; ++j) {
    sum += x[j];
    absSum += std::fabs(x[j]);
  }
  const double mu = static_cast<double>(sum / static_cast<long double>(n));
  const double slackMu =
      mul_up(gammaUp(n + 1, 0x1p-53),
             div_up(static_cast<double>(absSum) * (1.0 + 0x1p-50), static_cast<double>(n)));
  std::vector<double> pos, neg;
  for (std::int64_t j = 0; j < n; ++j) {
    const double d = x[j] - mu;
    const double slack = add_up(slackMu, mul_up(0x1p-52, std::fabs(d)));
    pos.push_back(add_up(std::fmax(d, 0.0), slack));
    neg.push_back(add_up(std::fmax(-d, 0.0), slack));
  }
  std::sort(pos.begin(), pos.end(), std::greater<>());
  std::sort(neg.begin(), neg.end(), std::greater<>());
  double p = 0.0, q = 0.0, squares = 0.0;
  for (std::size_t k = 0; k < pos.size(); ++k) {
    p = add_up(p, pos[k]);
    q = add_up(q, neg[k]);
    const double dk = std::fmax(p, q);
    squares = add_up(squares, mul_up(dk, dk));
  }
  return squares;
}

MomentSpread momentSpread(const double* x, std::int64_t n, const kernels::RowMoments& mo,
                          double eps, Format c, int rsqrtUlps) {
  MomentSpread sp;
  if (n <= 0 || !mo.bounded) return sp;
  const double u = unitRoundoff(c), nd = static_cast<double>(n);
  double a = 0.0, sumAbs = 0.0, lo = x[0], hi = x[0];
  for (std::int64_t j = 0; j < n; ++j) {
    a = std::fmax(a, std::fabs(x[j]));
    sumAbs = add_up(sumAbs, std::fabs(x[j]));
    lo = std::fmin(lo, x[j]);
    hi = std::fmax(hi, x[j]);
  }
  const double w = sub_up(hi, lo), s = mo.m2.hi, v = mo.var.hi, r = mo.rstd.hi;
  if (!std::isfinite(s) || !std::isfinite(r) || s < 0.0 || v < 0.0) return sp;
  const auto sq = [](double t) { return mul_up(t, t); };
  const double upd = mul_up(u, add_up(a, mul_up(3.0, w)));  // one Welford/tree update
  std::vector<double> mags(x, x + n);
  const double partial = partialSumsRootSquares(mags);  // sqrt(Σ_{k>=2} P_k²)
  const double meanTwoPass = add_up(sq(div_up(mul_up(u, partial), nd)), sq(mul_up(2.0 * u, a)));
  // Σ_{k=2..n} (k/n)² = (n(n + 1)(2n + 1)/6 − 1)/n²
  const double shares = div_up(
      sub_up(div_up(mul_up(mul_up(nd, nd + 1.0), 2.0 * nd + 1.0), 6.0), 1.0), mul_up(nd, nd));
  const double meanWelford = mul_up(shares, sq(upd));
  sp.mean = sqrt_up(std::fmax(meanTwoPass, meanWelford));
  // |μ̂ − μ| <= rad for every computed mean (the enclosure holds μ and every μ̂).
  const double rad = sub_up(mo.mean.hi, mo.mean.lo);
  // Near-constant rows (W < 8·n·u·A): the sums stagnate, x mod the partial sums' ulp is nearly
  // the same for every element and the roundings share a sign, so the mean's error grows like
  // n·u·A, not √n (review: 26× the root-sum-square at n = 8,192): the worst case stands.
  if (!(w >= mul_up(mul_up(8.0 * nd, u), a))) sp.mean = std::fmax(sp.mean, rad);
  const double us = mul_up(u, s);
  const double m2TwoPass = mul_up(add_up(9.0, nd - 1.0), sq(us));
  // Two-pass S' = Σ(x − μ̂)² = S + n(μ̂ − μ)²: the second term is no rounding of S's own but
  // the mean's error squared, which dominates near-constant rows (S <~ n·rad²): added linearly,
  // with |μ̂ − μ| <= min(rad, 8·sp.mean) (8 spreads: Hoeffding's 2·exp(−32) < 1e-13, beyond every
  // confidence the method offers; near-constant rows have sp.mean = rad).
  const double dMean = std::fmin(rad, mul_up(8.0, sp.mean));
  const double meanShift = mul_up(nd, sq(dMean));
  const double m2Welford =
      mul_up(2.0, add_up(add_up(mul_up(36.0, sq(us)), mul_up(2.0 * (nd - 1.0), sq(us))),
                         mul_up(mul_up(4.0, sq(upd)), subsetSumSquares(x, n))));
  sp.m2 = std::fmax(add_up(sqrt_up(m2TwoPass), meanShift), sqrt_up(m2Welford));
  const double varSquares = add_up(add_up(sq(div_up(sp.m2, nd)), mul_up(2.0, sq(mul_up(u, v)))),
                                   add_up(sq(mul_up(u, eps)), sq(mul_up(u, add_up(v, eps)))));
  const double halfR3 = mul_up(0.5, mul_up(r, mul_up(r, r)));
  const double rsqrtOwn = mul_up(std::fmax(rsqrtUlps, 2) * 2.0 * u, r);
  sp.rstd = sqrt_up(add_up(mul_up(sq(halfR3), varSquares), sq(rsqrtOwn)));
  if (!std::isfinite(sp.rstd)) sp = MomentSpread{};
  return sp;
}

double randomRsqrt(double var, double eps, Format c, std::mt19937_64& rng) {
  const double ve = roundNearest(var + randomScalar(eps, c, rng), c);
  if (rng() & 1) return roundNearest(1.0 / roundNearest(std::sqrt(ve), c), c);
  return perturbUlps(1.0 / std::sqrt(ve), publishedUlps(LibmFn::Rsqrt, c), c, rng);
}

AffineForm randomAffineForm(std::mt19937_64& rng) {
  return static_cast<AffineForm>(static_cast<int>(rng() % 5));
}

double randomAffine(double x, double mu, double r, const double* w, const double* b, AffineForm f,
                    Format c, Format stat, bool storeAlphaBeta) {
  auto rn = [c](double v) { return roundNearest(v, c); };
  double y = 0.0;
  switch (f) {
    case AffineForm::CentredThenWeight:
      y = rn(rn(x - mu) * r);
      if (w) y = rn(y * *w);
      break;
    case AffineForm::WeightFirst:
      y = w ? rn(rn(*w * rn(x - mu)) * r) : rn(rn(x - mu) * r);
      break;
    case AffineForm::ScaledWeight:
      y = w ? rn(rn(x - mu) * rn(r * *w)) : rn(rn(x - mu) * r);
      break;
    case AffineForm::CpuLinear:
    case AffineForm::CpuLinearFma: {
      double alpha = w ? rn(r * *w) : r;
      const bool store = storeAlphaBeta && unitRoundoff(stat) > unitRoundoff(c);
      if (store) alpha = roundNearest(alpha, stat);
      const double p = rn(mu * alpha);
      double beta = b ? rn(*b - p) : -p;
      if (store) beta = roundNearest(beta, stat);
      return f == AffineForm::CpuLinear ? rn(rn(x * alpha) + beta) : fmaIn(x, alpha, beta, c);
    }
  }
  if (b) y = rn(y + *b);
  return y;
}

std::vector<Tensor> localErrorFromInterval(const OpRule& rule, const OpArgs& args,
                                           std::span<const Tensor> outputs, OpContext& ctx) {
  const std::vector<Tensor> encl = rule.interval(args, ctx);
  std::vector<Tensor> out;
  for (std::size_t k = 0; k < outputs.size() && k < encl.size(); ++k)
    out.push_back(nn::localErrorFromEnclosure(outputs[k], encl[k]));
  return out;
}

std::vector<bool> outputMask(const OpArgs& args, std::size_t i) {
  std::vector<bool> mask{true, true, true};
  if (args.arg(i).kind == IrValue::Kind::List)
    for (std::size_t k = 0; k < 3 && k < args.arg(i).list.size(); ++k)
      mask[k] = args.arg(i).list[k].boolValue;
  return mask;
}

DType outDtypeOr(const OpArgs& args, std::size_t k, DType fallback) {
  return args.node().outputs.size() > k ? args.outSpec(k).dtype : fallback;
}

}  // namespace lossbound::ops::norm
