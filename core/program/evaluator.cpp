#include "core/program/evaluator.h"

#include "core/backend.h"
#include "core/ir/program_parser.h"
#include "core/ops/op_rule.h"
#include "core/ops/registry.h"
#include "core/program/equal_operands.h"
#include "core/program/exact_values.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <unordered_map>

namespace lossbound {

namespace {

constexpr std::size_t kNever = std::numeric_limits<std::size_t>::max();

std::string nodeLabel(const Node& n) { return "node '" + n.name + "' (" + n.op + ")"; }

void forEachRef(const IrValue& v, const std::function<void(const ValueRef&)>& f) {
  if (v.kind == IrValue::Kind::Ref) f(v.ref);
  for (const IrValue& e : v.list) forEachRef(e, f);
}

void forEachRef(const Node& n, const std::function<void(const ValueRef&)>& f) {
  for (const IrValue& a : n.args) forEachRef(a, f);
  for (const auto& [k, v] : n.kwargs) forEachRef(v, f);
}

// The value store of one evaluation: slot per input and per node, each holding the outputs.
class Schedule {
 public:
  Schedule(const Program& program, const std::vector<std::string>& outputNames)
      : mProgram(program) {
    try {
      validateProgram(program, "step program");
    } catch (const ProgramError& e) {
      throw EvaluationError(std::string("cannot evaluate an invalid program: ") + e.what());
    }
    // Slots: the inputs, then the inline constants (IR version 2), then the nodes.
    mLeaves = program.inputs.size() + program.constants.size();
    for (std::size_t i = 0; i < program.inputs.size(); ++i)
      mSlotOf.emplace(program.inputs[i].name, i);
    for (std::size_t i = 0; i < program.constants.size(); ++i)
      mSlotOf.emplace(program.constants[i].name, program.inputs.size() + i);
    for (std::size_t i = 0; i < program.nodes.size(); ++i)
      mSlotOf.emplace(program.nodes[i].name, mLeaves + i);
    mOutputs = outputNames.empty() ? std::vector<std::string>{"loss"} : outputNames;
    for (const std::string& name : mOutputs) {
      auto it = std::find_if(program.outputs.begin(), program.outputs.end(),
                             [&](const OutputSpec& o) { return o.name == name; });
      if (it == program.outputs.end()) {
        std::string known;
        for (const OutputSpec& o : program.outputs) known += (known.empty() ? "" : ", ") + o.name;
        throw EvaluationError("the program has no output called '" + name + "' (it has: " + known +
                              ")");
      }
      mOutputRefs.push_back(it->ref);
    }
    // Pruning: walk backwards from the requested outputs.
    std::vector<char> needed(program.nodes.size(), 0);
    auto mark = [&](const ValueRef& r) {
      const std::size_t s = mSlotOf.at(r.name);
      if (s >= mLeaves)
        needed[s - mLeaves] = 1;
      else if (s < program.inputs.size())
        mInputNeeded.insert(r.name);
    };
    for (const ValueRef& r : mOutputRefs) mark(r);
    for (std::size_t i = program.nodes.size(); i-- > 0;)
      if (needed[i]) forEachRef(program.nodes[i], mark);
    for (std::size_t i = 0; i < program.nodes.size(); ++i)
      if (needed[i]) mOrder.push_back(i);
    // Last use of every slot among the needed nodes; program outputs live to the end.
    mLastUse.assign(mLeaves + program.nodes.size(), 0);
    for (std::size_t i : mOrder)
      forEachRef(program.nodes[i], [&](const ValueRef& r) { mLastUse[mSlotOf.at(r.name)] = i; });
    for (const ValueRef& r : mOutputRefs) mLastUse[mSlotOf.at(r.name)] = kNever;
    mValues.resize(mLastUse.size());
  }

  const std::vector<std::size_t>& order() const { return mOrder; }
  const std::vector<ValueRef>& outputRefs() const { return mOutputRefs; }
  const std::vector<std::string>& outputNames() const { return mOutputs; }
  std::size_t slotOf(const std::string& name) const { return mSlotOf.at(name); }
  std::size_t nodeSlot(std::size_t node) const { return mLeaves + node; }
  std::size_t slots() const { return mValues.size(); }
  std::function<std::size_t(const std::string&)> slotFinder() const {
    return [this](const std::string& name) { return slotOf(name); };
  }

