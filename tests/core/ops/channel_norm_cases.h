#pragma once
// Random cases of the batch-norm and group-norm op rules for the op harness, shared by their
// tests: N×C×H×W, N×C×L and N×C inputs (some with zero extents), rows with a large mean against
// a small spread (where two-pass, Welford and the CPU affine form lose accuracy), wide dynamic
// ranges, weight/bias/running stats present or None, point or interval inputs, parameters in the
// input dtype or in fp32 (PyTorch 2.x mixed batch norm), and a direct way to run one rule domain.

#include "core/backend.h"
#include "core/ops/registry.h"
#include "tests/core/ops/nn_test_util.h"
#include "tests/core/ops/rule_call.h"

#include <QtTest>

#include <cmath>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace lossbound::test::norm {

using nn::CaseMaker;
using nn::uniform;
using nn::values;

/// Returns values with one of several offsets and scales (or a wide dynamic range), in dtype t.
inline Tensor normValues(const Shape& s, DType t, bool iv, std::mt19937_64& rng, Format f) {
  const double offsets[] = {0.0, 0.0, 3.0, 100.0, -1000.0};
  const double scales[] = {1.0, 0.01, 10.0};
  if (rng() % 4 == 0) return values(s, t, iv, rng, f == Format::Fp16 ? 4.0 : 8.0);
  double off = offsets[rng() % 5];
  if (f == Format::Fp16) off = std::clamp(off, -100.0, 100.0);
  return uniform(s, t, iv, rng, scales[rng() % 3], off);
}

/// Returns an N×C×* shape: rank 2, 3 or 4, extents 1..maxExtent, a zero extent with
/// probability zeroProb (per shape).
inline Shape channelShape(std::mt19937_64& rng, std::int64_t maxC, double zeroProb = 0.03) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Shape s{1 + static_cast<std::int64_t>(rng() % 4), 1 + static_cast<std::int64_t>(rng() % maxC)};
  const int spatial = static_cast<int>(rng() % 3);
  for (int d = 0; d < spatial; ++d) s.push_back(1 + static_cast<std::int64_t>(rng() % 6));
  if (u(rng) < zeroProb) {
    const std::size_t d = rng() % s.size();
    s[d == 1 ? 0 : d] = 0;  // no zero channel count: C = 0 has nothing to normalize
  }
  return s;
}

/// Returns the number of elements per channel (N·∏spatial) of an N×C×* shape.
inline std::int64_t perChannel(const Shape& s) {
  std::int64_t n = s[0];
  for (std::size_t d = 2; d < s.size(); ++d) n *= s[d];
  return n;
}

/// The batch-norm forward overloads.
enum class BnOp { Native, Legit, NoStats, NoTraining, Functional };

/// Returns the aten name of a batch-norm forward overload.
inline const char* bnOpName(BnOp op) {
  switch (op) {
    case BnOp::Native:
      return "aten.native_batch_norm.default";
    case BnOp::Legit:
      return "aten._native_batch_norm_legit.default";
    case BnOp::NoStats:
      return "aten._native_batch_norm_legit.no_stats";
    case BnOp::NoTraining:
      return "aten._native_batch_norm_legit_no_training.default";
    case BnOp::Functional:
      return "aten._native_batch_norm_legit_functional.default";
  }
  return "";
}

/// Returns the parameter dtype of a case in format f: the input dtype, or (one case in three in
/// bf16/fp16) float32 as in PyTorch 2.x mixed-precision batch norm.
inline DType paramDtype(Format f, std::mt19937_64& rng) {
  const DType t = dtypeFor(f);
  return (f == Format::Bf16 || f == Format::Fp16) && rng() % 3 == 0 ? DType::Float32 : t;
}

