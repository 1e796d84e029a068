// Tests of core/program: the IR parser and validator (each structural defect gives a ProgramError
// naming where, what was expected and what was found), and the evaluator (pruning, domains, start
// node, progress, cancellation, errors naming node and op, the first-order reverse pass).
#include "tests/core/program/test_program.h"

#include "core/backend.h"
#include "core/ir/program_parser.h"
#include "core/ops/op_rule.h"
#include "core/ops/registry.h"
#include "core/program/equal_operands.h"
#include "core/program/evaluator.h"
#include "core/program/op_coverage.h"

#include <QTest>

#include <atomic>
#include <cmath>
#include <random>

using namespace lossbound;

namespace {

// loss = sum(w * x); "twice" = w + w (not needed by loss); w [2,3], x [3].
const char* kProgram =
    R"({"format": "lossbound-step-program", "ir_version": 1, "torch_version": "1.13.0",
  "inputs": [{"name": "param:w", "shape": [2, 3], "dtype": "float64"},
             {"name": "batch:x", "shape": [3], "dtype": "float64"}],
  "nodes": [
    {"name": "mul", "op": "aten.mul.Tensor", "args": [{"ref": "param:w"}, {"ref": "batch:x"}], "kwargs": {},
     "outputs": [{"shape": [2, 3], "dtype": "float64"}]},
    {"name": "sum_1", "op": "aten.sum.default", "args": [{"ref": "mul"}], "kwargs": {},
     "outputs": [{"shape": [], "dtype": "float64"}]},
    {"name": "twice", "op": "aten.add.Tensor", "args": [{"ref": "param:w"}, {"ref": "param:w"}],
     "kwargs": {"alpha": 1}, "outputs": [{"shape": [2, 3], "dtype": "float64"}]}],
  "outputs": [{"name": "loss", "ref": {"ref": "sum_1"}}, {"name": "twice", "ref": {"ref": "twice", "index": 0}}]})";

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  if (at == std::string::npos) throw std::logic_error("fixture text not found: " + from);
  return s.replace(at, from.size(), to);
}

TensorMap inputs() {
  return {{"param:w", Tensor::point({2, 3}, DType::Float64, {0.5, -1.25, 2.0, 0.75, 1.5, -0.5})},
          {"batch:x", Tensor::point({3}, DType::Float64, {1.0, 2.0, 0.25})}};
}
std::string parseError(const std::string& json) {
  try {
    parseProgram(json, "prog.json");
  } catch (const ProgramError& e) {
    return e.what();
  }
  return "<parsed without error>";
}
void expectContains(const std::string& message, const std::vector<std::string>& parts) {
  for (const std::string& p : parts)
    QVERIFY2(message.find(p) != std::string::npos,
             ("expected \"" + p + "\" in: " + message).c_str());
}

constexpr double kLoss = 0.5 - 2.5 + 0.5 + 0.75 + 3.0 - 0.125;

}  // namespace

void TestProgram::parsesTheDocumentedShape() {
  const Program p = parseProgram(kProgram);
  QCOMPARE(p.inputs.size(), std::size_t{2});
  QCOMPARE(p.nodes.size(), std::size_t{3});
  QCOMPARE(p.nodes[2].kwargs.at("alpha").kind, IrValue::Kind::Int);
  QCOMPARE(p.outputs[1].ref.name, std::string("twice"));
  QCOMPARE(p.torchVersion, std::string("1.13.0"));
  QVERIFY(unsupportedOps(p).empty());
}