  // Checks that every needed input is given with the traced shape and dtype, and stores it.
  void setInputs(const TensorMap& inputs) {
    for (std::size_t i = 0; i < mProgram.inputs.size(); ++i) {
      const InputSpec& in = mProgram.inputs[i];
      if (!mInputNeeded.count(in.name)) continue;
      auto it = inputs.find(in.name);
      if (it == inputs.end())
        throw EvaluationError("input '" + in.name + "' was not given (the program needs it as " +
                              shapeString(in.spec.shape) + " " +
                              std::string(dtypeName(in.spec.dtype)) + ")");
      const Tensor& t = it->second;
      if (t.shape() != in.spec.shape || t.dtype() != in.spec.dtype)
        throw EvaluationError("input '" + in.name + "' is " + shapeString(t.shape()) + " " +
                              std::string(dtypeName(t.dtype())) + ", the program expects " +
                              shapeString(in.spec.shape) + " " +
                              std::string(dtypeName(in.spec.dtype)));
      mValues[i] = {t};
    }
    // Inline constants are exact point values of their dtype.
    for (std::size_t i = 0; i < mProgram.constants.size(); ++i) {
      const ConstantSpec& c = mProgram.constants[i];
      mValues[mProgram.inputs.size() + i] = {Tensor::point(c.spec.shape, c.spec.dtype, c.data)};
    }
  }

  const Tensor& lookup(const ValueRef& r) const {
    const std::vector<Tensor>& v = mValues[mSlotOf.at(r.name)];
    if (static_cast<std::size_t>(r.index) >= v.size())  // a scheduling bug, not a user error
      throw EvaluationError("internal error: value " + refString(r) + " is not available");
    return v[static_cast<std::size_t>(r.index)];
  }

  std::vector<Tensor>& values(std::size_t slot) { return mValues[slot]; }

  // Drops the values whose last use was node i.
  void dropAfter(std::size_t i) {
    forEachRef(mProgram.nodes[i], [&](const ValueRef& r) {
      const std::size_t s = mSlotOf.at(r.name);
      if (mLastUse[s] == i) std::vector<Tensor>().swap(mValues[s]);
    });
  }

