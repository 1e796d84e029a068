// The CUDA backend against the CPU backend, op by op (the faiss pattern: the CPU implementation is
// the oracle, tolerances are named). Needs a CUDA device: without one every test is skipped with
// "no CUDA device: <reason>".

#include "core/analysis/run_file_replay.h"
#include "core/analysis/step_replay.h"
#include "core/backend.h"
#include "core/interval/interval.h"
#include "core/interval/precision.h"
#include "core/kernels/kernel_bodies.h"
#include "core/kernels/layer_norm_row.h"
#include "core/kernels/softmax_row.h"
#include "core/ops/error_bounds.h"
#include "core/ops/formats.h"
#include "core/ops/libm_model.h"
#include "core/ops/random_arith.h"
#include "core/ops/registry.h"
#include "gpu/cuda_backend.h"
#include "gpu/cuda_device.h"
#include "tests/gpu/host_interval_matmul.h"
#include "tests/gpu/softmax_test_rows.h"

#include <QTest>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

using lossbound::Format;
using lossbound::Interval;
using lossbound::kernels::BinaryOp;
using lossbound::kernels::ConstIntervalSpan;
using lossbound::kernels::ElementwiseModel;
using lossbound::kernels::IntervalSpan;
using lossbound::kernels::UnaryOp;
using lossbound::kernels::test::HostIntervals;
namespace ops = lossbound::ops;

namespace {

/// A GPU enclosure may be at most this much wider than the CPU's on the same inputs. The device
/// libm margins of core/interval/elementary.h differ from glibc's by up to 1 ulp of 2-3 (erf:
/// 3 vs 2 ulps), and reductions/GEMMs run in other orders; 1.5 covers both with room.
constexpr double kGpuWidthFactor = 1.5;
/// Two round-to-nearest GEMMs of the same operands differ by at most 2·γ_k·|A||B| + 2kη.
constexpr double kGemmGammaFactor = 2.0;

bool sameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

QString show(Interval x) {
  char buf[96];  // hex floats: exact bits (QString::asprintf has no %a)
  std::snprintf(buf, sizeof buf, "[%a, %a]", x.lo, x.hi);
  return QString::fromLatin1(buf);
}

std::vector<double> randomMatrix(std::mt19937_64& rng, std::int64_t count) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> v(static_cast<std::size_t>(count));
  for (double& x : v) x = normal(rng) * std::ldexp(1.0, static_cast<int>(rng() % 9) - 4);
  return v;
}

HostIntervals randomIntervals(std::mt19937_64& rng, std::int64_t count, double relWidth) {
  HostIntervals x;
  x.lo = randomMatrix(rng, count);
  x.hi = x.lo;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (std::size_t i = 0; i < x.lo.size(); ++i) {
    const double w = std::fabs(x.lo[i]) * relWidth * unit(rng);
    x.lo[i] -= w;
    x.hi[i] += w;
  }
  return x;
}

}  // namespace

class TestCudaBackend : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void gemmAgreesWithCpu();
  void absoluteGemmAgreesWithCpu();
  void elementwiseAgreesWithCpu();
  void intervalMatmulAgreesWithCpuAndEncloses();
  void rowSumAgreesWithCpuAndEncloses();
  void rowMaxIsBitIdentical();
  void softmaxRowsAgreeWithHostAndEnclose();
  void layerNormRowsIsBitIdentical();
  void wholeSampleReplayAgreesWithCpu();
  void errorsNameTheCall();

 private:
  std::unique_ptr<lossbound::Backend> mCpu;
  std::unique_ptr<lossbound::Backend> mGpuOwner;
  lossbound::gpu::CudaBackend* mGpu = nullptr;
};

void TestCudaBackend::initTestCase() {
  QString reason;
  mGpuOwner = lossbound::gpu::createCudaBackend(&reason);
  if (!mGpuOwner) QSKIP(qPrintable(reason));  // reason starts with "no CUDA device: "
  mGpu = dynamic_cast<lossbound::gpu::CudaBackend*>(mGpuOwner.get());
  QVERIFY(mGpu);
  qInfo("device: %s", mGpu->name().c_str());
  try {
    mCpu = lossbound::createCpuBackend();
  } catch (const std::exception& e) {
    QSKIP(qPrintable(QStringLiteral("no CPU backend to compare with: %1").arg(e.what())));
  }
}

