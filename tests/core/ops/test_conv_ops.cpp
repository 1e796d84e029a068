// Convolution rules (convolution, convolution_backward): zero escapes of the randomized executor
// (random reduction orders, bracketings, blockings, FMA, tf32 truncation, bias inside or after the
// sum) from the interval rule for 1-D, 2-D and 3-D convolutions with stride, padding, dilation,
// groups (depthwise included), with and without bias, in fp64/fp32/tf32/bf16/fp16 and on interval
// inputs; adjoints against finite differences; local errors against observed rounding;
// convolution_backward against the forward rule's vjp; point results against PyTorch
// (tests/core/ops/data/conv_torch_cases.json, written by make_conv_cases.py).
#include "core/backend.h"
#include "core/ops/registry.h"
#include "tests/core/ops/op_harness.h"
#include "tests/core/ops/rule_call.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>

#include <cmath>
#include <memory>
#include <random>
#include <string>

using namespace lossbound;
using namespace lossbound::test;

namespace {

const Format kFormats[] = {Format::Fp64, Format::Fp32, Format::Tf32, Format::Bf16, Format::Fp16};

const char* formatName(Format f) {
  switch (f) {
    case Format::Fp64:
      return "fp64";
    case Format::Fp32:
      return "fp32";
    case Format::Tf32:
      return "tf32";
    case Format::Bf16:
      return "bf16";
    case Format::Fp16:
      return "fp16";
  }
  return "?";
}

/// One convolution's geometry.
struct Config {
  Shape x, w;
  bool bias = false;
  std::vector<std::int64_t> stride, padding, dilation;
  std::int64_t groups = 1;
  std::string kind;  // "plain", "strided", "dilated", "grouped", "depthwise", "padded"

  Shape outShape() const {
    Shape o{x[0], w[0]};
    for (std::size_t d = 0; d + 2 < x.size(); ++d)
      o.push_back((x[d + 2] + 2 * padding[d] - dilation[d] * (w[d + 2] - 1) - 1) / stride[d] + 1);
    return o;
  }
  std::vector<IrValue> tail() const {
    return {ints(stride),
            ints(padding),
            ints(dilation),
            flag(false),
            ints(std::vector<std::int64_t>(stride.size(), 0)),
            integer(groups)};
  }
};

std::int64_t pick(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
  return lo + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(hi - lo + 1));
}

/// Returns a random geometry of `dims` spatial dims; every sixth is depthwise, every sixth
/// grouped, and the others mix stride, dilation and padding.
Config randomConfig(int dims, std::mt19937_64& rng) {
  static const char* kinds[] = {"plain", "strided", "dilated", "grouped", "depthwise", "padded"};
  Config c;
  c.kind = kinds[rng() % 6];
  const bool big = dims == 1;
  std::int64_t ig = pick(rng, 1, 3), og = pick(rng, 1, 3);
  if (c.kind == "grouped") c.groups = pick(rng, 2, 3);
  if (c.kind == "depthwise") {
    c.groups = pick(rng, 2, 4);
    ig = 1;
    og = pick(rng, 1, 2);
  }
  const std::int64_t n = pick(rng, 1, 2);
  c.x = {n, ig * c.groups};
  c.w = {og * c.groups, ig};
  for (int d = 0; d < dims; ++d) {
    const std::int64_t k = pick(rng, 1, dims == 3 ? 2 : 3);
    const std::int64_t s = c.kind == "strided" || rng() % 4 == 0 ? pick(rng, 2, 3) : 1;
    const std::int64_t dil = c.kind == "dilated" || rng() % 4 == 0 ? pick(rng, 2, 3) : 1;
    const std::int64_t p = c.kind == "padded" || rng() % 3 == 0 ? pick(rng, 1, 2) : 0;
    const std::int64_t minIn = std::max<std::int64_t>(dil * (k - 1) + 1 - 2 * p, 1);
    c.x.push_back(minIn + pick(rng, 0, big ? 6 : (dims == 3 ? 2 : 4)));
    c.w.push_back(k);
    c.stride.push_back(s);
    c.dilation.push_back(dil);
    c.padding.push_back(p);
  }
  c.bias = rng() % 2 == 0;
  return c;
}