 private:
  const Program& mProgram;
  std::size_t mLeaves = 0;  // inputs + constants: the slots before the first node
  std::unordered_map<std::string, std::size_t> mSlotOf;
  std::vector<std::string> mOutputs;
  std::vector<ValueRef> mOutputRefs;
  std::set<std::string> mInputNeeded;
  std::vector<std::size_t> mOrder;
  std::vector<std::size_t> mLastUse;
  std::vector<std::vector<Tensor>> mValues;
};

// Returns the rule of every node in `order`; throws naming every unsupported op.
std::vector<const OpRule*> rulesFor(const Program& program, const std::vector<std::size_t>& order) {
  std::vector<const OpRule*> rules(program.nodes.size(), nullptr);
  std::vector<std::string> missing;
  for (std::size_t i : order) {
    rules[i] = opRegistry().find(program.nodes[i].op);
    if (!rules[i]) missing.push_back(nodeLabel(program.nodes[i]));
  }
  if (!missing.empty()) {
    std::string msg = "unsupported op: " + missing.front() + " has no rule in this Lossbound";
    if (missing.size() > 1) {
      msg += " (and " + std::to_string(missing.size() - 1) + " more node(s) with unsupported ops: ";
      for (std::size_t k = 1; k < missing.size() && k < 6; ++k)
        msg += (k > 1 ? ", " : "") + missing[k];
      msg += missing.size() > 6 ? ", ...)" : ")";
    }
    for (std::size_t i : order)
      if (!rules[i]) throw EvaluationError(msg, program.nodes[i].name, program.nodes[i].op);
  }
  return rules;
}

// Runs `body`, turning any exception except Cancelled into an EvaluationError that names the node.
template <typename F>
auto guarded(const Node& node, const char* what, F&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const Cancelled&) {
    throw;
  } catch (const EvaluationError&) {
    throw;
  } catch (const std::exception& e) {
    std::string message = e.what();
    const std::string prefix = "node '" + node.name + "'";
    if (!message.starts_with(prefix)) message = nodeLabel(node) + ": " + what + ": " + message;
    throw EvaluationError(message, node.name, node.op);
  }
}

// Checks a rule's results against the trace: output count, shapes, and (for value results, not
// localError bounds) the dtype the candidate declared and stored.
void checkResults(const Node& node, const std::vector<Tensor>& results, const char* what,
                  bool checkDtype = true) {
  if (results.size() != node.outputs.size())
    throw EvaluationError(nodeLabel(node) + ": the " + what + " rule returned " +
                              std::to_string(results.size()) + " outputs, the trace has " +
                              std::to_string(node.outputs.size()),
                          node.name, node.op);
  for (std::size_t k = 0; k < results.size(); ++k)
    if (!node.outputs[k].none && results[k].shape() != node.outputs[k].shape)
      throw EvaluationError(nodeLabel(node) + ": output " + std::to_string(k) + " of the " + what +
                                " rule has shape " + shapeString(results[k].shape()) +
                                ", the trace says " + shapeString(node.outputs[k].shape),
                            node.name, node.op);
  if (!checkDtype) return;
  for (std::size_t k = 0; k < results.size(); ++k)
    if (!node.outputs[k].none && results[k].dtype() != node.outputs[k].dtype)
      throw EvaluationError(nodeLabel(node) + ": output " + std::to_string(k) + " of the " + what +
                                " rule has dtype " + std::string(dtypeName(results[k].dtype())) +
                                ", the trace declares " +
                                std::string(dtypeName(node.outputs[k].dtype)),
                            node.name, node.op);
}

void checkCancel(const EvalOptions& options) {
  if (options.cancel && options.cancel->load(std::memory_order_relaxed)) throw Cancelled();
}

// Adds Σ|g|·r to *sum and Σ(g·r)² to *sumSquares (each skipped when null: the binary64 term
// needs no sum of squares) over the floating outputs of `node` that have an adjoint g, with the
// local bounds r of `local`. A zero adjoint owns no budget even where r is infinite (e.g. masked
// -inf logits); an unknown local bound (NaN) counts as unbounded. With the node's operands
// (`keys`, one list per output: operandKeys), the terms of elements with equal operands add
// linearly before they are squared (core/program/equal_operands.h: equal operands round alike).
using OperandKeys = std::vector<std::vector<std::uint64_t>>;
void addWeightedBounds(const Node& node, const std::vector<std::optional<Tensor>>& adjoints,
                       const std::vector<Tensor>& local, double* sum, double* sumSquares,
                       const OperandKeys* keys = nullptr) {
  std::vector<double> terms;
  for (std::size_t k = 0; k < adjoints.size() && k < local.size(); ++k) {
    if (!adjoints[k] || node.outputs[k].none || !isFloating(node.outputs[k].dtype)) continue;
    const auto g = adjoints[k]->values();
    const auto r = local[k].hi();
    if (sumSquares) terms.assign(g.size(), 0.0);
    double unused = 0.0;
    double& s = sum ? *sum : unused;  // added in element order, as before
    for (std::size_t e = 0; e < g.size(); ++e) {
      if (g[e] == 0) continue;
      double t = std::abs(g[e]) * r[e];
      if (std::isnan(t)) t = HUGE_VAL;
      s += t;
      if (sumSquares) terms[e] = t;
    }
    if (sumSquares)
      *sumSquares += groupedSumSquares(terms, keys && k < keys->size()
                                                  ? std::span<const std::uint64_t>((*keys)[k])
                                                  : std::span<const std::uint64_t>());
  }
}

// Adds Σ|g|·r to `sum` and Σ(g·min(r, c))² to `sumSquares`, with r the local bounds of `local`
// and c the rule's probabilisticLocalError `spread`: a rule's root-sum-square is never used above
// its worst case (OpRule's contract, enforced here for every rule).
void addSpreadBounds(const Node& node, const std::vector<std::optional<Tensor>>& adjoints,
                     const std::vector<Tensor>& local, const std::vector<Tensor>& spread,
                     double& sum, double& sumSquares, const OperandKeys& keys) {
  addWeightedBounds(node, adjoints, local, &sum, nullptr);
  std::vector<Tensor> least;
  least.reserve(spread.size());
  for (std::size_t k = 0; k < spread.size() && k < local.size(); ++k) {
    const auto r = local[k].hi(), c = spread[k].hi();
    if (r.size() != c.size()) {
      least.push_back(local[k]);
      continue;
    }
    std::vector<double> v(r.size());
    for (std::size_t e = 0; e < v.size(); ++e) v[e] = std::fmin(r[e], c[e]);
    least.push_back(Tensor::point(local[k].shape(), local[k].dtype(), std::move(v)));
  }
  addWeightedBounds(node, adjoints, least, nullptr, &sumSquares, &keys);
}

// Returns equalOperandKeys for every output of a node (empty for the outputs that are not
// floating).
OperandKeys operandKeys(const Node& node, const OpArgs& args, const std::vector<Tensor>& outputs) {
  OperandKeys keys(outputs.size());
  for (std::size_t k = 0; k < outputs.size(); ++k)
    if (k < node.outputs.size() && !node.outputs[k].none && isFloating(node.outputs[k].dtype))
      keys[k] = equalOperandKeys(args, outputs[k].shape());
  return keys;
}

// Returns one adjoint per output of a node: its adjoint, or zeros where it has none.
std::vector<Tensor> outGradsOf(const std::vector<Tensor>& outputs,
                               const std::vector<std::optional<Tensor>>& outAdj) {
  std::vector<Tensor> outGrads;
  outGrads.reserve(outputs.size());
  for (std::size_t k = 0; k < outputs.size(); ++k)
    outGrads.push_back(outAdj[k] ? *outAdj[k]
                                 : Tensor::full(outputs[k].shape(), outputs[k].dtype(), 0.0));
  return outGrads;
}

// Returns the rule's adjoint-weighted local error of a node under `ctx`, if it has one; an
// unknown (NaN) term counts as unbounded, a negative one is a rule bug.
std::optional<AdjointLocalError> adjointTerm(const Node& node, const OpRule& rule,
                                             const OpArgs& args, const std::vector<Tensor>& outputs,
                                             const std::vector<Tensor>& outGrads, OpContext& ctx) {
  std::optional<AdjointLocalError> t = guarded(node, "adjoint local error", [&] {
    return rule.adjointLocalError(args, outputs, outGrads, ctx);
  });
  if (!t) return t;
  if (std::isnan(t->bound)) t->bound = HUGE_VAL;
  if (std::isnan(t->sumSquares)) t->sumSquares = HUGE_VAL;
  if (t->bound < 0 || t->sumSquares < 0)
    throw EvaluationError(nodeLabel(node) + ": the adjoint local error is negative (bound " +
                              std::to_string(t->bound) + ", sum of squares " +
                              std::to_string(t->sumSquares) + "), expected >= 0",
                          node.name, node.op);
  return t;
}

// Returns the rule's closed-form bound of its own point() error per output (OpRule::pointError),
// checked against the trace; empty when the rule has none.
std::vector<Tensor> pointErrorOf(const Node& node, const OpRule& rule, const OpArgs& args,
                                 const std::vector<Tensor>& outputs) {
  std::vector<Tensor> e =
      guarded(node, "point error", [&] { return rule.pointError(args, outputs); });
  if (!e.empty()) checkResults(node, e, "pointError", false);
  return e;
}

}  // namespace

