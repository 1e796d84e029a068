// Softmax op rules (_softmax _log_softmax _softmax_backward_data _log_softmax_backward_data):
// per op and precision, 1,000 random cases (random rank and dim, rows of 0..64 elements,
// logits with a large shared offset to test that the shift cancels, wide dynamic ranges, point
// and interval inputs), zero escapes, local errors, vjp against finite differences; plus the
// sample-relevant composition log_softmax → nll_loss_forward (mean, ignore_index = −100), and
// that the rule hands contiguous rows to Backend::softmaxRows when a backend offers it.
#include "core/backend.h"
#include "core/kernels/softmax_row.h"
#include "core/ops/nn_support.h"
#include "core/ops/registry.h"
#include "tests/core/interval/mpfr_real.h"
#include "tests/core/ops/nn_test_util.h"
#include "tests/core/ops/rule_call.h"

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>

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
            QVERIFY2(p <= term->bound, where.c_str());
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
  /// The log-softmax adjoint term encloses only the entries with a nonzero adjoint
  /// (kernels::softmaxRow's `needed` flags): its first-order bound must be exactly Σ|g|·r with r
  /// the full localError, for contiguous and strided rows, one-hot and sparse adjoints, masked
  /// entries included.
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
          const Tensor local = call.localError().at(0);
          const auto r = local.hi();
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
