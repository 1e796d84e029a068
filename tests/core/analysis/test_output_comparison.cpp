// Per-output envelopes and the overlap rule (core/analysis/output_comparison.h) on programs built
// to differ in one known output: the candidate computes "a" with other ops (the same function),
// "grad" through a backward op (the same function), and "b" with another constant (a bug in that
// output only). Every method must flag "b" and only "b", and rank it first.
#include "core/analysis/output_comparison.h"
#include "core/backend.h"
#include "core/ir/program_parser.h"

#include <QTest>

#include <cmath>
#include <cstdio>
#include <random>

using namespace lossbound;

namespace {

// Returns v with 17 significant digits (std::to_string keeps only 6 decimals).
std::string exact(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// x [6,8] @ w [8,5] = mm; a = 2·mm (reference: mul by 2; candidate: (mm + mm)·(1 + 2^-52), which
// differs from 2·mm by ~1e-16 relative in binary64); b = mm·bScale; t = tanh(mm);
// grad = tanh_backward(b, t) (the vjp of tanh seeded with b: the backward half);
// loss = sum(a) + sum(t) (candidate: sum(t) + sum(a), other rounding in binary64).
std::string programJson(bool candidate, double bScale) {
  const std::string a =
      candidate ? R"({"name":"a2","op":"aten.add.Tensor","args":[{"ref":"mm"},{"ref":"mm"}],
                    "kwargs":{},"outputs":[{"shape":[6,5],"dtype":"float32"}]},
                   {"name":"a","op":"aten.mul.Tensor","args":[{"ref":"a2"},)" +
                      exact(1.0 + 0x1p-52) + "],"
                : R"({"name":"a","op":"aten.mul.Tensor","args":[{"ref":"mm"},2.0],)";
  const std::string loss =
      candidate ? R"([{"ref":"st"},{"ref":"sa"}])" : R"([{"ref":"sa"},{"ref":"st"}])";
  return R"({"format":"lossbound-step-program","ir_version":1,"torch_version":"1.13.0",
    "inputs":[{"name":"param:w","shape":[8,5],"dtype":"float32"},
              {"name":"batch:x","shape":[6,8],"dtype":"float32"}],
    "nodes":[
      {"name":"mm","op":"aten.mm.default","args":[{"ref":"batch:x"},{"ref":"param:w"}],"kwargs":{},
       "outputs":[{"shape":[6,5],"dtype":"float32"}]},
      )" +
         a +
         R"("kwargs":{},"outputs":[{"shape":[6,5],"dtype":"float32"}]},
      {"name":"b","op":"aten.mul.Tensor","args":[{"ref":"mm"},)" +
         exact(bScale) + R"(],"kwargs":{},"outputs":[{"shape":[6,5],"dtype":"float32"}]},
      {"name":"t","op":"aten.tanh.default","args":[{"ref":"mm"}],"kwargs":{},
       "outputs":[{"shape":[6,5],"dtype":"float32"}]},
      {"name":"grad","op":"aten.tanh_backward.default","args":[{"ref":"b"},{"ref":"t"}],
       "kwargs":{},"outputs":[{"shape":[6,5],"dtype":"float32"}]},
      {"name":"sa","op":"aten.sum.default","args":[{"ref":"a"}],"kwargs":{},
       "outputs":[{"shape":[],"dtype":"float32"}]},
      {"name":"st","op":"aten.sum.default","args":[{"ref":"t"}],"kwargs":{},
       "outputs":[{"shape":[],"dtype":"float32"}]},
      {"name":"loss","op":"aten.add.Tensor","args":)" +
         loss + R"(,"kwargs":{},
       "outputs":[{"shape":[],"dtype":"float32"}]}],
    "outputs":[{"name":"loss","ref":{"ref":"loss","index":0}},
               {"name":"a","ref":{"ref":"a","index":0}},
               {"name":"b","ref":{"ref":"b","index":0}},
               {"name":"grad:t","ref":{"ref":"grad","index":0}}]})";
}

TensorMap inputs(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto fill = [&](std::size_t n) {
    std::vector<double> v(n);
    for (double& x : v) x = u(rng);  // fp32-representable
    return v;
  };
  TensorMap m;
  m.emplace("param:w", Tensor::point({8, 5}, DType::Float32, fill(40)));
  m.emplace("batch:x", Tensor::point({6, 8}, DType::Float32, fill(48)));
  return m;
}