void TestCudaBackend::gemmAgreesWithCpu() {
  std::mt19937_64 rng(1);
  for (auto [m, k, n] : {std::array<std::int64_t, 3>{1, 1, 1},
                         {7, 13, 5},
                         {64, 300, 33},
                         {129, 1024, 65},
                         {3, 0, 4}}) {
    const auto a = randomMatrix(rng, m * k), b = randomMatrix(rng, k * n);
    std::vector<double> cg(static_cast<std::size_t>(m * n), -1.0), cc(cg.size(), -2.0),
        p(cg.size());
    mGpu->gemm(a.data(), b.data(), cg.data(), m, k, n);
    mCpu->gemm(a.data(), b.data(), cc.data(), m, k, n);
    mCpu->gemm(a.data(), b.data(), p.data(), m, k, n, /*absolute=*/true);
    const double g = lossbound::kernels::gammaUp(static_cast<double>(k), 0x1p-53);
    for (std::size_t i = 0; i < cg.size(); ++i) {
      const double tol = kGemmGammaFactor * g * p[i] * (1.0 + 1e-12) + 2.0 * k * 0x1p-1074;
      QVERIFY2(std::fabs(cg[i] - cc[i]) <= tol,
               qPrintable(QStringLiteral("m %1 k %2 n %3 [%4]: gpu %5 cpu %6 tol %7")
                              .arg(m)
                              .arg(k)
                              .arg(n)
                              .arg(i)
                              .arg(cg[i], 0, 'g', 17)
                              .arg(cc[i], 0, 'g', 17)
                              .arg(tol)));
    }
  }
}

void TestCudaBackend::absoluteGemmAgreesWithCpu() {
  std::mt19937_64 rng(2);
  const std::int64_t m = 31, k = 257, n = 17;
  const auto a = randomMatrix(rng, m * k), b = randomMatrix(rng, k * n);
  std::vector<double> cg(static_cast<std::size_t>(m * n)), cc(cg.size());
  mGpu->gemm(a.data(), b.data(), cg.data(), m, k, n, true);
  mCpu->gemm(a.data(), b.data(), cc.data(), m, k, n, true);
  const double g = lossbound::kernels::gammaUp(static_cast<double>(k), 0x1p-53);
  for (std::size_t i = 0; i < cg.size(); ++i) {
    QVERIFY(cg[i] >= 0.0);
    QVERIFY(std::fabs(cg[i] - cc[i]) <= kGemmGammaFactor * g * cc[i] * (1.0 + 1e-12));
  }
}

