// Elementwise op rules: zero escapes of the randomized executor from the interval rule per op and
// per precision (fp64, fp32, bf16, fp16) over random shapes with size-0 and size-1 broadcast dims
// and wide value ranges; adjoints against finite differences; local errors against observed
// rounding.
#include "core/ops/registry.h"
#include "tests/core/ops/op_harness.h"
#include "tests/core/ops/rule_call.h"

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <random>

using namespace lossbound;
using namespace lossbound::test;

namespace {

const Format kFormats[] = {Format::Fp64, Format::Fp32, Format::Bf16, Format::Fp16};

/// How the inputs of an op are drawn.
enum class Domain { Any, Positive, Small, Bool };

struct OpSpec {
  std::string op;
  int tensors;  // number of float tensor inputs (broadcast together)
  Domain domain;
  std::function<std::vector<IrValue>(std::mt19937_64&)> extraArgs;  // after the tensor refs
  bool boolOut = false;
  bool smooth = true;  // finite differences meaningful
};

double spreadFor(Format f, Domain d) {
  if (d == Domain::Small) return 2.0;
  return f == Format::Fp16 ? 5.0 : 20.0;
}

Tensor makeInput(const Shape& s, DType t, Domain d, Format f, bool asInterval,
                 std::mt19937_64& rng) {
  if (d == Domain::Bool) {
    Tensor p = randomPoint(s, DType::Bool, rng);
    if (!asInterval) return p;
    std::vector<double> lo(p.values().begin(), p.values().end()), hi = lo;
    for (std::size_t i = 0; i < lo.size(); ++i)
      if (rng() % 3 == 0) {
        lo[i] = 0;
        hi[i] = 1;
      }
    return Tensor::interval(s, DType::Bool, lo, hi);
  }
  Tensor x = asInterval ? randomInterval(s, t, rng, 1e-3, spreadFor(f, d))
                        : randomPoint(s, t, rng, spreadFor(f, d));
  if (d != Domain::Positive) return x;
  std::vector<double> lo(x.lo().begin(), x.lo().end()), hi(x.hi().begin(), x.hi().end());
  for (std::size_t i = 0; i < lo.size(); ++i)
    if (hi[i] < 0) {
      const double l = -hi[i], h = -lo[i];
      lo[i] = l;
      hi[i] = h;
    }
  return x.isInterval() ? Tensor::interval(s, t, lo, hi) : Tensor::point(s, t, lo);
}

std::vector<OpSpec> specs() {
  auto none = [](std::mt19937_64&) { return std::vector<IrValue>{}; };
  auto scalarArg = [](std::mt19937_64& rng) {
    const double choices[] = {2.0, 0.1, -3.5, 1e-5, 0.4, 16777216.0};
    return std::vector<IrValue>{num(choices[rng() % 6])};
  };
  std::vector<OpSpec> s;
  for (const char* op : {"aten.add.Tensor", "aten.sub.Tensor", "aten.add_.Tensor"})
    s.push_back({op, 2, Domain::Any, [](std::mt19937_64& rng) {
                   if (rng() % 2) return std::vector<IrValue>{};
                   return std::vector<IrValue>{num(rng() % 2 ? 0.3 : -2.0)};
                 }});
  for (const char* op : {"aten.mul.Tensor", "aten.mul_.Tensor", "aten.div.Tensor",
                         "aten.maximum.default", "aten.minimum.default"})
    s.push_back(
        {op, 2, Domain::Any, none, false, std::string(op).find("imum") == std::string::npos});
  for (const char* op : {"aten.add.Scalar", "aten.sub.Scalar", "aten.mul.Scalar", "aten.div.Scalar",
                         "aten.rsub.Scalar"})
    s.push_back({op, 1, Domain::Any, scalarArg});
  s.push_back({"aten.rsub.Tensor", 2, Domain::Any, none});
  for (const char* op : {"aten.neg.default", "aten.reciprocal.default"})
    s.push_back({op, 1, Domain::Any, none});
  s.push_back({"aten.abs.default", 1, Domain::Any, none, false, false});
  for (const char* op : {"aten.sqrt.default", "aten.rsqrt.default", "aten.log.default"})
    s.push_back({op, 1, Domain::Positive, none});
  s.push_back({"aten.exp.default", 1, Domain::Small, none});
  s.push_back({"aten.expm1.default", 1, Domain::Small, none});
  s.push_back({"aten.log1p.default", 1, Domain::Positive, none});
  for (const char* op : {"aten.floor.default", "aten.ceil.default", "aten.trunc.default",
                         "aten.round.default", "aten.sign.default"})
    s.push_back({op, 1, Domain::Any, none, false, false});
  for (const char* op : {"aten.sin.default", "aten.cos.default", "aten.nan_to_num.default"})
    s.push_back({op, 1, Domain::Any, none});
  s.push_back({"aten.pow.Tensor_Scalar", 1, Domain::Positive, [](std::mt19937_64& rng) {
                 const double e[] = {2.0, 3.0, 0.5, -1.0, -2.0, 1.5, -0.5};
                 return std::vector<IrValue>{num(e[rng() % 7])};
               }});
  s.push_back({"aten.pow.Tensor_Tensor", 2, Domain::Small, none});
  s.push_back({"aten.pow.Scalar", 1, Domain::Small, [](std::mt19937_64& rng) {  // base ** tensor
                 const double b[] = {2.0, 0.1, 1.0, 0.5, 3.7, 2.718281828459045, 10.0};
                 return std::vector<IrValue>{num(b[rng() % 7])};
               }});
  for (const char* op : {"aten.eq.Tensor", "aten.ne.Tensor", "aten.lt.Tensor", "aten.gt.Tensor",
                         "aten.le.Tensor", "aten.ge.Tensor"})
    s.push_back({op, 2, Domain::Any, none, true, false});
  for (const char* op : {"aten.eq.Scalar", "aten.lt.Scalar", "aten.ge.Scalar"})
    s.push_back({op, 1, Domain::Any, scalarArg, true, false});
  s.push_back({"aten.clamp.default", 1, Domain::Any,
               [](std::mt19937_64&) {
                 return std::vector<IrValue>{num(-0.5), num(0.7)};
               },
               false, false});
  s.push_back({"aten.clamp.Tensor", 3, Domain::Any, none, false, false});
  s.push_back({"aten.clamp_min.default", 1, Domain::Any,
               [](std::mt19937_64&) { return std::vector<IrValue>{num(0.1)}; }, false, false});
  return s;
}

/// Builds a random case of `spec` in format f: shapes broadcast against each other.
OpCase makeCase(const OpSpec& spec, Format f, std::mt19937_64& rng, bool intervals) {
  OpCase c;
  c.op = spec.op;
  c.precision = modelFor(std::nullopt);
  const DType t = dtypeFor(f);
  const Shape full = randomShape(static_cast<int>(rng() % 4), rng);
  std::vector<Shape> shapes{full};
  for (int k = 1; k < spec.tensors; ++k) shapes.push_back(broadcastableTo(full, rng));
  if (rng() % 2) std::swap(shapes.front(), shapes.back());
  Domain d = spec.domain;
  if (spec.op == "aten.pow.Tensor_Tensor") d = Domain::Positive;
  for (int k = 0; k < spec.tensors; ++k) {
    const Domain dk = (spec.op == "aten.pow.Tensor_Tensor" && k == 1) ? Domain::Small : d;
    c.inputs.push_back(makeInput(shapes[static_cast<std::size_t>(k)], t, dk, f, intervals, rng));
    c.args.push_back(in(k));
  }
  if (spec.op == "aten.pow.Tensor_Tensor" || spec.op == "aten.exp.default") {
    // keep exponents moderate so results stay finite in every format
    for (auto& x : c.inputs) {
      std::vector<double> lo(x.lo().begin(), x.lo().end()), hi(x.hi().begin(), x.hi().end());
      for (std::size_t i = 0; i < lo.size(); ++i) {
        lo[i] = std::ldexp(lo[i], -2);
        hi[i] = std::ldexp(hi[i], -2);
      }
      x = x.isInterval() ? Tensor::interval(x.shape(), t, lo, hi) : Tensor::point(x.shape(), t, lo);
    }
  }
  auto extra = spec.extraArgs(rng);
  if (spec.op == "aten.pow.Scalar") {
    c.args.insert(c.args.begin(), extra.begin(),
                  extra.end());  // pow.Scalar(Scalar self, Tensor exponent)
  } else if (spec.op.find("add") != std::string::npos || spec.op.find("sub") != std::string::npos) {
    if (!extra.empty() && spec.tensors == 2)
      c.kwargs["alpha"] = extra[0];
    else
      for (auto& e : extra) c.args.push_back(e);
  } else {
    for (auto& e : extra) c.args.push_back(e);
  }
  c.outDtypes = {spec.boolOut ? DType::Bool : t};
  return c;
}

}  // namespace

