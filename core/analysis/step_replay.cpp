#include "core/analysis/step_replay.h"

#include "core/backend.h"
#include "core/device.h"
#include "core/interval/rounding.h"
#include "core/program/resident_replay.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <set>
#include <stdexcept>

namespace lossbound {

namespace {

std::string specString(const Shape& shape, DType dtype) {
  return shapeString(shape) + " " + std::string(dtypeName(dtype));
}

/// The user-facing sentences of a resident replay's fallbacks: the out-of-memory nodes in one
/// sentence (the first message and how many), a replay that ran on the host from the start, and
/// the non-finite rerun (resident_replay.cpp pushes it last).
std::vector<std::string> residentNotes(const ResidentStats& stats) {
  const std::string prefix = "Device-resident interval replay: ";
  const std::vector<std::string>& m = stats.messages;
  std::vector<std::string> notes;
  const std::size_t others = m.size() - (stats.rerunOnHost && !m.empty() ? 1 : 0);
  if (stats.outOfMemoryNodes > 0 && others > 0) {
    notes.push_back(prefix + std::to_string(stats.outOfMemoryNodes) +
                    (stats.outOfMemoryNodes == 1 ? " node" : " nodes") +
                    " ran on the host for lack of device memory, with the same results (first: " +
                    m.front() + ").");
  } else {
    for (std::size_t k = 0; k < others; ++k) notes.push_back(prefix + m[k] + ".");
  }
  if (stats.rerunOnHost && !m.empty()) notes.push_back(prefix + m.back() + ".");
  return notes;
}

}  // namespace

Interval lossValue(const EvalResult& result) {
  const auto it = result.outputs.find("loss");
  if (it == result.outputs.end() || it->second.numel() != 1)
    throw EvaluationError(
        "step replay: expected a 0-d \"loss\" output, found " +
        std::string(it == result.outputs.end()
                        ? "none"
                        : "a tensor of shape " + shapeString(it->second.shape())));
  return it->second.at(0);
}

double probabilisticBound(double lambda, double sumSquares, double firstOrderBound) {
  const double p = mul_up(lambda, sqrt_up(sumSquares));
  if (std::isnan(p) || std::isnan(firstOrderBound)) return std::numeric_limits<double>::quiet_NaN();
  return std::fmin(p, firstOrderBound);
}

Envelope firstOrderEnvelope(FirstOrderResult fo, EnvelopeMethod method, double lambda) {
  Envelope env;
  env.point = fo.loss;
  if (method == EnvelopeMethod::FirstOrder) {
    env.bound = fo.bound;
  } else {
    env.bound = probabilisticBound(lambda, fo.sumSquares, fo.bound);
  }
  // The binary64 point value is not exact either: add its own first-order bound.
  env.pointBound = fo.pointBound;
  const double radius = add_up(env.bound, fo.pointBound);
  env.lo = sub_down(fo.loss, radius);
  env.hi = add_up(fo.loss, radius);
  if (std::isnan(env.lo) || std::isnan(env.hi)) {
    env.lo = -std::numeric_limits<double>::infinity();
    env.hi = std::numeric_limits<double>::infinity();
  }
  env.nodes = std::move(fo.nodes);
  return env;
}

Envelope replayEnvelope(const Program& program, const TensorMap& inputs, Backend& backend,
                        const ReplayOptions& options) {
  constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
  EvalOptions eval;
  eval.precision = options.precision;
  eval.cancel = options.cancel;
  Envelope env;
  switch (options.method) {
    case EnvelopeMethod::Interval: {
      eval.domain = EvalDomain::Interval;
      eval.startNode = options.startNode;
      Interval v;
      if (options.resident) {
        if (&options.resident->program() != &program)
          throw std::logic_error(
              "replayEnvelope: the resident evaluator is bound to another program");
        ResidentResult r = options.resident->evaluate(inputs, eval);
        v = lossValue(r.result);
        env.notes = residentNotes(r.stats);
      } else if (Device* device = backend.residentDevice()) {
        // No kept evaluator from the caller: one for this replay (its plans are recorded again).
        const std::unique_ptr<Backend> host = createCpuBackend(backend.threads());
        ResidentEvaluator resident(program, *device, *host);
        ResidentResult r = resident.evaluate(inputs, eval);
        v = lossValue(r.result);
        env.notes = residentNotes(r.stats);
      } else {
        v = lossValue(evaluate(program, inputs, backend, eval));
      }
      env.lo = v.lo;
      env.hi = v.hi;
      env.point = kNan;
      break;
    }
    case EnvelopeMethod::FirstOrder:
    case EnvelopeMethod::Probabilistic:
      return firstOrderEnvelope(evaluateFirstOrder(program, inputs, backend, eval), options.method,
                                options.lambda);
    case EnvelopeMethod::Ensemble: {
      eval.domain = EvalDomain::Random;
      eval.orderPerProduct = options.ensembleOrder == EnsembleOrder::PerProduct;
      double lo = std::numeric_limits<double>::infinity(), hi = -lo;
      const int n = std::max(1, options.ensembleSize);
      for (int i = 0; i < n; ++i) {
        eval.seed = ensembleMemberSeed(options.seed, i);
        const Interval v = lossValue(evaluate(program, inputs, backend, eval));
        lo = std::min(lo, v.lo);
        hi = std::max(hi, v.hi);
      }
      env.lo = lo;
      env.hi = hi;
      env.point = kNan;
      break;
    }
  }
  return env;
}

std::uint64_t ensembleMemberSeed(std::uint64_t base, int member) {
  // SplitMix64: decorrelated seeds from consecutive ones.
  std::uint64_t x = base + static_cast<std::uint64_t>(member) + 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

TensorMap adaptInputs(const Program& program, const TensorMap& inputs, std::string* note) {
  TensorMap out;
  std::set<std::string> rounded;
  for (const InputSpec& in : program.inputs) {
    const auto it = inputs.find(in.name);
    if (it == inputs.end())
      throw InputMismatch("input '" + in.name + "': the candidate program expects " +
                          specString(in.spec.shape, in.spec.dtype) +
                          ", the checkpoint has no such tensor");
    const Tensor& t = it->second;
    if (t.shape() != in.spec.shape)
      throw InputMismatch("input '" + in.name + "': the candidate program expects " +
                          specString(in.spec.shape, in.spec.dtype) + ", the checkpoint holds " +
                          specString(t.shape(), t.dtype()));
    if (t.dtype() == in.spec.dtype) {
      out.emplace(in.name, t);
      continue;
    }
    const bool toFloat = isFloating(in.spec.dtype), fromFloat = isFloating(t.dtype());
    if (toFloat) {
      // Round to nearest into the candidate's storage format, as the candidate stores it.
      const Format f = storageFormat(in.spec.dtype).value_or(Format::Fp64);
      std::vector<double> v(t.values().begin(), t.values().end());
      for (double& x : v) x = roundToFormat(x, f, RoundingDirection::Nearest);
      out.emplace(in.name, Tensor::point(t.shape(), in.spec.dtype, std::move(v)));
      if (fromFloat)
        rounded.insert(std::string(dtypeName(t.dtype())) + " to " +
                       std::string(dtypeName(in.spec.dtype)));
      continue;
    }
    // Integer or bool input: values must be exact integers (ids, labels, masks).
    if (fromFloat)
      for (double x : t.values())
        if (x != std::floor(x))
          throw InputMismatch("input '" + in.name + "': the candidate program expects " +
                              specString(in.spec.shape, in.spec.dtype) +
                              ", the checkpoint holds non-integer " +
                              std::string(dtypeName(t.dtype())) + " values");
    out.emplace(in.name, t.withDtype(in.spec.dtype));
  }
  if (note && !rounded.empty()) {
    std::string what;
    for (const std::string& r : rounded) what += (what.empty() ? "" : ", ") + r;
    *note += (note->empty() ? "" : " ") + std::string("Reference inputs rounded to nearest (") +
             what + ") as the candidate stores them.";
  }
  return out;
}

}  // namespace lossbound