double spreadFor(Format f) { return f == Format::Fp16 ? 3.0 : 12.0; }

Tensor input(const Shape& s, Format f, bool iv, std::mt19937_64& rng) {
  const DType t = dtypeFor(f);
  return iv ? randomInterval(s, t, rng, 1e-3, spreadFor(f)) : randomPoint(s, t, rng, spreadFor(f));
}

OpCase forwardCase(const Config& g, Format f, bool iv, std::mt19937_64& rng) {
  OpCase c;
  c.op = "aten.convolution.default";
  c.precision = modelFor(f);
  c.outDtypes = {dtypeFor(f)};
  c.inputs = {input(g.x, f, iv, rng), input(g.w, f, iv, rng)};
  c.args = {in(0), in(1)};
  if (g.bias) {
    c.inputs.push_back(input({g.w[0]}, f, iv, rng));
    c.args.push_back(in(2));
  } else {
    c.args.push_back(none());
  }
  for (const IrValue& v : g.tail()) c.args.push_back(v);
  return c;
}

OpCase backwardCase(const Config& g, Format f, bool iv, std::mt19937_64& rng,
                    std::array<bool, 3> mask) {
  OpCase c;
  c.op = "aten.convolution_backward.default";
  c.precision = modelFor(f);
  c.outDtypes = {dtypeFor(f), dtypeFor(f), dtypeFor(f)};
  c.inputs = {input(g.outShape(), f, iv, rng), input(g.x, f, iv, rng), input(g.w, f, iv, rng)};
  c.args = {in(0), in(1), in(2), mask[2] ? ints({g.w[0]}) : ints({0})};
  for (const IrValue& v : g.tail()) c.args.push_back(v);
  c.args.push_back(list({flag(mask[0]), flag(mask[1]), flag(mask[2])}));
  return c;
}

/// Aggregated enclosure results.
struct Totals {
  int cases = 0, trials = 0, escapes = 0;
  double widthSum = 0, spreadSum = 0;
  std::string first;
  void add(const EnclosureReport& r, bool pointInputs) {
    ++cases;
    trials += r.trials;
    escapes += r.escapes;
    if (first.empty()) first = r.firstEscape;
    if (pointInputs) {
      widthSum += r.widthSum;
      spreadSum += r.spreadSum;
    }
  }
  double ratio() const { return spreadSum > 0 ? widthSum / spreadSum : 0.0; }
};

Backend& cpu() {
  static std::unique_ptr<Backend> b = createCpuBackend();
  return *b;
}

/// A node of `op` bound to tensors in0, in1, ... for calling a rule directly.
struct Direct {
  Node node;
  std::vector<Tensor> inputs;
  Direct(const std::string& op, std::vector<IrValue> args, std::vector<Tensor> ins, int outputs)
      : inputs(std::move(ins)) {
    node.name = "conv_node";
    node.op = op;
    node.args = std::move(args);
    for (int k = 0; k < outputs; ++k) node.outputs.push_back(TensorSpec{{}, DType::Float64});
  }
  OpArgs args() const {
    return OpArgs(node, [this](const ValueRef& r) -> const Tensor& {
      return inputs.at(static_cast<std::size_t>(std::stoi(r.name.substr(2))));
    });
  }
  const OpRule& rule() const { return *opRegistry().find(node.op); }
};

double maxRelDiff(const Tensor& a, const Tensor& b) {
  double worst = 0, scale = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i)
    scale = std::max(scale, std::fabs(b.values()[static_cast<std::size_t>(i)]));
  for (std::int64_t i = 0; i < a.numel(); ++i)
    worst = std::max(worst, std::fabs(a.values()[static_cast<std::size_t>(i)] -
                                      b.values()[static_cast<std::size_t>(i)]) /
                                (scale + 1e-300));
  return worst;
}