void TestProgram::constantsKeepIntAndFloatApart() {
  const std::string json = replaced(
      kProgram, R"("kwargs": {"alpha": 1})",
      R"("kwargs": {"alpha": 2.0, "b": 1e-05, "c": 3, "d": {"float": "-inf"}, "e": {"dtype": "bfloat16"},
                    "f": [1, [2.5, null, true]], "g": "mean", "h": {"device": "cpu"},
                    "i": 9223372036854775807, "j": "a \"quoted\" 1.5 in a string"})");
  const Program p = parseProgram(json);
  const auto& kw = p.nodes[2].kwargs;
  QCOMPARE(kw.at("alpha").kind, IrValue::Kind::Float);  // Qt alone would make 2.0 an integer
  QCOMPARE(kw.at("alpha").floatValue, 2.0);
  QCOMPARE(kw.at("b").floatValue, 1e-05);
  QCOMPARE(kw.at("c").kind, IrValue::Kind::Int);
  QVERIFY(std::isinf(kw.at("d").floatValue) && kw.at("d").floatValue < 0);
  QCOMPARE(kw.at("e").dtypeValue, DType::BFloat16);
  QCOMPARE(kw.at("f").list[1].list[0].floatValue, 2.5);
  QCOMPARE(kw.at("f").list[1].list[1].kind, IrValue::Kind::None);
  QCOMPARE(kw.at("g").stringValue, std::string("mean"));
  QCOMPARE(kw.at("h").kind, IrValue::Kind::Device);
  QCOMPARE(kw.at("i").intValue, std::int64_t{9223372036854775807});
  QCOMPARE(kw.at("j").stringValue, std::string("a \"quoted\" 1.5 in a string"));
}

void TestProgram::structuralErrors() {
  expectContains(
      parseError(R"({"format": "lossbound-step-program", "ir_version": 1, "inputs": [})"),
      {"prog.json", "malformed JSON at byte offset"});
  expectContains(parseError("[]"), {"expected a JSON object at the top level"});
  expectContains(parseError(replaced(kProgram, "lossbound-step-program", "other")),
                 {"field 'format' is the string \"other\"", "expected \"lossbound-step-program\""});
  expectContains(parseError(replaced(kProgram, R"("ir_version": 1)", R"("ir_version": 3)")),
                 {"found IR version 3", "reads IR versions 1 to 2", "update Lossbound"});
  expectContains(parseError(replaced(kProgram, R"("ir_version": 1,)", "")),
                 {"missing field 'ir_version'"});
  expectContains(parseError(replaced(kProgram, R"({"ref": "batch:x"}], "kwargs")",
                                     R"({"ref": "batch:y"}], "kwargs")")),
                 {"node 'mul' (#0, aten.mul.Tensor)", "refers to 'batch:y'",
                  "no input, constant or node has that name"});
  expectContains(parseError(replaced(kProgram, R"("args": [{"ref": "mul"}])",
                                     R"("args": [{"ref": "twice"}])")),
                 {"node 'sum_1'", "refers to node 'twice' (#2)", "execution order"});
  expectContains(
      parseError(replaced(kProgram, R"("name": "twice", "op")", R"("name": "mul", "op")")),
      {"node 'mul' (#2)", "duplicate name"});
  expectContains(parseError(replaced(kProgram, R"({"ref": "twice", "index": 0})",
                                     R"({"ref": "twice", "index": 3})")),
                 {"program output 'twice'", "refers to twice[3]", "has 1 outputs"});
  expectContains(parseError(replaced(kProgram, R"("shape": [3], "dtype": "float64")",
                                     R"("shape": [3], "dtype": "complex32")")),
                 {"input 'batch:x'", "unknown dtype \"complex32\""});
  expectContains(parseError(replaced(kProgram, R"("shape": [3])", R"("shape": [-3])")),
                 {"input 'batch:x'", "is -3"});
  expectContains(parseError(replaced(kProgram, R"("name": "loss")", R"("name": "total")")),
                 {"no output called \"loss\""});
  expectContains(parseError(replaced(kProgram, R"("outputs": [{"shape": [], "dtype": "float64"}])",
                                     R"("outputs": [{"shape": [1], "dtype": "float64"}])")),
                 {"program output 'loss'", "expected a 0-d floating tensor, found [1] float64"});
  expectContains(
      parseError(replaced(kProgram, R"({"ref": "param:w"}, {"ref": "param:w"})",
                          R"({"ref": "param:w"}, {"wat": 1})")),
      {"node 'twice'", "argument 1", "expected a reference", "found an object with keys {wat}"});
  expectContains(parseError(replaced(kProgram, R"("name": "param:w")", R"("name": "w")")),
                 {"input 'w'", "must start with \"param:\" or \"batch:\""});
}