void TestCudaBackend::elementwiseAgreesWithCpu() {
  // Host side: the same bodies with the emulated rounding table (the CPU path, checked bit for
  // bit in gpu/kernel_bodies). Correctly rounded ops must be bit-identical on the device (the
  // directed-rounding intrinsics are IEEE operations); libm-based ones must contain the host
  // libm value of point inputs and be no wider than kGpuWidthFactor times the host enclosure.
  std::mt19937_64 rng(3);
  const std::int64_t n = 50'000;
  HostIntervals x = randomIntervals(rng, n, 1e-6), y = randomIntervals(rng, n, 1e-3);
  for (std::int64_t i = 0; i < n; i += 3)
    x.hi[static_cast<std::size_t>(i)] = x.lo[static_cast<std::size_t>(i)];
  std::vector<double> lo(static_cast<std::size_t>(n)), hi(lo.size());
  const std::pair<Format, Format> formats[] = {
      {Format::Fp64, Format::Fp64}, {Format::Fp32, Format::Fp32}, {Format::Fp32, Format::Bf16}};
  for (const auto& [compute, store] : formats) {
    for (int o = 0; o < lossbound::kernels::kBinaryOpCount; ++o) {
      const auto op = static_cast<BinaryOp>(o);
      // The activations' backward ops that call libm functions: the device libm's enclosures
      // differ from the host's (contained, within kGpuWidthFactor, as for the unary ops below).
      const bool libm = op == BinaryOp::GeluBackward || op == BinaryOp::GeluTanhBackward ||
                        op == BinaryOp::SiluBackward;
      ElementwiseModel model{compute, store, libm ? 3 : 0};
      model.expUlps = model.ulps;
      // y of n elements, then a y that repeats every 250 elements (broadcast over leading dims).
      for (const std::int64_t yCount : {n, std::int64_t{250}}) {
        mGpu->binary(op, model, {x.lo.data(), x.hi.data()}, {y.lo.data(), y.hi.data()}, yCount,
                     {lo.data(), hi.data()}, n);
        for (std::size_t i = 0; i < lo.size(); ++i) {
          const std::size_t j = i % static_cast<std::size_t>(yCount);
          const Interval h =
              lossbound::kernels::binaryBody(op, {x.lo[i], x.hi[i]}, {y.lo[j], y.hi[j]}, model);
          if (libm) {
            const Interval g{lo[i], hi[i]};
            QVERIFY2(!lossbound::isEmpty(lossbound::intersect(g, h)) &&
                         lossbound::width(g) <= kGpuWidthFactor * lossbound::width(h) + 1e-300,
                     qPrintable(QStringLiteral("binary op %1 [%2]: gpu %3 host %4")
                                    .arg(o)
                                    .arg(i)
                                    .arg(show(g), show(h))));
            continue;
          }
          QVERIFY2(sameBits(h.lo, lo[i]) && sameBits(h.hi, hi[i]),
                   qPrintable(QStringLiteral("binary op %1 [%2], y of %3: gpu %4 host %5")
                                  .arg(o)
                                  .arg(i)
                                  .arg(yCount)
                                  .arg(show({lo[i], hi[i]}), show(h))));
        }
      }
    }
    for (int o = 0; o < lossbound::kernels::kUnaryOpCount; ++o) {
      const auto op = static_cast<UnaryOp>(o);
      const bool libm = (op >= UnaryOp::Exp && op <= UnaryOp::Sigmoid) ||
                        (op >= UnaryOp::GeluErf && op <= UnaryOp::GeluTanh);
      const bool rsqrt = op == UnaryOp::Rsqrt;
      const ElementwiseModel model{compute, store, (libm || rsqrt) ? 3 : 0};
      mGpu->unary(op, model, {x.lo.data(), x.hi.data()}, {lo.data(), hi.data()}, n);
      for (std::size_t i = 0; i < lo.size(); ++i) {
        const Interval h = lossbound::kernels::unaryBody(op, {x.lo[i], x.hi[i]}, model);
        const Interval g{lo[i], hi[i]};
        if (!libm) {
          QVERIFY2(sameBits(h.lo, g.lo) && sameBits(h.hi, g.hi),
                   qPrintable(QStringLiteral("unary op %1 [%2]: gpu %3 host %4")
                                  .arg(o)
                                  .arg(i)
                                  .arg(show(g), show(h))));
          continue;
        }
        QVERIFY2(lossbound::isEmpty(h) == lossbound::isEmpty(g), qPrintable(QString::number(o)));
        if (lossbound::isEmpty(h)) continue;
        QVERIFY2(!lossbound::isEmpty(lossbound::intersect(g, h)) &&
                     lossbound::width(g) <= kGpuWidthFactor * lossbound::width(h) + 1e-300,
                 qPrintable(QStringLiteral("unary op %1 [%2]: gpu %3 host %4")
                                .arg(o)
                                .arg(i)
                                .arg(show(g), show(h))));
        if (x.lo[i] == x.hi[i]) {  // point input: the host libm value must be inside
          const Interval ref = lossbound::kernels::unaryBody(
              op, {x.lo[i], x.lo[i]}, ElementwiseModel{Format::Fp64, Format::Fp64, 0});
          const double v = 0.5 * ref.lo + 0.5 * ref.hi;
          QVERIFY2(lossbound::contains(g, v),
                   qPrintable(QStringLiteral("unary op %1 at %2: gpu %3 misses %4")
                                  .arg(o)
                                  .arg(x.lo[i], 0, 'g', 17)
                                  .arg(show(g))
                                  .arg(v, 0, 'g', 17)));
        }
      }
    }
  }
  // Broadcast of a scalar right operand.
  const double two = 2.0;
  mGpu->binary(BinaryOp::Mul, {}, {x.lo.data(), x.hi.data()}, {&two, &two}, 1,
               {lo.data(), hi.data()}, n);
  for (std::size_t i = 0; i < lo.size(); ++i) QCOMPARE(lo[i], 2.0 * x.lo[i]);
}