std::vector<double> doubles(const QJsonValue& v) {
  std::vector<double> out;
  for (const QJsonValue& e : v.toArray()) out.push_back(e.toDouble());
  return out;
}

std::vector<std::int64_t> int64s(const QJsonValue& v) {
  std::vector<std::int64_t> out;
  for (const QJsonValue& e : v.toArray()) out.push_back(e.toInteger());
  return out;
}

}  // namespace

class TestConvOps : public QObject {
  Q_OBJECT

 private slots:
  void forwardEnclosureEveryFormat() {
    std::mt19937_64 rng(2025);
    for (int dims : {1, 2, 3})
      for (Format f : kFormats) {
        Totals t;
        for (int caseNo = 0; caseNo < 150; ++caseNo) {
          const bool iv = caseNo % 3 == 2;
          const OpCase c = forwardCase(randomConfig(dims, rng), f, iv, rng);
          t.add(checkEnclosure(c, 20, rng), !iv);
        }
        qInfo("convolution %d-D %s: %d cases %d runs, escapes %d, width/spread %.3g", dims,
              formatName(f), t.cases, t.trials, t.escapes, t.ratio());
        QVERIFY2(t.escapes == 0, t.first.c_str());
      }
  }

  void everyGeometryKindEncloses() {
    // Each geometry kind on its own, fp32 and bf16, with interval inputs half the time.
    std::mt19937_64 rng(77);
    for (const char* kind : {"plain", "strided", "dilated", "grouped", "depthwise", "padded"}) {
      Totals t;
      for (int caseNo = 0; caseNo < 40; ++caseNo) {
        Config g;
        do g = randomConfig(2, rng);
        while (g.kind != kind);
        const Format f = caseNo % 2 ? Format::Fp32 : Format::Bf16;
        const bool iv = caseNo % 4 >= 2;
        // Tightness over the fp32 point cases (bf16 results mostly round to one value).
        t.add(checkEnclosure(forwardCase(g, f, iv, rng), 10, rng), !iv && f == Format::Fp32);
      }
      qInfo("convolution 2-D %-9s: %d cases %d runs, escapes %d, width/spread (fp32) %.3g", kind,
            t.cases, t.trials, t.escapes, t.ratio());
      QVERIFY2(t.escapes == 0, t.first.c_str());
    }
  }

  void backwardEnclosureEveryFormat() {
    std::mt19937_64 rng(2026);
    for (int dims : {1, 2, 3})
      for (Format f : kFormats) {
        Totals t;
        for (int caseNo = 0; caseNo < 100; ++caseNo) {
          const bool iv = caseNo % 3 == 2;
          std::array<bool, 3> mask{true, true, true};
          if (caseNo % 5 == 4) mask = {false, true, rng() % 2 == 0};
          if (caseNo % 7 == 6) mask = {true, false, false};
          t.add(checkEnclosure(backwardCase(randomConfig(dims, rng), f, iv, rng, mask), 16, rng),
                !iv);
        }
        qInfo("convolution_backward %d-D %s: %d cases %d runs, escapes %d, width/spread %.3g", dims,
              formatName(f), t.cases, t.trials, t.escapes, t.ratio());
        QVERIFY2(t.escapes == 0, t.first.c_str());
      }
  }