void TestProgram::unknownOpIsAFindingNotAnError() {
  const Program p = parseProgram(replaced(kProgram, "aten.add.Tensor", "aten.frobnicate.Tensor"));
  const auto u = unsupportedOps(p);
  QCOMPARE(u.size(), std::size_t{1});
  QCOMPARE(u[0].node, std::string("twice"));
  QCOMPARE(unsupportedOpNames(p), std::vector<std::string>{"aten.frobnicate.Tensor"});
  const auto backend = createCpuBackend();
  EvalOptions o;
  o.outputs = {"twice"};
  try {
    evaluate(p, inputs(), *backend, o);
    QFAIL("an unsupported op must not be evaluated");
  } catch (const EvaluationError& e) {
    expectContains(e.what(), {"node 'twice' (aten.frobnicate.Tensor)", "unsupported"});
  }
  // Only "loss" is requested by default: the unsupported node is pruned away.
  QCOMPARE(evaluate(p, inputs(), *backend).outputs.at("loss").values()[0], kLoss);
}

void TestProgram::pruningAndProgress() {
  const Program p = parseProgram(kProgram);
  QCOMPARE(neededNodes(p, {"loss"}), (std::vector<std::size_t>{0, 1}));
  QCOMPARE(neededNodes(p, {"twice"}), (std::vector<std::size_t>{2}));
  const auto backend = createCpuBackend();
  std::vector<std::pair<std::size_t, std::size_t>> calls;
  EvalOptions o;
  o.progress = [&](std::size_t done, std::size_t total) { calls.emplace_back(done, total); };
  const EvalResult r = evaluate(p, inputs(), *backend, o);
  QCOMPARE(r.nodesEvaluated, std::size_t{2});
  QCOMPARE(r.nodesSkipped, std::size_t{1});
  QCOMPARE(r.outputs.size(), std::size_t{1});
  QCOMPARE(r.outputs.at("loss").values()[0], kLoss);
  QCOMPARE(calls, (std::vector<std::pair<std::size_t, std::size_t>>{{1, 2}, {2, 2}}));
  o.outputs = {"loss", "twice"};
  const EvalResult both = evaluate(p, inputs(), *backend, o);
  QCOMPARE(both.outputs.at("twice").values()[5], -1.0);
}

void TestProgram::inputErrors() {
  const Program p = parseProgram(kProgram);
  const auto backend = createCpuBackend();
  TensorMap in = inputs();
  in.erase("batch:x");
  try {
    evaluate(p, in, *backend);
    QFAIL("a missing input must throw");
  } catch (const EvaluationError& e) {
    expectContains(e.what(), {"input 'batch:x' was not given", "[3] float64"});
  }
  in = inputs();
  in["batch:x"] = Tensor::point({2}, DType::Float64, {1, 2});
  try {
    evaluate(p, in, *backend);
    QFAIL("a mis-shaped input must throw");
  } catch (const EvaluationError& e) {
    expectContains(e.what(), {"input 'batch:x' is [2] float64", "expects [3] float64"});
  }
  EvalOptions o;
  o.outputs = {"nothing"};
  try {
    evaluate(p, inputs(), *backend, o);
    QFAIL("an unknown output must throw");
  } catch (const EvaluationError& e) {
    expectContains(e.what(), {"no output called 'nothing'", "loss, twice"});
  }
}

void TestProgram::opFailureNamesNodeAndOp() {
  // The trace says mul has shape [2, 3]; feeding x of another length makes the op itself fail.
  Program p = parseProgram(kProgram);
  p.inputs[1].spec.shape = {4};
  TensorMap in = inputs();
  in["batch:x"] = Tensor::point({4}, DType::Float64, {1, 2, 3, 4});
  const auto backend = createCpuBackend();
  try {
    evaluate(p, in, *backend);
    QFAIL("broadcasting [2, 3] with [4] must fail");
  } catch (const EvaluationError& e) {
    expectContains(e.what(), {"node 'mul'", "aten.mul.Tensor"});
    QCOMPARE(e.op(), std::string("aten.mul.Tensor"));
  }
}