void TestCudaBackend::intervalMatmulAgreesWithCpuAndEncloses() {
  std::mt19937_64 rng(4);
  const auto cpuGemm = [this](const double* a, const double* b, double* c, std::int64_t m,
                              std::int64_t k, std::int64_t n) { mCpu->gemm(a, b, c, m, k, n); };
  struct Case {
    Format input, acc, store;
    double relWidth;
  };
  for (const Case cs : {Case{Format::Fp64, Format::Fp64, Format::Fp64, 0.0},
                        Case{Format::Fp32, Format::Fp32, Format::Fp32, 1e-5},
                        Case{Format::Tf32, Format::Fp32, Format::Fp32, 0.0},
                        Case{Format::Bf16, Format::Fp32, Format::Bf16, 1e-3}})
    for (auto [m, k, n] : {std::array<std::int64_t, 3>{5, 37, 3}, {96, 512, 80}}) {
      const HostIntervals a = randomIntervals(rng, m * k, cs.relWidth),
                          b = randomIntervals(rng, k * n, cs.relWidth);
      const lossbound::gpu::MatmulModel model{cs.input, cs.acc, lossbound::unitRoundoff(cs.acc),
                                              cs.store};
      HostIntervals g{std::vector<double>(static_cast<std::size_t>(m * n)),
                      std::vector<double>(static_cast<std::size_t>(m * n))};
      mGpu->intervalMatmul({a.lo.data(), a.hi.data()}, {b.lo.data(), b.hi.data()},
                           {g.lo.data(), g.hi.data()}, m, k, n, model);
      const HostIntervals c = lossbound::kernels::test::hostIntervalMatmul(
          a, b, m, k, n, cs.input, cs.acc, model.accumulationRoundoff, cs.store, cpuGemm);
      std::vector<double> row(static_cast<std::size_t>(k)), col(row.size()), scratch;
      std::uniform_real_distribution<double> unit(0.0, 1.0);
      for (std::size_t e = 0; e < g.lo.size(); ++e) {
        const Interval gi{g.lo[e], g.hi[e]}, ci{c.lo[e], c.hi[e]};
        QVERIFY2(lossbound::width(gi) <= kGpuWidthFactor * lossbound::width(ci) &&
                     lossbound::width(ci) <= kGpuWidthFactor * lossbound::width(gi),
                 qPrintable(QStringLiteral("[%1]: gpu %2 cpu %3").arg(e).arg(show(gi), show(ci))));
        // A randomized candidate execution must lie in both enclosures.
        const std::int64_t i = static_cast<std::int64_t>(e) / n,
                           j = static_cast<std::int64_t>(e) % n;
        for (std::int64_t l = 0; l < k; ++l) {
          const auto ai = static_cast<std::size_t>(i * k + l),
                     bi = static_cast<std::size_t>(l * n + j);
          row[static_cast<std::size_t>(l)] =
              ops::roundNearest(a.lo[ai] + (a.hi[ai] - a.lo[ai]) * unit(rng), cs.input);
          col[static_cast<std::size_t>(l)] =
              ops::roundNearest(b.lo[bi] + (b.hi[bi] - b.lo[bi]) * unit(rng), cs.input);
        }
        const double v =
            ops::roundNearest(ops::randomDot(row, col, cs.acc, rng, scratch), cs.store);
        QVERIFY2(lossbound::contains(gi, v) && lossbound::contains(ci, v),
                 qPrintable(QStringLiteral("[%1]: candidate %2, gpu %3 cpu %4")
                                .arg(e)
                                .arg(v, 0, 'g', 17)
                                .arg(show(gi), show(ci))));
      }
    }
}

