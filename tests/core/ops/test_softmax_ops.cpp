// Softmax op rules (_softmax _log_softmax _softmax_backward_data _log_softmax_backward_data):
// per op and precision, 1,000 random cases (random rank and dim, rows of 0..64 elements,
// logits with a large shared offset to test that the shift cancels, wide dynamic ranges, point
// and interval inputs), zero escapes, local errors, vjp against finite differences; plus the
// sample-relevant composition log_softmax → nll_loss_forward (mean, ignore_index = −100), and
// that the rule hands contiguous rows to Backend::softmaxRows when a backend offers it.
#include "core/backend.h"
#include "core/kernels/softmax_row.h"
#include "core/ops/error_bounds.h"
#include "core/ops/formats.h"
#include "core/ops/libm_model.h"
#include "core/ops/log_softmax_local_error.h"
#include "core/ops/nn_support.h"
#include "core/ops/registry.h"
#include "tests/core/interval/mpfr_real.h"
#include "tests/core/ops/nn_test_util.h"
#include "tests/core/ops/rule_call.h"

#include <QtTest>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <span>

using namespace lossbound;
using namespace lossbound::test;
using namespace lossbound::test::nn;

namespace {

/// A random shape of rank 1..3 whose dimension `dim` has up to 64 elements; returns dim too.
std::pair<Shape, int> rowShape(std::mt19937_64& rng) {
  const int rank = 1 + static_cast<int>(rng() % 3);
  Shape s = randomShape(rank, rng, 4, 0.03);
  const int dim = static_cast<int>(rng() % static_cast<unsigned>(rank));
  const std::int64_t ext[] = {0, 1, 2, 3, 7, 16, 33, 64};
  s[static_cast<std::size_t>(dim)] = ext[rng() % 8];
  return {s, dim};
}

/// Logits: uniform in [−a, a] around a random shared offset, or wide-range values.
Tensor logits(const Shape& s, DType t, bool iv, std::mt19937_64& rng, Format f) {
  const double as[] = {0.5, 4.0, 30.0, 200.0};
  const double offsets[] = {0.0, 0.0, 3.0, -50.0, 1000.0};
  switch (rng() % 3) {
    case 0:
      return values(s, t, iv, rng, f == Format::Fp16 ? 5.0 : 7.0);
    default: {
      double a = as[rng() % 4], off = offsets[rng() % 5];
      if (f == Format::Fp16) a = std::min(a, 30.0);
      return uniform(s, t, iv, rng, a, off);
    }
  }
}

CaseMaker softmax(const std::string& op, bool halfToFloat = false) {
  return [=](Format f, bool iv, std::mt19937_64& rng) {
    OpCase c;
    c.op = op;
    c.precision = modelFor(std::nullopt);
    const DType t = halfToFloat ? DType::Float16 : dtypeFor(f);
    auto [s, dim] = rowShape(rng);
    c.inputs.push_back(logits(s, t, iv, rng, halfToFloat ? Format::Fp16 : f));
    c.args = {in(0), integer(rng() % 2 ? dim : dim - static_cast<int>(s.size())),
              flag(halfToFloat)};
    c.outDtypes = {halfToFloat ? DType::Float32 : t};
    return c;
  };
}

CaseMaker backwardData(const std::string& op, bool log) {
  return [=](Format f, bool iv, std::mt19937_64& rng) {
    OpCase c;
    c.op = op;
    c.precision = modelFor(std::nullopt);
    const DType t = dtypeFor(f);
    auto [s, dim] = rowShape(rng);
    c.inputs.push_back(rng() % 2 ? uniform(s, t, iv, rng, 1.0)
                                 : values(s, t, iv, rng, f == Format::Fp16 ? 4.0 : 10.0));
    c.inputs.push_back(log ? uniform(s, t, iv, rng, 10.0, -10.0)
                           : uniform(s, t, iv, rng, 0.5, 0.5));
    c.args = {in(0), in(1), integer(dim), dtypeValue(t)};
    c.outDtypes = {t};
    return c;
  };
}

/// The log-softmax model of core/ops/softmax_ops.cpp for storage format f (compute in fp32, or
/// fp64 for fp64), round to nearest.
kernels::SoftmaxModel logSoftmaxModel(Format f) {
  const Format c = f == Format::Fp64 ? Format::Fp64 : Format::Fp32;
  return kernels::makeSoftmaxModel(c, f, false, ops::modelUlps(ops::LibmFn::Exp, c),
                                   ops::modelUlps(ops::LibmFn::Log, c));
}

/// The largest |y − ŷ_i| / r_i over the extreme executions of the log-softmax model for element
/// i of row x (256-bit MPFR): every rounding at +u or −u of its operand (the d_j = fl(x_j − m)
/// together, d_i apart: x need not lie in c), exp at ±β, the sum at ±γ_{k−1}, the log at ±its model
/// ulps, the last operation and the storage rounding at ±u and ±u_s, in both shifted forms (fl(d_i
/// − L), fl(x_i − fl(m + L))) and, where every |x_j| <= T, the unshifted one, over the given
/// elements. Returns −1 when some execution passes r_i, with i in `failed`.
double worstExtremeRatio(const std::vector<double>& x, const std::vector<std::size_t>& elements,
                         std::span<const double> yHat, const std::vector<double>& r,
                         const kernels::SoftmaxModel& m, std::size_t& failed) {
  const double u = m.u;
  const double relLog = 2.0 * m.kLog * u * (1.0 + 0x1p-10);
  double mx = -kInf, maxMag = 0.0;
  std::size_t k = 0;
  for (double v : x)
    if (v != -kInf) {
      mx = std::max(mx, v);
      maxMag = std::max(maxMag, std::fabs(v));
      ++k;
    }
  const double gamma = ops::gammaUp(static_cast<std::int64_t>(k) - 1, u);
  double worst = 0.0;
  Real e, sum, d, di, ei, s, l, t, v, err;
  const auto check = [&](std::size_t i) {  // v holds the result; compares it with ŷ_i
    mpfr_sub_d(err, v, yHat[i], MPFR_RNDN);
    mpfr_abs(err, err, MPFR_RNDN);
    if (mpfr_cmp_d(err, r[i]) > 0) return false;
    if (r[i] > 0) worst = std::max(worst, mpfr_get_d(err, MPFR_RNDU) / r[i]);
    return true;
  };
  for (const bool shifted : {true, false}) {
    if (!shifted && maxMag > m.noShiftT) continue;
    const double shift = shifted ? mx : 0.0;
    for (const int sd : {-1, 1})
      for (const int se : {-1, 1}) {
        // d_j = (x_j − m)(1 + sd·u) (shifted) or x_j, e_j = exp(d_j)(1 + se·β), S = Σ e_j
        const auto expOf = [&](double xj, int sign, mpfr_ptr out, mpfr_ptr dOut) {
          mpfr_set_d(dOut, xj, MPFR_RNDN);
          mpfr_sub_d(dOut, dOut, shift, MPFR_RNDN);
          mpfr_mul_d(dOut, dOut, 1.0 + sign * u, MPFR_RNDN);  // fl(x_j − m), x_j not in c
          mpfr_exp(out, dOut, MPFR_RNDN);
          mpfr_mul_d(out, out, 1.0 + se * m.beta, MPFR_RNDN);
        };
        mpfr_set_zero(sum, 1);
        for (double xj : x) {
          if (xj == -kInf) continue;
          expOf(xj, sd, e, d);
          mpfr_add(sum, sum, e, MPFR_RNDN);
        }
        for (const std::size_t i : elements)
          for (const int sdi : {-1, 1}) {
            expOf(x[i], sd, e, d);  // e_i as in the sum, replaced by e_i with d_i's own sign
            expOf(x[i], sdi, ei, di);
            for (const int sS : {-1, 1})
              for (const int sL : {-1, 1}) {
                mpfr_sub(s, sum, e, MPFR_RNDN);
                mpfr_add(s, s, ei, MPFR_RNDN);
                mpfr_mul_d(s, s, 1.0 + sS * gamma, MPFR_RNDN);
                mpfr_log(l, s, MPFR_RNDN);
                mpfr_mul_d(l, l, 1.0 + sL * relLog, MPFR_RNDN);
                for (const int form : {0, 1, 2}) {      // fl(d_i − L); fl(x_i − fl(m + L)), ±u
                  if (!shifted && form != 0) continue;  // fl(0 + L) = L: both forms are one
                  if (form == 0) {
                    mpfr_sub(v, di, l, MPFR_RNDN);
                  } else {
                    mpfr_add_d(t, l, shift, MPFR_RNDN);
                    mpfr_mul_d(t, t, 1.0 + (form == 1 ? u : -u), MPFR_RNDN);
                    mpfr_d_sub(v, x[i], t, MPFR_RNDN);
                  }
                  // the last operation and the storage: rounded to nearest, exactly
                  const double yc = m.c == Format::Fp32
                                        ? static_cast<double>(mpfr_get_flt(v, MPFR_RNDN))
                                        : mpfr_get_d(v, MPFR_RNDN);
                  mpfr_set_d(v, ops::roundNearest(yc, m.s), MPFR_RNDN);
                  if (!check(i)) {
                    failed = i;
                    return -1.0;
                  }
                }
              }
          }
      }
  }
  return worst;
}

/// The CPU backend with a softmaxRows hook that records its calls and either declines, or fills
/// every entry with the marker [−1, 2] (so a test can see whose result the rule returned).
class HookBackend final : public Backend {
 public:
  bool offer = true;
  int calls = 0;
  std::int64_t lastRows = -1, lastCols = -1;