class TestElementwiseOps : public QObject {
  Q_OBJECT

 private slots:
  void registryNamesEveryOp() {
    for (const OpSpec& s : specs()) QVERIFY2(opRegistry().find(s.op), s.op.c_str());
    for (const char* op :
         {"aten.bitwise_not.default", "aten.logical_not.default", "aten.where.self",
          "aten.masked_fill.Scalar", "aten.masked_fill.Tensor", "aten.div_.Tensor"})
      QVERIFY2(opRegistry().find(op), op);
    QVERIFY(opRegistry().find("aten.not_an_op.default") == nullptr);
  }

  void enclosureEveryOpEveryFormat() {
    std::mt19937_64 rng(1234);
    for (const OpSpec& spec : specs()) {
      for (Format f : kFormats) {
        int trials = 0;
        double width = 0, spread = 0;
        for (int caseNo = 0; trials < 1000; ++caseNo) {
          const OpCase c = makeCase(spec, f, rng, caseNo % 2 == 0);
          const EnclosureReport r = checkEnclosure(c, 25, rng);
          QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
          trials += r.trials;
          width += r.widthSum;
          spread += r.spreadSum;
        }
        QVERIFY(trials >= 1000);
      }
    }
  }

  void adjointsMatchFiniteDifferences() {
    std::mt19937_64 rng(99);
    for (const OpSpec& spec : specs()) {
      if (!spec.smooth) continue;
      for (int k = 0; k < 6; ++k) {
        OpCase c = makeCase(spec, Format::Fp64, rng, false);
        // finite differences need moderate values
        for (auto& x : c.inputs) {
          std::vector<double> v(x.values().begin(), x.values().end());
          for (double& e : v)
            if (e != 0) e = std::ldexp(e, -std::ilogb(e));  // keep the sign, magnitude in [1, 2)
          x = Tensor::point(x.shape(), x.dtype(), v);
        }
        const VjpReport r = checkVjp(c, rng);
        QVERIFY2(r.maxRelError < 1e-6, (r.where + " err " + std::to_string(r.maxRelError)).c_str());
      }
    }
  }

  void localErrorBoundsObservedRounding() {
    std::mt19937_64 rng(7);
    for (const OpSpec& spec : specs()) {
      for (Format f : kFormats) {
        for (int k = 0; k < 8; ++k) {
          const OpCase c = makeCase(spec, f, rng, false);
          const LocalErrorReport r = checkLocalError(c, 10, rng);
          QVERIFY2(r.violations == 0, r.first.c_str());
        }
      }
    }
  }