void TestCudaBackend::rowSumAgreesWithCpuAndEncloses() {
  std::mt19937_64 rng(5);
  for (auto [rows, cols] : {std::array<std::int64_t, 2>{1, 1}, {7, 1000}, {300, 4097}}) {
    const HostIntervals x = randomIntervals(rng, rows * cols, 1e-6);
    std::vector<double> lo(static_cast<std::size_t>(rows)), hi(lo.size());
    const lossbound::kernels::SumModel model{Format::Fp32, Format::Fp32, false};
    mGpu->rowSum({x.lo.data(), x.hi.data()}, {lo.data(), hi.data()}, rows, cols, model);
    for (std::int64_t r = 0; r < rows; ++r) {
      ops::SumEnclosure s{{0.0, 0.0}, 0.0};
      std::vector<double> terms;
      for (std::int64_t j = 0; j < cols; ++j) {
        const auto e = static_cast<std::size_t>(r * cols + j);
        ops::accumulate(s, {x.lo[e], x.hi[e]});
        terms.push_back(ops::roundNearest(x.hi[e], Format::Fp32));
      }
      const Interval cpu = ops::roundedSumEnclosure(s, cols, Format::Fp32, Format::Fp32);
      const Interval gpu{lo[static_cast<std::size_t>(r)], hi[static_cast<std::size_t>(r)]};
      const double v = ops::randomSum(terms, Format::Fp32, rng);
      QVERIFY2(lossbound::contains(gpu, v) && lossbound::contains(cpu, v),
               qPrintable(QStringLiteral("row %1: sum %2, gpu %3 cpu %4")
                              .arg(r)
                              .arg(v, 0, 'g', 17)
                              .arg(show(gpu), show(cpu))));
      QVERIFY(lossbound::width(gpu) <= kGpuWidthFactor * lossbound::width(cpu) + 1e-300);
    }
  }
}

void TestCudaBackend::rowMaxIsBitIdentical() {
  std::mt19937_64 rng(6);
  const std::int64_t rows = 50, cols = 777;
  const HostIntervals x = randomIntervals(rng, rows * cols, 1e-3);
  std::vector<double> lo(static_cast<std::size_t>(rows)), hi(lo.size());
  mGpu->rowMax({x.lo.data(), x.hi.data()}, {lo.data(), hi.data()}, rows, cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto b = x.lo.begin() + r * cols;
    QCOMPARE(lo[static_cast<std::size_t>(r)], *std::max_element(b, b + cols));
    const auto bh = x.hi.begin() + r * cols;
    QCOMPARE(hi[static_cast<std::size_t>(r)], *std::max_element(bh, bh + cols));
  }
}