/// Returns a random batch-norm forward case of overload `op`. `minPerChannel` excludes shapes
/// with fewer elements per channel (the vjp checks need n >= 2 for the unbiased variance).
inline OpCase bnForwardCase(BnOp op, Format f, bool iv, std::mt19937_64& rng,
                            std::int64_t minPerChannel = 0) {
  OpCase c;
  c.op = bnOpName(op);
  c.precision = modelFor(std::nullopt);
  const DType t = dtypeFor(f), pt = paramDtype(f, rng);
  Shape s = channelShape(rng, 5, minPerChannel > 0 ? 0.0 : 0.03);
  while (perChannel(s) < minPerChannel) s.push_back(2);
  const std::int64_t ch = s[1];
  c.inputs = {normValues(s, t, iv, rng, f)};
  c.args = {in(0)};
  int k = 1;
  auto optional = [&](bool present, Tensor v) {
    if (present) c.inputs.push_back(std::move(v));
    c.args.push_back(present ? in(k++) : none());
  };
  optional(rng() % 3 != 0, uniform({ch}, pt, iv, rng, 1.0, 1.0));
  optional(rng() % 3 != 0, uniform({ch}, pt, iv, rng, 0.5));
  bool training = rng() % 2 == 0;
  if (op == BnOp::NoStats) training = true;
  if (op == BnOp::NoTraining) training = false;
  const bool stats = op == BnOp::Legit || op == BnOp::NoTraining || op == BnOp::Functional ||
                     (op == BnOp::Native && (!training || rng() % 2 == 0));
  if (op != BnOp::NoStats) {
    optional(stats, uniform({ch}, pt, iv, rng, 1.0));
    optional(stats, uniform({ch}, pt, iv, rng, 0.5, 1.0));
  }
  if (op != BnOp::NoTraining) c.args.push_back(flag(training));
  c.args.push_back(num(rng() % 4 == 0 ? 0.01 * static_cast<double>(1 + rng() % 50) : 0.1));
  c.args.push_back(num(1e-5));
  c.outDtypes = {t, pt, pt};
  if (op == BnOp::Functional) c.outDtypes.insert(c.outDtypes.end(), {pt, pt});
  return c;
}

/// Returns per-channel (mean, 1/sqrt(var + eps)) of x computed in long double and rounded to
/// nearest in f (what the forward saves).
inline std::pair<std::vector<double>, std::vector<double>> channelStats(const Tensor& x, Format f,
                                                                        double eps) {
  const Shape& s = x.shape();
  const std::int64_t ch = s[1], hw = perChannel(s) / std::max<std::int64_t>(s[0], 1);
  std::vector<double> mean(static_cast<std::size_t>(ch)), rstd(mean.size());
  for (std::int64_t c = 0; c < ch; ++c) {
    long double m = 0, v = 0;
    std::int64_t n = 0;
    for (std::int64_t b = 0; b < s[0]; ++b)
      for (std::int64_t i = 0; i < hw; ++i, ++n)
        m += x.values()[static_cast<std::size_t>((b * ch + c) * hw + i)];
    m /= n > 0 ? n : 1;
    for (std::int64_t b = 0; b < s[0]; ++b)
      for (std::int64_t i = 0; i < hw; ++i) {
        const long double d = x.values()[static_cast<std::size_t>((b * ch + c) * hw + i)] - m;
        v += d * d;
      }
    v /= n > 0 ? n : 1;
    mean[static_cast<std::size_t>(c)] =
        roundToFormat(static_cast<double>(m), f, RoundingDirection::Nearest);
    rstd[static_cast<std::size_t>(c)] =
        roundToFormat(static_cast<double>(1 / std::sqrt(v + static_cast<long double>(eps))), f,
                      RoundingDirection::Nearest);
  }
  return {mean, rstd};
}