  /// add, sub, rsub and mul whose exact result is an F value round nothing: local error 0, and
  /// no randomized execution moves them (checkLocalError fails on any difference from the point);
  /// an inexact product or sum, or a scalar that converts inexactly, keeps its term. The
  /// attention-mask chain (1 − m)·finfo.min of a {0, 1} mask cast to the dtype is exact.
  void exactResultsHaveNoLocalError() {
    std::mt19937_64 rng(23);
    const auto localErrorOf = [](const OpCase& c) { return localErrorOutputs(c)[0]; };
    const auto allZero = [](const Tensor& e) {
      return std::all_of(e.values().begin(), e.values().end(), [](double v) { return v == 0; });
    };
    for (Format f : kFormats) {
      const DType t = dtypeFor(f);
      // Small integers and halves: every sum and product below is exact in every format.
      const Tensor x = Tensor::point({6}, t, {0, 1, -3, 0.5, 7, -2});
      const Tensor y = Tensor::point({6}, t, {1, 1, 4, -0.25, 2, 8});
      for (const char* op :
           {"aten.add.Tensor", "aten.sub.Tensor", "aten.mul.Tensor", "aten.rsub.Tensor"}) {
        const OpCase c{op, {in(0), in(1)}, {}, {t}, {x, y}, modelFor(std::nullopt)};
        QVERIFY(allZero(localErrorOf(c)));
        const LocalErrorReport r = checkLocalError(c, 20, rng);
        QVERIFY2(r.violations == 0, r.first.c_str());
      }
      for (const char* op : {"aten.rsub.Scalar", "aten.mul.Scalar", "aten.add.Scalar"}) {
        const OpCase c{op, {in(0), num(1.0)}, {}, {t}, {x}, modelFor(std::nullopt)};
        QVERIFY(allZero(localErrorOf(c)));
      }
      // The mask chain: cast, 1 − m, ·finfo.min (fp16's and bf16's own minimum).
      const double lowest = f == Format::Fp64 ? -std::numeric_limits<double>::max()
                            : f == Format::Fp32
                                ? -static_cast<double>(std::numeric_limits<float>::max())
                            : f == Format::Bf16 ? -0x1.fep127
                                                : -65504.0;
      const Tensor ids = Tensor::point({4}, DType::Int64, {1, 1, 0, 1});
      const OpCase cast{"aten._to_copy.default", {in(0)}, {}, {t}, {ids}, modelFor(std::nullopt)};
      QVERIFY(allZero(localErrorOf(cast)));
      const Tensor m = Tensor::point({4}, t, {1, 1, 0, 1});
      const OpCase inv{"aten.rsub.Scalar", {in(0), num(1.0)}, {}, {t}, {m}, modelFor(std::nullopt)};
      QVERIFY(allZero(localErrorOf(inv)));
      const OpCase big{"aten.mul.Scalar",     {in(0), num(lowest)}, {}, {t}, {m},
                       modelFor(std::nullopt)};
      QVERIFY(allZero(localErrorOf(big)));
      // Operands not known to be held exactly (OpContext::exactOperands unset): a candidate
      // operand off by upstream error rounds there, so the term stays.
      if (f != Format::Fp64) {
        const Tensor unheld = RuleCall(inv).localError()[0];
        QVERIFY(unheld.values()[0] > 0 || unheld.values()[2] > 0);
        QVERIFY(RuleCall(cast).localError()[0].values()[0] > 0);
      }
      const LocalErrorReport rb = checkLocalError(big, 20, rng);
      QVERIFY2(rb.violations == 0, rb.first.c_str());
      if (f == Format::Fp64) {
        // binary64 itself rounds: the FMA residual of (1 + 2^-30)² and the TwoSum residual of
        // 1 + 2^-100 are not 0, so the terms stay.
        const Tensor p = Tensor::point({1}, t, {1 + std::ldexp(1.0, -30)});
        const OpCase sq{"aten.mul.Tensor", {in(0), in(1)}, {}, {t}, {p, p}, modelFor(std::nullopt)};
        QVERIFY(localErrorOf(sq).values()[0] > 0);
        const OpCase sum{
            "aten.add.Tensor",
            {in(0), in(1)},
            {},
            {t},
            {Tensor::point({1}, t, {1.0}), Tensor::point({1}, t, {std::ldexp(1.0, -100)})},
            modelFor(std::nullopt)};
        QVERIFY(localErrorOf(sum).values()[0] > 0);
        continue;
      }
      // Inexact: a product that needs more digits than F, a sum that does, a scalar that does not
      // convert exactly (0.3), an alpha that does not: the term stays.
      const double a = 1 + std::ldexp(1.0, f == Format::Fp32 ? -13 : -6), b = std::ldexp(1.0, -14);
      const Tensor p = Tensor::point({1}, t, {a});
      const OpCase sq{"aten.mul.Tensor", {in(0), in(1)}, {}, {t}, {p, p}, modelFor(std::nullopt)};
      QVERIFY(localErrorOf(sq).values()[0] > 0);
      const OpCase sum{"aten.add.Tensor",
                       {in(0), in(1)},
                       {},
                       {t},
                       {Tensor::point({1}, t, {1.0}), Tensor::point({1}, t, {b * b})},
                       modelFor(std::nullopt)};
      QVERIFY(localErrorOf(sum).values()[0] > 0);
      if (f == Format::Fp32 || f == Format::Bf16) {  // binary64 rounds 1 + 2^-100 to 1
        const OpCase tiny{
            "aten.add.Tensor",
            {in(0), in(1)},
            {},
            {t},
            {Tensor::point({1}, t, {1.0}), Tensor::point({1}, t, {std::ldexp(1.0, -100)})},
            modelFor(std::nullopt)};
        QVERIFY(localErrorOf(tiny).values()[0] > 0);
      }
      const OpCase third{"aten.mul.Scalar",     {in(0), num(0.3)}, {}, {t}, {m},
                         modelFor(std::nullopt)};
      QVERIFY(localErrorOf(third).values()[0] > 0);
      const OpCase alpha{"aten.add.Tensor",     {in(0), in(1)}, {{"alpha", num(0.3)}}, {t}, {x, y},
                         modelFor(std::nullopt)};
      QVERIFY(localErrorOf(alpha).values()[1] > 0);
    }
  }