void TestCudaBackend::softmaxRowsAgreeWithHostAndEnclose() {
  // The device runs the host's row body (core/kernels/softmax_row.h), but its exp/log bounds come
  // from CUDA's libm (core/interval/elementary.h), so, as for the libm unary ops above: masked and
  // unbounded entries must be bit-identical (they depend on comparisons only); other entries must
  // intersect the host enclosure, be at most kGpuWidthFactor times as wide plus one storage ulp
  // per endpoint (an endpoint moved by the libm can cross a grid point of the storage format),
  // and contain the randomized executions of the registered CPU rule (aten._softmax /
  // aten._log_softmax, random domain) on points inside the inputs. The rule itself, run with this
  // backend, must return the hook's bits for contiguous rows.
  namespace k = lossbound::kernels;
  using lossbound::DType;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (const char* op : {"aten._softmax.default", "aten._log_softmax.default"}) {
    const lossbound::OpRule* rule = lossbound::opRegistry().find(op);
    QVERIFY2(rule, op);
    const bool log = std::string(op) == "aten._log_softmax.default";
    for (DType t : {DType::Float64, DType::Float32, DType::BFloat16, DType::Float16})
      for (std::int64_t cols : {1, 2, 7, 100, 5000}) {
        const std::int64_t rows = 3 * k::test::kSoftmaxRowKinds;
        const HostIntervals x = k::test::randomSoftmaxRows(rng, rows, cols);
        const lossbound::PrecisionModel pm;
        const Format c = ops::accumulationFormat(pm, t), st = pm.storageFor(t);
        const k::SoftmaxModel model = k::makeSoftmaxModel(
            c, st, false, ops::modelUlps(ops::LibmFn::Exp, c), ops::modelUlps(ops::LibmFn::Log, c));
        const HostIntervals h = k::test::hostSoftmaxRows(model, log, x, rows, cols);
        HostIntervals g{std::vector<double>(x.lo.size()), std::vector<double>(x.lo.size())};
        QVERIFY(mGpu->softmaxRows(model, log, {x.lo.data(), x.hi.data()},
                                  {g.lo.data(), g.hi.data()}, rows, cols));
        // The rule on this backend: a [rows, cols] tensor, dim -1 (contiguous rows: the hook).
        lossbound::Node node;
        node.name = "node0";
        node.op = op;
        lossbound::IrValue ref, dim, halfToFloat;
        ref.kind = lossbound::IrValue::Kind::Ref;
        ref.ref.name = "x";
        dim.kind = lossbound::IrValue::Kind::Int;
        dim.intValue = -1;
        halfToFloat.kind = lossbound::IrValue::Kind::Bool;
        node.args = {ref, dim, halfToFloat};
        node.outputs.push_back({lossbound::Shape{rows, cols}, t});
        const lossbound::Tensor in = lossbound::Tensor::interval({rows, cols}, t, x.lo, x.hi);
        const auto lookup = [&](const lossbound::ValueRef&) -> const lossbound::Tensor& {
          return in;
        };
        const lossbound::OpArgs args(node, lookup);
        lossbound::OpContext gpuCtx{pm, *mGpu, nullptr};
        const lossbound::Tensor viaRule = rule->interval(args, gpuCtx).at(0);
        // Randomized executions of the candidate on points inside the inputs (CPU random rule).
        std::vector<lossbound::Tensor> runs;
        lossbound::OpContext randomCtx{pm, *mCpu, &rng};
        for (int run = 0; run < 8; ++run) {
          std::vector<double> v(x.lo.size());
          for (std::size_t e = 0; e < v.size(); ++e) {
            const double lo = x.lo[e], hi = x.hi[e];
            v[e] = !std::isfinite(hi) ? lo : std::clamp(lo + (hi - lo) * unit(rng), lo, hi);
          }
          const lossbound::Tensor p = lossbound::Tensor::point({rows, cols}, t, v);
          const auto lookupPoint = [&](const lossbound::ValueRef&) -> const lossbound::Tensor& {
            return p;
          };
          const lossbound::OpArgs pargs(node, lookupPoint);
          runs.push_back(rule->random(pargs, randomCtx).at(0));
        }
        for (std::size_t e = 0; e < g.lo.size(); ++e) {
          const Interval gi{g.lo[e], g.hi[e]}, ho{h.lo[e], h.hi[e]};
          const auto where = [&] {
            return QStringLiteral("%1 dtype %2 cols %3 row %4 entry %5 x [%6, %7]: gpu %8 host %9")
                .arg(op)
                .arg(static_cast<int>(t))
                .arg(cols)
                .arg(static_cast<std::int64_t>(e) / cols)
                .arg(static_cast<std::int64_t>(e) % cols)
                .arg(x.lo[e], 0, 'g', 17)
                .arg(x.hi[e], 0, 'g', 17)
                .arg(show(gi), show(ho));
          };
          const Interval ri = viaRule.at(static_cast<std::int64_t>(e));
          if (!sameBits(ri.lo, gi.lo) || !sameBits(ri.hi, gi.hi))
            QFAIL(qPrintable(where() + QStringLiteral(", rule on this backend %1").arg(show(ri))));
          const std::int64_t row = static_cast<std::int64_t>(e) / cols;
          const std::int64_t kind = row % k::test::kSoftmaxRowKinds;
          const bool masked = x.lo[e] == -HUGE_VAL && x.hi[e] == -HUGE_VAL;
          if (masked || kind == 5 || kind == 6) {  // masked entries, all-masked and unbounded rows
            if (!sameBits(gi.lo, ho.lo) || !sameBits(gi.hi, ho.hi)) QFAIL(qPrintable(where()));
            continue;
          }
          const double ulpS =
              2.0 * lossbound::unitRoundoff(st) * std::fmax(std::fabs(ho.lo), std::fabs(ho.hi)) +
              lossbound::smallestSubnormal(st);
          if (lossbound::isEmpty(lossbound::intersect(gi, ho)) ||
              !(lossbound::width(gi) <= kGpuWidthFactor * lossbound::width(ho) + 2.0 * ulpS))
            QFAIL(qPrintable(where()));
          for (const lossbound::Tensor& y : runs) {
            const double v = y.values()[e];
            if (!std::isnan(v) && !lossbound::contains(gi, v))
              QFAIL(qPrintable(QStringLiteral("%1: candidate %2").arg(where()).arg(v, 0, 'g', 17)));
          }
        }
      }
  }
}

