#pragma once
// The contract of one aten op in every evaluation domain.
//
// The interval contract, for every op: the result encloses every value that an implementation of
// this op in the modelled precision could return, for any inputs inside their enclosures, in any
// reduction order and bracketing.
//
// The one way to write a rule (docs/writing-op-rules.md has a full example and the test recipe):
// - a `final` class deriving from OpRule, in the anonymous namespace of core/ops/<family>_ops.cpp,
//   with a `///` line stating its contract; the file's opening comment gives each op's bound and
//   where it comes from;
// - public: the constructor (if the rule has parameters), then point, interval, random, vjp,
//   localError in this order; private: helper member functions, then data members (mName);
// - registered by name in registerXxxOps(OpRegistry&) (declared in families.h, called from
//   registry.cpp): r.add("aten.op.overload", std::make_shared<const XxxRule>(...));
// - helpers: formats.h (formats, storage rounding), broadcasting.h, error_bounds.h (γ, sum/dot
//   bounds), random_arith.h, libm_model.h, arg_readers.h, reduction_layout.h, rule_helpers.h
//   (zeroLocalError, noGradients), nn_support.h (one formula in four domains, localErrorVia);
// - conventions: read only the dtypes of the traced outputs (never their shapes); interval returns
//   interval tensors (views keep their input's form); random reads point values;
// - tests in tests/core/ops/ with op_harness.h: checkEnclosure, checkVjp, checkLocalError in
//   fp64, fp32, bf16 and fp16.