  void typicalValuesAreTight() {
    // A small resnet-like layer with values uniform in [-1, 1] (8 channels, 8×8, 3×3, pad 1, bias)
    // in every format: the envelope width over the observed spread of the randomized executor,
    // and the mean width in ulps of the storage format (bf16/fp16 results rarely differ at all).
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    Config g;
    g.x = {1, 8, 8, 8};
    g.w = {8, 8, 3, 3};
    g.bias = true;
    g.stride = {1, 1};
    g.padding = {1, 1};
    g.dilation = {1, 1};
    OpCase c;
    c.op = "aten.convolution.default";
    c.args = {in(0), in(1), in(2)};
    for (const IrValue& v : g.tail()) c.args.push_back(v);
    for (Format f : kFormats) {
      const Format store = f == Format::Tf32 ? Format::Fp32 : f;
      auto uniform = [&](const Shape& s) {
        std::vector<double> v(static_cast<std::size_t>(numel(s)));
        for (double& x : v) x = roundToFormat(u(rng), store, RoundingDirection::Nearest);
        return Tensor::point(s, dtypeFor(f), v);
      };
      c.precision = modelFor(f);
      c.outDtypes = {dtypeFor(f)};
      c.inputs = {uniform(g.x), uniform(g.w), uniform({8})};
      const EnclosureReport r = checkEnclosure(c, 100, rng);
      QCOMPARE(r.escapes, 0);
      const Tensor e = intervalOutputs(c)[0];
      double ulps = 0;
      for (std::int64_t i = 0; i < e.numel(); ++i) {
        const Interval v = e.at(i);
        const double m = std::max(std::fabs(midpoint(v)), 0x1p-14);
        ulps += (v.hi - v.lo) / std::ldexp(2 * unitRoundoff(store), std::ilogb(m));
      }
      qInfo(
          "convolution %s 8×8×8×8, 3×3, uniform[-1,1]: width/spread %.3g (100 runs), mean "
          "width %.3g ulps",
          formatName(f), r.spreadSum > 0 ? r.widthSum / r.spreadSum : 0.0,
          ulps / static_cast<double>(e.numel()));
    }
    // Positive values in [1, 2): no cancellation, the relative width is about γ_k (k = 72);
    // a regression guard on the radius (as in the matmul test): within 8·γ_k.
    std::uniform_real_distribution<double> p(1.0, 2.0);
    std::vector<double> xs(static_cast<std::size_t>(numel(g.x))), ws(72 * 8);
    for (double& v : xs) v = static_cast<float>(p(rng));
    for (double& v : ws) v = static_cast<float>(p(rng));
    c.precision = modelFor(Format::Fp32);
    c.outDtypes = {DType::Float32};
    c.inputs = {Tensor::point(g.x, DType::Float32, xs), Tensor::point(g.w, DType::Float32, ws)};
    c.args[2] = none();
    c.args[4] = ints({0, 0});  // no padding: every output sums all 72 terms
    const EnclosureReport q = checkEnclosure(c, 50, rng);
    QCOMPARE(q.escapes, 0);
    const double gamma = 72 * 0x1p-24 / (1 - 72 * 0x1p-24);
    qInfo("convolution fp32 positive values: max relative width %.3g = %.3g γ_72", q.relWidthMax,
          q.relWidthMax / gamma);
    QVERIFY2(q.relWidthMax <= 8 * gamma, std::to_string(q.relWidthMax).c_str());
  }

  void adjointsMatchFiniteDifferences() {
    std::mt19937_64 rng(17);
    double worstF = 0, worstB = 0;
    for (int t = 0; t < 30; ++t) {
      const Config g = randomConfig(1 + t % 3, rng);
      OpCase c = forwardCase(g, Format::Fp64, false, rng);
      const VjpReport r = checkVjp(c, rng);
      worstF = std::max(worstF, r.maxRelError);
      QVERIFY2(r.maxRelError < 1e-6, r.where.c_str());
      std::array<bool, 3> mask{true, true, g.bias};
      if (t % 4 == 3) mask = {false, true, true};
      const OpCase b = backwardCase(g, Format::Fp64, false, rng, mask);
      const VjpReport rb = checkVjp(b, rng);
      worstB = std::max(worstB, rb.maxRelError);
      QVERIFY2(rb.maxRelError < 1e-6, rb.where.c_str());
    }
    qInfo("vjp vs finite differences: convolution %.3g, convolution_backward %.3g", worstF, worstB);
  }