  std::string name() const override { return "CPU with a softmaxRows hook (test)"; }
  void gemm(const double* a, const double* b, double* c, std::int64_t m, std::int64_t k,
            std::int64_t n, bool absolute) override {
    mCpu->gemm(a, b, c, m, k, n, absolute);
  }
  void parallelFor(std::int64_t n,
                   const std::function<void(std::int64_t, std::int64_t)>& body) override {
    mCpu->parallelFor(n, body);
  }
  bool softmaxRows(const kernels::SoftmaxModel&, bool, kernels::ConstIntervalSpan,
                   kernels::IntervalSpan out, std::int64_t rows, std::int64_t cols) override {
    ++calls;
    lastRows = rows;
    lastCols = cols;
    if (!offer) return false;
    std::fill(out.lo, out.lo + rows * cols, -1.0);
    std::fill(out.hi, out.hi + rows * cols, 2.0);
    return true;
  }

 private:
  std::unique_ptr<Backend> mCpu = createCpuBackend();
};

CaseMaker moderate(CaseMaker m) {
  return [m](Format f, bool iv, std::mt19937_64& rng) {
    OpCase c = m(f, iv, rng);
    std::uniform_real_distribution<double> u(-2.0, 2.0);
    for (auto& x : c.inputs) {
      std::vector<double> v(static_cast<std::size_t>(x.numel()));
      for (double& e : v) e = u(rng);
      x = Tensor::point(x.shape(), x.dtype(), v);
    }
    return c;
  };
}

}  // namespace