void TestProgram::cancellation() {
  const Program p = parseProgram(kProgram);
  const auto backend = createCpuBackend();
  std::atomic<bool> cancel{false};
  EvalOptions o;
  o.cancel = &cancel;
  o.progress = [&](std::size_t done, std::size_t) { cancel = done >= 1; };
  QVERIFY_THROWS_EXCEPTION(Cancelled, evaluate(p, inputs(), *backend, o));
  cancel = false;
  o.progress = nullptr;
  QCOMPARE(evaluate(p, inputs(), *backend, o).outputs.at("loss").values()[0], kLoss);
}

void TestProgram::intervalDomainAndStartNode() {
  Program p = parseProgram(kProgram);
  for (Node& n : p.nodes) n.outputs[0].dtype = DType::Float32;  // model fp32 rounding
  p.inputs[0].spec.dtype = DType::Float32;
  p.inputs[1].spec.dtype = DType::Float32;
  TensorMap in = inputs();
  for (auto& [name, t] : in) t = t.withDtype(DType::Float32);
  const auto backend = createCpuBackend();
  EvalOptions o;
  o.domain = EvalDomain::Interval;
  const Tensor full = evaluate(p, in, *backend, o).outputs.at("loss");
  QVERIFY(full.isInterval());
  QVERIFY(full.lo()[0] <= kLoss && kLoss <= full.hi()[0]);
  QVERIFY(full.hi()[0] > full.lo()[0]);
  o.startNode = "sum_1";  // mul is exact: the enclosure can only get narrower
  const Tensor late = evaluate(p, in, *backend, o).outputs.at("loss");
  QVERIFY(late.lo()[0] <= kLoss && kLoss <= late.hi()[0]);
  QVERIFY(late.hi()[0] - late.lo()[0] <= full.hi()[0] - full.lo()[0]);
  o.startNode = "nope";
  QVERIFY_THROWS_EXCEPTION(EvaluationError, evaluate(p, in, *backend, o));
}

void TestProgram::firstOrderAdjointsAndBudget() {
  Program p = parseProgram(kProgram);
  for (Node& n : p.nodes) n.outputs[0].dtype = DType::Float32;
  p.inputs[0].spec.dtype = DType::Float32;
  p.inputs[1].spec.dtype = DType::Float32;
  TensorMap in = inputs();
  for (auto& [name, t] : in) t = t.withDtype(DType::Float32);
  const auto backend = createCpuBackend();
  const FirstOrderResult r = evaluateFirstOrder(p, in, *backend);
  QCOMPARE(r.loss, kLoss);
  QCOMPARE(r.nodesEvaluated, std::size_t{2});
  QCOMPARE(r.nodes.size(), std::size_t{2});
  QCOMPARE(r.nodes[0].node, std::string("mul"));
  QCOMPARE(r.nodes[1].node, std::string("sum_1"));
  // mul's adjoint is 1 everywhere, so its term is the sum of its local bounds: > 0 in fp32
  // (2 of its 6 products are not representable exactly? all are here — so only the sum rounds).
  QVERIFY(r.nodes[1].bound > 0);
  double total = 0, squares = 0;
  for (const NodeBudget& b : r.nodes) {
    total += b.bound;
    squares += b.sumSquares;
    QVERIFY(b.sumSquares <= b.bound * b.bound + 1e-300);
  }
  QCOMPARE(r.bound, total);
  QCOMPARE(r.sumSquares, squares);
  // The bound must cover the actual fp32 rounding of the loss, here |fl32(sum) - sum|.
  QVERIFY(std::fabs(static_cast<double>(static_cast<float>(kLoss)) - kLoss) <= r.bound);
}

