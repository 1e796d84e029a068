#pragma once
// Evaluation of a step Program on a Backend, op by op through the OpRules of opRegistry().
//
// Scheduling: nodes run in program order (the IR guarantees a valid execution order), pruned to
// the nodes the requested outputs depend on — asking only for "loss" skips the backward and the
// optimizer nodes. In the forward-only modes (evaluate()) a value is dropped right after its last
// use, so peak memory is the live set of the forward pass, not the whole trace.
//
// Domains: Point (binary64, the exact reference evaluation), Interval (enclosures under the
// precision model; optionally only from a *start node* on — every node before it in program order
// is evaluated in point arithmetic and its value treated as exact, which ignores the rounding
// upstream of the start node), Random (one randomized execution in the modelled precision, seeded).
//
// First order (evaluateFirstOrder()): a point forward pass keeping every value, then a reverse pass
// with the ops' vjp rules giving the adjoint g_k = ∂loss/∂v_k of every intermediate, and per node
// the local rounding bound r_k from localError(); per node it reports Σ|g_k|·r_k (the budget
// attribution term of ARCHITECTURE §1) and Σ(g_k·c_k)² (for the probabilistic method), where c_k
// is the rule's probabilisticLocalError (the root-sum-square of the roundings inside a reduction)
// when it has one, else r_k — the terms of elements with equal operands summed before they are
// squared (core/program/equal_operands.h). A rule with an adjointLocalError (roundings shared by
// many outputs: a layer norm's row statistics) gives both terms of its node itself from the
// adjoints, in both reverse passes and for both the modelled precision and the binary64 pointBound;
// the functional pass caches only localError (the hook depends on each functional's adjoints).
// The binary64 pointBound takes a rule's closed-form bound of its own point() error where it has
// one (OpRule::pointError: softmax, log-softmax, gelu), else its local error under a binary64
// precision model, which bounds every binary64 execution, point() among them.
//
// Cancellation is cooperative: the flag is checked before every op (forward and reverse) and a
// set flag throws Cancelled. Progress is reported after every op as (done, total).
//
// Errors: an op without a rule, an op rule that throws, a result whose shape disagrees with the
// trace, or a missing / mis-shaped input throw EvaluationError naming the node and op.

#include "core/ir/ir.h"
#include "core/ops/precision_model.h"
#include "core/tensor/tensor.h"
#include "core/tensor/tensor_map.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace lossbound {

class Backend;

/// Thrown when a program cannot be evaluated; node() and op() are empty for input problems.
class EvaluationError : public std::runtime_error {
 public:
  /// Builds the error; `message` is the whole user-facing text.
  EvaluationError(const std::string& message, std::string node = {}, std::string op = {})
      : std::runtime_error(message), mNode(std::move(node)), mOp(std::move(op)) {}
  /// Returns the node being evaluated when it failed ("" if none).
  const std::string& node() const { return mNode; }
  /// Returns that node's op ("" if none).
  const std::string& op() const { return mOp; }

 private:
  std::string mNode, mOp;
};

/// Thrown between two ops when the cancellation flag is set.
class Cancelled : public std::runtime_error {
 public:
  /// Builds the exception with the message "evaluation cancelled".
  Cancelled() : std::runtime_error("evaluation cancelled") {}
};

/// The arithmetic of a forward evaluation.
enum class EvalDomain { Point, Interval, Random };

/// How to evaluate.
struct EvalOptions {
  EvalDomain domain = EvalDomain::Point;
  PrecisionModel precision;  ///< the modelled arithmetic (Interval, Random, local errors)
  std::uint64_t seed = 0;    ///< Random domain: seed of the std::mt19937_64
  /// Random domain: one reduction order per matrix product instead of one per output element
  /// (OpContext::orderPerProduct): what the baselines' one rounded execution and the ensemble
  /// method's default (EnsembleOrder::PerProduct) use.
  bool orderPerProduct = false;
  std::string startNode;             ///< Interval domain: nodes before it run in point arithmetic
  std::vector<std::string> outputs;  ///< program output names to compute; empty = only "loss"
  std::function<void(std::size_t done, std::size_t total)> progress;  ///< after every op
  const std::atomic<bool>* cancel = nullptr;  ///< when set and true, the next op throws Cancelled
};