  void backwardAgreesWithForwardVjp() {
    // convolution_backward's point outputs are the forward rule's vjp: the same sums in another
    // lowering (one GEMM per gradient vs. adjoints scattered through the im2col indices).
    std::mt19937_64 rng(31);
    std::normal_distribution<double> nd;
    double worst = 0;
    for (int t = 0; t < 60; ++t) {
      const Config g = randomConfig(1 + t % 3, rng);
      const OpCase fc = forwardCase(g, Format::Fp64, false, rng);
      Direct fwd(fc.op, fc.args, fc.inputs, 1);
      OpContext ctx{fc.precision, cpu(), nullptr};
      const std::vector<Tensor> y = fwd.rule().point(fwd.args(), ctx);
      std::vector<double> gv(static_cast<std::size_t>(y[0].numel()));
      for (double& v : gv) v = nd(rng);
      const Tensor gy = Tensor::point(y[0].shape(), DType::Float64, gv);
      const auto vj = fwd.rule().vjp(fwd.args(), y, std::vector<Tensor>{gy}, ctx);

      std::vector<IrValue> bargs = {in(0), in(1), in(2), g.bias ? ints({g.w[0]}) : none()};
      for (const IrValue& v : g.tail()) bargs.push_back(v);
      bargs.push_back(list({flag(true), flag(true), flag(g.bias)}));
      Direct bwd("aten.convolution_backward.default", bargs, {gy, fc.inputs[0], fc.inputs[1]}, 3);
      const std::vector<Tensor> grads = bwd.rule().point(bwd.args(), ctx);
      QCOMPARE(grads[0].shape(), fc.inputs[0].shape());
      QCOMPARE(grads[1].shape(), fc.inputs[1].shape());
      worst = std::max(worst, maxRelDiff(grads[0], *vj[0]));
      worst = std::max(worst, maxRelDiff(grads[1], *vj[1]));
      if (g.bias) worst = std::max(worst, maxRelDiff(grads[2], *vj[2]));
    }
    qInfo("convolution_backward vs forward vjp: max relative difference %.3g", worst);
    QVERIFY2(worst < 1e-13, std::to_string(worst).c_str());
  }

  void localErrorBoundsObservedRounding() {
    std::mt19937_64 rng(21);
    for (Format f : kFormats) {
      double ratio = 0;
      for (int t = 0; t < 16; ++t) {
        const Config g = randomConfig(1 + t % 3, rng);
        const LocalErrorReport r = checkLocalError(forwardCase(g, f, false, rng), 8, rng);
        QVERIFY2(r.violations == 0, r.first.c_str());
        const LocalErrorReport rb =
            checkLocalError(backwardCase(g, f, false, rng, {true, true, rng() % 2 == 0}), 4, rng);
        QVERIFY2(rb.violations == 0, rb.first.c_str());
        ratio = std::max({ratio, r.maxRatio, rb.maxRatio});
      }
      qInfo("local error %s: max |random - point| / localError %.3g", formatName(f), ratio);
    }
  }