void TestCudaBackend::layerNormRowsIsBitIdentical() {
  // The row body uses only correctly rounded operations (directed +, −, ×, ÷, sqrt, outward
  // rounding to formats; the candidate's rsqrt is a widening of the exact value, no device libm),
  // so the device must give the host body's bits for out, mean and rstd.
  using lossbound::kernels::LayerNormModel;
  std::mt19937_64 rng(7);
  const LayerNormModel models[] = {
      {Format::Fp64, Format::Fp64, Format::Fp64, Format::Fp64, 1e-5, 2},
      {Format::Fp32, Format::Fp32, Format::Fp32, Format::Fp32, 1e-5, 3},
      {Format::Fp32, Format::Bf16, Format::Bf16, Format::Bf16, 1e-6, 3},
      {Format::Fp32, Format::Fp16, Format::Fp32, Format::Fp32, 0.0, 3}};
  for (const LayerNormModel& m : models)
    for (auto [rows, cols] :
         {std::array<std::int64_t, 2>{1, 1}, {3, 0}, {300, 7}, {1000, 768}, {5, 4096}})
      for (int wb = 0; wb < 4; ++wb) {
        HostIntervals x = randomIntervals(rng, rows * cols, wb % 2 ? 1e-3 : 0.0);
        if (rows * cols > 8) {  // a constant row and a row with an infinite endpoint
          std::fill(x.lo.begin(), x.lo.begin() + cols, 0.25);
          std::fill(x.hi.begin(), x.hi.begin() + cols, 0.25);
          x.hi[static_cast<std::size_t>(cols + cols / 2)] = HUGE_VAL;
        }
        const HostIntervals w = randomIntervals(rng, cols, 1e-2),
                            b = randomIntervals(rng, cols, 0.0);
        const ConstIntervalSpan ws =
            wb & 1 ? ConstIntervalSpan{w.lo.data(), w.hi.data()} : ConstIntervalSpan{};
        const ConstIntervalSpan bs =
            wb & 2 ? ConstIntervalSpan{b.lo.data(), b.hi.data()} : ConstIntervalSpan{};
        std::vector<double> olo(static_cast<std::size_t>(rows * cols)), ohi(olo.size()),
            mlo(static_cast<std::size_t>(rows)), mhi(mlo.size()), rlo(mlo.size()), rhi(mlo.size());
        QVERIFY(mGpu->layerNormRows(m, {x.lo.data(), x.hi.data()}, ws, bs, {olo.data(), ohi.data()},
                                    {mlo.data(), mhi.data()}, {rlo.data(), rhi.data()}, rows,
                                    cols));
        std::vector<double> ylo(static_cast<std::size_t>(cols)), yhi(ylo.size());
        for (std::int64_t r = 0; r < rows; ++r) {
          const auto o = static_cast<std::size_t>(r * cols), ri = static_cast<std::size_t>(r);
          Interval mean{}, rstd{};
          lossbound::kernels::layerNormRow(x.lo.data() + o, x.hi.data() + o, cols, ws.lo, ws.hi,
                                           bs.lo, bs.hi, m, ylo.data(), yhi.data(), &mean, &rstd);
          const QString where =
              QStringLiteral("rows %1 cols %2 wb %3 row %4").arg(rows).arg(cols).arg(wb).arg(r);
          QVERIFY2(sameBits(mean.lo, mlo[ri]) && sameBits(mean.hi, mhi[ri]),
                   qPrintable(where + QStringLiteral(" mean: gpu %1 host %2")
                                          .arg(show({mlo[ri], mhi[ri]}), show(mean))));
          QVERIFY2(sameBits(rstd.lo, rlo[ri]) && sameBits(rstd.hi, rhi[ri]),
                   qPrintable(where + QStringLiteral(" rstd: gpu %1 host %2")
                                          .arg(show({rlo[ri], rhi[ri]}), show(rstd))));
          for (std::size_t j = 0; j < ylo.size(); ++j)
            QVERIFY2(sameBits(ylo[j], olo[o + j]) && sameBits(yhi[j], ohi[o + j]),
                     qPrintable(where +
                                QStringLiteral(" out[%1]: gpu %2 host %3")
                                    .arg(j)
                                    .arg(show({olo[o + j], ohi[o + j]}), show({ylo[j], yhi[j]}))));
        }
      }
}