std::vector<std::size_t> neededNodes(const Program& program,
                                     const std::vector<std::string>& outputs) {
  return Schedule(program, outputs).order();
}

EvalResult evaluate(const Program& program, const TensorMap& inputs, Backend& backend,
                    const EvalOptions& options) {
  Schedule schedule(program, options.outputs);
  const std::vector<const OpRule*> rules = rulesFor(program, schedule.order());
  schedule.setInputs(inputs);

  std::size_t intervalFrom = 0;  // program index from which the Interval domain applies
  if (options.domain == EvalDomain::Interval && !options.startNode.empty()) {
    const int s = findNode(program, options.startNode);
    if (s < 0)
      throw EvaluationError("the start node '" + options.startNode + "' is not in the program");
    intervalFrom = static_cast<std::size_t>(s);
  }
  std::mt19937_64 rng(options.seed);
  OpContext ctx{options.precision, backend, options.domain == EvalDomain::Random ? &rng : nullptr};
  ctx.orderPerProduct = options.orderPerProduct;

  const std::size_t total = schedule.order().size();
  std::size_t done = 0;
  for (std::size_t i : schedule.order()) {
    checkCancel(options);
    const Node& node = program.nodes[i];
    const OpRule& rule = *rules[i];
    std::vector<Tensor> results = guarded(node, "evaluation", [&] {
      const OpArgs args(node,
                        [&](const ValueRef& r) -> const Tensor& { return schedule.lookup(r); });
      switch (options.domain) {
        case EvalDomain::Point:
          return rule.point(args, ctx);
        case EvalDomain::Interval:
          return i < intervalFrom ? rule.point(args, ctx) : rule.interval(args, ctx);
        case EvalDomain::Random:
          return rule.random(args, ctx);
      }
      return std::vector<Tensor>{};
    });
    checkResults(node, results,
                 options.domain == EvalDomain::Interval && i >= intervalFrom ? "interval"
                 : options.domain == EvalDomain::Random                      ? "random"
                                                                             : "point");
    schedule.values(schedule.nodeSlot(i)) = std::move(results);
    schedule.dropAfter(i);
    ++done;
    if (options.progress) options.progress(done, total);
  }

  EvalResult result;
  for (std::size_t k = 0; k < schedule.outputNames().size(); ++k)
    result.outputs.emplace(schedule.outputNames()[k], schedule.lookup(schedule.outputRefs()[k]));
  result.nodesEvaluated = total;
  result.nodesSkipped = program.nodes.size() - total;
  return result;
}