void TestProgram::adjointLocalErrorInBothReversePasses() {
  // loss = sum(layer_norm(x)·y): the layer norm's term comes from its adjointLocalError (signed
  // row sums), below Σ|g|·localError, the same in evaluateFirstOrder and in the functional
  // pass (which must not cache it), and it tracks the functional's adjoints.
  const char* json =
      R"({"format": "lossbound-step-program", "ir_version": 1, "torch_version": "1.13.0",
  "inputs": [{"name": "batch:x", "shape": [4, 64], "dtype": "float32"},
             {"name": "batch:y", "shape": [4, 64], "dtype": "float32"},
             {"name": "param:w", "shape": [64], "dtype": "float32"},
             {"name": "param:b", "shape": [64], "dtype": "float32"}],
  "nodes": [
    {"name": "ln", "op": "aten.native_layer_norm.default",
     "args": [{"ref": "batch:x"}, [64], {"ref": "param:w"}, {"ref": "param:b"}, 1e-05], "kwargs": {},
     "outputs": [{"shape": [4, 64], "dtype": "float32"}, {"shape": [4, 1], "dtype": "float32"},
                 {"shape": [4, 1], "dtype": "float32"}]},
    {"name": "mul", "op": "aten.mul.Tensor", "args": [{"ref": "ln"}, {"ref": "batch:y"}], "kwargs": {},
     "outputs": [{"shape": [4, 64], "dtype": "float32"}]},
    {"name": "sum_1", "op": "aten.sum.default", "args": [{"ref": "mul"}], "kwargs": {},
     "outputs": [{"shape": [], "dtype": "float32"}]}],
  "outputs": [{"name": "loss", "ref": {"ref": "sum_1"}}, {"name": "ln", "ref": {"ref": "ln"}}]})";
  const Program p = parseProgram(json);
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> un(-1.0, 1.0);
  auto tensor = [&](Shape s, double off) {
    std::vector<double> v(static_cast<std::size_t>(numel(s)));
    for (double& e : v) e = static_cast<double>(static_cast<float>(off + un(rng)));
    return Tensor::point(s, DType::Float32, v);
  };
  const TensorMap in{{"batch:x", tensor({4, 64}, 3.0)},
                     {"batch:y", tensor({4, 64}, 0.0)},
                     {"param:w", tensor({64}, 1.0)},
                     {"param:b", tensor({64}, 0.0)}};
  const auto backend = createCpuBackend();
  EvalOptions o;
  o.precision.override = Format::Fp32;
  const FirstOrderResult r = evaluateFirstOrder(p, in, *backend, o);
  QCOMPARE(r.nodes.size(), std::size_t{3});
  const NodeBudget& ln = r.nodes[0];
  QCOMPARE(ln.node, std::string("ln"));
  QVERIFY(ln.bound > 0 && std::isfinite(ln.bound));
  QVERIFY(ln.sumSquares <= ln.bound * ln.bound);
  // The fallback Σ|g|·r with g = y (∂loss/∂ln) and the rule's localError.
  const OpRule* rule = opRegistry().find("aten.native_layer_norm.default");
  QVERIFY(rule);
  const OpArgs args(p.nodes[0],
                    [&](const ValueRef& ref) -> const Tensor& { return in.at(ref.name); });
  OpContext ctx{o.precision, *backend, nullptr};
  const std::vector<Tensor> outs = rule->point(args, ctx);
  const std::vector<Tensor> le = rule->localError(args, outs, ctx);
  double fallback = 0.0;
  for (std::int64_t i = 0; i < outs[0].numel(); ++i)
    fallback += std::fabs(in.at("batch:y").at(i).lo) * le[0].at(i).hi;
  QVERIFY2(ln.bound < fallback, qPrintable(QStringLiteral("%1 >= %2").arg(ln.bound).arg(fallback)));
  // The functional pass: the loss's functional gives the same terms; a second functional (of
  // the layer norm's output, adjoint y) gives the layer norm's own term again (not a cached one).
  LinearizedProgram lp(p, in, *backend, o);
  const FunctionalBound f = lp.functional("loss", Tensor::full({}, DType::Float32, 1.0));
  QCOMPARE(f.bound, r.bound);
  QCOMPARE(f.pointBound, r.pointBound);
  QCOMPARE(f.sumSquares, r.sumSquares);
  const FunctionalBound f1 = lp.functional("ln", in.at("batch:y"));
  QCOMPARE(f1.bound, ln.bound);
  const FunctionalBound f2 = lp.functional("ln", Tensor::full({4, 64}, DType::Float32, 1.0));
  QVERIFY(f2.bound != f1.bound && f2.bound > 0);
  QVERIFY(r.pointBound > 0 && r.pointBound < 1e-6 * r.bound);

  // A GEMM's probabilisticLocalError (√k) in both passes: loss = sum(mm(x, wᵀ-shaped y)).
  const char* mmJson =
      R"({"format": "lossbound-step-program", "ir_version": 1, "torch_version": "1.13.0",
  "inputs": [{"name": "batch:x", "shape": [4, 64], "dtype": "float32"},
             {"name": "param:m", "shape": [64, 4], "dtype": "float32"}],
  "nodes": [
    {"name": "mm", "op": "aten.mm.default", "args": [{"ref": "batch:x"}, {"ref": "param:m"}], "kwargs": {},
     "outputs": [{"shape": [4, 4], "dtype": "float32"}]},
    {"name": "sum_1", "op": "aten.sum.default", "args": [{"ref": "mm"}], "kwargs": {},
     "outputs": [{"shape": [], "dtype": "float32"}]}],
  "outputs": [{"name": "loss", "ref": {"ref": "sum_1"}}]})";
  const Program pm = parseProgram(mmJson);
  const TensorMap inm{{"batch:x", in.at("batch:x")}, {"param:m", tensor({64, 4}, 0.5)}};
  const FirstOrderResult rm = evaluateFirstOrder(pm, inm, *backend, o);
  LinearizedProgram lpm(pm, inm, *backend, o);
  const FunctionalBound fm = lpm.functional("loss", Tensor::full({}, DType::Float32, 1.0));
  QCOMPARE(fm.bound, rm.bound);
  QCOMPARE(fm.sumSquares, rm.sumSquares);
  QVERIFY(rm.nodes[0].sumSquares < 0.1 * rm.nodes[0].bound * rm.nodes[0].bound);
}