/// Returns a random native_batch_norm_backward case (save_mean/save_invstd as the forward saves
/// them, running stats given or None in training, output_mask random).
inline OpCase bnBackwardCase(Format f, bool iv, std::mt19937_64& rng) {
  OpCase c;
  c.op = "aten.native_batch_norm_backward.default";
  c.precision = modelFor(std::nullopt);
  const DType t = dtypeFor(f), pt = paramDtype(f, rng);
  const Shape s = channelShape(rng, 5);
  const std::int64_t ch = s[1];
  const Tensor x = normValues(s, t, false, rng, f);
  const bool train = rng() % 4 != 0;
  const auto [mean, rstd] = channelStats(x, storageFormat(pt).value(), 1e-5);
  c.inputs = {values(s, t, iv, rng, f == Format::Fp16 ? 3.0 : 6.0), iv ? x.toInterval() : x};
  c.args = {in(0), in(1)};
  int k = 2;
  auto optional = [&](bool present, Tensor v) {
    if (present) c.inputs.push_back(std::move(v));
    c.args.push_back(present ? in(k++) : none());
  };
  optional(rng() % 3 != 0, uniform({ch}, pt, iv, rng, 1.0, 1.0));
  const bool stats = !train || rng() % 2 == 0;
  optional(stats, uniform({ch}, pt, iv, rng, 1.0));
  optional(stats, uniform({ch}, pt, iv, rng, 0.5, 1.0));
  if (train) {
    optional(true, Tensor::point({ch}, pt, mean));
    optional(true, Tensor::point({ch}, pt, rstd));
  } else {  // eval: the forward saved empty tensors, or the trace has None
    const bool empty = rng() % 2 == 0;
    optional(empty, Tensor::point({0}, pt, {}));
    optional(empty, Tensor::point({0}, pt, {}));
  }
  c.args.push_back(flag(train));
  c.args.push_back(num(1e-5));
  c.args.push_back(list({flag(rng() % 4 != 0), flag(rng() % 4 != 0), flag(rng() % 4 != 0)}));
  c.outDtypes = {t, pt, pt};
  return c;
}

/// The (N, C, HxW, G) of a group-norm case and its input shape.
struct GnShape {
  std::int64_t n, c, hw, g;
  Shape x;
};

/// Returns a random group-norm layout: N 1..3 (rarely 0), G 1..3, C/G 1..4, HxW from 0..2
/// spatial dims of 1..6.
inline GnShape gnShape(std::mt19937_64& rng) {
  GnShape s;
  s.n = rng() % 40 == 0 ? 0 : 1 + static_cast<std::int64_t>(rng() % 3);
  s.g = 1 + static_cast<std::int64_t>(rng() % 3);
  s.c = s.g * (1 + static_cast<std::int64_t>(rng() % 4));
  s.x = {s.n, s.c};
  s.hw = 1;
  const int spatial = static_cast<int>(rng() % 3);
  for (int d = 0; d < spatial; ++d) {
    const std::int64_t e = 1 + static_cast<std::int64_t>(rng() % 6);
    s.x.push_back(e);
    s.hw *= e;
  }
  return s;
}

/// Returns a random native_group_norm case.
inline OpCase gnForwardCase(Format f, bool iv, std::mt19937_64& rng) {
  OpCase c;
  c.op = "aten.native_group_norm.default";
  c.precision = modelFor(std::nullopt);
  const DType t = dtypeFor(f), pt = paramDtype(f, rng);
  const GnShape s = gnShape(rng);
  c.inputs = {normValues(s.x, t, iv, rng, f)};
  c.args = {in(0)};
  int k = 1;
  auto optional = [&](bool present, Tensor v) {
    if (present) c.inputs.push_back(std::move(v));
    c.args.push_back(present ? in(k++) : none());
  };
  optional(rng() % 3 != 0, uniform({s.c}, pt, iv, rng, 1.0, 1.0));
  optional(rng() % 3 != 0, uniform({s.c}, pt, iv, rng, 0.5));
  c.args.insert(c.args.end(), {integer(s.n), integer(s.c), integer(s.hw), integer(s.g), num(1e-5)});
  c.outDtypes = {t, pt, pt};
  return c;
}

/// Returns a random native_group_norm_backward case (mean/rstd as the forward saves them).
inline OpCase gnBackwardCase(Format f, bool iv, std::mt19937_64& rng) {
  OpCase c;
  c.op = "aten.native_group_norm_backward.default";
  c.precision = modelFor(std::nullopt);
  const DType t = dtypeFor(f), pt = paramDtype(f, rng);
  const GnShape s = gnShape(rng);
  const Tensor x = normValues(s.x, t, false, rng, f);
  // Group statistics: the group's rows viewed as channels of a 1×(N·G)×m tensor.
  const std::int64_t m = s.c / s.g * s.hw;
  const auto [mean, rstd] =
      channelStats(x.reshaped({1, s.n * s.g, m}), storageFormat(pt).value(), 1e-5);
  c.inputs = {values(s.x, t, iv, rng, f == Format::Fp16 ? 3.0 : 6.0), iv ? x.toInterval() : x,
              Tensor::point({s.n, s.g}, pt, mean), Tensor::point({s.n, s.g}, pt, rstd)};
  c.args = {in(0), in(1), in(2), in(3)};
  const bool w = rng() % 3 != 0;
  if (w) c.inputs.push_back(uniform({s.c}, pt, iv, rng, 1.0, 1.0));
  c.args.push_back(w ? in(4) : none());
  c.args.insert(c.args.end(), {integer(s.n), integer(s.c), integer(s.hw), integer(s.g)});
  c.args.push_back(list({flag(rng() % 4 != 0), flag(rng() % 4 != 0), flag(rng() % 4 != 0)}));
  c.outDtypes = {t, pt, pt};
  return c;
}