class TestSoftmaxOps : public QObject {
  Q_OBJECT
 private slots:
  void softmax() {
    checkAllFormats("_softmax", ::softmax("aten._softmax.default"));
    checkAllFormats("_softmax(half_to_float)", ::softmax("aten._softmax.default", true));
    checkVjpCases("_softmax", moderate(::softmax("aten._softmax.default")));
  }
  void logSoftmax() {
    checkAllFormats("_log_softmax", ::softmax("aten._log_softmax.default"));
    checkAllFormats("_log_softmax(half_to_float)", ::softmax("aten._log_softmax.default", true));
    checkVjpCases("_log_softmax", moderate(::softmax("aten._log_softmax.default")));
  }
  /// A causal mask (exact -inf above the diagonal, as masked_fill leaves it): masked entries are
  /// exactly 0 (log-softmax: -inf), the others finite, and no randomized execution escapes.
  void maskedEntriesAreExact() {
    std::mt19937_64 rng(31);
    for (bool log : {false, true})
      for (Format f : {Format::Fp64, Format::Fp32, Format::Bf16, Format::Fp16})
        for (bool iv : {false, true}) {
          const std::int64_t n = 6;
          const DType t = dtypeFor(f);
          std::vector<double> lo(n * n), hi(n * n);
          for (std::int64_t i = 0; i < n; ++i)
            for (std::int64_t j = 0; j < n; ++j) {
              const double v = j > i ? -HUGE_VAL : static_cast<double>(rng() % 33) / 8.0 - 2.0;
              lo[static_cast<std::size_t>(i * n + j)] = v;
              hi[static_cast<std::size_t>(i * n + j)] = iv && j <= i ? v + 0.125 : v;
            }
          OpCase c;
          c.op = log ? "aten._log_softmax.default" : "aten._softmax.default";
          c.precision = modelFor(std::nullopt);
          c.inputs = {iv ? Tensor::interval({n, n}, t, lo, hi) : Tensor::point({n, n}, t, lo)};
          c.args = {in(0), integer(-1), flag(false)};
          c.outDtypes = {t};
          const EnclosureReport r = checkEnclosure(c, 200, rng);
          QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
          const Tensor y = intervalOutputs(c).at(0);
          for (std::int64_t i = 0; i < n; ++i)
            for (std::int64_t j = 0; j < n; ++j) {
              const Interval e = y.at(i * n + j);
              if (j > i) {
                const double masked = log ? -HUGE_VAL : 0.0;
                QVERIFY2(e.lo == masked && e.hi == masked, qPrintable(QString::number(i * n + j)));
              } else {
                QVERIFY2(std::isfinite(e.lo) && std::isfinite(e.hi),
                         qPrintable(QString::number(i * n + j)));
              }
            }
        }
  }
  /// A finite mask (finfo.min added to the logits, as Hugging Face eager attention does) makes
  /// exp underflow: the masked probabilities are enclosed in [0, a few of the format's subnormals],
  /// not in [0, 1], in every format,
  /// and no randomized execution escapes.
  void finiteMaskValuesGiveTinyEnclosures() {
    std::mt19937_64 rng(77);
    for (Format f : {Format::Fp64, Format::Fp32, Format::Bf16, Format::Fp16})
      for (bool iv : {false, true}) {
        const std::int64_t n = 7;
        const DType t = dtypeFor(f);
        const double lowest = -largestFinite(f);
        std::vector<double> lo(n * n), hi(n * n);
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t j = 0; j < n; ++j) {
            const double logit = static_cast<double>(rng() % 33) / 8.0 - 2.0;
            // lowest + logit rounds to lowest (or next to it) in the format
            const double v =
                j > i ? roundToFormat(lowest + logit, f, RoundingDirection::Nearest) : logit;
            lo[static_cast<std::size_t>(i * n + j)] = v;
            hi[static_cast<std::size_t>(i * n + j)] = iv && j <= i ? v + 0.125 : v;
          }
        OpCase c;
        c.op = "aten._softmax.default";
        c.precision = modelFor(std::nullopt);
        c.inputs = {iv ? Tensor::interval({n, n}, t, lo, hi) : Tensor::point({n, n}, t, lo)};
        c.args = {in(0), integer(-1), flag(false)};
        c.outDtypes = {t};
        const EnclosureReport r = checkEnclosure(c, 200, rng);
        QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
        const LocalErrorReport le = checkLocalError(
            OpCase{c.op, c.args, {}, c.outDtypes, {Tensor::point({n, n}, t, lo)}, c.precision}, 50,
            rng);
        QVERIFY2(le.violations == 0, le.first.c_str());
        const Tensor y = intervalOutputs(c).at(0);
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t j = i + 1; j < n; ++j) {
            const Interval e = y.at(i * n + j);
            QVERIFY2(e.lo == 0.0 && e.hi <= 64 * smallestSubnormal(f),
                     qPrintable(QStringLiteral("%1 entry %2: [%3, %4]")
                                    .arg(static_cast<int>(f))
                                    .arg(i * n + j)
                                    .arg(e.lo)
                                    .arg(e.hi)));
          }
      }
  }
  /// A row with a masked entry and an entry that may be +inf has no bound anywhere: PyTorch's
  /// row max is then +inf, fl(+inf − +inf) is NaN, and so is every output, the masked ones too.
  void unboundedRowHasNoBoundEvenWhereMasked() {
    for (bool log : {false, true}) {
      const std::vector<double> lo = {-HUGE_VAL, 1.0, 0.5}, hi = {-HUGE_VAL, HUGE_VAL, 0.5};
      OpCase c;
      c.op = log ? "aten._log_softmax.default" : "aten._softmax.default";
      c.precision = modelFor(std::nullopt);
      c.inputs = {Tensor::interval({1, 3}, DType::Float32, lo, hi)};
      c.args = {in(0), integer(-1), flag(false)};
      c.outDtypes = {DType::Float32};
      const Tensor y = intervalOutputs(c).at(0);
      for (std::int64_t j = 0; j < 3; ++j)
        QVERIFY2(y.at(j).lo == -HUGE_VAL && y.at(j).hi == HUGE_VAL,
                 qPrintable(QStringLiteral("log %1 entry %2: [%3, %4]")
                                .arg(log)
                                .arg(j)
                                .arg(y.at(j).lo)
                                .arg(y.at(j).hi)));
    }
  }
  /// The rule hands contiguous rows (softmax over the last dim, or over a dim followed only by
  /// size-1 dims) to Backend::softmaxRows and returns its result; strided rows never reach the
  /// hook; a declined hook leaves the host body's result, bit for bit the default backend's.
  void backendHookTakesContiguousRows() {
    std::mt19937_64 rng(41);
    std::uniform_real_distribution<double> u(-3.0, 3.0);
    for (const char* op : {"aten._softmax.default", "aten._log_softmax.default"}) {
      const OpRule* rule = opRegistry().find(op);
      QVERIFY(rule);
      struct Layout {
        Shape shape;
        int dim;
        bool contiguous;
        std::int64_t rows, cols;
      };
      for (const Layout& l : {Layout{{4, 9}, -1, true, 4, 9}, Layout{{4, 9}, 1, true, 4, 9},
                              Layout{{2, 3, 5}, 2, true, 6, 5}, Layout{{3, 7, 1}, 1, true, 3, 7},
                              Layout{{9, 4}, 0, false, 0, 0}, Layout{{2, 5, 3}, 1, false, 0, 0}}) {
        std::int64_t numel = 1;
        for (std::int64_t d : l.shape) numel *= d;
        std::vector<double> lo(static_cast<std::size_t>(numel)), hi(lo.size());
        for (std::size_t i = 0; i < lo.size(); ++i) {
          lo[i] = u(rng);
          hi[i] = lo[i] + 0.01;
        }
        const Tensor x = Tensor::interval(l.shape, DType::Float32, lo, hi);
        Node node;
        node.name = "n";
        node.op = op;
        node.args = {ref("x"), integer(l.dim), flag(false)};
        node.outputs = {TensorSpec{l.shape, DType::Float32}};
        const OpArgs args(node, [&](const ValueRef&) -> const Tensor& { return x; });
        const PrecisionModel pm;
        auto cpu = createCpuBackend();
        OpContext cpuCtx{pm, *cpu, nullptr};
        const Tensor want = rule->interval(args, cpuCtx)[0];
        for (bool offer : {true, false}) {
          HookBackend hook;
          hook.offer = offer;
          OpContext ctx{pm, hook, nullptr};
          const Tensor y = rule->interval(args, ctx)[0];
          const QString where = QStringLiteral("%1 dim %2 offer %3").arg(op).arg(l.dim).arg(offer);
          QVERIFY2(hook.calls == (l.contiguous ? 1 : 0), qPrintable(where));
          if (l.contiguous) {
            QVERIFY2(hook.lastRows == l.rows && hook.lastCols == l.cols, qPrintable(where));
          }
          for (std::int64_t i = 0; i < numel; ++i) {
            const Interval e = y.at(i);
            const Interval w = offer && l.contiguous ? Interval{-1.0, 2.0} : want.at(i);
            QVERIFY2(std::memcmp(&e, &w, sizeof e) == 0, qPrintable(where));
          }
        }
      }
    }
  }
  /// Rows whose enclosures are far wider than the exponent range (radius 1e4, or 1e3 in fp16):
  /// every exp(x_j − m) bound underflows or overflows, yet with the max shift S lies in
  /// [1 − β, k(1 + β)] and log-softmax stays finite (it was entire before); softmax stays in
  /// [0, 1]; no randomized execution escapes.
  void wideRowsGiveFiniteBounds() {
    std::mt19937_64 rng(43);
    for (const char* op : {"aten._log_softmax.default", "aten._softmax.default"})
      for (Format f : kFormats)
        for (std::int64_t n : {1, 2, 7, 64, 256}) {
          OpCase c;
          c.op = op;
          c.precision = modelFor(std::nullopt);
          const DType t = dtypeFor(f);
          c.inputs = {wideIntervals({2, n}, t, rng, 2.0, f == Format::Fp16 ? 1e3 : 1e4)};
          c.args = {in(0), integer(1), flag(false)};
          c.outDtypes = {t};
          const std::string where =
              std::string(op) + " " + std::string(formatName(f)) + " n=" + std::to_string(n);
          QVERIFY2(allFinite(intervalOutputs(c)), where.c_str());
          const EnclosureReport r = checkEnclosure(c, 100, rng);
          QVERIFY2(r.escapes == 0, (where + ": " + r.firstEscape).c_str());
        }
  }
  /// Log-softmax's probabilistic term against the randomized executor: rows of 1 to 2,000
  /// logits (uniform in [−a, a] around an offset, some masked with −inf) in every format; per
  /// element, 60 random executions stay within λ = 5.39 (the method's λ at 1 − 1e-6) times the
  /// term, and their root-mean-square error within the term (the model's variance is at most its
  /// square; the sum's own part is not singled out: the log's and the subtraction's terms are as
  /// large at these sizes); masked entries have none; and for rows of 2,000 stored in the compute
  /// format (fp32, fp64; bf16 and fp16 outputs are dominated by their storage rounding) the term of
  /// the largest entry is below a tenth of the worst case (the sum's √n).
  /// Log-softmax's adjoint-weighted probabilistic term against 60 executions for four adjoints:
  /// cross-entropy (one nonzero per row), label smoothing 0.1 and all ones (every entry: the
  /// row's shared roundings add up coherently), random signs; masked entries in the rows.
  void logSoftmaxAdjointTermBoundsTheExecutions() {
    std::mt19937_64 rng(47);
    for (Format f : kFormats)
      for (std::int64_t n : {1, 2, 33, 512, 2000})
        for (double a : {1.0, 8.0}) {
          OpCase c;
          c.op = "aten._log_softmax.default";
          c.precision = modelFor(std::nullopt);
          const DType t = dtypeFor(f);
          Tensor x = uniform({3, n}, t, false, rng, a, a > 1 ? -20.0 : 0.0);
          std::vector<double> v(x.values().begin(), x.values().end());
          if (n > 2) v[1] = -kInf;  // a masked entry in the first row
          x = Tensor::point(x.shape(), t, v);
          c.inputs = {x};
          c.args = {in(0), integer(1), flag(false)};
          c.outDtypes = {t};
          const RuleCall call(c);
          const auto masked = [&](std::size_t i) { return v[i] == -kInf; };
          const std::size_t count = v.size(), rowLen = static_cast<std::size_t>(n);
          std::vector<std::vector<double>> adjoints(4, std::vector<double>(count, 0.0));
          for (std::size_t row = 0; row < 3; ++row) {
            std::size_t target = row * rowLen + rng() % rowLen, live = 0;
            if (masked(target)) target = row * rowLen;
            for (std::size_t j = row * rowLen; j < (row + 1) * rowLen; ++j) live += !masked(j);
            for (std::size_t j = row * rowLen; j < (row + 1) * rowLen; ++j) {
              if (masked(j)) continue;
              adjoints[0][j] = j == target ? -1.0 / 3 : 0.0;
              adjoints[1][j] = -(0.1 / static_cast<double>(live) + (j == target ? 0.9 : 0.0)) / 3;
              adjoints[2][j] = 1.0;
              adjoints[3][j] = (rng() & 1) ? 0.5 : -0.25;
            }
          }
          for (std::size_t k = 0; k < adjoints.size(); ++k) {
            const std::string where = std::string(formatName(f)) + " n=" + std::to_string(n) +
                                      " a=" + std::to_string(a) + " adjoint " + std::to_string(k);
            const auto term = call.adjointLocalError({Tensor::point(x.shape(), t, adjoints[k])});
            QVERIFY2(term.has_value(), where.c_str());
            const double p = std::sqrt(term->sumSquares);
            // the rule's contract, never above bound² (the square root may round an ulp above)
            QVERIFY2(term->sumSquares <= mul_up(term->bound, term->bound), where.c_str());
            if (k == 0 && n == 2000 && (f == Format::Fp32 || f == Format::Fp64))  // (bf16/fp16:
              QVERIFY2(p < 0.1 * term->bound,                                     // storage)
                       qPrintable(QStringLiteral("%1: %2 vs worst %3")
                                      .arg(where.c_str())
                                      .arg(p)
                                      .arg(term->bound)));
            const std::string failure =
                checkAdjointProbabilisticTerm(call, adjoints[k], p, 60, rng);
            QVERIFY2(failure.empty(), (where + ", " + failure).c_str());
          }
        }
  }
  /// The log-softmax adjoint term bounds only the entries with a nonzero adjoint, with the
  /// closed form (logSoftmaxRowLocalErrors): its first-order bound must be exactly Σ|g|·r with r
  /// the closed form over whole rows, for contiguous and strided rows, one-hot and sparse
  /// adjoints, masked entries included.
  void adjointTermReadsOnlyNonzeroAdjoints() {
    std::mt19937_64 rng(7);
    for (Format f : kFormats)
      for (const int dim : {0, 1})
        for (std::int64_t n : {1, 5, 300}) {
          const DType t = dtypeFor(f);
          const Shape shape = dim == 1 ? Shape{4, n} : Shape{n, 4};
          Tensor x = uniform(shape, t, false, rng, 6.0, -3.0);
          std::vector<double> v(x.values().begin(), x.values().end());
          if (n > 1) v[2] = -kInf;  // masked
          x = Tensor::point(shape, t, v);
          OpCase c;
          c.op = "aten._log_softmax.default";
          c.precision = modelFor(std::nullopt);
          c.inputs = {x};
          c.args = {in(0), integer(dim), flag(false)};
          c.outDtypes = {t};
          const RuleCall call(c);
          const auto y = call.point()[0].values();
          const ops::nn::Rows rows = ops::nn::rowsAlong(shape, dim);
          std::vector<double> r(v.size());
          for (std::int64_t row = 0; row < rows.count(); ++row) {
            std::vector<double> xr, yr, rr(static_cast<std::size_t>(n));
            for (std::int64_t j = 0; j < n; ++j) {
              xr.push_back(v[static_cast<std::size_t>(rows.at(row, j))]);
              yr.push_back(y[static_cast<std::size_t>(rows.at(row, j))]);
            }
            QVERIFY(ops::logSoftmaxRowLocalErrors(xr.data(), yr.data(), n, logSoftmaxModel(f),
                                                  nullptr, rr.data()));
            for (std::int64_t j = 0; j < n; ++j)
              r[static_cast<std::size_t>(rows.at(row, j))] = rr[static_cast<std::size_t>(j)];
          }
          for (const bool oneHot : {true, false}) {
            std::vector<double> g(v.size(), 0.0);
            for (std::size_t k = 0; k < g.size(); ++k)
              if (oneHot ? rng() % static_cast<std::uint64_t>(n) == 0 : rng() % 3 != 0)
                g[k] = (rng() & 1) ? -0.25 : 0.5;
            double expected = 0.0;
            for (std::size_t k = 0; k < g.size(); ++k)
              if (g[k] != 0.0) expected = add_up(expected, mul_up(std::fabs(g[k]), r[k]));
            const auto term = call.adjointLocalError({Tensor::point(shape, t, g)});
            const std::string where = std::string(formatName(f)) + " dim=" + std::to_string(dim) +
                                      " n=" + std::to_string(n) + (oneHot ? " one-hot" : " sparse");
            QVERIFY2(term.has_value(), where.c_str());
            QVERIFY2(term->bound == expected, qPrintable(QStringLiteral("%1: bound %2, Σ|g|·r %3")
                                                             .arg(where.c_str())
                                                             .arg(term->bound, 0, 'g', 17)
                                                             .arg(expected, 0, 'g', 17)));
          }
        }
  }
  /// logSoftmaxRowLocalErrors (the adjoint term's closed form) bounds every extreme execution
  /// of the log-softmax model (worstExtremeRatio, MPFR at 256 bits) and 20 randomized executions
  /// per row, on rows of 1 to 512 entries in every storage format: logits of ±0.5 to ±40 around
  /// offsets 0, 10 (the unshifted form allowed) and 1000, rounded to the format or not (binary64
  /// replay values), a masked entry, a finite mask (finfo.min: not needed, as cross-entropy's
  /// adjoint leaves it), one dominant entry (outputs near 0); the tightness against the extremes
  /// and against the interval rows' local error is printed, and it is never above twice the
  /// latter on rows of two or more entries (one entry: y = 0 and both are a few ulps of 1; the
  /// closed form's is up to 2.5× in fp64, where its binary64 evaluation's slack is not small).
  void logSoftmaxClosedFormBoundsTheModel() {
    std::mt19937_64 rng(53);
    for (Format f : kFormats) {
      const kernels::SoftmaxModel m = logSoftmaxModel(f);
      const DType t = dtypeFor(f);
      double worst = 0.0, overInterval = 0.0, underInterval = kInf;
      int elements = 0, fellBack = 0;
      for (std::int64_t n : {1, 2, 7, 64, 512})
        for (double a : {0.5, 8.0, 40.0})
          for (double offset : {0.0, 10.0, 1000.0})
            for (int variant = 0; variant < 4; ++variant) {
              std::uniform_real_distribution<double> dist(-a, a);
              std::vector<double> v(static_cast<std::size_t>(n));
              for (double& e : v)
                e = variant == 3 ? offset + dist(rng) : ops::roundNearest(offset + dist(rng), f);
              std::vector<unsigned char> needed(v.size(), 1);
              if (variant == 1 && n > 2) {
                v[1] = -kInf;
                v[2] = -largestFinite(f);
                needed[2] = 0;
              }
              if (variant == 2) v[0] = ops::roundNearest(offset + a + 60.0, f);
              OpCase c;
              c.op = "aten._log_softmax.default";
              c.precision = modelFor(std::nullopt);
              c.inputs = {Tensor::point({1, n}, t, v)};
              c.args = {in(0), integer(1), flag(false)};
              c.outDtypes = {t};
              const RuleCall call(c);
              const auto y = call.point()[0].values();
              std::vector<double> r(v.size(), -1.0);
              const std::string where = std::string(formatName(f)) + " n=" + std::to_string(n) +
                                        " a=" + std::to_string(a) +
                                        " offset=" + std::to_string(offset) +
                                        " variant=" + std::to_string(variant);
              if (!ops::logSoftmaxRowLocalErrors(v.data(), y.data(), n, m, needed.data(),
                                                 r.data())) {
                ++fellBack;
                continue;
              }
              const Tensor localIv = call.localError().at(0);
              const auto rIv = localIv.values();
              std::vector<std::size_t> checked;
              for (std::size_t i = 0; i < v.size(); ++i)
                if (v.size() <= 16 || i < 4 || i % 61 == 0) checked.push_back(i);
              std::vector<std::size_t> live;  // needed and not masked
              for (std::size_t i : checked) {
                if (!needed[i]) {
                  QVERIFY2(r[i] == -1.0, where.c_str());  // left as it was
                  continue;
                }
                if (v[i] == -kInf) {
                  QVERIFY2(r[i] == 0.0, where.c_str());
                  continue;
                }
                live.push_back(i);
              }
              std::size_t failed = 0;
              const double ratio = worstExtremeRatio(v, live, y, r, m, failed);
              QVERIFY2(ratio >= 0.0, qPrintable(QStringLiteral("%1 element %2: an extreme "
                                                               "execution passes r = %3")
                                                    .arg(where.c_str())
                                                    .arg(failed)
                                                    .arg(r[failed])));
              worst = std::max(worst, ratio);
              for (std::size_t i : live) {
                if (rIv[i] > 0 && n > 1) {  // n = 1: y = 0, both a few ulps of 1 absolute
                  overInterval = std::max(overInterval, r[i] / rIv[i]);
                  underInterval = std::min(underInterval, r[i] / rIv[i]);
                }
                ++elements;
              }
              for (int e = 0; e < 20; ++e) {
                const Tensor execution = call.random(rng).at(0);
                const auto z = execution.values();
                for (std::size_t i = 0; i < v.size(); ++i)
                  QVERIFY2(!needed[i] || std::fabs(z[i] - y[i]) <= r[i] || (z[i] == y[i]),
                           qPrintable(QStringLiteral("%1 element %2: a randomized execution is "
                                                     "%3 from the point, r = %4")
                                          .arg(where.c_str())
                                          .arg(i)
                                          .arg(std::fabs(z[i] - y[i]))
                                          .arg(r[i])));
              }
            }
      qInfo(
          "%s: %d elements; the extremes reach %.3g of r; r is %.3g to %.3g of the interval "
          "rows' local error; %d rows fell back",
          formatName(f), elements, worst, underInterval, overInterval, fellBack);
      QVERIFY(worst > 0.3 && worst <= 1.0);  // not vacuous, never passed
      QVERIFY(overInterval <= 2.0);
      QCOMPARE(fellBack, 0);
    }
  }
  /// The closed form does not bound rows with NaN or +inf, or with every entry masked (the
  /// interval rows then do), and writes nothing for entries that are not needed.
  void logSoftmaxClosedFormDeclinesUnboundedRows() {
    const kernels::SoftmaxModel m = logSoftmaxModel(Format::Fp32);
    const double y[3] = {-1.0, -1.0, -1.0};
    double r[3] = {7.0, 7.0, 7.0};
    for (const double bad : {std::nan(""), kInf}) {
      const double x[3] = {0.5, bad, 1.0};
      QVERIFY(!ops::logSoftmaxRowLocalErrors(x, y, 3, m, nullptr, r));
    }
    const double masked[2] = {-kInf, -kInf};
    QVERIFY(!ops::logSoftmaxRowLocalErrors(masked, y, 2, m, nullptr, r));
    // Outputs that may overflow (every execution stores −inf, the point is finite): fp16's
    // −65504 mask under a max of 20, and fp32's −FLT_MAX under a max of 1e32 (fl(x − m) = −inf).
    const double half[2] = {20.0, -65504.0}, yHalf[2] = {0.0, -65524.0};
    QVERIFY(
        !ops::logSoftmaxRowLocalErrors(half, yHalf, 2, logSoftmaxModel(Format::Fp16), nullptr, r));
    const double wide[2] = {1e32, -static_cast<double>(FLT_MAX)}, yWide[2] = {0.0, -3.4e38};
    QVERIFY(!ops::logSoftmaxRowLocalErrors(wide, yWide, 2, m, nullptr, r));
    const double x[3] = {0.5, 0.25, 1.0};
    const unsigned char needed[3] = {0, 1, 0};
    std::fill(r, r + 3, 7.0);
    const double yy[3] = {-1.2318375667944002, -1.4818375667944002, -0.7318375667944002};
    QVERIFY(ops::logSoftmaxRowLocalErrors(x, yy, 3, m, needed, r));
    QCOMPARE(r[0], 7.0);
    QCOMPARE(r[2], 7.0);
    QVERIFY2(r[1] > 0.0 && r[1] < 1e-5, qPrintable(QString::number(r[1])));
  }
  /// SoftmaxRule::pointError bounds the binary64 point rule's own error: against MPFR (256
  /// bits) on rows of 1 to 3,000 elements, logits from ±0.5 to ±300 around offsets up to −1e5,
  /// masked entries, entries whose exp underflows binary64 (d < −745) or long double (d < −11,400),
  /// along the last dim and along a strided one. It is at most a few ulps of the values and of
  /// u·|d| (the tightness is printed).
  void pointErrorBoundsTheBinary64Rows() {
    std::mt19937_64 rng(91);
    for (const bool log : {false, true}) {
      const std::string op = log ? "aten._log_softmax.default" : "aten._softmax.default";
      double worst = 0.0;  // the largest |point − exact| / bound seen
      int elements = 0;
      for (std::int64_t n : {1, 2, 7, 64, 512, 3000})
        for (double a : {0.5, 8.0, 40.0, 300.0})
          for (double offset : {0.0, 1000.0, -1e5})
            for (const int dim : {0, 1}) {
              const Shape shape = dim == 1 ? Shape{2, n} : Shape{n, 2};
              std::uniform_real_distribution<double> dist(-a, a);
              std::vector<double> v(static_cast<std::size_t>(2 * n));
              for (double& e : v) e = offset + dist(rng);
              if (n > 2) {
                v[1] = -kInf;                            // masked
                v[v.size() - 1] = offset - 800.0;        // exp underflows binary64
                v[v.size() - 2] = offset - 20000.0;      // and long double
                v[v.size() / 2] = offset + 3 * a + 1.0;  // a clear maximum in one row
              }
              OpCase c;
              c.op = op;
              c.precision = modelFor(std::nullopt);
              c.inputs = {Tensor::point(shape, DType::Float64, v)};
              c.args = {in(0), integer(dim), flag(false)};
              c.outDtypes = {DType::Float64};
              const RuleCall call(c);
              const std::vector<Tensor> bound = call.pointError();
              const std::string where = op + " n=" + std::to_string(n) + " a=" + std::to_string(a) +
                                        " offset=" + std::to_string(offset) +
                                        " dim=" + std::to_string(dim);
              QVERIFY2(bound.size() == 1, where.c_str());
              const auto y = call.point()[0].values();
              const auto r = bound[0].values();
              const ops::nn::Rows rows = ops::nn::rowsAlong(shape, dim);
              Real m, sum, t, exact, err;
              for (std::int64_t row = 0; row < rows.count(); ++row) {
                double mx = -kInf;
                for (std::int64_t j = 0; j < rows.n; ++j)
                  mx = std::max(mx, v[static_cast<std::size_t>(rows.at(row, j))]);
                mpfr_set_d(m, mx, MPFR_RNDN);  // exact
                mpfr_set_zero(sum, 1);
                for (std::int64_t j = 0; j < rows.n; ++j) {
                  const double x = v[static_cast<std::size_t>(rows.at(row, j))];
                  if (x == -kInf) continue;
                  mpfr_set_d(t, x, MPFR_RNDN);
                  mpfr_sub(t, t, m, MPFR_RNDN);
                  mpfr_exp(t, t, MPFR_RNDN);
                  mpfr_add(sum, sum, t, MPFR_RNDN);
                }
                for (std::int64_t j = 0; j < rows.n; ++j) {
                  const auto k = static_cast<std::size_t>(rows.at(row, j));
                  if (v[k] == -kInf) {
                    QVERIFY2(y[k] == (log ? -kInf : 0.0) && r[k] == 0.0, where.c_str());
                    continue;
                  }
                  mpfr_set_d(t, v[k], MPFR_RNDN);
                  mpfr_sub(t, t, m, MPFR_RNDN);
                  if (log) {
                    mpfr_log(exact, sum, MPFR_RNDN);
                    mpfr_sub(exact, t, exact, MPFR_RNDN);
                  } else {
                    mpfr_exp(exact, t, MPFR_RNDN);
                    mpfr_div(exact, exact, sum, MPFR_RNDN);
                  }
                  mpfr_set_d(err, y[k], MPFR_RNDN);
                  mpfr_sub(err, err, exact, MPFR_RNDN);
                  mpfr_abs(err, err, MPFR_RNDN);
                  QVERIFY2(mpfr_cmp_d(err, r[k]) <= 0,
                           qPrintable(QStringLiteral("%1 element %2: point %3 is %4 off, bound %5")
                                          .arg(where.c_str())
                                          .arg(k)
                                          .arg(y[k], 0, 'g', 17)
                                          .arg(mpfr_get_d(err, MPFR_RNDU))
                                          .arg(r[k])));
                  if (r[k] > 0) worst = std::max(worst, mpfr_get_d(err, MPFR_RNDU) / r[k]);
                  ++elements;
                }
              }
            }
      qInfo("%s: %d elements, the largest error is %.3g of the bound", op.c_str(), elements, worst);
      QVERIFY(worst > 1e-3);  // the bound is not vacuous: some element comes near it
    }
  }
  void softmaxBackwardData() {
    const auto m = backwardData("aten._softmax_backward_data.default", false);
    checkAllFormats("_softmax_backward_data", m);
    checkVjpCases("_softmax_backward_data", moderate(m));
  }
  void logSoftmaxBackwardData() {
    const auto m = backwardData("aten._log_softmax_backward_data.default", true);
    checkAllFormats("_log_softmax_backward_data", m);
    checkVjpCases("_log_softmax_backward_data", moderate(m));
  }
  /// A shared offset of 1e4 on wide intervals must cancel: the width of softmax(x + c) stays
  /// that of softmax(x) (a naive interval exp(x)/Σexp(x) would multiply it by e^{2w}).
  void sharedShiftCancels() {
    std::mt19937_64 rng(5);
    const OpRule* rule = opRegistry().find("aten._softmax.default");
    QVERIFY(rule);
    auto widthAt = [&](double offset) {
      std::vector<double> lo, hi;
      for (int j = 0; j < 32; ++j) {
        const double v = offset + 0.25 * j;
        lo.push_back(v - 0.01);
        hi.push_back(v + 0.01);
      }
      Node node;
      node.name = "n";
      node.op = "aten._softmax.default";
      node.args = {ref("x"), integer(0), flag(false)};
      node.outputs = {TensorSpec{{32}, DType::Float64}};
      const Tensor x = Tensor::interval({32}, DType::Float64, lo, hi);
      const OpArgs args(node, [&](const ValueRef&) -> const Tensor& { return x; });
      const PrecisionModel pm;
      auto backend = createCpuBackend();
      OpContext ctx{pm, *backend, &rng};
      const Tensor y = rule->interval(args, ctx)[0];
      double w = 0;
      for (int j = 0; j < 32; ++j) w = std::max(w, (y.at(j).hi - y.at(j).lo) / y.at(j).hi);
      return w;
    };
    const double w0 = widthAt(0.0), w1 = widthAt(1e4);
    qInfo("softmax relative width, offset 0: %.3g, offset 1e4: %.3g", w0, w1);
    QVERIFY(w0 < 0.09);  // 2·(0.01 + 0.01)·... : two input radii of 0.01 each, ~4%
    QVERIFY(w1 < 1.001 * w0 + 1e-12);
  }
};

QTEST_GUILESS_MAIN(TestSoftmaxOps)
#include "test_softmax_ops.moc"