  /// An integer tensor operand of a floating op is converted to the output dtype first, as
  /// PyTorch's kernels do: torch 1.13 gives int64 16777217 + fp32 -1.0 = 16777215 and int64
  /// 257 · bf16 1.0 = 256. The interval rule encloses them, the randomized executor computes them,
  /// the local error covers them.
  void integerOperandsConvertToTheOutputDtype() {
    std::mt19937_64 rng(29);
    struct Case {
      const char* op;
      double integer, other, torchValue;
      DType t;
    };
    for (const Case& k : {Case{"aten.add.Tensor", 16777217, -1.0, 16777215, DType::Float32},
                          Case{"aten.mul.Tensor", 257, 1.0, 256, DType::BFloat16},
                          Case{"aten.add.Tensor", 257, 0.0, 256, DType::BFloat16},
                          Case{"aten.div.Tensor", 16777217, 1.0, 16777216, DType::Float32}}) {
      const OpCase c{
          k.op,
          {in(0), in(1)},
          {},
          {k.t},
          {Tensor::point({1}, DType::Int64, {k.integer}), Tensor::point({1}, k.t, {k.other})},
          modelFor(std::nullopt)};
      const Tensor y = intervalOutputs(c)[0];
      QVERIFY2(y.lo()[0] <= k.torchValue && k.torchValue <= y.hi()[0], k.op);
      std::vector<Tensor> pointOut;
      const Tensor err = localErrorOutputs(c, &pointOut)[0];
      QVERIFY2(std::fabs(k.torchValue - pointOut[0].values()[0]) <= err.values()[0], k.op);
      const LocalErrorReport r = checkLocalError(c, 20, rng);
      QVERIFY2(r.violations == 0, r.first.c_str());
      bool seen = false;
      for (int i = 0; i < 20; ++i) seen |= RuleCall(c).random(rng)[0].values()[0] == k.torchValue;
      QVERIFY2(seen, k.op);
    }
  }

  /// sin/cos on intervals around the turning points kπ/2 and on points next to them, in every
  /// format: no escapes, the enclosure reaches ±1 exactly when a turning point is inside.
  void sinCosAroundTurningPoints() {
    std::mt19937_64 rng(2024);
    const double halfPi = 1.5707963267948966;
    int straddling = 0;
    for (const char* op : {"aten.sin.default", "aten.cos.default"}) {
      const bool isCos = std::string(op) == "aten.cos.default";
      for (Format f : kFormats) {
        const DType t = dtypeFor(f);
        const Format sf = formatOf(t, modelFor(std::nullopt));
        for (int rep = 0; rep < 40; ++rep) {
          std::vector<double> lo, hi;
          for (int k = -12; k <= 12; ++k) {
            const double c = k * halfPi;
            const double w = std::ldexp(1.0, -static_cast<int>(rng() % 30) - 1);
            const Interval x = roundOutward(Interval{c - w * (rng() % 2), c + w}, sf);
            lo.push_back(x.lo);
            hi.push_back(x.hi);
          }
          const Shape s{static_cast<std::int64_t>(lo.size())};
          OpCase c{op, {in(0)}, {}, {t}, {Tensor::interval(s, t, lo, hi)}, modelFor(std::nullopt)};
          const EnclosureReport r = checkEnclosure(c, 20, rng);
          QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
          const Tensor y = intervalOutputs(c)[0];
          for (std::size_t i = 0; i < lo.size(); ++i) {
            const int k = static_cast<int>(i) - 12;
            const int phase = ((k % 4) + 4 + (isCos ? 0 : 3)) % 4;  // 0: maximum, 2: minimum
            const bool inside = lo[i] <= k * halfPi && k * halfPi <= hi[i] && lo[i] < hi[i];
            if (!inside || (phase != 0 && phase != 2)) continue;
            ++straddling;
            const Interval yi = y.at(static_cast<std::int64_t>(i));
            // the turning value ±1 is inside (the libm margin may widen past it)
            QVERIFY2(phase == 0 ? yi.hi >= 1.0 : yi.lo <= -1.0,
                     qPrintable(QString("%1 of [%2, %3]").arg(op).arg(lo[i]).arg(hi[i])));
          }
          // points next to the turning points: the local error bounds the observed rounding
          OpCase p = c;
          p.inputs = {Tensor::point(s, t, lo)};
          const LocalErrorReport l = checkLocalError(p, 10, rng);
          QVERIFY2(l.violations == 0, l.first.c_str());
        }
      }
    }
    QVERIFY(straddling > 1000);
  }