void TestCudaBackend::wholeSampleReplayAgreesWithCpu() {
  // The replay of each sample's candidate program on the reference state at its first and last
  // step, with the CUDA backend as the Backend (GEMMs on cuBLAS; elementwise ops, row sums and
  // the other offered kernels on the device) and with the CPU backend: both rigorous envelopes
  // must contain the CPU's randomized executions (ensemble), and their widths must agree within
  // kGpuWidthFactor.
  using namespace lossbound;
  for (const char* sample : {"gradaccum-fixed", "gradaccum-hf-bug", "kernel-path"}) {
    const std::string dir = std::string(LOSSBOUND_SOURCE_DIR) + "/samples/" + sample + "/";
    const auto reference = RunFileReplay::open(dir + "reference.h5");
    const auto candidate = RunFileReplay::open(dir + "candidate.h5");
    for (std::int64_t step : {std::int64_t{0}, std::int64_t{49}}) {
      const auto program = candidate->programAt(step);
      const TensorMap inputs = adaptInputs(*program, reference->inputsAt(step), nullptr);
      ReplayOptions o;
      o.method = EnvelopeMethod::Ensemble;
      o.ensembleSize = 64;
      o.ensembleOrder = EnsembleOrder::PerElement;  // the soundness oracle: the widest exploration
      const Envelope observed = replayEnvelope(*program, inputs, *mCpu, o);
      for (EnvelopeMethod m : {EnvelopeMethod::Interval, EnvelopeMethod::FirstOrder}) {
        o.method = m;
        const Envelope cpu = replayEnvelope(*program, inputs, *mCpu, o);
        const Envelope gpu = replayEnvelope(*program, inputs, *mGpu, o);
        const QString where = QStringLiteral(
                                  "%1 step %2, method %3: observed [%4, %5], "
                                  "cpu [%6, %7], gpu [%8, %9]")
                                  .arg(sample)
                                  .arg(step)
                                  .arg(static_cast<int>(m))
                                  .arg(observed.lo, 0, 'g', 17)
                                  .arg(observed.hi, 0, 'g', 17)
                                  .arg(cpu.lo, 0, 'g', 17)
                                  .arg(cpu.hi, 0, 'g', 17)
                                  .arg(gpu.lo, 0, 'g', 17)
                                  .arg(gpu.hi, 0, 'g', 17);
        QVERIFY2(cpu.lo <= observed.lo && observed.hi <= cpu.hi, qPrintable(where));
        QVERIFY2(gpu.lo <= observed.lo && observed.hi <= gpu.hi, qPrintable(where));
        QVERIFY2(gpu.hi - gpu.lo <= kGpuWidthFactor * (cpu.hi - cpu.lo) &&
                     cpu.hi - cpu.lo <= kGpuWidthFactor * (gpu.hi - gpu.lo),
                 qPrintable(where));
      }
    }
  }
}

void TestCudaBackend::errorsNameTheCall() {
  // A size beyond cuBLAS's int range must be refused with a message naming the dimension.
  std::vector<double> a(1), b(1), c(1);
  try {
    mGpu->gemm(a.data(), b.data(), c.data(), 1, std::int64_t{1} << 32, 1);
    QFAIL("gemm with k = 2^32 did not throw");
  } catch (const std::invalid_argument& e) {
    QVERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("k = 4294967296")), e.what());
  }
}

QTEST_GUILESS_MAIN(TestCudaBackend)
#include "test_cuda_backend.moc"