/// Returns the case with every input replaced by values in [−2, 2], inputs from index
/// `firstPositive` on in [1, 3] (variances, rstd, weights): the finite-difference checks need
/// moderate values.
inline CaseMaker moderate(CaseMaker m, std::size_t firstPositive) {
  return [m, firstPositive](Format f, bool iv, std::mt19937_64& rng) {
    OpCase c = m(f, iv, rng);
    std::uniform_real_distribution<double> u(-2.0, 2.0);
    for (std::size_t k = 0; k < c.inputs.size(); ++k) {
      Tensor& x = c.inputs[k];
      std::vector<double> v(static_cast<std::size_t>(x.numel()));
      for (double& e : v) e = k >= firstPositive ? 1.0 + std::fabs(u(rng)) : u(rng);
      x = Tensor::point(x.shape(), x.dtype(), v);
    }
    return c;
  };
}

/// A node of a case bound to its inputs (output shapes as given), to run one rule domain.
struct Bound {
  Node node;
  std::vector<Tensor> inputs;
  /// Binds `c`'s inputs; output k gets shape shapes[k] when given, else a 0-d shape.
  explicit Bound(const OpCase& c, std::vector<Shape> shapes = {}) : inputs(c.inputs) {
    node.name = "norm";
    node.op = c.op;
    node.args = c.args;
    for (std::size_t k = 0; k < c.outDtypes.size(); ++k)
      node.outputs.push_back({k < shapes.size() ? shapes[k] : Shape{}, c.outDtypes[k]});
  }
  /// Returns the arguments as a rule sees them.
  OpArgs args() const {
    return OpArgs(node, [this](const ValueRef& r) -> const Tensor& {
      return inputs.at(static_cast<std::size_t>(std::stoi(r.name.substr(2))));
    });
  }
  /// Returns the rule of the node's op.
  const OpRule& rule() const { return *opRegistry().find(node.op); }
};

/// Returns the CPU backend shared by the direct rule calls of the tests.
inline Backend& cpuBackend() {
  static std::unique_ptr<Backend> b = createCpuBackend();
  return *b;
}

/// The adjoint-weighted local error of a normalization's forward against random executions
/// (checkAdjointLocalError: four adjoints, `trials` executions each): no execution above the
/// bound, the probabilistic term never above it, no execution above λ times it and its
/// root-mean-square within 1.5 times it. Returns the first failure, or "" — and in `hooked`
/// whether the rule had a term for the case (nullopt: the evaluator uses localError).
inline std::string adjointFailure(const OpCase& c, int trials, std::mt19937_64& rng, bool& hooked) {
  const AdjointErrorReport rep = checkAdjointLocalError(c, trials, rng);
  hooked = rep.hooked;
  if (!rep.hooked) return "";
  if (rep.violations > 0) return rep.first;
  if (rep.probabilisticAbove > 0) return "the probabilistic term exceeds the bound";
  if (rep.probabilisticEscapes > 0)
    return std::to_string(rep.probabilisticEscapes) + " executions beyond λ·term";
  if (rep.maxRmsRatio > 1.5)
    return "root-mean-square " + std::to_string(rep.maxRmsRatio) + " × the term";
  return "";
}