  /// nan_to_num replaces NaN, +inf and -inf by the given numbers or the format's extremes; an
  /// interval reaching an infinity holds the replacement and every finite value.
  /// floor, ceil, trunc, round and sign against PyTorch's results (round: half to even), on
  /// points and on an interval across an integer (sign: across zero).
  void integerRoundingOps() {
    const Tensor x =
        Tensor::point({8}, DType::Float32, {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -1.25, 16777215.0});
    const std::map<std::string, std::vector<double>> want{
        {"aten.floor.default", {-3, -2, -1, 0, 1, 2, -2, 16777215}},
        {"aten.ceil.default", {-2, -1, -0.0, 1, 2, 3, -1, 16777215}},
        {"aten.trunc.default", {-2, -1, -0.0, 0, 1, 2, -1, 16777215}},
        {"aten.round.default", {-2, -2, -0.0, 0, 2, 2, -1, 16777215}},
        {"aten.sign.default", {-1, -1, -1, 1, 1, 1, -1, 1}}};
    for (const auto& [op, w] : want) {
      const OpCase pc{op, {in(0)}, {}, {DType::Float32}, {x}, modelFor(std::nullopt)};
      std::vector<Tensor> pointOut;
      localErrorOutputs(pc, &pointOut);
      for (std::size_t i = 0; i < w.size(); ++i) {
        QCOMPARE(pointOut[0].values()[i], w[i]);
        QCOMPARE(std::signbit(pointOut[0].values()[i]), std::signbit(w[i]));
      }
      const Tensor across = Tensor::interval({1}, DType::Float32, {0.75}, {1.25});
      const OpCase ic{op, {in(0)}, {}, {DType::Float32}, {across}, modelFor(std::nullopt)};
      const Tensor y = intervalOutputs(ic)[0];
      const double lo = op == "aten.floor.default" || op == "aten.trunc.default" ? 0.0 : 1.0;
      const double hi = op == "aten.ceil.default" ? 2.0 : 1.0;
      QCOMPARE(y.lo()[0], lo);
      QCOMPARE(y.hi()[0], hi);
    }
    // sign: 0 for ±0 and NaN (PyTorch 1.13 and 2.15 print 0., +0), -1 to 1 across zero.
    const OpCase zc{"aten.sign.default",
                    {in(0)},
                    {},
                    {DType::Float32},
                    {Tensor::point({3}, DType::Float32, {-0.0, 0.0, __builtin_nan("")})},
                    modelFor(std::nullopt)};
    std::vector<Tensor> zeros;
    localErrorOutputs(zc, &zeros);
    for (double v : zeros[0].values()) QVERIFY(v == 0.0 && !std::signbit(v));
    const OpCase sc{"aten.sign.default",
                    {in(0)},
                    {},
                    {DType::Float32},
                    {Tensor::interval({2}, DType::Float32, {-0.5, 0.0}, {0.25, 3.0})},
                    modelFor(std::nullopt)};
    const Tensor ys = intervalOutputs(sc)[0];
    QCOMPARE(ys.lo()[0], -1.0);
    QCOMPARE(ys.hi()[0], 1.0);
    QCOMPARE(ys.lo()[1], 0.0);
    QCOMPARE(ys.hi()[1], 1.0);
  }