FirstOrderResult evaluateFirstOrder(const Program& program, const TensorMap& inputs,
                                    Backend& backend, const EvalOptions& options) {
  const std::vector<std::string> lossName{options.outputs.empty() ? std::string("loss")
                                                                  : options.outputs.front()};
  Schedule schedule(program, lossName);
  const std::vector<const OpRule*> rules = rulesFor(program, schedule.order());
  schedule.setInputs(inputs);
  OpContext ctx{options.precision, backend, nullptr};
  PrecisionModel binary64 = options.precision;
  binary64.override = Format::Fp64;
  OpContext ctx64{binary64, backend, nullptr};
  ctx64.boundOnly = true;  // the binary64 term is first-order only

  const std::size_t forward = schedule.order().size();
  const std::size_t total = 2 * forward;
  std::size_t done = 0;
  // Forward, in point arithmetic, keeping every value for the reverse pass, and marking the
  // values the candidate holds exactly (core/program/exact_values.h).
  ExactValues exact(schedule.nodeSlot(0), schedule.slots());
  const auto slotOf = schedule.slotFinder();
  for (std::size_t i : schedule.order()) {
    checkCancel(options);
    const Node& node = program.nodes[i];
    const OpArgs args(node, [&](const ValueRef& r) -> const Tensor& { return schedule.lookup(r); });
    std::vector<Tensor> results =
        guarded(node, "evaluation", [&] { return rules[i]->point(args, ctx); });
    checkResults(node, results, "point");
    const std::size_t slot = schedule.nodeSlot(i);
    schedule.values(slot) = std::move(results);
    exact.evaluated(slot, *rules[i], args, schedule.values(slot), ctx,
                    exact.operands(args, slotOf));
    if (options.progress) options.progress(++done, total);
  }

  FirstOrderResult out;
  out.nodesEvaluated = forward;
  const ValueRef lossRef = schedule.outputRefs().front();
  const Tensor& loss = schedule.lookup(lossRef);
  if (loss.numel() != 1)
    throw EvaluationError("output '" + lossName.front() + "' has shape " +
                          shapeString(loss.shape()) +
                          ", expected a scalar for the first-order bound");
  out.loss = loss.values()[0];

  // Reverse: adjoints per slot and output index, seeded with ∂loss/∂loss = 1.
  std::vector<std::vector<std::optional<Tensor>>> adjoint(schedule.nodeSlot(0) +
                                                          program.nodes.size());
  {
    auto& a = adjoint[schedule.slotOf(lossRef.name)];
    a.resize(static_cast<std::size_t>(lossRef.index) + 1);
    a[static_cast<std::size_t>(lossRef.index)] = Tensor::full(loss.shape(), loss.dtype(), 1.0);
  }
  std::vector<NodeBudget> budgets;
  for (auto it = schedule.order().rbegin(); it != schedule.order().rend(); ++it) {
    checkCancel(options);
    const std::size_t i = *it;
    const Node& node = program.nodes[i];
    const std::size_t slot = schedule.nodeSlot(i);
    const std::vector<Tensor>& outputs = schedule.values(slot);
    std::vector<std::optional<Tensor>>& outAdj = adjoint[slot];
    outAdj.resize(outputs.size());
    const bool anyAdjoint =
        std::any_of(outAdj.begin(), outAdj.end(), [](const auto& g) { return g.has_value(); });
    const bool floatingOut = std::any_of(node.outputs.begin(), node.outputs.end(),
                                         [](const TensorSpec& s) { return isFloating(s.dtype); });
    if (anyAdjoint) {
      const OpArgs args(node,
                        [&](const ValueRef& r) -> const Tensor& { return schedule.lookup(r); });
      // Local rounding bounds r_k of this op, weighted by the adjoints of its outputs; then the
      // binary64 point evaluation's own rounding, to first order: the same adjoints with the
      // rule's closed-form bound of its point() error (OpRule::pointError) where it has one, else
      // the local bounds of an fp64 execution (it is one: every point rule computes in binary64
      // or wider).
      // Rules whose roundings are shared by many outputs (a layer norm's row statistics) weigh
      // them by the adjoints themselves (OpRule::adjointLocalError), in both contexts.
      NodeBudget b{node.name, node.op, 0.0, 0.0};
      const std::vector<Tensor> outGrads = outGradsOf(outputs, outAdj);
      std::map<std::string, std::vector<double>> memo;  // shared by both models' rules
      ctx.nodeMemo = &memo;
      ctx64.nodeMemo = &memo;
      // The candidate's exactly held operands; the binary64 evaluation holds all of its own.
      const std::vector<bool> held = exact.operands(args, slotOf),
                              own(args.tensorInputs().size(), true);
      ctx.exactOperands = &held;
      ctx64.exactOperands = &own;
      for (OpContext* c : {&ctx, &ctx64}) {
        if (c == &ctx64) {
          // The point evaluation's own error in closed form where the rule has one.
          const std::vector<Tensor> e = pointErrorOf(node, *rules[i], args, outputs);
          if (!e.empty()) {
            addWeightedBounds(node, outAdj, e, &out.pointBound, nullptr);
            continue;
          }
        }
        if (const auto t = adjointTerm(node, *rules[i], args, outputs, outGrads, *c)) {
          if (c == &ctx) {
            b.bound += t->bound;
            b.sumSquares += t->sumSquares;
          } else {
            out.pointBound += t->bound;
          }
          continue;
        }
        const std::vector<Tensor> local =
            guarded(node, "local error", [&] { return rules[i]->localError(args, outputs, *c); });
        checkResults(node, local, "localError", false);
        if (c == &ctx) {
          // The probabilistic term: the op's root-sum-square of its individual roundings where
          // the rule has one (a reduction: √n instead of n), else the worst case r_k.
          const std::vector<Tensor> spread = guarded(node, "probabilistic local error", [&] {
            return rules[i]->probabilisticLocalError(args, outputs, *c);
          });
          const OperandKeys keys = operandKeys(node, args, outputs);
          if (spread.empty()) {
            addWeightedBounds(node, outAdj, local, &b.bound, &b.sumSquares, &keys);
          } else {
            checkResults(node, spread, "probabilisticLocalError", false);
            addSpreadBounds(node, outAdj, local, spread, b.bound, b.sumSquares, keys);
          }
        } else
          addWeightedBounds(node, outAdj, local, &out.pointBound, nullptr);
      }
      ctx.nodeMemo = nullptr;
      ctx64.nodeMemo = nullptr;
      ctx.exactOperands = nullptr;
      ctx64.exactOperands = nullptr;
      out.bound += b.bound;
      out.sumSquares += b.sumSquares;
      budgets.push_back(std::move(b));

      // Propagate: one vjp call, gradients accumulated into the inputs' adjoints.
      const std::vector<std::optional<Tensor>> grads =
          guarded(node, "vjp", [&] { return rules[i]->vjp(args, outputs, outGrads, ctx); });
      const auto& refs = args.tensorRefs();
      if (grads.size() != refs.size())
        throw EvaluationError(nodeLabel(node) + ": the vjp rule returned " +
                                  std::to_string(grads.size()) + " gradients for " +
                                  std::to_string(refs.size()) + " tensor inputs",
                              node.name, node.op);
      for (std::size_t j = 0; j < refs.size(); ++j) {
        if (!grads[j]) continue;
        const Tensor& value = *args.tensorInputs()[j];
        if (!isFloating(value.dtype())) continue;
        if (grads[j]->shape() != value.shape())
          throw EvaluationError(nodeLabel(node) + ": the vjp rule returned a gradient of shape " +
                                    shapeString(grads[j]->shape()) + " for input " +
                                    refString(refs[j]) + " of shape " + shapeString(value.shape()),
                                node.name, node.op);
        auto& target = adjoint[schedule.slotOf(refs[j].name)];
        if (target.size() <= static_cast<std::size_t>(refs[j].index))
          target.resize(static_cast<std::size_t>(refs[j].index) + 1);
        std::optional<Tensor>& acc = target[static_cast<std::size_t>(refs[j].index)];
        if (!acc) {
          acc = grads[j]->midpoint();
        } else {
          auto dst = acc->mutableLo();
          const auto src = grads[j]->values();
          for (std::size_t e = 0; e < dst.size(); ++e) dst[e] += src[e];
        }
      }
    } else if (floatingOut) {
      budgets.push_back({node.name, node.op, 0.0, 0.0});  // does not influence the loss
    }
    // Nothing before node i uses its outputs: free them and their adjoints.
    std::vector<Tensor>().swap(schedule.values(slot));
    std::vector<std::optional<Tensor>>().swap(outAdj);
    if (options.progress) options.progress(++done, total);
  }
  std::reverse(budgets.begin(), budgets.end());
  out.nodes = std::move(budgets);
  return out;
}

}  // namespace lossbound