void TestProgram::probabilisticTermCoversRepeatedValues() {
  // loss = Σ (x / s) in binary64 over fp32 quotients of 4,096 elements that take 8 values: equal
  // inputs round alike (every execution divides each value one way: x / s or x · RN(1/s)), so
  // their errors add linearly, not in quadrature. The probabilistic envelope (λ·sqrt(Σ(g·c)²),
  // the pipeline's confidence 1 − 1e-6) must contain every randomized execution.
  const char* json =
      R"({"format": "lossbound-step-program", "ir_version": 1, "torch_version": "1.13.0",
  "inputs": [{"name": "batch:x", "shape": [4096], "dtype": "float32"},
             {"name": "batch:s", "shape": [], "dtype": "float32"}],
  "nodes": [
    {"name": "q", "op": "aten.div.Tensor", "args": [{"ref": "batch:x"}, {"ref": "batch:s"}],
     "kwargs": {}, "outputs": [{"shape": [4096], "dtype": "float32"}]},
    {"name": "w", "op": "aten._to_copy.default", "args": [{"ref": "q"}],
     "kwargs": {"dtype": {"dtype": "float64"}}, "outputs": [{"shape": [4096], "dtype": "float64"}]},
    {"name": "l", "op": "aten.sum.default", "args": [{"ref": "w"}], "kwargs": {},
     "outputs": [{"shape": [], "dtype": "float64"}]}],
  "outputs": [{"name": "loss", "ref": {"ref": "l"}}]})";
  const Program p = parseProgram(json);
  const auto backend = createCpuBackend();
  const double s = 255.0;
  // 8 values (512 copies each: the groups' sum passes the first-order bound, which caps it) and
  // 64 (64 copies: below the cap, so the groups go in quadrature). The values' quotients by s all
  // round up (RN32(v / s) > v / s): the worst case for a sum of equal-sign errors.
  for (const std::size_t distinct : {std::size_t{8}, std::size_t{64}}) {
    std::vector<double> values;
    for (int k = 1; values.size() < distinct; ++k) {
      const double v = static_cast<float>(1.0 + 0.0371 * k);
      if (static_cast<double>(static_cast<float>(v / s)) > v / s) values.push_back(v);
    }
    std::vector<double> x(4096);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = values[i % values.size()];
    const TensorMap in{{"batch:x", Tensor::point({4096}, DType::Float32, x)},
                       {"batch:s", Tensor::point({}, DType::Float32, {s})}};
    const FirstOrderResult r = evaluateFirstOrder(p, in, *backend);
    // The pipeline's probabilistic half-width (analysis/step_replay.h probabilisticBound): never
    // above the first-order bound.
    const double lambda = std::sqrt(2.0 * std::log(2.0 / 1e-6));
    const double quadrature = lambda * std::sqrt(r.sumSquares);
    const double half = std::fmin(quadrature, r.bound) + r.pointBound;
    double spread = 0.0;
    for (std::uint64_t seed = 1; seed <= 40; ++seed) {
      EvalOptions o;
      o.domain = EvalDomain::Random;
      o.seed = seed;
      const double y = evaluate(p, in, *backend, o).outputs.at("loss").at(0).lo;
      spread = std::max(spread, std::fabs(y - r.loss));
    }
    qInfo(
        "%zu repeated values: largest deviation %.3g, probabilistic half-width %.3g (quadrature "
        "%.3g), first-order %.3g",
        distinct, spread, half, quadrature, r.bound + r.pointBound);
    QVERIFY(spread > 0.0);
    QVERIFY2(spread <= half, qPrintable(QStringLiteral("%1 > %2").arg(spread).arg(half)));
    if (distinct == 64) QVERIFY(quadrature < r.bound);
  }

  // The keys: equal operands (broadcast too) give equal keys, a product of matrices none.
  Node n;
  n.name = "add";
  n.op = "aten.add.Tensor";
  ValueRef ra, rb;
  ra.name = "a";
  rb.name = "b";
  IrValue va, vb;
  va.kind = vb.kind = IrValue::Kind::Ref;
  va.ref = ra;
  vb.ref = rb;
  n.args = {va, vb};
  const Tensor a = Tensor::point({3, 2}, DType::Float32, {1, 2, 1, 2, 1, 3});
  Tensor b = Tensor::point({2}, DType::Float32, {5, 6});
  const auto lookup = [&](const ValueRef& v) -> const Tensor& { return v.name == "a" ? a : b; };
  {
    const OpArgs args(n, lookup);
    const auto keys = equalOperandKeys(args, {3, 2});
    QCOMPARE(keys.size(), std::size_t{6});
    QVERIFY(keys[0] == keys[2] && keys[2] == keys[4] && keys[1] == keys[3]);
    QVERIFY(keys[0] != keys[1] && keys[3] != keys[5]);
    const double t[] = {1, 1, 1, 1, 1, 1};
    QCOMPARE(groupedSumSquares(t, keys), 9.0 + 4.0 + 1.0);
    QCOMPARE(groupedSumSquares(t, {}), 6.0);
  }
  b = Tensor::point({3}, DType::Float32, {5, 6, 7});  // does not broadcast to [3, 2]
  const OpArgs args(n, lookup);
  QVERIFY(equalOperandKeys(args, {3, 2}).empty());
}