  /// probabilisticLocalError: never above localError, and checkProbabilisticTerm (every
  /// execution within λ times it, root-mean-square within 1.5 times it) on random geometries of
  /// every format and on a long dot product (k = 576, positive terms: √k·u where the worst case
  /// has k·u).
  void probabilisticTermBoundsTheExecutions() {
    std::mt19937_64 rng(33);
    for (Format f : kFormats)
      for (int t = 0; t < 12; ++t) {
        const OpCase c = forwardCase(randomConfig(1 + t % 3, rng), f, false, rng);
        const RuleCall call(c);
        const std::vector<Tensor> pr = call.probabilisticLocalError(), le = call.localError();
        QCOMPARE(pr.size(), std::size_t{1});
        for (std::int64_t i = 0; i < pr[0].numel(); ++i) QVERIFY(pr[0].at(i).hi <= le[0].at(i).hi);
        const std::string failure = checkProbabilisticTerm(call, pr[0].hi(), 40, rng);
        QVERIFY2(failure.empty(), (std::string(formatName(f)) + ": " + failure).c_str());
      }
    OpCase c;
    c.op = "aten.convolution.default";
    c.precision = modelFor(Format::Fp32);
    c.outDtypes = {DType::Float32};
    const auto positive = [&](const Shape& sh) {  // fp32 values in [0.5, 1.5)
      std::uniform_real_distribution<double> u(0.5, 1.5);
      std::vector<double> v(static_cast<std::size_t>(numel(sh)));
      for (double& e : v) e = static_cast<float>(u(rng));
      return Tensor::point(sh, DType::Float32, std::move(v));
    };
    c.inputs = {positive({1, 64, 6, 6}), positive({8, 64, 3, 3})};
    c.args = {in(0), in(1), none()};
    Config g;
    g.stride = {1, 1};
    g.padding = {0, 0};
    g.dilation = {1, 1};
    for (const IrValue& v : g.tail()) c.args.push_back(v);
    const RuleCall call(c);
    const std::vector<Tensor> pr = call.probabilisticLocalError(), le = call.localError();
    for (std::int64_t i = 0; i < pr[0].numel(); ++i)
      QVERIFY2(pr[0].at(i).hi < 0.1 * le[0].at(i).hi,
               qPrintable(QStringLiteral("%1 vs %2").arg(pr[0].at(i).hi).arg(le[0].at(i).hi)));
    const std::string failure = checkProbabilisticTerm(call, pr[0].hi(), 40, rng);
    QVERIFY2(failure.empty(), failure.c_str());
  }
  void pointMatchesTorch() {
    QFile file(QStringLiteral(LOSSBOUND_SOURCE_DIR "/tests/core/ops/data/conv_torch_cases.json"));
    QVERIFY(file.open(QIODevice::ReadOnly));
    const QJsonArray cases = QJsonDocument::fromJson(file.readAll()).object()["cases"].toArray();
    QCOMPARE(cases.size(), 10);  // 6 convolutions, 4 transposed ones
    for (const QJsonValue& cv : cases) {
      const QJsonObject c = cv.toObject();
      const std::string name = c["name"].toString().toStdString();
      const Shape xs = int64s(c["input_shape"]), ws = int64s(c["weight_shape"]),
                  ys = int64s(c["output_shape"]);
      const bool bias = c.contains("bias");
      const Tensor x = Tensor::point(xs, DType::Float64, doubles(c["input"]));
      const Tensor w = Tensor::point(ws, DType::Float64, doubles(c["weight"]));
      const Tensor gy = Tensor::point(ys, DType::Float64, doubles(c["grad_output"]));
      const auto stride = int64s(c["stride"]), padding = int64s(c["padding"]),
                 dilation = int64s(c["dilation"]);
      const bool transposed = c["transposed"].toBool();
      const auto outPadding = c.contains("output_padding")
                                  ? int64s(c["output_padding"])
                                  : std::vector<std::int64_t>(stride.size(), 0);
      const std::int64_t channels = transposed ? ws[1] * c["groups"].toInteger() : ws[0];
      const std::vector<IrValue> tail = {ints(stride),     ints(padding),
                                         ints(dilation),   flag(transposed),
                                         ints(outPadding), integer(c["groups"].toInteger())};
      PrecisionModel pm = modelFor(Format::Fp64);
      OpContext ctx{pm, cpu(), nullptr};

      std::vector<IrValue> fargs = {in(0), in(1), bias ? in(2) : none()};
      fargs.insert(fargs.end(), tail.begin(), tail.end());
      std::vector<Tensor> fins = {x, w};
      if (bias) fins.push_back(Tensor::point({channels}, DType::Float64, doubles(c["bias"])));
      Direct fwd("aten.convolution.default", fargs, fins, 1);
      const auto y = fwd.rule().point(fwd.args(), ctx);
      const Tensor expected = Tensor::point(ys, DType::Float64, doubles(c["output"]));
      QVERIFY2(y[0].shape() == ys, name.c_str());
      QVERIFY2(maxRelDiff(y[0], expected) < 1e-13, name.c_str());

      std::vector<IrValue> bargs = {in(0), in(1), in(2), bias ? ints({channels}) : none()};
      bargs.insert(bargs.end(), tail.begin(), tail.end());
      bargs.push_back(list({flag(true), flag(true), flag(bias)}));
      Direct bwd("aten.convolution_backward.default", bargs, {gy, x, w}, 3);
      const auto g = bwd.rule().point(bwd.args(), ctx);
      QVERIFY2(
          maxRelDiff(g[0], Tensor::point(xs, DType::Float64, doubles(c["grad_input"]))) < 1e-13,
          name.c_str());
      QVERIFY2(
          maxRelDiff(g[1], Tensor::point(ws, DType::Float64, doubles(c["grad_weight"]))) < 1e-13,
          name.c_str());
      if (bias)
        QVERIFY2(maxRelDiff(g[2], Tensor::point({channels}, DType::Float64,
                                                doubles(c["grad_bias"]))) < 1e-13,
                 name.c_str());
    }
  }

