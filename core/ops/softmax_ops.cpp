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
// Where exp(d_i) may underflow (the absolute error η_c of exp is not small next to P_i: a finite
// mask such as finfo.min added to a logit, as Hugging Face eager attention does), the ratio form
// gives only y_i <= 1; softmax then also takes y_i <= e_i^hi / S^lo (e_i^hi at the smallest shift,
// S^lo at the largest, with the absolute error of exp), which is tiny for such entries.
// Where the row's enclosures are wider than the exponent range (deep interval programs), the ratio
// form overflows; log-softmax is then also enclosed directly, y_i = fl(d_i − L) with d_i <= 0 and
// L = log_c(S), S in [1 − β − η, k(1 + β + η)]·(1 ± γ_{k−1}) (the max entry's term is exp(0);
// every term is exp of a non-positive number), and the two enclosures are intersected.
// Online (flash-style) rescaling is not in the model. The enclosure of one row is the LB_HD body
// kernels::softmaxRow (core/kernels/softmax_row.h), which a Backend may run itself
// (Backend::softmaxRows; the CUDA backend does).
//
// Backward ops (PyTorch formulas): _softmax_backward_data: gI = y·(g − Σ_j g_j y_j) or
// y·g − y·s, the dot product in any order in c (Higham 2002, eq. 3.5, γ_n plus n·η_c for
// underflow); _log_softmax_backward_data: gI = g − exp_c(y)·Σ_j g_j (sum any order, γ_{n−1}).

#include "core/backend.h"
#include "core/kernels/softmax_row.h"
#include "core/ops/error_bounds.h"
#include "core/ops/families.h"
#include "core/ops/formats.h"
#include "core/ops/libm_model.h"
#include "core/ops/log_softmax_local_error.h"
#include "core/ops/nn_support.h"
#include "core/ops/random_arith.h"
#include "core/ops/registry.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lossbound {