void TestProgram::exactOperationsOnlyOnExactlyHeldOperands() {
  // An operation whose point result is representable rounds nothing at its point operands, but a
  // candidate operand off by upstream rounding moves it off the grid (a review's case): in fp32,
  // (x + y) − y with x = 1, y = 3·2^-26 is exactly 1 at the point and 1 − 2^-24 in fp32; the
  // three ·3 that follow then round. The first-order bound must cover the fp32 loss.
  const char* json =
      R"({"format": "lossbound-step-program", "ir_version": 1, "torch_version": "1.13.0",
  "inputs": [{"name": "param:x", "shape": [1], "dtype": "float32"},
             {"name": "batch:y", "shape": [1], "dtype": "float32"},
             {"name": "batch:mask", "shape": [1, 4], "dtype": "int64"},
             {"name": "batch:s", "shape": [1, 4], "dtype": "float32"}],
  "nodes": [
    {"name": "a", "op": "aten.add.Tensor", "args": [{"ref": "param:x"}, {"ref": "batch:y"}],
     "kwargs": {}, "outputs": [{"shape": [1], "dtype": "float32"}]},
    {"name": "b", "op": "aten.sub.Tensor", "args": [{"ref": "a"}, {"ref": "batch:y"}],
     "kwargs": {}, "outputs": [{"shape": [1], "dtype": "float32"}]},
    {"name": "c1", "op": "aten.mul.Scalar", "args": [{"ref": "b"}, 3.0], "kwargs": {},
     "outputs": [{"shape": [1], "dtype": "float32"}]},
    {"name": "c2", "op": "aten.mul.Scalar", "args": [{"ref": "c1"}, 3.0], "kwargs": {},
     "outputs": [{"shape": [1], "dtype": "float32"}]},
    {"name": "c3", "op": "aten.mul.Scalar", "args": [{"ref": "c2"}, 3.0], "kwargs": {},
     "outputs": [{"shape": [1], "dtype": "float32"}]},
    {"name": "cast", "op": "aten._to_copy.default", "args": [{"ref": "batch:mask"}],
     "kwargs": {}, "outputs": [{"shape": [1, 4], "dtype": "float32"}]},
    {"name": "inv", "op": "aten.rsub.Scalar", "args": [{"ref": "cast"}, 1.0], "kwargs": {},
     "outputs": [{"shape": [1, 4], "dtype": "float32"}]},
    {"name": "bias", "op": "aten.mul.Scalar", "args": [{"ref": "inv"}, -3.4028234663852886e+38],
     "kwargs": {}, "outputs": [{"shape": [1, 4], "dtype": "float32"}]},
    {"name": "scores", "op": "aten.add.Tensor", "args": [{"ref": "batch:s"}, {"ref": "bias"}],
     "kwargs": {}, "outputs": [{"shape": [1, 4], "dtype": "float32"}]},
    {"name": "e", "op": "aten.exp.default", "args": [{"ref": "scores"}], "kwargs": {},
     "outputs": [{"shape": [1, 4], "dtype": "float32"}]},
    {"name": "se", "op": "aten.sum.default", "args": [{"ref": "e"}], "kwargs": {},
     "outputs": [{"shape": [], "dtype": "float32"}]},
    {"name": "sc", "op": "aten.sum.default", "args": [{"ref": "c3"}], "kwargs": {},
     "outputs": [{"shape": [], "dtype": "float32"}]},
    {"name": "loss", "op": "aten.add.Tensor", "args": [{"ref": "sc"}, {"ref": "se"}],
     "kwargs": {}, "outputs": [{"shape": [], "dtype": "float32"}]}],
  "outputs": [{"name": "loss", "ref": {"ref": "loss"}}]})";
  const Program p = parseProgram(json);
  const float x = 1.0f, y = std::ldexp(3.0f, -26);
  const std::vector<double> s{0.25, -0.5, 0.75, 0.125};
  const TensorMap in{{"param:x", Tensor::point({1}, DType::Float32, {x})},
                     {"batch:y", Tensor::point({1}, DType::Float32, {y})},
                     {"batch:mask", Tensor::point({1, 4}, DType::Int64, {1, 0, 1, 1})},
                     {"batch:s", Tensor::point({1, 4}, DType::Float32, s)}};
  const auto backend = createCpuBackend();
  EvalOptions o;
  const FirstOrderResult r = evaluateFirstOrder(p, in, *backend, o);
  const float chain = ((x + y) - y) * 3.0f * 3.0f * 3.0f;
  QVERIFY(chain != 27.0f);  // fp32 moved the exact point result off the grid
  double pointChain = 27.0, candidateChain = chain;
  const auto byName = [&](const char* name) {
    for (const NodeBudget& b : r.nodes)
      if (b.node == name) return b.bound;
    return -1.0;
  };
  // The chain's candidate error is covered by its nodes' terms (first order: the rest is tiny).
  const double chainTerms = byName("a") + byName("b") + byName("c1") + byName("c2") + byName("c3");
  QVERIFY2(
      std::fabs(candidateChain - pointChain) <= chainTerms,
      qPrintable(
          QStringLiteral("%1 > %2").arg(std::fabs(candidateChain - pointChain)).arg(chainTerms)));
  QVERIFY(byName("c1") > 0 && byName("c3") > 0);
  // The mask chain: held exactly from the int64 input on, so its huge adjoints own nothing.
  QCOMPARE(byName("cast"), 0.0);
  QCOMPARE(byName("inv"), 0.0);
  QCOMPARE(byName("bias"), 0.0);
  // The functional pass agrees.
  LinearizedProgram lp(p, in, *backend, o);
  const FunctionalBound f = lp.functional("loss", Tensor::full({}, DType::Float32, 1.0));
  QCOMPARE(f.bound, r.bound);
  QVERIFY(r.bound < 1e-3);
}

QTEST_GUILESS_MAIN(TestProgram)