/// The outputs of a forward evaluation.
struct EvalResult {
  TensorMap outputs;               ///< the requested program outputs by name
  std::size_t nodesEvaluated = 0;  ///< nodes run after pruning
  std::size_t nodesSkipped = 0;    ///< nodes not needed for the requested outputs
};

/// One node's share of the first-order rounding bound.
struct NodeBudget {
  std::string node;       ///< trace node name
  std::string op;         ///< aten op
  double bound = 0;       ///< Σ over its output elements of |g|·r (absolute loss units)
  double sumSquares = 0;  ///< Σ over its elements' groups of (Σ|g|·c)² (see the file comment)
};

/// The result of evaluateFirstOrder().
struct FirstOrderResult {
  double loss = 0;                 ///< the point (binary64) value of the loss output
  double bound = 0;                ///< Σ over nodes of NodeBudget::bound
  double sumSquares = 0;           ///< Σ over nodes of NodeBudget::sumSquares
  double pointBound = 0;           ///< first-order bound of `loss`'s own binary64 rounding
  std::vector<NodeBudget> nodes;   ///< every evaluated node with a floating output, program order
  std::size_t nodesEvaluated = 0;  ///< forward nodes run after pruning
};

/// Returns the indices of the nodes that `outputs` (program output names) depend on, in program
/// order; throws EvaluationError for an unknown output name.
std::vector<std::size_t> neededNodes(const Program& program,
                                     const std::vector<std::string>& outputs);

/// Evaluates the requested outputs in options.domain; throws EvaluationError (missing or
/// mis-shaped input, unknown start node, unsupported op, failing op) or Cancelled.
EvalResult evaluate(const Program& program, const TensorMap& inputs, Backend& backend,
                    const EvalOptions& options = {});

/// Evaluates the loss output (options.outputs.front(), default "loss") in point arithmetic and
/// runs the reverse pass; returns the per-node first-order terms under options.precision and, with
/// the same adjoints, the first-order bound of the binary64 evaluation itself (pointBound).
/// options.domain is ignored.
/// Throws EvaluationError (also for an op without vjp/localError support) or Cancelled.
FirstOrderResult evaluateFirstOrder(const Program& program, const TensorMap& inputs,
                                    Backend& backend, const EvalOptions& options = {});

/// The first-order bound of one linear functional φ(y) = Σ_e w_e·y_e of a program output.
struct FunctionalBound {
  double value = 0;       ///< φ at the binary64 point values of the output
  double bound = 0;       ///< Σ over nodes of Σ|g|·r (g = ∂φ/∂v, modelled precision)
  double sumSquares = 0;  ///< Σ over nodes of Σ(g·c)² (grouped as in evaluateFirstOrder)
  double pointBound = 0;  ///< the same adjoints with the point's own errors (OpRule::pointError,
                          ///< else binary64 local errors)
};

/// A program evaluated once in point arithmetic, every value kept, so that first-order bounds of
/// many linear functionals of its outputs cost one reverse pass each (the forward pass and every
/// node's local rounding bounds are shared). Evaluates every node the requested outputs need,
/// backward nodes included (their vjp rules give the second-order adjoints).
class LinearizedProgram {
 public:
  /// Runs the forward pass of `options.outputs` (empty: every program output) in point arithmetic
  /// with the local errors under options.precision; throws EvaluationError or Cancelled.
  LinearizedProgram(const Program& program, const TensorMap& inputs, Backend& backend,
                    const EvalOptions& options);
  ~LinearizedProgram();
  LinearizedProgram(const LinearizedProgram&) = delete;
  LinearizedProgram& operator=(const LinearizedProgram&) = delete;

  /// Returns the names of the evaluated outputs, in program order.
  const std::vector<std::string>& outputNames() const;
  /// Returns the binary64 point value of output `name`; throws EvaluationError for an unknown one.
  const Tensor& output(const std::string& name) const;
  /// Returns the first-order bound of Σ_e weights_e·output_e (weights: a point tensor of the
  /// output's shape) by one reverse pass; throws EvaluationError (shape mismatch, missing vjp or
  /// localError support) or Cancelled.
  FunctionalBound functional(const std::string& name, const Tensor& weights);
  /// Returns the forward nodes run.
  std::size_t nodesEvaluated() const;

 private:
  struct State;
  std::unique_ptr<State> mState;
};

}  // namespace lossbound
