#pragma once
// Direct calls of one op rule's domains on concrete inputs, for checks the harness does not make:
// a backward op against the vjp of its forward op, and the first-order behaviour of a rule next to
// its breakpoints (inputs named "in0", "in1", ... as in op_harness.h).

#include "core/backend.h"
#include "core/ops/registry.h"
#include "tests/core/ops/op_harness.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace lossbound::test {

/// One node of an OpCase bound to its inputs; output shapes are taken from point().
class RuleCall {
 public:
  /// Binds the case; throws std::runtime_error when its op is not registered.
  explicit RuleCall(const OpCase& c) : mCase(c), mInputs(c.inputs) {
    mRule = opRegistry().find(c.op);
    if (!mRule) throw std::runtime_error("op " + c.op + " is not registered");
    mNode.name = "case";
    mNode.op = c.op;
    mNode.args = c.args;
    mNode.kwargs = c.kwargs;
    for (DType t : c.outDtypes) mNode.outputs.push_back(TensorSpec{{}, t});
    OpContext ctx = context(nullptr);
    mPoint = mRule->point(args(), ctx);
    for (std::size_t k = 0; k < mPoint.size() && k < mNode.outputs.size(); ++k)
      mNode.outputs[k].shape = mPoint[k].shape();
  }

  /// Returns the point outputs.
  const std::vector<Tensor>& point() const { return mPoint; }
  /// Returns the interval outputs.
  std::vector<Tensor> interval() const {
    OpContext ctx = context(nullptr);
    return mRule->interval(args(), ctx);
  }
  /// Returns one randomized execution.
  std::vector<Tensor> random(std::mt19937_64& rng) const {
    OpContext ctx = context(&rng);
    return mRule->random(args(), ctx);
  }
  /// Returns the vjp at the point outputs for the given output gradients.
  std::vector<std::optional<Tensor>> vjp(const std::vector<Tensor>& outGrads) const {
    OpContext ctx = context(nullptr);
    return mRule->vjp(args(), mPoint, outGrads, ctx);
  }
  /// Returns the local error bounds at the point outputs.
  std::vector<Tensor> localError() const {
    OpContext ctx = context(nullptr);
    return mRule->localError(args(), mPoint, ctx);
  }
  /// Returns the probabilistic local error terms at the point outputs (empty: none).
  std::vector<Tensor> probabilisticLocalError() const {
    OpContext ctx = context(nullptr);
    return mRule->probabilisticLocalError(args(), mPoint, ctx);
  }
  /// Returns the rule's closed-form bound of its point() error (empty: none).
  std::vector<Tensor> pointError() const { return mRule->pointError(args(), mPoint); }
  /// Returns the adjoint-weighted local error for the output gradients `g` (nullopt: none).
  std::optional<AdjointLocalError> adjointLocalError(const std::vector<Tensor>& g) const {
    OpContext ctx = context(nullptr);
    return mRule->adjointLocalError(args(), mPoint, g, ctx);
  }

 private:
  static Backend& backend() {
    static std::unique_ptr<Backend> b = createCpuBackend();
    return *b;
  }
  OpContext context(std::mt19937_64* rng) const {
    return OpContext{mCase.precision, backend(), rng};
  }
  OpArgs args() const {
    return OpArgs(mNode, [this](const ValueRef& r) -> const Tensor& {
      return mInputs.at(static_cast<std::size_t>(std::stoi(r.name.substr(2))));
    });
  }

  OpCase mCase;
  std::vector<Tensor> mInputs;
  Node mNode;
  const OpRule* mRule = nullptr;
  std::vector<Tensor> mPoint;
};

/// Checks a probabilistic term p (per element of output 0) against `executions` random
/// executions of `call`: every error |ŷ − y| within λ·p (λ = 5.39, the method's at confidence
/// 1 − 1e-6), and the root-mean-square error within 1.5·p (the model's variance is at most p²,
/// each rounding |δ_i·c_i| <= c_i; 1.5 for sampling noise: a factor lost in a derivation shows
/// here, not at λ). Elements with skip(i) are left out. Returns the first failure, or "".
inline std::string checkProbabilisticTerm(const RuleCall& call, std::span<const double> p,
                                          int executions, std::mt19937_64& rng,
                                          const std::function<bool(std::size_t)>& skip = {}) {
  const double lambda = std::sqrt(2.0 * std::log(2.0 / 1e-6));
  const auto g = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3g", v);
    return std::string(b);
  };
  const auto y = call.point()[0].values();
  std::vector<double> squares(y.size(), 0.0);
  for (int k = 0; k < executions; ++k) {
    const std::vector<Tensor> run = call.random(rng);
    const auto e = run[0].values();
    for (std::size_t i = 0; i < e.size(); ++i) {
      if (skip && skip(i)) continue;
      const double err = std::fabs(e[i] - y[i]);
      squares[i] += err * err / executions;
      if (!(err <= lambda * p[i]))
        return "element " + std::to_string(i) + ": " + g(err) + " off, term " + g(p[i]);
    }
  }
  for (std::size_t i = 0; i < y.size(); ++i)
    if (!(skip && skip(i)) && !(std::sqrt(squares[i]) <= 1.5 * p[i]))
      return "element " + std::to_string(i) + ": root-mean-square " + g(std::sqrt(squares[i])) +
             ", term " + g(p[i]);
  return "";
}

/// Checks an adjoint-weighted probabilistic term p = sqrt(sumSquares) for output gradients g
/// (output 0) as checkProbabilisticTerm checks an element's: |Σ g_i(ŷ_i − y_i)| within λ·p for
/// every one of `executions` random executions, and its root-mean-square within 1.5·p. Elements
/// where y or ŷ is not finite are left out. Returns the first failure, or "".
inline std::string checkAdjointProbabilisticTerm(const RuleCall& call, std::span<const double> g,
                                                 double p, int executions, std::mt19937_64& rng) {
  const double lambda = std::sqrt(2.0 * std::log(2.0 / 1e-6));
  const auto y = call.point()[0].values();
  double squares = 0.0;
  for (int k = 0; k < executions; ++k) {
    const std::vector<Tensor> run = call.random(rng);
    const auto e = run[0].values();
    long double dot = 0.0L;
    for (std::size_t i = 0; i < y.size(); ++i)
      if (g[i] != 0.0 && std::isfinite(y[i]) && std::isfinite(e[i]))
        dot += static_cast<long double>(g[i]) * (static_cast<long double>(e[i]) - y[i]);
    const double err = std::fabs(static_cast<double>(dot));
    squares += err * err / executions;
    if (!(err <= lambda * p)) {
      char b[96];
      std::snprintf(b, sizeof b, "execution %d: %.3g off, term %.3g", k, err, p);
      return b;
    }
  }
  if (!(std::sqrt(squares) <= 1.5 * p)) {
    char b[96];
    std::snprintf(b, sizeof b, "root-mean-square %.3g, term %.3g", std::sqrt(squares), p);
    return b;
  }
  return "";
}

}  // namespace lossbound::test