#include "core/ir/ir.h"
#include "core/ops/precision_model.h"
#include "core/tensor/tensor.h"

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace lossbound {

class Backend;

/// Thrown by op rules for inputs they cannot handle (bad arguments, shape mismatch); the message
/// names the node and op (the evaluator adds them if missing) and what was expected and found.
class OpError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The arguments of one node with references resolved to tensors.
class OpArgs {
 public:
  /// Resolves `node`'s references through `lookup` (a ValueRef → Tensor function).
  template <typename Lookup>
  OpArgs(const Node& node, Lookup&& lookup) : mNode(&node) {
    collect(node.args, lookup);
    for (const auto& [k, v] : node.kwargs) collect(std::vector<IrValue>{v}, lookup);
  }

  /// Returns the node being evaluated.
  const Node& node() const { return *mNode; }
  /// Returns the number of positional arguments.
  std::size_t size() const { return mNode->args.size(); }
  /// Returns positional argument i, or a None value when i is past the end.
  const IrValue& arg(std::size_t i) const;
  /// Returns keyword argument `name`, or nullptr.
  const IrValue* kwarg(std::string_view name) const;
  /// Returns the tensor referenced by positional argument i; throws OpError if it is not a ref.
  const Tensor& tensor(std::size_t i) const;
  /// Returns true when positional argument i exists and is a tensor reference.
  bool isTensor(std::size_t i) const;
  /// Returns the tensors referenced by a list argument i (for cat, stack, ...).
  std::vector<const Tensor*> tensorList(std::size_t i) const;
  /// Returns list argument i with one entry per element: the tensor of a reference, nullptr for
  /// None (the index lists of index.Tensor and index_put).
  std::vector<const Tensor*> optionalTensorList(std::size_t i) const;
  /// Returns an integer argument (positional i, else keyword `name`, else `fallback`).
  std::int64_t intArg(std::size_t i, std::string_view name,
                      std::optional<std::int64_t> fallback = std::nullopt) const;
  /// Returns a number argument (int or float constant).
  double numberArg(std::size_t i, std::string_view name,
                   std::optional<double> fallback = std::nullopt) const;
  /// Returns a bool argument.
  bool boolArg(std::size_t i, std::string_view name,
               std::optional<bool> fallback = std::nullopt) const;
  /// Returns a list-of-ints argument (a bare int counts as a one-element list).
  std::vector<std::int64_t> intListArg(
      std::size_t i, std::string_view name,
      std::optional<std::vector<std::int64_t>> fallback = std::nullopt) const;
  /// Returns the spec of output k as traced.
  const TensorSpec& outSpec(std::size_t k = 0) const { return mNode->outputs.at(k); }

  /// Every tensor input in order of appearance (positional, lists flattened, then keywords);
  /// vjp() returns one gradient per entry.
  const std::vector<const Tensor*>& tensorInputs() const { return mTensors; }
  /// The reference each tensorInputs() entry came from.
  const std::vector<ValueRef>& tensorRefs() const { return mRefs; }

  /// Throws OpError("node <name> (<op>): <message>").
  [[noreturn]] void fail(const std::string& message) const;

 private:
  template <typename Lookup>
  void collect(const std::vector<IrValue>& values, Lookup& lookup) {
    for (const IrValue& v : values) {
      if (v.kind == IrValue::Kind::Ref) {
        mTensors.push_back(&lookup(v.ref));
        mRefs.push_back(v.ref);
      } else if (v.kind == IrValue::Kind::List) {
        collect(v.list, lookup);
      }
    }
  }
  const IrValue* find(std::size_t i, std::string_view name) const;

  const Node* mNode;
  std::vector<const Tensor*> mTensors;
  std::vector<ValueRef> mRefs;
};

/// What an op evaluation may use besides its arguments.
struct OpContext {
  const PrecisionModel& precision;
  Backend& backend;
  std::mt19937_64* rng = nullptr;  // set in the randomized domain only
  /// Randomized domain: the GEMMs draw one reduction order per product, not per output element
  /// (GemmOrder::PerProduct, core/ops/gemm.h): as one kernel call sums; cheaper than the
  /// per-element executor's draws, and a narrower exploration of the orders.
  bool orderPerProduct = false;
  /// Values a rule computed for the node in hand that do not depend on the precision model (a
  /// GEMM's |A|·|B|), kept by name for its other local-error calls on the same node (the
  /// first-order evaluators call them under the modelled and the binary64 model); null: none.
  std::map<std::string, std::vector<double>>* nodeMemo = nullptr;
  /// The caller reads only AdjointLocalError::bound (the first-order evaluators' binary64 term):
  /// a rule may skip its probabilistic sum of squares and leave it 0.
  bool boundOnly = false;
  /// Local errors: one flag per OpArgs::tensorInputs() entry, true when the execution being
  /// bounded holds that operand exactly at its point value (the candidate: program inputs,
  /// constants, results of exact operations on such operands, core/program/evaluator.cpp; the
  /// binary64 point evaluation: every operand); null: none. Only on such operands may a rule take
  /// as zero the rounding of an operation whose point result is representable: an operand that
  /// carries upstream error moves the result off the grid, which is a first-order term.
  const std::vector<bool>* exactOperands = nullptr;

  /// Returns true when tensor input k is exact (see exactOperands).
  bool operandExact(std::size_t k) const {
    return exactOperands && k < exactOperands->size() && (*exactOperands)[k];
  }
};

/// One node's rounding error weighted by the adjoints of its outputs (OpRule::adjointLocalError).
struct AdjointLocalError {
  double bound = 0;       ///< ≥ |Σ_k ⟨g_k, ŷ_k − y_k⟩|: the node's first-order term
  double sumSquares = 0;  ///< Σ of squared independent terms (probabilistic), sqrt ≤ bound
};

/// The rules of one op in every domain.
class OpRule {
 public:
  virtual ~OpRule() = default;

  /// Computes the outputs in binary64 point arithmetic (the "exact" reference evaluation).
  virtual std::vector<Tensor> point(const OpArgs& args, OpContext& ctx) const = 0;

  /// Encloses every output an implementation in the modelled precision could return, for inputs
  /// anywhere in their (point or interval) enclosures and any reduction order and bracketing.
  virtual std::vector<Tensor> interval(const OpArgs& args, OpContext& ctx) const = 0;

  /// Executes once in the modelled precision, emulated exactly, with random reduction orders and
  /// bracketings, split-K blocking, FMA on/off and libm results perturbed within the ulp table.
  virtual std::vector<Tensor> random(const OpArgs& args, OpContext& ctx) const = 0;

  /// Returns the vector-Jacobian product: for each tensorInputs() entry, d(outputs)/d(input)
  /// contracted with `outGrads` (one per output; zero tensors where unused), or nullopt for
  /// non-differentiable inputs (ids, masks). Point arithmetic.
  virtual std::vector<std::optional<Tensor>> vjp(const OpArgs& args,
                                                 std::span<const Tensor> outputs,
                                                 std::span<const Tensor> outGrads,
                                                 OpContext& ctx) const = 0;

  /// Bounds, per output element, |computed - exact| of this op alone under the precision model
  /// when its inputs are exact (the local rounding term r_k of the first-order method), including
  /// the rounding of the result to its storage format.
  virtual std::vector<Tensor> localError(const OpArgs& args, std::span<const Tensor> outputs,
                                         OpContext& ctx) const = 0;

  /// Optionally bounds, per output element, the root-sum-square sqrt(Σ_i c_i²) of the bounds c_i
  /// of the individual roundings inside this op (exact inputs, first order): the term the
  /// probabilistic method puts in quadrature (Higham–Mary 2019: independent, mean-zero
  /// roundings), meant to be at most localError's r_k (the evaluator uses min(r_k, this) per
  /// element, so a rule need not take the minimum itself). Empty (the default): the
  /// probabilistic method uses r_k.
  virtual std::vector<Tensor> probabilisticLocalError(const OpArgs& /*args*/,
                                                      std::span<const Tensor> /*outputs*/,
                                                      OpContext& /*ctx*/) const {
    return {};
  }

  /// Optionally bounds |Σ_k ⟨g_k, ŷ_k − y_k⟩| (g_k = outGrads, y_k the point outputs, ŷ_k any
  /// output of the candidate, exact inputs) and gives the probabilistic sum of squares, for ops
  /// whose roundings are shared by many outputs; nullopt (the default): localError is used.
  virtual std::optional<AdjointLocalError> adjointLocalError(const OpArgs& /*args*/,
                                                             std::span<const Tensor> /*outputs*/,
                                                             std::span<const Tensor> /*outGrads*/,
                                                             OpContext& /*ctx*/) const {
    return std::nullopt;
  }

  /// Optionally bounds, per output element, |point() − exact| of this rule's own point() on
  /// exact inputs: the first-order method's term for the binary64 evaluation it is centred on.
  /// Empty (the default): the evaluator uses localError (or adjointLocalError) under a binary64
  /// precision model, which bounds every binary64 execution, point() among them; a rule whose
  /// point() has a closed-form error bound cheaper than that may return it.
  virtual std::vector<Tensor> pointError(const OpArgs& /*args*/,
                                         std::span<const Tensor> /*outputs*/) const {
    return {};
  }
};

}  // namespace lossbound