const OutputComparison& find(const std::vector<OutputComparison>& v, const std::string& name) {
  for (const OutputComparison& c : v)
    if (c.name == name) return c;
  throw std::runtime_error("no output " + name);
}

}  // namespace

class TestOutputComparison : public QObject {
  Q_OBJECT

 private:
  std::vector<OutputComparison> compare(EnvelopeMethod method, double bScale) {
    const Program reference = parseProgram(programJson(false, 0.5));
    const Program candidate = parseProgram(programJson(true, bScale));
    auto backend = createCpuBackend();
    OutputComparisonOptions o;
    o.method = method;
    o.lambda = 5.39;
    o.ensembleSize = 8;
    const TensorMap in = inputs(7);
    return compareOutputs(candidate, in, reference, in, *backend, o);
  }

 private slots:
  // The overlap rule: the output with the other constant is disjoint, the same functions computed
  // with other ops are not; it is ranked first.
  void oneOutputDiffers_data() {
    QTest::addColumn<int>("method");
    QTest::newRow("interval") << int(EnvelopeMethod::Interval);
    QTest::newRow("first-order") << int(EnvelopeMethod::FirstOrder);
    QTest::newRow("probabilistic") << int(EnvelopeMethod::Probabilistic);
    QTest::newRow("ensemble") << int(EnvelopeMethod::Ensemble);
  }
  void oneOutputDiffers() {
    QFETCH(int, method);
    const auto m = EnvelopeMethod(method);
    // 0.5 vs 0.5·(1 + 1e-3): a 1e-3 relative bug in b, and (through tanh_backward) in grad:t.
    const std::vector<OutputComparison> out = compare(m, 0.5 * (1 + 1e-3));
    QCOMPARE(out.size(), std::size_t{4});
    QVERIFY(find(out, "b").disjoint);
    QVERIFY(find(out, "grad:t").disjoint);
    QVERIFY(!find(out, "a").disjoint);
    QVERIFY(!find(out, "loss").disjoint);
    QVERIFY(out[0].disjoint && out[1].disjoint);
    QVERIFY(!out[2].disjoint && !out[3].disjoint);
    QVERIFY(out[0].worstMargin >= out[1].worstMargin);
    QVERIFY(find(out, "a").worstMargin <= 1);
    if (m != EnvelopeMethod::Ensemble)  // the binary64 points differ: the bounds decide
      QVERIFY(find(out, "a").difference > 0);
    const bool elementwise = m == EnvelopeMethod::Interval || m == EnvelopeMethod::Ensemble;
    QCOMPARE(find(out, "b").elementwise, elementwise);
    if (elementwise) {
      QVERIFY(find(out, "b").disjointElements > 0);
      QCOMPARE(find(out, "a").disjointElements, std::int64_t{0});
    } else {
      QCOMPARE(find(out, "b").disjointElements, std::int64_t{-1});
    }
    // The baselines see the 1e-3 bug too (allclose's tolerance is 1e-5 relative).
    QVERIFY(find(out, "b").baselinesComputed);
    QVERIFY(!find(out, "b").allclosePass);
    QVERIFY(find(out, "a").allclosePass);
  }

  // Same functions everywhere: no output is flagged by any sound method.
  void sameFunctionsOverlap() {
    for (auto m : {EnvelopeMethod::Interval, EnvelopeMethod::FirstOrder}) {
      const std::vector<OutputComparison> out = compare(m, 0.5);
      for (const OutputComparison& c : out) QVERIFY2(!c.disjoint, c.name.c_str());
    }
  }

  // A difference far below the rounding of the programs is not flagged (no false alarm).
  void tinyDifferenceIsNotFlagged() {
    const std::vector<OutputComparison> out = compare(EnvelopeMethod::FirstOrder, 0.5 + 1e-12);
    QVERIFY(!find(out, "b").disjoint);
  }

  void l1LowerBound() {
    const std::vector<double> a{1.0, 2.0, -3.0}, b{1.0, 2.5, -1.0};
    const double l = l1DistanceLowerBound(a, b);
    QVERIFY(l <= 2.5);
    QVERIFY(l > 2.5 * (1 - 1e-15));
    QCOMPARE(l1DistanceLowerBound(a, a), 0.0);
  }
};

QTEST_MAIN(TestOutputComparison)
#include "test_output_comparison.moc"