  void transposedEnclosesAndMatchesItsVjp() {
    // ConvTranspose: random geometries with output_padding, in every format: zero escapes of the
    // executor, local errors, adjoints against finite differences, and convolution_backward
    // (transposed) equal to the forward rule's vjp.
    std::mt19937_64 rng(41);
    std::normal_distribution<double> nd;
    const Format formats[] = {Format::Fp32, Format::Bf16, Format::Fp64};
    double worst = 0;
    for (int t = 0; t < 60; ++t) {
      const Config g = randomConfig(1 + t % 3, rng);
      // The transposed op maps g's output back to g's input: its input is g's output shape, its
      // weight g's ([C_out, C_in/groups, *k] = [C_in_t, C_out_t/groups, *k]).
      std::vector<std::int64_t> outPadding;
      Shape y = g.x;
      for (std::size_t d = 0; d < g.stride.size(); ++d) {
        const std::int64_t most = std::max(g.stride[d], g.dilation[d]) - 1;
        const std::int64_t want =
            y[d + 2] + 2 * g.padding[d] - g.dilation[d] * (g.w[d + 2] - 1) - 1;
        outPadding.push_back(std::min<std::int64_t>(want % g.stride[d], most));
      }
      const Format f = formats[t % 3];
      const Shape xt = g.outShape();
      const std::int64_t channels = g.x[1];
      OpCase c;
      c.op = "aten.convolution.default";
      c.precision = modelFor(f);
      c.outDtypes = {dtypeFor(f)};
      const bool iv = t % 2 == 0;
      c.inputs = {input(xt, f, iv, rng), input(g.w, f, iv, rng)};
      c.args = {in(0), in(1)};
      if (g.bias) {
        c.inputs.push_back(input({channels}, f, iv, rng));
        c.args.push_back(in(2));
      } else {
        c.args.push_back(none());
      }
      for (const IrValue& v : {ints(g.stride), ints(g.padding), ints(g.dilation), flag(true),
                               ints(outPadding), integer(g.groups)})
        c.args.push_back(v);
      const EnclosureReport r = checkEnclosure(c, 8, rng);
      QVERIFY2(r.escapes == 0, (g.kind + ": " + r.firstEscape).c_str());
      if (iv) continue;
      const LocalErrorReport l = checkLocalError(c, 8, rng);
      QVERIFY2(l.violations == 0, l.first.c_str());
      OpCase d = c;
      d.precision = modelFor(Format::Fp64);
      for (Tensor& x : d.inputs) x = randomPoint(x.shape(), DType::Float64, rng, 3.0);
      d.outDtypes = {DType::Float64};
      const VjpReport v = checkVjp(d, rng);
      QVERIFY2(v.maxRelError < 1e-6, v.where.c_str());
      // The backward op against the forward rule's vjp.
      Direct fwd(d.op, d.args, d.inputs, 1);
      OpContext ctx{d.precision, cpu(), nullptr};
      const std::vector<Tensor> out = fwd.rule().point(fwd.args(), ctx);
      std::vector<double> gv(static_cast<std::size_t>(out[0].numel()));
      for (double& x : gv) x = nd(rng);
      const Tensor gy = Tensor::point(out[0].shape(), DType::Float64, gv);
      const auto vj = fwd.rule().vjp(fwd.args(), out, std::vector<Tensor>{gy}, ctx);
      std::vector<IrValue> bargs = {in(0), in(1), in(2), g.bias ? ints({channels}) : none()};
      for (const IrValue& x : {ints(g.stride), ints(g.padding), ints(g.dilation), flag(true),
                               ints(outPadding), integer(g.groups)})
        bargs.push_back(x);
      bargs.push_back(list({flag(true), flag(true), flag(g.bias)}));
      Direct bwd("aten.convolution_backward.default", bargs, {gy, d.inputs[0], d.inputs[1]}, 3);
      const std::vector<Tensor> grads = bwd.rule().point(bwd.args(), ctx);
      worst = std::max(worst, maxRelDiff(grads[0], *vj[0]));
      worst = std::max(worst, maxRelDiff(grads[1], *vj[1]));
      if (g.bias) worst = std::max(worst, maxRelDiff(grads[2], *vj[2]));
      OpCase bc;
      bc.op = "aten.convolution_backward.default";
      bc.precision = modelFor(Format::Fp32);
      bc.outDtypes = {DType::Float32, DType::Float32, DType::Float32};
      bc.inputs = {input(gy.shape(), Format::Fp32, true, rng), input(xt, Format::Fp32, true, rng),
                   input(g.w, Format::Fp32, true, rng)};
      bc.args = bargs;
      const EnclosureReport rb = checkEnclosure(bc, 8, rng);
      QVERIFY2(rb.escapes == 0, ("backward " + g.kind + ": " + rb.firstEscape).c_str());
    }
    qInfo("transposed convolution_backward vs forward vjp: max relative difference %.3g", worst);
    QVERIFY2(worst < 1e-13, std::to_string(worst).c_str());
    // An output_padding that is not below the stride or the dilation is an error.
    OpCase bad;
    bad.op = "aten.convolution.default";
    bad.precision = modelFor(Format::Fp32);
    bad.outDtypes = {DType::Float32};
    bad.inputs = {input({1, 2, 4}, Format::Fp32, false, rng),
                  input({2, 2, 3}, Format::Fp32, false, rng)};
    bad.args = {in(0),     in(1),      none(),    ints({1}), ints({0}),
                ints({1}), flag(true), ints({1}), integer(1)};
    QVERIFY_THROWS_EXCEPTION(OpError, checkEnclosure(bad, 1, rng));
  }

