// Softmax ops: _softmax _log_softmax _softmax_backward_data _log_softmax_backward_data.
//
// Error model of "any reasonable implementation" of softmax / log-softmax over a row x_1..x_n
// (PyTorch 1.13 CPU vectorized and CUDA kernels, and the algorithms analysed by
// Blanchard, Higham, Higham 2021, "Accurately computing the log-sum-exp and softmax functions",
// IMA J. Numer. Anal. 41(4), §2–3), computed in format c (fp32 for fp32/bf16/fp16 storage, fp64
// for fp64) and stored in s:
//  1. a shift m: the row maximum (exact), or no shift (m = 0) when every |x_j| ≤ T_c =
//     ln(max_c)/4 so that no exp can overflow;
//  2. d_j = fl_c(x_j − m) (one rounding, |α_j| ≤ u_c);
//  3. e_j = exp_c(d_j): the candidate's libm, |e_j − exp(d_j)| ≤ K ulps (K = modelUlps(exp, c))
//     i.e. relative 2K·u_c plus K·η_c absolute (η_c: smallest subnormal), e_j ≥ 0;
//  4. S = Σ e_j in any order and bracketing in c: S = Σ e_j (1 + θ_j), |θ_j| ≤ γ_{n−1}
//     (Higham 2002, "Accuracy and Stability of Numerical Algorithms" 2nd ed., Lemma 3.1 and §4.2);
//  5. softmax: y_i = fl_c(e_i / S) or fl_c(e_i · fl_c(1/S)) (one or two roundings);
//     log-softmax: L = log_c(S) (K_log ulps), then y_i = fl_c(d_i − L) (CPU, CUDA) or
//     fl_c(x_i − fl_c(m + L));
//  6. y_i rounded to nearest in s.
// Dependency-aware enclosure (why intervals stay tight): with the exact identity
//    e_i / S = 1 / (t_i + Σ_{j≠i} (e_j / e_i) t_j),   t_j = 1 + θ_j,
//    e_j / e_i = exp(d_j − d_i)·(1+β_j)/(1+β_i) (+ underflow terms),
//    d_j − d_i = (x_j − x_i) + α_j(x_j − m) − α_i(x_i − m),
// the shift m cancels: only differences of inputs enter, and the ratios are bounded per
// element through q_j = exp(x_j − c0 ± u|x_j − m|) with a common constant c0, so
// Σ_{j≠i} q_j comes from prefix/suffix sums in O(n) per row. The result is monotone in e_i/P_i
// (increasing) and in Q_i/P_i (decreasing), which gives the endpoints. Log-softmax uses
//    d_i − log S = −log(S / P_i),  P_i = exp(d_i),
// the same ratios, plus the log and subtraction errors of step 5 (Blanchard–Higham–Higham,
// eq. (2.6)–(2.9): error of the shifted log-sum-exp is dominated by u·|d_i| and γ_n terms).
// Online (flash-style) rescaling is not in the model.
//
// Backward ops (PyTorch formulas): _softmax_backward_data: gI = y·(g − Σ_j g_j y_j) or
// y·g − y·s, the dot product in any order in c (Higham 2002, eq. 3.5, γ_n plus n·η_c for
// underflow); _log_softmax_backward_data: gI = g − exp_c(y)·Σ_j g_j (sum any order, γ_{n−1}).

#include <algorithm>
#include <cmath>
#include <string>

#include "core/ops/families.h"
#include "core/ops/nn_support.h"
#include "core/ops/op_support.h"
#include "core/ops/registry.h"