namespace {

using namespace ops;
using namespace ops::nn;

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

/// Returns the bounds of the error model for one op (kernels::SoftmaxModel): compute format c =
/// the accumulation format of the output dtype, storage s = its format, model ulps of exp and log.
kernels::SoftmaxModel modelFor(const OpArgs& a, const OpContext& ctx) {
  const Format c = accumulationFormat(ctx.precision, a.outSpec(0).dtype);
  return kernels::makeSoftmaxModel(c, outFormat(a, ctx), ctx.precision.truncatingAccumulation,
                                   modelUlps(LibmFn::Exp, c), modelUlps(LibmFn::Log, c));
}

/// Encloses softmax (log == false) or log-softmax of x along dim under m (the enclosure of one
/// row is kernels::softmaxRow, core/kernels/softmax_row.h). Contiguous rows (nothing after dim)
/// go to the backend's softmaxRows hook first; when it is not offered, or the rows are strided,
/// the body runs on the host, rows split over backend.parallelFor (strided rows are gathered),
/// enclosing only the entries whose `needed` flag is set where flags are given (the others are
/// then [0, 0], not an enclosure: the caller reads the needed ones only).
Tensor intervalRows(const Tensor& x, int dim, DType out, const kernels::SoftmaxModel& m, bool log,
                    Backend& backend, const std::vector<unsigned char>* needed = nullptr) {
  const Rows rows = rowsAlong(x.shape(), dim);
  std::vector<double> lo(static_cast<std::size_t>(x.numel())), hi(lo.size());
  if (lo.empty()) return Tensor::interval(x.shape(), out, std::move(lo), std::move(hi));
  const auto xl = x.lo(), xh = x.hi();
  const bool contiguous = rows.inner == 1;
  if (contiguous && backend.softmaxRows(m, log, {xl.data(), xh.data()}, {lo.data(), hi.data()},
                                        rows.count(), rows.n))
    return Tensor::interval(x.shape(), out, std::move(lo), std::move(hi));
  backend.parallelFor(rows.count(), [&](std::int64_t begin, std::int64_t end) {
    const auto n = static_cast<std::size_t>(rows.n);
    std::vector<double> scratch(static_cast<std::size_t>(kernels::softmaxRowScratch(rows.n)));
    std::vector<double> rowLo(contiguous ? 0 : n), rowHi(rowLo.size()), resLo(rowLo.size()),
        resHi(rowLo.size());
    std::vector<unsigned char> rowNeeded(contiguous || !needed ? 0 : n);
    for (std::int64_t r = begin; r < end; ++r) {
      if (contiguous) {
        const auto o = static_cast<std::size_t>(r * rows.n);
        kernels::softmaxRow(xl.data() + o, xh.data() + o, rows.n, m, log, lo.data() + o,
                            hi.data() + o, scratch.data(), needed ? needed->data() + o : nullptr);
        continue;
      }
      for (std::size_t j = 0; j < n; ++j) {
        const auto k = static_cast<std::size_t>(rows.at(r, static_cast<std::int64_t>(j)));
        rowLo[j] = xl[k];
        rowHi[j] = xh[k];
        if (needed) rowNeeded[j] = (*needed)[k];
      }
      kernels::softmaxRow(rowLo.data(), rowHi.data(), rows.n, m, log, resLo.data(), resHi.data(),
                          scratch.data(), needed ? rowNeeded.data() : nullptr);
      for (std::size_t j = 0; j < n; ++j) {
        const auto k = static_cast<std::size_t>(rows.at(r, static_cast<std::int64_t>(j)));
        lo[k] = resLo[j];
        hi[k] = resHi[j];
      }
    }
  });
  return Tensor::interval(x.shape(), out, std::move(lo), std::move(hi));
}

/// One random execution of softmax / log-softmax on a row.
void rowRandom(const std::vector<double>& x, const kernels::SoftmaxModel& m, bool log,
               std::mt19937_64& rng, std::vector<double>& y) {
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
      y[i] =
          roundNearest(variantB ? roundNearest(x[i] - ml, m.c) : roundNearest(d[i] - l, m.c), m.s);
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

/// Bounds |rowPoint − exact| per element of x along dim (y: rowPoint's results), or nullopt when
/// a row holds NaN or +inf, has no finite entry, or a finite x_j − m overflows (the binary64
/// precision model's enclosure covers those). rowPoint rounds d_j = x_j − m to binary64
/// (|Δd_j| <= u|d_j|, u = 2^-53), computes the exps, the sum, the log and the last operation in
/// long double (x87, unit roundoff 2^-64; glibc's expl and logl: 1 ulp in its x86_64
/// libm-test-ulps, measured up to 1.09 ulp against MPFR; charged 2 ulps, 2^-62 relative, and the
/// n·2^-62 term leaves room for ~6) and rounds to binary64 (u|y| + η/2, η = 2^-1074). To first
/// order the d roundings move y_i by Δd_i − Σ p_j Δd_j, |·| <= u(|d_i| + Σ p_j|d_j|) (p = softmax;
/// absolute for log-softmax, relative for softmax; the second-order rest is <= u²·Σ p_j d_j² <=
/// 0.54·n·u², since t²e^−t <= 4/e² for t >= 0); the exps, the sum (γ_{n−1} <= n·2^-64), the log and
/// the subtraction add 2^-62·(n + 2 + |L| + |y_i|) to log-softmax (L = log Σ exp(d)), the exps, the
/// sum and the division 2^-62·(n + 3) relative to softmax; long double underflow (below 2^-16445)
/// and subnormal binary64 results are inside (n + 2)·η. The weights p_j and L come from binary64
/// exps and sums: relative errors up to ~n·2^-52 (Blanchard, Higham, Higham 2021, §2 for the
/// shifted forms), inside the slack 1 + 2^-30 + n·2^-48.
std::optional<std::vector<double>> pointErrorRows(const Tensor& x, int dim, const Tensor& y,
                                                  bool log) {
  static_assert(std::numeric_limits<long double>::digits >= 64,
                "rowPoint's error bound assumes an x87 (or wider) long double");
  const Rows rows = rowsAlong(x.shape(), dim);
  const auto xv = x.values(), yv = y.values();
  std::vector<double> err(xv.size(), 0.0);
  if (xv.empty()) return err;
  if (yv.size() != xv.size()) return std::nullopt;
  constexpr double u = 0x1p-53, uLong = 0x1p-62, eta = 0x1p-1074;
  const auto n = static_cast<double>(rows.n);
  const double slack = add_up(1.0 + 0x1p-30, mul_up(n, 0x1p-48));
  const double absolute = mul_up(n + 2.0, eta);
  std::vector<double> d(static_cast<std::size_t>(rows.n));
  for (std::int64_t r = 0; r < rows.count(); ++r) {
    double mx = -kInf;
    for (std::int64_t j = 0; j < rows.n; ++j) {
      const double v = xv[static_cast<std::size_t>(rows.at(r, j))];
      if (std::isnan(v) || v == kInf) return std::nullopt;
      mx = std::max(mx, v);
    }
    if (mx == -kInf) return std::nullopt;  // rowPoint gives NaN (−inf − −inf)
    double sum = 0.0;
    for (std::int64_t j = 0; j < rows.n; ++j) {
      const double v = xv[static_cast<std::size_t>(rows.at(r, j))];
      d[static_cast<std::size_t>(j)] = v - mx;
      if (v != -kInf && !std::isfinite(v - mx)) return std::nullopt;
      sum += std::exp(v - mx);
    }
    double pAbsD = 0.0;  // Σ p_j |d_j|
    for (const double dj : d)
      if (dj != -kInf) pAbsD = add_up(pAbsD, mul_up(std::exp(dj) / sum, std::fabs(dj)));
    const double magL = std::fabs(std::log(sum));
    for (std::int64_t j = 0; j < rows.n; ++j) {
      const auto k = static_cast<std::size_t>(rows.at(r, j));
      const double dj = d[static_cast<std::size_t>(j)], yj = std::fabs(yv[k]);
      if (dj == -kInf) continue;  // masked: exactly −inf (log) or 0
      const double shifts = mul_up(u, add_up(std::fabs(dj), pAbsD));
      double e = 0.0;
      if (log) {
        e = add_up(add_up(shifts, mul_up(u, yj)), mul_up(uLong, add_up(add_up(n + 2.0, magL), yj)));
      } else {
        e = mul_up(yj, add_up(add_up(shifts, u), mul_up(uLong, n + 3.0)));
      }
      err[k] = add_up(mul_up(e, slack), absolute);
    }
  }
  return err;
}

/// Returns log-softmax's local error in closed form (logSoftmaxRowLocalErrors) for the needed
/// entries of every row along `rows` (0 elsewhere), y the point outputs; empty when a row with a
/// needed entry cannot be bounded that way.
std::vector<double> closedFormLocalErrors(const Tensor& x, const Rows& rows,
                                          std::span<const double> y, const kernels::SoftmaxModel& m,
                                          const std::vector<unsigned char>& needed) {
  const auto xv = x.values();
  std::vector<double> r(xv.size(), 0.0);
  const auto n = static_cast<std::size_t>(rows.n);
  std::vector<double> xr(n), yr(n), rr(n);
  std::vector<unsigned char> nr(n);
  for (std::int64_t row = 0; row < rows.count(); ++row) {
    bool any = false;
    for (std::size_t j = 0; j < n; ++j) {
      const auto k = static_cast<std::size_t>(rows.at(row, static_cast<std::int64_t>(j)));
      xr[j] = xv[k];
      yr[j] = y[k];
      nr[j] = needed[k];
      any = any || nr[j] != 0;
    }
    if (!any) continue;
    if (!logSoftmaxRowLocalErrors(xr.data(), yr.data(), rows.n, m, nr.data(), rr.data())) return {};
    for (std::size_t j = 0; j < n; ++j)
      if (nr[j]) r[static_cast<std::size_t>(rows.at(row, static_cast<std::int64_t>(j)))] = rr[j];
  }
  return r;
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
    for (std::int64_t j = 0; j < rows.n; ++j)
      out[static_cast<std::size_t>(rows.at(r, j))] = res[static_cast<std::size_t>(j)];
  }
  return out;
}

/// _softmax(x, dim, half_to_float) (log == false) and _log_softmax (log == true): the enclosure
/// of the file comment, localError from that enclosure on exact inputs.
class SoftmaxRule final : public OpRule {
 public:
  explicit SoftmaxRule(bool log) : mLog(log) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    const int dim = softmaxDim(a, x);
    auto v = mapRows<double>(
        x, dim, [&](std::int64_t i) { return x.values()[static_cast<std::size_t>(i)]; },
        [this](const std::vector<double>& in, std::vector<double>& out) {
          rowPoint(in, mLog, out);
        });
    return std::vector<Tensor>{Tensor::point(x.shape(), a.outSpec(0).dtype, std::move(v))};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const Tensor& x = a.tensor(0);
    const int dim = softmaxDim(a, x);
    return std::vector<Tensor>{
        intervalRows(x, dim, a.outSpec(0).dtype, modelFor(a, ctx), mLog, ctx.backend)};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const Tensor& x = a.tensor(0);
    const int dim = softmaxDim(a, x);
    const kernels::SoftmaxModel m = modelFor(a, ctx);
    auto v = mapRows<double>(
        x, dim, [&](std::int64_t i) { return x.values()[static_cast<std::size_t>(i)]; },
        [&](const std::vector<double>& in, std::vector<double>& out) {
          rowRandom(in, m, mLog, *ctx.rng, out);
        });
    return std::vector<Tensor>{Tensor::point(x.shape(), a.outSpec(0).dtype, std::move(v))};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor> outputs,
                                         std::span<const Tensor> g, OpContext&) const override {
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
        s += mLog ? gv[k] : static_cast<long double>(gv[k]) * y[k];
      }
      for (std::int64_t j = 0; j < rows.n; ++j) {
        const auto k = static_cast<std::size_t>(rows.at(r, j));
        out[k] = mLog ? static_cast<double>(gv[k] - std::exp(static_cast<long double>(y[k])) * s)
                      : static_cast<double>(y[k] * (gv[k] - s));
      }
    }
    return std::vector<std::optional<Tensor>>{Tensor::point(x.shape(), x.dtype(), std::move(out))};
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    return localErrorVia(*this, a, o, ctx);
  }

  // rowPoint's own error, in closed form (pointErrorRows): the binary64 model's enclosure,
  // which it replaces, runs the interval row twice over.
  std::vector<Tensor> pointError(const OpArgs& a, std::span<const Tensor> o) const override {
    const Tensor& x = a.tensor(0);
    if (o.empty()) return {};
    auto e = pointErrorRows(x, softmaxDim(a, x), o[0], mLog);
    if (!e) return {};
    return std::vector<Tensor>{Tensor::point(x.shape(), o[0].dtype(), std::move(*e))};
  }

  // Adjoint-weighted local error (log-softmax, round to nearest; softmax and truncating sums:
  // nullopt, localError is used). bound = Σ|g_i|·r_i, r = localError: the first-order term
  // unchanged. sumSquares: every rounding of steps 2–6 of the file comment weighed by its
  // first-order effect on Σ_i g_i·y_i, y_i = d_i − L, p_j = e_j/S, G = Σ_row g_i (unmasked):
  // d_l's rounding u|d_l| by max(|g_l − p_l·G|, p_l·|G|) (it reaches y_l and L, or only L in the
  // fl(x_i − fl(m + L)) form); exp's error β·e_l by |G|·p_l; the sum's roundings by
  // |G|·u·partialSumsRootSquares(e)/S; the log's by |G|·2·kLog·u·|L|, fl(m + L)'s by
  // |G|·u·|m + L|; per element fl(d_i − L) or fl(x_i − ·) by |g_i|·u|y_i|, storage in a coarser
  // s by |g_i|·u_s|y_i|, these last roundings summed over the row as one term: they are not
  // independent (d_i on a grid as coarse as y_i's, bf16 inputs, round with the same offset L:
  // measured, an all-ones adjoint in bf16 had 3× their root-sum-square). The unshifted form (every
  // |x| <= T) has no d rounding and L + m for L: the terms of every form together bound each
  // form's. Linearly, added to the root: exp's underflow |G|·n·η_exp/S and the binary64 point
  // value's own error (rowPoint's roundings, below) times |g_i|. The roundings a row shares (the
  // sum, the log, the exps, the d's) are weighed once by the row's adjoints together, so this holds
  // for any adjoint: one nonzero per row (cross-entropy) as well as all of them (label smoothing,
  // KL). Never above bound².
  std::optional<AdjointLocalError> adjointLocalError(const OpArgs& a, std::span<const Tensor> o,
                                                     std::span<const Tensor> g,
                                                     OpContext& ctx) const override {
    if (!mLog || ctx.precision.truncatingAccumulation || g.empty() || o.empty())
      return std::nullopt;
    const Tensor& x = a.tensor(0);
    const Rows rows = rowsAlong(x.shape(), softmaxDim(a, x));
    const kernels::SoftmaxModel m = modelFor(a, ctx);
    const double u = m.u, uS = unitRoundoff(m.s) > u ? unitRoundoff(m.s) : 0.0;
    const auto xv = x.values(), yv = o[0].values(), gv = g[0].values();
    if (gv.size() != xv.size()) return std::nullopt;
    AdjointLocalError res;
    // localError where the adjoint is nonzero (a zero adjoint owns no budget, as in the
    // evaluator's Σ|g|·r): cross-entropy's adjoint has one nonzero per row.
    std::vector<unsigned char> needed(gv.size());
    for (std::size_t k = 0; k < gv.size(); ++k) needed[k] = gv[k] != 0.0;
    std::vector<double> r = closedFormLocalErrors(x, rows, yv, m, needed);
    if (r.empty()) {  // a row the closed form does not bound: the interval rows
      const Tensor local = localErrorFromEnclosure(
          o[0],
          intervalRows(x, softmaxDim(a, x), a.outSpec(0).dtype, m, true, ctx.backend, &needed));
      r.assign(local.values().begin(), local.values().end());
    }
    for (std::size_t k = 0; k < gv.size(); ++k) {
      if (gv[k] == 0.0) continue;
      const double t = mul_up(std::fabs(gv[k]), r[k]);
      res.bound = add_up(res.bound, std::isnan(t) ? HUGE_VAL : t);
    }
    const auto sq = [](double t) { return mul_up(t, t); };
    std::vector<double> d(static_cast<std::size_t>(rows.n)), e(d.size());
    double squares = 0.0, linear = 0.0;
    for (std::int64_t row = 0; row < rows.count(); ++row) {
      double mx = -kInf, gUp = 0.0, gDown = 0.0;
      for (std::int64_t j = 0; j < rows.n; ++j) {
        const auto k = static_cast<std::size_t>(rows.at(row, j));
        if (std::isnan(xv[k]) || xv[k] == kInf) return std::nullopt;
        mx = std::max(mx, xv[k]);
        if (xv[k] == -kInf) continue;  // masked: y = −inf exactly, whatever L is
        gUp = add_up(gUp, gv[k]);
        gDown = add_down(gDown, gv[k]);
      }
      if (mx == -kInf) continue;  // every entry masked: exact −inf everywhere
      const double bigG = std::fmax(std::fabs(gUp), std::fabs(gDown));  // >= |G|
      double sum = 0.0;
      for (std::size_t j = 0; j < d.size(); ++j) {
        d[j] = xv[static_cast<std::size_t>(rows.at(row, static_cast<std::int64_t>(j)))] - mx;
        e[j] = d[j] == -kInf ? 0.0 : std::exp(d[j]);
        sum = add_up(sum, e[j]);
      }
      const double lse = std::log(sum);
      const double lMax = std::fmax(std::fabs(lse), std::fabs(lse + mx));
      // Σ p², Σ p|d|, Σ (coef·u|d|)², Σ|g|(u + u_s)|y| (the last roundings), the point's error
      double pp = 0.0, pAbsD = 0.0, own = 0.0, last = 0.0, point = 0.0;
      for (std::size_t j = 0; j < d.size(); ++j) {
        if (e[j] == 0.0) continue;
        const double p = e[j] / sum;
        pp = add_up(pp, sq(p));
        pAbsD = add_up(pAbsD, mul_up(p, std::fabs(d[j])));
      }
      std::vector<double> sorted = e;  // partialSumsRootSquares reorders its span
      const double sumTerm = div_up(mul_up(u, partialSumsRootSquares(sorted)), sum);
      for (std::int64_t j = 0; j < rows.n; ++j) {
        const auto k = static_cast<std::size_t>(rows.at(row, j));
        if (xv[k] == -kInf) continue;
        const auto jj = static_cast<std::size_t>(j);
        const double p = e[jj] / sum, dj = std::fabs(d[jj]), y = std::fabs(yv[k]);
        const double gj = std::fabs(gv[k]), pG = mul_up(p, bigG);
        // |g_l − p_l·G| in binary64 to within 2^-52·(|g_l| + p_l·|G|)
        const double diff =
            add_up(std::fabs(gv[k] - p * (gUp + gDown) / 2),
                   add_up(mul_up(0x1p-52, add_up(gj, pG)), mul_up(p, sub_up(gUp, gDown))));
        own = add_up(own, sq(mul_up(mul_up(u, dj), std::fmax(diff, pG))));
        last = add_up(last, mul_up(gj, add_up(mul_up(u, y), mul_up(uS, y))));
        // rowPoint: x_i − m and each d_l in binary64 (u64·(|d_i| + Σ p_l|d_l|) on y_i), the rest
        // in long double (the exps, the sum, the log, the subtraction: 2^-62·(n + 2 + |L| + |y|)),
        // the result rounded to binary64 (u64·|y|).
        point = add_up(
            point,
            mul_up(gj, add_up(mul_up(0x1p-53, add_up(add_up(dj, pAbsD), y)),
                              mul_up(0x1p-62,
                                     add_up(add_up(static_cast<double>(rows.n) + 2.0, lMax), y)))));
      }
      const double shared = add_up(add_up(mul_up(sq(m.beta), pp), sq(sumTerm)),
                                   add_up(sq(mul_up(2.0 * m.kLog * u, lMax)), sq(mul_up(u, lMax))));
      squares = add_up(squares, add_up(add_up(own, sq(last)), mul_up(sq(bigG), shared)));
      const double under = div_up(mul_up(static_cast<double>(rows.n), m.etaExp), sum);
      linear = add_up(linear, add_up(mul_up(bigG, under), point));
    }
    // The weights p_j, Σp² and S/sum come from binary64 exps, quotients and an upward sum of
    // n terms: relative errors up to ~n·2^-52, low as well as high; 2^-40 + n·2^-48 covers them.
    const double slack = add_up(1.0 + 0x1p-40, mul_up(static_cast<double>(rows.n), 0x1p-48));
    const double root = mul_up(add_up(sqrt_up(squares), linear), slack);
    res.sumSquares = std::fmin(sq(root), sq(res.bound));
    return res;
  }

 private:
  bool mLog;  // log-softmax
};