namespace lossbound {

// The kept forward state: the schedule with every value, the rules, and the local bounds of each
// node computed on first use (modelled precision and binary64) and then shared by every reverse
// pass.
struct LinearizedProgram::State {
  State(const Program& p, const std::vector<std::string>& outputs, const EvalOptions& o, Backend& b)
      : program(p), schedule(p, outputs), options(o), backend(b) {
    binary64 = o.precision;
    binary64.override = Format::Fp64;
  }
  const Program& program;
  Schedule schedule;
  EvalOptions options;
  Backend& backend;
  PrecisionModel binary64;
  std::vector<const OpRule*> rules;
  std::vector<std::optional<std::vector<Tensor>>> local, local64;  // by node index
  std::vector<std::optional<std::vector<Tensor>>> pointError;      // OpRule::pointError, by node
  std::vector<std::optional<std::vector<Tensor>>> spread;  // probabilisticLocalError, by node
  std::vector<std::optional<std::vector<std::vector<std::uint64_t>>>> keys;  // equalOperandKeys
  std::vector<std::string> names;
  std::size_t forward = 0;
  std::optional<ExactValues> exact;  // the candidate's exactly held values
};

namespace {

std::vector<std::string> allOutputs(const Program& program, const std::vector<std::string>& asked) {
  if (!asked.empty()) return asked;
  std::vector<std::string> names;
  for (const OutputSpec& o : program.outputs) names.push_back(o.name);
  return names;
}

}  // namespace

LinearizedProgram::LinearizedProgram(const Program& program, const TensorMap& inputs,
                                     Backend& backend, const EvalOptions& options)
    : mState(std::make_unique<State>(program, allOutputs(program, options.outputs), options,
                                     backend)) {
  State& st = *mState;
  st.names = st.schedule.outputNames();
  st.rules = rulesFor(program, st.schedule.order());
  st.schedule.setInputs(inputs);
  st.local.resize(program.nodes.size());
  st.local64.resize(program.nodes.size());
  st.pointError.resize(program.nodes.size());
  st.spread.resize(program.nodes.size());
  st.keys.resize(program.nodes.size());
  OpContext ctx{st.options.precision, backend, nullptr};
  st.exact.emplace(st.schedule.nodeSlot(0), st.schedule.slots());
  const auto slotOf = st.schedule.slotFinder();
  for (std::size_t i : st.schedule.order()) {
    checkCancel(options);
    const Node& node = program.nodes[i];
    const OpArgs args(node,
                      [&](const ValueRef& r) -> const Tensor& { return st.schedule.lookup(r); });
    std::vector<Tensor> results =
        guarded(node, "evaluation", [&] { return st.rules[i]->point(args, ctx); });
    checkResults(node, results, "point");
    const std::size_t slot = st.schedule.nodeSlot(i);
    st.schedule.values(slot) = std::move(results);
    st.exact->evaluated(slot, *st.rules[i], args, st.schedule.values(slot), ctx,
                        st.exact->operands(args, slotOf));
  }
  st.forward = st.schedule.order().size();
}

LinearizedProgram::~LinearizedProgram() = default;

const std::vector<std::string>& LinearizedProgram::outputNames() const { return mState->names; }

std::size_t LinearizedProgram::nodesEvaluated() const { return mState->forward; }

const Tensor& LinearizedProgram::output(const std::string& name) const {
  const State& st = *mState;
  for (std::size_t k = 0; k < st.names.size(); ++k)
    if (st.names[k] == name) return st.schedule.lookup(st.schedule.outputRefs()[k]);
  throw EvaluationError("output '" + name + "' was not evaluated");
}

FunctionalBound LinearizedProgram::functional(const std::string& name, const Tensor& weights) {
  State& st = *mState;
  const Program& program = st.program;
  std::size_t k = 0;
  while (k < st.names.size() && st.names[k] != name) ++k;
  if (k == st.names.size()) throw EvaluationError("output '" + name + "' was not evaluated");
  const ValueRef ref = st.schedule.outputRefs()[k];
  const Tensor& y = st.schedule.lookup(ref);
  if (weights.shape() != y.shape())
    throw EvaluationError("functional of output '" + name + "': weights of shape " +
                          shapeString(weights.shape()) + ", the output has shape " +
                          shapeString(y.shape()));
  FunctionalBound out;
  {
    const auto v = y.values();
    const auto w = weights.values();
    for (std::size_t e = 0; e < v.size(); ++e) out.value += w[e] * v[e];
  }
  OpContext ctx{st.options.precision, st.backend, nullptr};
  OpContext ctx64{st.binary64, st.backend, nullptr};
  ctx64.boundOnly = true;  // the binary64 term is first-order only
  std::vector<std::vector<std::optional<Tensor>>> adjoint(st.schedule.nodeSlot(0) +
                                                          program.nodes.size());
  {
    auto& a = adjoint[st.schedule.slotOf(ref.name)];
    a.resize(static_cast<std::size_t>(ref.index) + 1);
    a[static_cast<std::size_t>(ref.index)] = weights.withDtype(y.dtype());
  }
  for (auto it = st.schedule.order().rbegin(); it != st.schedule.order().rend(); ++it) {
    checkCancel(st.options);
    const std::size_t i = *it;
    const Node& node = program.nodes[i];
    const std::size_t slot = st.schedule.nodeSlot(i);
    const std::vector<Tensor>& outputs = st.schedule.values(slot);
    std::vector<std::optional<Tensor>>& outAdj = adjoint[slot];
    outAdj.resize(outputs.size());
    if (std::none_of(outAdj.begin(), outAdj.end(), [](const auto& g) { return g.has_value(); }))
      continue;
    const OpArgs args(node,
                      [&](const ValueRef& r) -> const Tensor& { return st.schedule.lookup(r); });
    // Local bounds: computed once per node, then reused by every functional; a rule with an
    // adjoint-weighted local error depends on this functional's adjoints: never cached.
    const std::vector<Tensor> outGrads = outGradsOf(outputs, outAdj);
    std::map<std::string, std::vector<double>> memo;  // shared by both models' rules
    ctx.nodeMemo = &memo;
    ctx64.nodeMemo = &memo;
    // As in evaluateFirstOrder: the candidate's exactly held operands, all for binary64.
    const std::vector<bool> held = st.exact->operands(args, st.schedule.slotFinder()),
                            own(args.tensorInputs().size(), true);
    ctx.exactOperands = &held;
    ctx64.exactOperands = &own;
    for (auto [cache, c] : {std::pair{&st.local, &ctx}, std::pair{&st.local64, &ctx64}}) {
      double& sum = c == &ctx ? out.bound : out.pointBound;
      double unusedSquares = 0.0;  // the binary64 term has no probabilistic part
      double& squares = c == &ctx ? out.sumSquares : unusedSquares;
      double* squaresOut = c == &ctx ? &out.sumSquares : nullptr;
      if (c == &ctx64) {
        if (!st.pointError[i]) st.pointError[i] = pointErrorOf(node, *st.rules[i], args, outputs);
        if (!st.pointError[i]->empty()) {
          addWeightedBounds(node, outAdj, *st.pointError[i], &sum, squaresOut);
          continue;
        }
      }
      if (const auto t = adjointTerm(node, *st.rules[i], args, outputs, outGrads, *c)) {
        sum += t->bound;
        squares += t->sumSquares;
        continue;
      }
      if (!(*cache)[i]) {
        std::vector<Tensor> local = guarded(
            node, "local error", [&] { return st.rules[i]->localError(args, outputs, *c); });
        checkResults(node, local, "localError", false);
        (*cache)[i] = std::move(local);
      }
      if (c != &ctx) {
        addWeightedBounds(node, outAdj, *(*cache)[i], &sum, squaresOut);
        continue;
      }
      // As in evaluateFirstOrder: the probabilistic term from the rule's root-sum-square of its
      // roundings where it has one (empty: r_k).
      if (!st.spread[i]) {
        std::vector<Tensor> spread = guarded(node, "probabilistic local error", [&] {
          return st.rules[i]->probabilisticLocalError(args, outputs, *c);
        });
        if (!spread.empty()) checkResults(node, spread, "probabilisticLocalError", false);
        st.spread[i] = std::move(spread);
      }
      if (!st.keys[i]) st.keys[i] = operandKeys(node, args, outputs);
      if (st.spread[i]->empty()) {
        addWeightedBounds(node, outAdj, *(*cache)[i], &sum, &squares, &*st.keys[i]);
      } else {
        addSpreadBounds(node, outAdj, *(*cache)[i], *st.spread[i], sum, squares, *st.keys[i]);
      }
    }

    ctx.nodeMemo = nullptr;
    ctx64.nodeMemo = nullptr;
    ctx.exactOperands = nullptr;
    ctx64.exactOperands = nullptr;
    const std::vector<std::optional<Tensor>> grads =
        guarded(node, "vjp", [&] { return st.rules[i]->vjp(args, outputs, outGrads, ctx); });
    const auto& refs = args.tensorRefs();
    if (grads.size() != refs.size())
      throw EvaluationError(nodeLabel(node) + ": the vjp rule returned " +
                                std::to_string(grads.size()) + " gradients for " +
                                std::to_string(refs.size()) + " tensor inputs",
                            node.name, node.op);
    for (std::size_t j = 0; j < refs.size(); ++j) {
      if (!grads[j]) continue;
      const Tensor& value = *args.tensorInputs()[j];
      if (!isFloating(value.dtype())) continue;
      if (grads[j]->shape() != value.shape())
        throw EvaluationError(nodeLabel(node) + ": the vjp rule returned a gradient of shape " +
                                  shapeString(grads[j]->shape()) + " for input " +
                                  refString(refs[j]) + " of shape " + shapeString(value.shape()),
                              node.name, node.op);
      auto& target = adjoint[st.schedule.slotOf(refs[j].name)];
      if (target.size() <= static_cast<std::size_t>(refs[j].index))
        target.resize(static_cast<std::size_t>(refs[j].index) + 1);
      std::optional<Tensor>& acc = target[static_cast<std::size_t>(refs[j].index)];
      if (!acc) {
        acc = grads[j]->midpoint();
      } else {
        auto dst = acc->mutableLo();
        const auto src = grads[j]->values();
        for (std::size_t e = 0; e < dst.size(); ++e) dst[e] += src[e];
      }
    }
    std::vector<std::optional<Tensor>>().swap(outAdj);
  }
  return out;
}

}  // namespace lossbound