namespace lossbound {

namespace {

using namespace ops;
using namespace ops::nn;

constexpr double kInf = HUGE_VAL;

/// Returns the softmax dim normalized against the input rank (0-d tensors accept 0 and −1).
int softmaxDim(const OpArgs& a, const Tensor& x, std::size_t pos = 1) {
  const std::int64_t d = a.intArg(pos, "dim");
  if (x.rank() == 0) {
    if (d != 0 && d != -1) a.fail("dim " + std::to_string(d) + " is out of range for a 0-d tensor");
    return 0;
  }
  try {
    return normalizeDim(d, static_cast<std::size_t>(x.rank()));
  } catch (const std::out_of_range& e) {
    a.fail(e.what());
  }
}

/// Bounds of the model for one op.
struct Model {
  Format c;         // compute format
  Format s;         // storage format of the output
  double u;         // unit roundoff of c
  double uAcc;      // unit roundoff of the sums (2u with truncating accumulation)
  double eta;       // smallest subnormal of c
  int kExp, kLog;   // modelUlps of exp and log in c
  double beta;      // relative error of exp: 2·kExp·u (with the ulp slack of widenUlps)
  double etaExp;    // absolute error of exp: kExp·eta
  double noShiftT;  // rows with every |x| <= T may be computed without the max shift
};

Model modelFor(const OpArgs& a, const OpContext& ctx) {
  Model m;
  const DType t = a.outSpec(0).dtype;
  m.s = outFormat(a, ctx);
  m.c = accumulationFormat(ctx.precision, t);
  m.u = unitRoundoff(m.c);
  m.uAcc = m.u * (ctx.precision.truncatingAccumulation ? 2.0 : 1.0);
  m.eta = smallestSubnormal(m.c);
  m.kExp = modelUlps(LibmFn::Exp, m.c);
  m.kLog = modelUlps(LibmFn::Log, m.c);
  // Same relative size of an ulp as widenUlps (op_support): 2u per ulp, with slack 2^-10.
  m.beta = mul_up(mul_up(2.0 * m.kExp, m.u), 1.0 + 0x1p-10);
  m.etaExp = mul_up(static_cast<double>(m.kExp), m.eta);
  m.noShiftT = std::floor(std::log(largestFinite(m.c)) / 4.0);
  return m;
}

double divUpSafe(double a, double b) {  // a, b >= 0
  if (a == 0.0) return 0.0;
  if (b == 0.0 || a == kInf) return kInf;
  return div_up(a, b);
}
double divDownSafe(double a, double b) {  // a, b >= 0
  if (a == 0.0 || b == kInf) return 0.0;
  if (b == 0.0) return kInf;
  return div_down(a, b);
}

/// Encloses softmax (log == false) or log-softmax of one row of finite interval inputs.
void rowIntervalFinite(const std::vector<Interval>& x, const Model& m, bool log,
                       std::vector<Interval>& y) {
  const std::size_t n = x.size();
  y.assign(n, entireInterval());
  if (n == 0) return;
  double maxLo = -kInf, maxHi = -kInf, maxMag = 0.0;
  for (const Interval& v : x) {
    if (!std::isfinite(v.lo) || !std::isfinite(v.hi)) return;  // unbounded input: no bound
    maxLo = std::max(maxLo, v.lo);
    maxHi = std::max(maxHi, v.hi);
    maxMag = std::max(maxMag, mag(v));
  }
  const bool noShift = maxMag <= m.noShiftT;
  Interval shift{maxLo, maxHi};
  if (noShift) shift = hull(shift, Interval{0.0, 0.0});
  const double c0 = maxHi;
  const double gamma = gammaUp(static_cast<std::int64_t>(n) - 1, m.uAcc);
  const double tLo = sub_down(1.0, gamma), tHi = add_up(1.0, gamma);

  std::vector<double> magd(n), pLo(n), pHi(n);
  for (std::size_t j = 0; j < n; ++j) {
    magd[j] = mag(lossbound::sub(x[j], shift));
    const double r = mul_up(m.u, magd[j]);  // |α_j (x_j − m)|
    pLo[j] = std::max(0.0, elementaryDown(Elementary::Exp, sub_down(sub_down(x[j].lo, c0), r)));
    pHi[j] = elementaryUp(Elementary::Exp, add_up(sub_up(x[j].hi, c0), r));
  }
  // Sums of all q_j but one, from prefix and suffix sums (directed).
  std::vector<double> preLo(n + 1, 0.0), preHi(n + 1, 0.0), sufLo(n + 1, 0.0), sufHi(n + 1, 0.0);
  for (std::size_t j = 0; j < n; ++j) {
    preLo[j + 1] = add_down(preLo[j], pLo[j]);
    preHi[j + 1] = add_up(preHi[j], pHi[j]);
  }
  for (std::size_t j = n; j-- > 0;) {
    sufLo[j] = add_down(sufLo[j + 1], pLo[j]);
    sufHi[j] = add_up(sufHi[j + 1], pHi[j]);
  }

  // Log-softmax only: an enclosure of S itself, for the error of log_c(S) and of m + L.
  double eLogCommon = 0.0;
  if (log) {
    double sLo = 0.0, sHi = 0.0;
    for (std::size_t j = 0; j < n; ++j) {
      const double r = mul_up(m.u, magd[j]);
      const double lo = mul_down(elementaryDown(Elementary::Exp, sub_down(sub_down(x[j].lo, shift.hi), r)),
                                 sub_down(1.0, m.beta));
      sLo = add_down(sLo, std::max(0.0, sub_down(lo, m.etaExp)));
      const double hi = elementaryUp(Elementary::Exp, add_up(sub_up(x[j].hi, shift.lo), r));
      sHi = add_up(sHi, add_up(mul_up(hi, add_up(1.0, m.beta)), m.etaExp));
    }
    sLo = mul_down(sLo, tLo);
    sHi = mul_up(sHi, tHi);
    const double ls = sLo > 0.0 ? mag(lossbound::log(Interval{sLo, sHi})) : kInf;  // |log S|
    const double relLog = mul_up(mul_up(2.0 * m.kLog, m.u), 1.0 + 0x1p-10);
    const double etaLog = mul_up(static_cast<double>(m.kLog), m.eta);
    const double eLog = add_up(mul_up(relLog, ls), etaLog);          // |L − log S|
    const double magL = add_up(ls, eLog);                             // |L|
    const double eMl = mul_up(m.u, add_up(mag(shift), magL));         // |fl(m + L) − (m + L)|
    eLogCommon = add_up(eLog, eMl);
  }

  const double nm1 = static_cast<double>(n - 1);
  for (std::size_t i = 0; i < n; ++i) {
    const double r = mul_up(m.u, magd[i]);
    // ε_i bounds η_exp / P_i, P_i = exp(d_i) >= exp(x_i.lo − m.hi − u|d_i|).
    const double eps = mul_up(m.etaExp, elementaryUp(Elementary::Exp, add_up(sub_up(shift.hi, x[i].lo), r)));
    const double aLo = std::max(0.0, sub_down(sub_down(1.0, m.beta), eps));
    const double aHi = add_up(add_up(1.0, m.beta), eps);
    double qLo = 0.0, qHi = 0.0;  // bounds of Σ_{j≠i} e_j t_j / P_i
    if (n > 1) {
      const double slex = add_down(preLo[i], sufLo[i + 1]);
      const double shex = add_up(preHi[i], sufHi[i + 1]);
      const double lo = sub_down(divDownSafe(mul_down(sub_down(1.0, m.beta), slex), pHi[i]), mul_up(nm1, eps));
      qLo = mul_down(tLo, std::max(0.0, lo));
      qHi = mul_up(tHi, add_up(divUpSafe(mul_up(add_up(1.0, m.beta), shex), pLo[i]), mul_up(nm1, eps)));
      if (std::isnan(qHi)) qHi = kInf;
      if (std::isnan(qLo)) qLo = 0.0;
    }
    Interval r2;
    if (!log) {
      const double yLo = aLo == 0.0 ? 0.0 : div_down(1.0, add_up(tHi, divUpSafe(qHi, aLo)));
      const double yHi = div_up(1.0, add_down(tLo, divDownSafe(qLo, aHi)));
      const double f2Lo = mul_down(sub_down(1.0, m.u), sub_down(1.0, m.u));
      const double f2Hi = mul_up(add_up(1.0, m.u), add_up(1.0, m.u));
      r2 = {std::max(0.0, mul_down(yLo, f2Lo)), mul_up(yHi, f2Hi)};
    } else {
      // S / P_i = a_i t_i + Q_i / P_i; y_i = −log(S / P_i) + errors.
      const double zLo = add_down(mul_down(aLo, tLo), qLo);
      const double zHi = add_up(mul_up(aHi, tHi), qHi);
      const Interval lz = zLo > 0.0 ? lossbound::log(Interval{zLo, zHi}) : Interval{-kInf, lossbound::log(Interval{zHi, zHi}).hi};
      const double e = add_up(eLogCommon, r);  // + |α_i d_i| of the fl(x_i − fl(m + L)) variant
      Interval base{sub_down(-lz.hi, e), add_up(-lz.lo, e)};
      r2 = lossbound::mul(base, Interval{sub_down(1.0, m.u), add_up(1.0, m.u)});
    }
    y[i] = roundOutward(r2, m.s);
  }
}

/// Encloses softmax (log == false) or log-softmax of one row under the model. Entries that are
/// exactly −inf (a causal or padding mask) are taken out of the row: fl(−inf − m) = −inf and
/// exp(−inf) = 0 exactly in IEEE 754 (§9.2 special cases), and adding an exact 0 to a sum is
/// exact, so they give exactly 0 (log-softmax: −inf) and leave the other entries' bounds as for
/// the shorter row. Any other non-finite entry, or a row that is all −inf (NaN in PyTorch), gives
/// no bound (the entire line).
void rowInterval(const std::vector<Interval>& x, const Model& m, bool log, std::vector<Interval>& y) {
  const std::size_t n = x.size();
  std::vector<Interval> kept;
  std::vector<std::size_t> where;
  kept.reserve(n);
  where.reserve(n);
  for (std::size_t j = 0; j < n; ++j) {
    if (x[j].lo == -kInf && x[j].hi == -kInf) continue;
    kept.push_back(x[j]);
    where.push_back(j);
  }
  if (kept.empty() || kept.size() == n) {
    rowIntervalFinite(x, m, log, y);
    return;
  }
  std::vector<Interval> part;
  rowIntervalFinite(kept, m, log, part);
  const Interval masked = log ? Interval{-kInf, -kInf} : Interval{0.0, 0.0};
  y.assign(n, masked);
  for (std::size_t k = 0; k < kept.size(); ++k) y[where[k]] = part[k];
}

/// One random execution of softmax / log-softmax on a row.
void rowRandom(const std::vector<double>& x, const Model& m, bool log, std::mt19937_64& rng,
               std::vector<double>& y) {
  const std::size_t n = x.size();
  y.assign(n, 0.0);
  if (n == 0) return;
  double mx = -kInf, maxMag = 0.0;
  for (double v : x) {
    mx = std::max(mx, v);
    maxMag = std::max(maxMag, std::fabs(v));
  }
  const double shift = (maxMag <= m.noShiftT && rng() % 3 == 0) ? 0.0 : mx;
  std::vector<double> d(n), e(n);
  const int pubExp = publishedUlps(LibmFn::Exp, m.c);
  for (std::size_t j = 0; j < n; ++j) {
    d[j] = roundNearest(x[j] - shift, m.c);
    // exp(−inf) = 0 exactly in every libm: a masked entry is never perturbed.
    e[j] = d[j] == -kInf ? 0.0 : std::max(0.0, perturbUlps(std::exp(d[j]), pubExp, m.c, rng));
  }
  std::vector<double> terms = e;
  const double s = randomSum(terms, m.c, rng);
  if (!log) {
    const bool recip = rng() & 1;
    const double inv = roundNearest(1.0 / s, m.c);
    for (std::size_t i = 0; i < n; ++i)
      y[i] = roundNearest(recip ? roundNearest(e[i] * inv, m.c) : roundNearest(e[i] / s, m.c), m.s);
  } else {
    const double l = perturbUlps(std::log(s), publishedUlps(LibmFn::Log, m.c), m.c, rng);
    const bool variantB = rng() & 1;
    const double ml = roundNearest(shift + l, m.c);
    for (std::size_t i = 0; i < n; ++i)
      y[i] = roundNearest(variantB ? roundNearest(x[i] - ml, m.c) : roundNearest(d[i] - l, m.c), m.s);
  }
}

/// Binary64 softmax / log-softmax of a row (max-shifted).
void rowPoint(const std::vector<double>& x, bool log, std::vector<double>& y) {
  const std::size_t n = x.size();
  y.assign(n, 0.0);
  if (n == 0) return;
  const double mx = *std::max_element(x.begin(), x.end());
  long double s = 0;
  for (double v : x) s += std::exp(static_cast<long double>(v - mx));
  for (std::size_t i = 0; i < n; ++i)
    y[i] = log ? static_cast<double>(static_cast<long double>(x[i] - mx) - std::log(s))
               : static_cast<double>(std::exp(static_cast<long double>(x[i] - mx)) / s);
}

/// Applies f(row in, row out) to every row of `x` along dim, for point or interval values.
template <typename T, typename Get, typename F>
std::vector<T> mapRows(const Tensor& x, int dim, Get get, F f) {
  const Rows rows = rowsAlong(x.shape(), dim);
  std::vector<T> out(static_cast<std::size_t>(x.numel()));
  std::vector<T> in, res;
  for (std::int64_t r = 0; r < rows.count(); ++r) {
    in.resize(static_cast<std::size_t>(rows.n));
    for (std::int64_t j = 0; j < rows.n; ++j) in[static_cast<std::size_t>(j)] = get(rows.at(r, j));
    f(in, res);
    for (std::int64_t j = 0; j < rows.n; ++j) out[static_cast<std::size_t>(rows.at(r, j))] = res[static_cast<std::size_t>(j)];
  }
  return out;
}

Tensor intervalTensor(const Shape& s, DType t, const std::vector<Interval>& v) {
  std::vector<double> lo(v.size()), hi(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    lo[i] = v[i].lo;
    hi[i] = v[i].hi;
  }
  return Tensor::interval(s, t, std::move(lo), std::move(hi));
}

std::shared_ptr<const OpRule> softmaxRule(bool log) {
  auto fns = std::make_shared<RuleFns>();
  fns->point = [log](const OpArgs& a, OpContext&) {
    const Tensor& x = a.tensor(0);
    const int dim = softmaxDim(a, x);
    auto v = mapRows<double>(x, dim, [&](std::int64_t i) { return x.values()[static_cast<std::size_t>(i)]; },
                             [log](const std::vector<double>& in, std::vector<double>& out) { rowPoint(in, log, out); });
    return std::vector<Tensor>{Tensor::point(x.shape(), a.outSpec(0).dtype, std::move(v))};
  };
  fns->interval = [log](const OpArgs& a, OpContext& ctx) {
    const Tensor& x = a.tensor(0);
    const int dim = softmaxDim(a, x);
    const Model m = modelFor(a, ctx);
    auto v = mapRows<Interval>(x, dim, [&](std::int64_t i) { return x.at(i); },
                               [&](const std::vector<Interval>& in, std::vector<Interval>& out) {
                                 rowInterval(in, m, log, out);
                               });
    return std::vector<Tensor>{intervalTensor(x.shape(), a.outSpec(0).dtype, v)};
  };
  fns->random = [log](const OpArgs& a, OpContext& ctx) {
    const Tensor& x = a.tensor(0);
    const int dim = softmaxDim(a, x);
    const Model m = modelFor(a, ctx);
    auto v = mapRows<double>(x, dim, [&](std::int64_t i) { return x.values()[static_cast<std::size_t>(i)]; },
                             [&](const std::vector<double>& in, std::vector<double>& out) {
                               rowRandom(in, m, log, *ctx.rng, out);
                             });
    return std::vector<Tensor>{Tensor::point(x.shape(), a.outSpec(0).dtype, std::move(v))};
  };
  fns->vjp = [log](const OpArgs& a, std::span<const Tensor> outputs, std::span<const Tensor> g, OpContext&) {
    // softmax: gx = y (g − <g, y>); log-softmax: gx = g − softmax · Σ g.
    const Tensor& x = a.tensor(0);
    const int dim = softmaxDim(a, x);
    const Rows rows = rowsAlong(x.shape(), dim);
    const auto y = outputs[0].values();
    const auto gv = g[0].values();
    std::vector<double> out(static_cast<std::size_t>(x.numel()));
    for (std::int64_t r = 0; r < rows.count(); ++r) {
      long double s = 0;
      for (std::int64_t j = 0; j < rows.n; ++j) {
        const auto k = static_cast<std::size_t>(rows.at(r, j));
        s += log ? gv[k] : static_cast<long double>(gv[k]) * y[k];
      }
      for (std::int64_t j = 0; j < rows.n; ++j) {
        const auto k = static_cast<std::size_t>(rows.at(r, j));
        out[k] = log ? static_cast<double>(gv[k] - std::exp(static_cast<long double>(y[k])) * s)
                     : static_cast<double>(y[k] * (gv[k] - s));
      }
    }
    return std::vector<std::optional<Tensor>>{Tensor::point(x.shape(), x.dtype(), std::move(out))};
  };
  fns->localError = [fns](const OpArgs& a, std::span<const Tensor> o, OpContext& ctx) {
    return localErrorVia(*fns, a, o, ctx);
  };
  return makeRule(*fns);
}

/// _softmax_backward_data(grad_output, output, dim, input_dtype) (log == false) and
/// _log_softmax_backward_data (log == true).
std::shared_ptr<const OpRule> backwardDataRule(bool log) {
  auto fns = std::make_shared<RuleFns>();
  auto check = [](const OpArgs& a) {
    if (a.tensor(0).shape() != a.tensor(1).shape())
      a.fail("grad_output " + shapeString(a.tensor(0).shape()) + " and output " +
             shapeString(a.tensor(1).shape()) + " should have the same shape");
    return softmaxDim(a, a.tensor(1), 2);
  };
  // The formula of one row in a domain (point, interval or random), with its reduction `red`.
  fns->point = [log, check](const OpArgs& a, OpContext&) {
    const int dim = check(a);
    const Tensor& g = a.tensor(0);
    const Tensor& y = a.tensor(1);
    const Rows rows = rowsAlong(g.shape(), dim);
    std::vector<double> out(static_cast<std::size_t>(g.numel()));
    for (std::int64_t r = 0; r < rows.count(); ++r) {
      long double s = 0;
      for (std::int64_t j = 0; j < rows.n; ++j) {
        const auto k = static_cast<std::size_t>(rows.at(r, j));
        s += log ? g.values()[k] : static_cast<long double>(g.values()[k]) * y.values()[k];
      }
      for (std::int64_t j = 0; j < rows.n; ++j) {
        const auto k = static_cast<std::size_t>(rows.at(r, j));
        out[k] = log ? static_cast<double>(g.values()[k] - std::exp(static_cast<long double>(y.values()[k])) * s)
                     : static_cast<double>(y.values()[k] * (g.values()[k] - s));
      }
    }
    return std::vector<Tensor>{Tensor::point(g.shape(), a.outSpec(0).dtype, std::move(out))};
  };
  fns->interval = [log, check](const OpArgs& a, OpContext& ctx) {
    const int dim = check(a);
    const Tensor& g = a.tensor(0);
    const Tensor& y = a.tensor(1);
    const Model m = modelFor(a, ctx);
    const IntervalDomain d{m.c};
    const Rows rows = rowsAlong(g.shape(), dim);
    std::vector<Interval> out(static_cast<std::size_t>(g.numel()));
    for (std::int64_t r = 0; r < rows.count(); ++r) {
      Interval s{0.0, 0.0};
      double absSum = 0.0;
      for (std::int64_t j = 0; j < rows.n; ++j) {
        const std::int64_t k = rows.at(r, j);
        const Interval t = log ? g.at(k) : lossbound::mul(g.at(k), y.at(k));
        s = lossbound::add(s, t);
        absSum = add_up(absSum, mag(t));
      }
      // Order-free bounds: γ_{n−1}Σ|g| (Higham 2002, eq. 4.4) or γ_n Σ|g y| + n·η (eq. 3.5).
      const double err = log ? sumErrorBound(rows.n, absSum, m.uAcc)
                             : dotErrorBound(rows.n, absSum, m.uAcc, m.eta);
      s = d.round(Interval{sub_down(s.lo, err), add_up(s.hi, err)});
      for (std::int64_t j = 0; j < rows.n; ++j) {
        const std::int64_t k = rows.at(r, j);
        Interval v;
        if (log) {
          v = d.sub(g.at(k), d.mul(d.fn(Fn::Exp, y.at(k)), s));
        } else {
          v = hull(d.mul(y.at(k), d.sub(g.at(k), s)), d.sub(d.mul(y.at(k), g.at(k)), d.mul(y.at(k), s)));
        }
        out[static_cast<std::size_t>(k)] = roundOutward(v, m.s);
      }
    }
    return std::vector<Tensor>{intervalTensor(g.shape(), a.outSpec(0).dtype, out)};
  };
  fns->random = [log, check](const OpArgs& a, OpContext& ctx) {
    const int dim = check(a);
    const Tensor& g = a.tensor(0);
    const Tensor& y = a.tensor(1);
    const Model m = modelFor(a, ctx);
    const RandomDomain d{m.c, ctx.rng};
    const Rows rows = rowsAlong(g.shape(), dim);
    std::vector<double> out(static_cast<std::size_t>(g.numel())), gr, yr, scratch;
    for (std::int64_t r = 0; r < rows.count(); ++r) {
      gr.clear();
      yr.clear();
      for (std::int64_t j = 0; j < rows.n; ++j) {
        gr.push_back(g.values()[static_cast<std::size_t>(rows.at(r, j))]);
        yr.push_back(y.values()[static_cast<std::size_t>(rows.at(r, j))]);
      }
      std::vector<double> terms = gr;
      const double s = log ? randomSum(terms, m.c, *ctx.rng) : randomDot(gr, yr, m.c, *ctx.rng, scratch);
      const int variant = static_cast<int>((*ctx.rng)() % 2);
      for (std::int64_t j = 0; j < rows.n; ++j) {
        const auto jj = static_cast<std::size_t>(j);
        double v;
        if (log) {
          const double e = d.fn(Fn::Exp, yr[jj]);
          v = variant == 0 ? d.sub(gr[jj], d.mul(e, s)) : fmaIn(-e, s, gr[jj], m.c);
        } else {
          v = variant == 0 ? d.mul(yr[jj], d.sub(gr[jj], s)) : d.sub(d.mul(yr[jj], gr[jj]), d.mul(yr[jj], s));
        }
        out[static_cast<std::size_t>(rows.at(r, j))] = roundNearest(v, m.s);
      }
    }
    return std::vector<Tensor>{Tensor::point(g.shape(), a.outSpec(0).dtype, std::move(out))};
  };
  fns->vjp = [log, check](const OpArgs& a, std::span<const Tensor>, std::span<const Tensor> h, OpContext&) {
    // softmax: out = y ⊙ (g − <g,y>): dg = y ⊙ (h − <h,y>), dy = h ⊙ (g − <g,y>) − g·<h,y>.
    // log-softmax: out = g − exp(y)·Σg: dg = h − <h, exp(y)>, dy = −h ⊙ exp(y)·Σg.
    const int dim = check(a);
    const Tensor& g = a.tensor(0);
    const Tensor& y = a.tensor(1);
    const Rows rows = rowsAlong(g.shape(), dim);
    std::vector<double> dg(static_cast<std::size_t>(g.numel())), dy(dg.size());
    const auto gv = g.values(), yv = y.values(), hv = h[0].values();
    for (std::int64_t r = 0; r < rows.count(); ++r) {
      long double sgy = 0, shy = 0, sg = 0, she = 0;
      for (std::int64_t j = 0; j < rows.n; ++j) {
        const auto k = static_cast<std::size_t>(rows.at(r, j));
        sgy += static_cast<long double>(gv[k]) * yv[k];
        shy += static_cast<long double>(hv[k]) * yv[k];
        sg += gv[k];
        she += hv[k] * std::exp(static_cast<long double>(yv[k]));
      }
      for (std::int64_t j = 0; j < rows.n; ++j) {
        const auto k = static_cast<std::size_t>(rows.at(r, j));
        if (log) {
          dg[k] = static_cast<double>(hv[k] - she);
          dy[k] = static_cast<double>(-hv[k] * std::exp(static_cast<long double>(yv[k])) * sg);
        } else {
          dg[k] = static_cast<double>(yv[k] * (hv[k] - shy));
          dy[k] = static_cast<double>(hv[k] * (gv[k] - sgy) - gv[k] * shy);
        }
      }
    }
    return std::vector<std::optional<Tensor>>{Tensor::point(g.shape(), g.dtype(), std::move(dg)),
                                              Tensor::point(y.shape(), y.dtype(), std::move(dy))};
  };
  fns->localError = [fns](const OpArgs& a, std::span<const Tensor> o, OpContext& ctx) {
    return localErrorVia(*fns, a, o, ctx);
  };
  return makeRule(*fns);
}

}  // namespace

void registerSoftmaxOps(OpRegistry& r) {
  r.add("aten._softmax", softmaxRule(false));
  r.add("aten._log_softmax", softmaxRule(true));
  r.add("aten._softmax_backward_data", backwardDataRule(false));
  r.add("aten._log_softmax_backward_data", backwardDataRule(true));
}

}  // namespace lossbound