  void badGeometryIsAnError() {
    OpContext ctx{modelFor(Format::Fp32), cpu(), nullptr};
    auto message = [&](const Shape& xs, const Shape& ws, std::int64_t groups) -> std::string {
      Direct d("aten.convolution.default",
               {in(0), in(1), none(), ints({1, 1}), ints({0, 0}), ints({1, 1}), flag(false),
                ints({0, 0}), integer(groups)},
               {Tensor::full(xs, DType::Float32, 1.0), Tensor::full(ws, DType::Float32, 1.0)}, 1);
      try {
        d.rule().point(d.args(), ctx);
      } catch (const OpError& e) {
        return e.what();
      }
      return "";
    };
    QVERIFY(message({1, 3, 5, 5}, {4, 2, 3, 3}, 1).find("channels") != std::string::npos);
    QVERIFY(message({1, 4, 5, 5}, {3, 2, 3, 3}, 2).find("groups") != std::string::npos);
    QVERIFY(message({1, 3, 2, 2}, {4, 3, 3, 3}, 1).find("smaller than") != std::string::npos);
    QVERIFY(message({3, 5, 5}, {4, 3, 3, 3}, 1).find("4-D input") != std::string::npos);
  }
};

QTEST_GUILESS_MAIN(TestConvOps)
#include "test_conv_ops.moc"