/// _softmax_backward_data(grad_output, output, dim, input_dtype) (log == false) and
/// _log_softmax_backward_data (log == true).
class SoftmaxBackwardDataRule final : public OpRule {
 public:
  explicit SoftmaxBackwardDataRule(bool log) : mLog(log) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const int dim = check(a);
    const Tensor& g = a.tensor(0);
    const Tensor& y = a.tensor(1);
    const Rows rows = rowsAlong(g.shape(), dim);
    std::vector<double> out(static_cast<std::size_t>(g.numel()));
    for (std::int64_t r = 0; r < rows.count(); ++r) {
      long double s = 0;
      for (std::int64_t j = 0; j < rows.n; ++j) {
        const auto k = static_cast<std::size_t>(rows.at(r, j));
        s += mLog ? g.values()[k] : static_cast<long double>(g.values()[k]) * y.values()[k];
      }
      for (std::int64_t j = 0; j < rows.n; ++j) {
        const auto k = static_cast<std::size_t>(rows.at(r, j));
        out[k] = mLog ? static_cast<double>(g.values()[k] -
                                            std::exp(static_cast<long double>(y.values()[k])) * s)
                      : static_cast<double>(y.values()[k] * (g.values()[k] - s));
      }
    }
    return std::vector<Tensor>{Tensor::point(g.shape(), a.outSpec(0).dtype, std::move(out))};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const int dim = check(a);
    const Tensor& g = a.tensor(0);
    const Tensor& y = a.tensor(1);
    const kernels::SoftmaxModel m = modelFor(a, ctx);
    const Rows rows = rowsAlong(g.shape(), dim);
    const auto n = static_cast<std::size_t>(rows.n);
    std::vector<double> lo(static_cast<std::size_t>(g.numel())), hi(lo.size());
    const auto gl = g.lo(), gh = g.hi(), yl = y.lo(), yh = y.hi();
    // Each row through kernels::softmaxBackwardRow (core/kernels/softmax_row.h): contiguous rows
    // offered to the backend's row kernel first (a device runs the same body), else here.
    const bool contiguous = rows.inner == 1;
    if (!lo.empty() && contiguous &&
        ctx.backend.softmaxBackwardRows(m, mLog, {gl.data(), gh.data()}, {yl.data(), yh.data()},
                                        {lo.data(), hi.data()}, rows.count(), rows.n))
      return std::vector<Tensor>{
          Tensor::interval(g.shape(), a.outSpec(0).dtype, std::move(lo), std::move(hi))};
    std::vector<double> row(contiguous ? 0 : 6 * n);  // g, y and the result, gathered
    for (std::int64_t r = 0; r < rows.count(); ++r) {
      if (contiguous) {
        const auto o = static_cast<std::size_t>(r * rows.n);
        kernels::softmaxBackwardRow(gl.data() + o, gh.data() + o, yl.data() + o, yh.data() + o,
                                    rows.n, mLog, m, lo.data() + o, hi.data() + o);
        continue;
      }
      for (std::size_t j = 0; j < n; ++j) {
        const auto k = static_cast<std::size_t>(rows.at(r, static_cast<std::int64_t>(j)));
        row[j] = gl[k];
        row[n + j] = gh[k];
        row[2 * n + j] = yl[k];
        row[3 * n + j] = yh[k];
      }
      kernels::softmaxBackwardRow(row.data(), row.data() + n, row.data() + 2 * n,
                                  row.data() + 3 * n, rows.n, mLog, m, row.data() + 4 * n,
                                  row.data() + 5 * n);
      for (std::size_t j = 0; j < n; ++j) {
        const auto k = static_cast<std::size_t>(rows.at(r, static_cast<std::int64_t>(j)));
        lo[k] = row[4 * n + j];
        hi[k] = row[5 * n + j];
      }
    }
    return std::vector<Tensor>{
        Tensor::interval(g.shape(), a.outSpec(0).dtype, std::move(lo), std::move(hi))};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const int dim = check(a);
    const Tensor& g = a.tensor(0);
    const Tensor& y = a.tensor(1);
    const kernels::SoftmaxModel m = modelFor(a, ctx);
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
      const double s =
          mLog ? randomSum(terms, m.c, *ctx.rng) : randomDot(gr, yr, m.c, *ctx.rng, scratch);
      const int variant = static_cast<int>((*ctx.rng)() % 2);
      for (std::int64_t j = 0; j < rows.n; ++j) {
        const auto jj = static_cast<std::size_t>(j);
        double v;
        if (mLog) {
          const double e = d.fn(Fn::Exp, yr[jj]);
          v = variant == 0 ? d.sub(gr[jj], d.mul(e, s)) : fmaIn(-e, s, gr[jj], m.c);
        } else {
          v = variant == 0 ? d.mul(yr[jj], d.sub(gr[jj], s))
                           : d.sub(d.mul(yr[jj], gr[jj]), d.mul(yr[jj], s));
        }
        out[static_cast<std::size_t>(rows.at(r, j))] = roundNearest(v, m.s);
      }
    }
    return std::vector<Tensor>{Tensor::point(g.shape(), a.outSpec(0).dtype, std::move(out))};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> h, OpContext&) const override {
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
        if (mLog) {
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
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    return localErrorVia(*this, a, o, ctx);
  }

 private:
  /// Checks that grad_output and output have the same shape; returns the normalized dim.
  static int check(const OpArgs& a) {
    if (a.tensor(0).shape() != a.tensor(1).shape())
      a.fail("grad_output " + shapeString(a.tensor(0).shape()) + " and output " +
             shapeString(a.tensor(1).shape()) + " should have the same shape");
    return softmaxDim(a, a.tensor(1), 2);
  }

  bool mLog;  // log-softmax
};

}  // namespace

void registerSoftmaxOps(OpRegistry& r) {
  r.add("aten._softmax", std::make_shared<const SoftmaxRule>(false));
  r.add("aten._log_softmax", std::make_shared<const SoftmaxRule>(true));
  r.add("aten._softmax_backward_data", std::make_shared<const SoftmaxBackwardDataRule>(false));
  r.add("aten._log_softmax_backward_data", std::make_shared<const SoftmaxBackwardDataRule>(true));
}

}  // namespace lossbound