/// Runs adjointFailure on 24 cases of `make` per format (100 executions each, exact inputs) and
/// requires at least a quarter of them to have an adjoint term; prints how many did.
inline void checkAdjointCases(const char* name, const CaseMaker& make, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  int hooked = 0, cases = 0;
  for (Format f : nn::kFormats)
    for (int k = 0; k < 24; ++k) {
      bool h = false;
      const std::string failure = adjointFailure(make(f, false, rng), 100, rng, h);
      QVERIFY2(failure.empty(),
               (std::string(name) + " " + std::string(nn::formatName(f)) + ": " + failure).c_str());
      hooked += h;
      ++cases;
    }
  std::printf("%s: %d of %d random cases have an adjoint term\n", name, hooked, cases);
  QVERIFY(hooked >= cases / 4);
}

/// Returns sqrt(Σ(g·r)²) over output 0 with r = localError: the probabilistic term of a rule
/// without adjointLocalError (elements in quadrature, each with its worst-case local error).
inline double perElementTerm(const OpCase& c, std::span<const double> g) {
  Bound b(c);
  OpContext ctx{c.precision, cpuBackend(), nullptr};
  const std::vector<Tensor> out = b.rule().point(b.args(), ctx);
  Bound shaped(c, {out[0].shape(), out[1].shape(), out[2].shape()});
  const std::vector<Tensor> le = shaped.rule().localError(shaped.args(), out, ctx);
  const auto r = le[0].hi();
  double ss = 0.0;
  for (std::size_t i = 0; i < r.size(); ++i) ss += (g[i] * r[i]) * (g[i] * r[i]);
  return std::sqrt(ss);
}

/// Returns a forward case of `op` on fp32 x of shape `xs` (uniform in ±1 around `off`), with a
/// weight near 1 and a bias of `channels` elements, then the arguments `tail`.
inline OpCase largeNormCase(const std::string& op, const Shape& xs, std::int64_t channels,
                            double off, std::vector<IrValue> tail, std::mt19937_64& rng) {
  OpCase c;
  c.op = op;
  c.precision = modelFor(std::nullopt);
  const DType t = DType::Float32;
  c.inputs = {uniform(xs, t, false, rng, 1.0, off), uniform({channels}, t, false, rng, 1.0, 1.0),
              uniform({channels}, t, false, rng, 0.5)};
  c.args = {in(0), in(1), in(2)};
  c.args.insert(c.args.end(), tail.begin(), tail.end());
  c.outDtypes = {t, t, t};
  return c;
}

/// The adjoint term of a normalization case with long rows against 60 executions for three
/// adjoints of output 0 (ones, ∝ y, random signs), and against perElementTerm: prints both and
/// requires the adjoint term below a tenth of it for random signs.
inline void checkLargeRows(const OpCase& c, std::mt19937_64& rng, const char* name, double off) {
  const RuleCall call(c);
  const std::vector<Tensor>& out = call.point();
  const auto y = out[0].values();
  for (int kind = 0; kind < 3; ++kind) {
    std::vector<double> g(y.size());
    for (std::size_t i = 0; i < g.size(); ++i)
      g[i] = kind == 0 ? 1.0 : kind == 1 ? y[i] : ((rng() & 1) ? 1.0 : -1.0);
    std::vector<Tensor> grads{Tensor::point(out[0].shape(), out[0].dtype(), g)};
    for (std::size_t k = 1; k < out.size(); ++k)
      grads.push_back(Tensor::full(out[k].shape(), out[k].dtype(), 0.0));
    const auto term = call.adjointLocalError(grads);
    QVERIFY2(term.has_value(), name);
    const double p = std::sqrt(term->sumSquares), old = perElementTerm(c, g);
    std::printf("%s, offset %g, adjoint %d: probabilistic term %.3g, per-element %.3g (%.0f×)\n",
                name, off, kind, p, old, old / p);
    // Random signs, as a network's gradients: the shared statistics' terms cancel in Σ g·w
    // and Σ g·w·(x − μ), which the per-element worst cases in quadrature cannot see.
    if (kind == 2) QVERIFY2(p < 0.1 * old, name);
    const std::string failure = checkAdjointProbabilisticTerm(call, g, p, 60, rng);
    QVERIFY2(failure.empty(), (std::string(name) + ": " + failure).c_str());
  }
}

}  // namespace lossbound::test::norm