  /// log(±0) and log1p(-1) are -inf in PyTorch (1.13 and 2.15: torch.log(torch.zeros(1)) prints
  /// -inf, in every dtype): T5's relative position buckets take the log of a zero distance and
  /// discard it with torch.where. The enclosure is that exact point, not an empty set or a
  /// widened one; an interval reaching the pole reaches -inf, and a wholly negative one is an
  /// error (NaN in PyTorch: no value to enclose).
  void logOfZeroIsMinusInfinity() {
    const double inf = __builtin_huge_val();
    std::mt19937_64 rng(11);
    for (Format f : kFormats) {
      const DType t = dtypeFor(f);
      for (const auto& [op, pole] :
           {std::pair{"aten.log.default", 0.0}, std::pair{"aten.log1p.default", -1.0}}) {
        const Tensor x = Tensor::point({2}, t, {pole, pole == 0.0 ? -0.0 : pole});
        const OpCase c{op, {in(0)}, {}, {t}, {x}, modelFor(std::nullopt)};
        std::vector<Tensor> pointOut;
        localErrorOutputs(c, &pointOut);
        const Tensor y = intervalOutputs(c)[0];
        for (int i = 0; i < 2; ++i) {
          QCOMPARE(pointOut[0].values()[i], -inf);
          QCOMPARE(y.lo()[i], -inf);
          QCOMPARE(y.hi()[i], -inf);
        }
        const EnclosureReport r = checkEnclosure(c, 20, rng);
        QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
        const Tensor reach = Tensor::interval({1}, t, {pole - 0.5}, {pole + 0.5});
        const OpCase cr{op, {in(0)}, {}, {t}, {reach}, modelFor(std::nullopt)};
        const Tensor yr = intervalOutputs(cr)[0];
        QCOMPARE(yr.lo()[0], -inf);
        QVERIFY(yr.hi()[0] >= std::log(0.5) && yr.hi()[0] < 0.0);
        const Tensor below = Tensor::interval({1}, t, {pole - 2.0}, {pole - 1.0});
        const OpCase cb{op, {in(0)}, {}, {t}, {below}, modelFor(std::nullopt)};
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, intervalOutputs(cb));
      }
    }
  }

  void nanToNumReplacesNonFinite() {
    const double inf = __builtin_huge_val(), nan = __builtin_nan("");
    const Tensor x = Tensor::point({5}, DType::Float32, {nan, inf, -inf, 1.5, -0.0});
    auto run = [&](std::vector<IrValue> extra, const Tensor& in0, DType t, std::mt19937_64& rng) {
      OpCase c{"aten.nan_to_num.default", {in(0)}, {}, {t}, {in0}, modelFor(std::nullopt)};
      for (auto& e : extra) c.args.push_back(e);
      const EnclosureReport r = checkEnclosure(c, 50, rng);
      if (r.escapes != 0) qWarning("%s", r.firstEscape.c_str());
      return std::pair{intervalOutputs(c)[0], r.escapes};
    };
    std::mt19937_64 rng(5);
    const double f32max = 3.4028234663852886e38;
    auto [y, e] = run({}, x, DType::Float32, rng);
    QCOMPARE(e, 0);
    // A NaN endpoint means "unknown" in an enclosure (the entire line): its image is every
    // finite value, the replacement 0 included; the point rule maps NaN to 0 exactly.
    QVERIFY(y.lo()[0] == -f32max && y.hi()[0] == f32max);
    const OpCase pc{"aten.nan_to_num.default", {in(0)}, {},
                    {DType::Float32},          {x},     modelFor(std::nullopt)};
    const std::vector<double> want{0.0, f32max, -f32max, 1.5, -0.0};
    std::vector<Tensor> pointOut;
    localErrorOutputs(pc, &pointOut);
    for (std::size_t i = 0; i < want.size(); ++i) {
      QCOMPARE(pointOut[0].values()[i], want[i]);
      if (i == 0) continue;
      QCOMPARE(y.lo()[i], want[i]);
      QCOMPARE(y.hi()[i], want[i]);
    }
    // given replacements are stored in bf16: 0.1 is enclosed by its bf16 neighbours
    const Tensor xb = Tensor::point({3}, DType::BFloat16, {-inf, inf, -inf});
    auto [yb, eb] = run({num(7.0), num(0.1), num(-3.0)}, xb, DType::BFloat16, rng);
    QCOMPARE(eb, 0);
    QVERIFY(yb.lo()[1] < 0.1 && yb.hi()[1] > 0.1 && yb.hi()[1] - yb.lo()[1] < 1e-3);
    QCOMPARE(yb.hi()[0], -3.0);
    QCOMPARE(yb.lo()[2], -3.0);
    // intervals reaching ±inf: replacement hull the finite part
    const Tensor iv = Tensor::interval({3}, DType::Float32, {-inf, 1.0, -inf}, {2.0, inf, inf});
    auto [yi, ei] = run({num(7.0)}, iv, DType::Float32, rng);
    QCOMPARE(ei, 0);
    QCOMPARE(yi.lo()[0], -f32max);
    QCOMPARE(yi.hi()[0], 2.0);
    QCOMPARE(yi.lo()[1], 1.0);
    QCOMPARE(yi.hi()[1], f32max);
    QVERIFY(yi.lo()[2] == -f32max && yi.hi()[2] == f32max);  // may be NaN: 7 inside
  }

  void powScalarNegativeAndTinyBases() {
    // (-2) ** x: integer exponents give signed values, fractional ones NaN (an entire enclosure);
    // 1e-30 ** x: the base underflows to 0 in bf16/fp16 casts (0 ** x is 0, 1 or inf).
    std::mt19937_64 rng(3);
    for (Format f : kFormats)
      for (double base : {-2.0, 1e-30}) {
        const DType t = dtypeFor(f);
        OpCase c;
        c.op = "aten.pow.Scalar";
        c.outDtypes = {t};
        c.args = {num(base), in(0)};
        c.inputs = {Tensor::point({6}, t, {-3.0, -1.0, 0.0, 2.0, 5.0, 0.5})};
        EnclosureReport r = checkEnclosure(c, 200, rng);
        QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
        c.inputs = {Tensor::interval({2}, t, {1.0, -0.5}, {1.5, 0.25})};
        r = checkEnclosure(c, 200, rng);
        QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
      }
  }

  void comparisonsOfOverlappingIntervalsAreUncertain() {
    OpCase c;
    c.op = "aten.lt.Tensor";
    c.args = {in(0), in(1)};
    c.outDtypes = {DType::Bool};
    c.inputs = {Tensor::interval({2}, DType::Float32, {0.0, 0.0}, {1.0, 1.0}),
                Tensor::interval({2}, DType::Float32, {0.5, 2.0}, {0.6, 3.0})};
    std::mt19937_64 rng(1);
    const EnclosureReport r = checkEnclosure(c, 200, rng);
    QCOMPARE(r.escapes, 0);
    // the first pair overlaps: both outcomes occur and the result must be [0, 1]
    QVERIFY(r.spreadSum >= 1.0);
  }

  void whereAndMaskedFillWithUncertainConditions() {
    std::mt19937_64 rng(5);
    for (Format f : kFormats) {
      for (int k = 0; k < 40; ++k) {
        const DType t = dtypeFor(f);
        const Shape s = randomShape(static_cast<int>(rng() % 3), rng);
        OpCase w;
        w.op = "aten.where.self";
        w.args = {in(0), in(1), in(2)};
        w.outDtypes = {t};
        w.inputs = {
            makeInput(broadcastableTo(s, rng), DType::Bool, Domain::Bool, f, k % 2 == 0, rng),
            makeInput(s, t, Domain::Any, f, true, rng),
            makeInput(broadcastableTo(s, rng), t, Domain::Any, f, false, rng)};
        EnclosureReport r = checkEnclosure(w, 25, rng);
        QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
        OpCase m;
        m.op = k % 4 == 0 ? "aten.masked_fill.Tensor" : "aten.masked_fill.Scalar";
        m.outDtypes = {t};
        m.inputs = {makeInput(s, t, Domain::Any, f, true, rng),
                    makeInput(broadcastableTo(s, rng), DType::Bool, Domain::Bool, f, true, rng)};
        if (k % 4 == 0) {
          m.inputs.push_back(Tensor::scalar(-1e4, t));
          m.args = {in(0), in(1), in(2)};
        } else {
          m.args = {in(0), in(1), num(k % 2 ? -__builtin_huge_val() : 0.1)};
        }
        r = checkEnclosure(m, 25, rng);
        QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
        QVERIFY2(checkVjp(m, rng).maxRelError < 1e-6, m.op.c_str());
      }
    }
  }

  void logicalOps() {
    std::mt19937_64 rng(3);
    for (const char* op : {"aten.bitwise_not.default", "aten.logical_not.default"}) {
      for (int k = 0; k < 40; ++k) {
        OpCase c;
        c.op = op;
        c.args = {in(0)};
        c.outDtypes = {DType::Bool};
        c.inputs = {
            makeInput(randomShape(2, rng), DType::Bool, Domain::Bool, Format::Fp32, k % 2, rng)};
        const EnclosureReport r = checkEnclosure(c, 25, rng);
        QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
      }
    }
    // bitwise_not of an int64 tensor is ~x
    OpCase c;
    c.op = "aten.bitwise_not.default";
    c.args = {in(0)};
    c.outDtypes = {DType::Int64};
    c.inputs = {Tensor::point({3}, DType::Int64, {0, 5, -1})};
    std::mt19937_64 r2(1);
    QCOMPARE(checkEnclosure(c, 5, r2).escapes, 0);
  }

  void binaryLogicalOps() {
    // Truth tables, with broadcasting ({4} against {2,1} is {2,4}) and a float operand for the
    // logical forms (nonzero is true).
    const Tensor x = Tensor::point({4}, DType::Bool, {0, 1, 0, 1});
    const Tensor xf = Tensor::point({4}, DType::Float32, {0, 2.5, 0, -1});
    const Tensor y = Tensor::point({2, 1}, DType::Bool, {0, 1});
    const std::map<std::string, std::vector<double>> expected = {{"and", {0, 0, 0, 0, 0, 1, 0, 1}},
                                                                 {"or", {0, 1, 0, 1, 1, 1, 1, 1}},
                                                                 {"xor", {0, 1, 0, 1, 1, 0, 1, 0}}};
    for (const auto& [name, want] : expected) {
      for (const std::string& op :
           {"aten.logical_" + name + ".default", "aten.bitwise_" + name + ".Tensor"}) {
        const bool logical = op.find("logical") != std::string::npos;
        OpCase c;
        c.op = op;
        c.args = {in(0), in(1)};
        c.outDtypes = {DType::Bool};
        c.inputs = {logical ? xf : x, y};
        const std::vector<Tensor> out = intervalOutputs(c);
        QCOMPARE(out.size(), std::size_t{1});
        QCOMPARE(out[0].shape(), (Shape{2, 4}));
        for (std::size_t i = 0; i < want.size(); ++i) {
          QCOMPARE(out[0].lo()[i], want[i]);
          QCOMPARE(out[0].hi()[i], want[i]);
        }
      }
    }
    // Integer bits: x & 10, x | 10, x ^ 10 (a Scalar operand), two's complement for -1.
    const Tensor xi = Tensor::point({3}, DType::Int64, {12, 5, -1});
    const std::map<std::string, std::vector<double>> bits = {
        {"and", {8, 0, 10}}, {"or", {14, 15, -1}}, {"xor", {6, 15, -11}}};
    for (const auto& [name, want] : bits) {
      OpCase c;
      c.op = "aten.bitwise_" + name + ".Scalar";
      c.args = {in(0), integer(10)};
      c.outDtypes = {DType::Int64};
      c.inputs = {xi};
      const std::vector<Tensor> out = intervalOutputs(c);
      for (std::size_t i = 0; i < want.size(); ++i) QCOMPARE(out[0].lo()[i], want[i]);
    }
    // An unknown operand ([0, 1]) is decided by the other one only for false AND x, true OR x.
    const Tensor unknown = Tensor::interval({2}, DType::Bool, {0, 0}, {1, 1});
    const Tensor fixed = Tensor::point({2}, DType::Bool, {0, 1});
    const std::map<std::string, std::pair<Interval, Interval>> decided = {
        {"and", {{0, 0}, {0, 1}}}, {"or", {{0, 1}, {1, 1}}}, {"xor", {{0, 1}, {0, 1}}}};
    for (const auto& [name, want] : decided) {
      OpCase c;
      c.op = "aten.logical_" + name + ".default";
      c.args = {in(0), in(1)};
      c.outDtypes = {DType::Bool};
      c.inputs = {unknown, fixed};
      const Tensor out = intervalOutputs(c)[0];
      QCOMPARE(out.lo()[0], want.first.lo);
      QCOMPARE(out.hi()[0], want.first.hi);
      QCOMPARE(out.lo()[1], want.second.lo);
      QCOMPARE(out.hi()[1], want.second.hi);
    }
    // Randomized: no escape for bool operands with unknown elements.
    std::mt19937_64 rng(17);
    for (const char* name : {"and", "or", "xor"}) {
      for (const std::string& op : {std::string("aten.logical_") + name + ".default",
                                    std::string("aten.bitwise_") + name + ".Tensor"}) {
        for (int k = 0; k < 40; ++k) {
          OpCase c;
          c.op = op;
          c.args = {in(0), in(1)};
          c.outDtypes = {DType::Bool};
          const Shape s = randomShape(2, rng);
          c.inputs = {makeInput(s, DType::Bool, Domain::Bool, Format::Fp32, k % 2, rng),
                      makeInput(broadcastableTo(s, rng), DType::Bool, Domain::Bool, Format::Fp32,
                                k % 3 == 0, rng)};
          const EnclosureReport r = checkEnclosure(c, 25, rng);
          QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
        }
      }
    }
    // Refused: bitwise ops of floats, and integer operands that are not exact.
    OpCase f;
    f.op = "aten.bitwise_and.Tensor";
    f.args = {in(0), in(1)};
    f.outDtypes = {DType::Float32};
    f.inputs = {xf, xf};
    QVERIFY_THROWS_EXCEPTION(OpError, intervalOutputs(f));
    OpCase w;
    w.op = "aten.bitwise_or.Tensor";
    w.args = {in(0), in(1)};
    w.outDtypes = {DType::Int64};
    w.inputs = {Tensor::interval({1}, DType::Int64, {1}, {3}), xi};
    QVERIFY_THROWS_EXCEPTION(OpError, intervalOutputs(w));
  }

  void scalarDivisionMayUseTheReciprocal() {
    // x / 10 in fp32: a kernel computing x * RN(1/10) differs from RN(x/10) for some x; the
    // interval must hold both (PyTorch's CUDA div_true_kernel multiplies by the reciprocal).
    OpCase c;
    c.op = "aten.div.Scalar";
    c.args = {in(0), num(10.0)};
    c.outDtypes = {DType::Float32};
    std::vector<double> v;
    for (int i = 1; i <= 200; ++i) v.push_back(static_cast<double>(static_cast<float>(i * 0.37)));
    c.inputs = {Tensor::point({200}, DType::Float32, v)};
    std::mt19937_64 rng(11);
    const EnclosureReport r = checkEnclosure(c, 200, rng);
    QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
  }

  void unsupportedDivisionModeIsAnError() {
    OpCase c;
    c.op = "aten.div.Tensor_mode";
    c.args = {in(0), in(1)};
    IrValue mode;
    mode.kind = IrValue::Kind::String;
    mode.stringValue = "floor";
    c.kwargs["rounding_mode"] = mode;
    c.outDtypes = {DType::Float32};
    c.inputs = {Tensor::scalar(1.0, DType::Float32), Tensor::scalar(2.0, DType::Float32)};
    std::mt19937_64 rng(1);
    QVERIFY_THROWS_EXCEPTION(OpError, checkEnclosure(c, 1, rng));
  }

  void clampWithTensorBounds() {
    const auto pointOf = [](const OpCase& oc) {
      std::vector<Tensor> out;
      localErrorOutputs(oc, &out);
      return out[0];
    };
    // torch.clamp(x, min=lo) and torch.clamp(x, lo, hi) with broadcast bounds (PhiMoE's
    // sparsemixer clamps |scores| by the row maximum); max wins where lo > hi; NaN stays NaN.
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const Tensor x = Tensor::point({2, 3}, DType::Float32, {-2, 0.5, 3, nan, 1, -1});
    const Tensor lo = Tensor::point({2, 1}, DType::Float32, {0, -0.5});
    const Tensor hi = Tensor::point({3}, DType::Float32, {1, 2, -3});
    OpCase c;
    c.op = "aten.clamp.Tensor";
    c.outDtypes = {DType::Float32};
    c.precision = modelFor(std::nullopt);
    c.inputs = {x, lo};
    c.args = {in(0), in(1)};
    std::mt19937_64 rng(2);
    const Tensor minOnly = pointOf(c);
    const std::vector<double> wantMin = {0, 0.5, 3, nan, 1, -0.5};
    for (std::size_t i = 0; i < wantMin.size(); ++i)
      QVERIFY(std::isnan(wantMin[i]) ? std::isnan(minOnly.values()[i])
                                     : minOnly.values()[i] == wantMin[i]);
    c.inputs = {x, lo, hi};
    c.args = {in(0), in(1), in(2)};
    const Tensor both = pointOf(c);
    const std::vector<double> wantBoth = {0, 0.5, -3, nan, 1, -3};
    for (std::size_t i = 0; i < wantBoth.size(); ++i)
      QVERIFY(std::isnan(wantBoth[i]) ? std::isnan(both.values()[i])
                                      : both.values()[i] == wantBoth[i]);
    // min as a keyword, max positional None: the same values as the positional form.
    c.inputs = {x, lo};
    c.args = {in(0), none()};
    c.kwargs["min"] = in(1);
    const Tensor kw = pointOf(c);
    for (std::size_t i = 0; i < wantMin.size(); ++i)
      QVERIFY(std::isnan(wantMin[i]) ? std::isnan(kw.values()[i]) : kw.values()[i] == wantMin[i]);
    // Gradients away from the kinks against finite differences; intervals enclose executions.
    for (int trial = 0; trial < 40; ++trial) {
      OpCase d;
      d.op = "aten.clamp.Tensor";
      d.outDtypes = {DType::Float64};
      d.precision = modelFor(std::nullopt);
      const Shape s = randomShape(2, rng, 4, 0.0);
      d.inputs = {randomPoint(s, DType::Float64, rng, 3.0),
                  randomPoint(s, DType::Float64, rng, 3.0),
                  randomPoint(s, DType::Float64, rng, 3.0)};
      d.args = {in(0), in(1), in(2)};
      const VjpReport v = checkVjp(d, rng);
      QVERIFY2(v.maxRelError < 1e-6, v.where.c_str());
    }
    c.kwargs.clear();
    c.args = {in(0), none(), none()};
    QVERIFY_THROWS_EXCEPTION(OpError, checkEnclosure(c, 1, rng));
  }
};

QTEST_GUILESS_MAIN(TestElementwiseOps)
#include "test_elementwise_ops.moc"
