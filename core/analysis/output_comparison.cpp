// Per-output envelopes of two programs at one state, and the overlap rule (output_comparison.h,
// docs/output-envelopes.md has the argument).
#include "core/analysis/output_comparison.h"

#include "core/analysis/baselines.h"
#include "core/analysis/step_replay.h"
#include "core/interval/rounding.h"
#include "core/ir/program_parser.h"
#include "core/program/evaluator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

namespace lossbound {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The floating outputs both programs have, in the candidate's order; the others go to `note`.
std::vector<std::string> sharedOutputs(const Program& c, const Program& r, std::string* note) {
  auto dtypeOf = [](const Program& p, const OutputSpec& o) -> std::optional<DType> {
    for (const InputSpec& in : p.inputs)
      if (in.name == o.ref.name) return in.spec.dtype;
    const int n = findNode(p, o.ref.name);
    if (n < 0) return std::nullopt;
    const auto& outs = p.nodes[static_cast<std::size_t>(n)].outputs;
    if (static_cast<std::size_t>(o.ref.index) >= outs.size()) return std::nullopt;
    const TensorSpec& s = outs[static_cast<std::size_t>(o.ref.index)];
    if (s.none) return std::nullopt;
    return s.dtype;
  };
  std::set<std::string> inReference;
  for (const OutputSpec& o : r.outputs) inReference.insert(o.name);
  std::vector<std::string> names, onlyOne;
  for (const OutputSpec& o : c.outputs) {
    if (!inReference.count(o.name)) {
      onlyOne.push_back(o.name + " (candidate only)");
      continue;
    }
    const auto d = dtypeOf(c, o);
    if (d && isFloating(*d)) names.push_back(o.name);
  }
  std::set<std::string> inCandidate;
  for (const OutputSpec& o : c.outputs) inCandidate.insert(o.name);
  for (const OutputSpec& o : r.outputs)
    if (!inCandidate.count(o.name)) onlyOne.push_back(o.name + " (reference only)");
  if (note && !onlyOne.empty()) {
    std::string list;
    for (const std::string& s : onlyOne) list += (list.empty() ? "" : ", ") + s;
    *note += (note->empty() ? "" : " ") + std::string("Outputs not compared: ") + list + ".";
  }
  return names;
}

// Elementwise comparison of two enclosures of one output.
void compareElementwise(const Tensor& c, const Tensor& r, OutputComparison& out) {
  out.elementwise = true;
  out.disjointElements = 0;
  const auto clo = c.lo(), chi = c.hi(), rlo = r.lo(), rhi = r.hi();
  double worst = -1;
  for (std::size_t e = 0; e < clo.size(); ++e) {
    // Disjoint: an exact comparison of the enclosures' endpoints.
    const bool disjoint = clo[e] > rhi[e] || chi[e] < rlo[e];
    if (disjoint) ++out.disjointElements;
    const double hc = chi[e] / 2 - clo[e] / 2, hr = rhi[e] / 2 - rlo[e] / 2;
    const double dc = std::abs((clo[e] / 2 + chi[e] / 2) - (rlo[e] / 2 + rhi[e] / 2));
    double m = 0;
    if (std::isfinite(hc) && std::isfinite(hr) && std::isfinite(dc))
      m = hc + hr > 0 ? dc / (hc + hr) : (dc > 0 ? kInfinity : 0.0);
    if (disjoint && !(m > 1)) m = std::nextafter(1.0, 2.0);  // rounding of the display margin
    if (m > worst) {
      worst = m;
      out.difference = dc;
      out.candidateHalfWidth = hc;
      out.referenceHalfWidth = hr;
    }
  }
  out.worstMargin = std::max(worst, 0.0);
  out.disjoint = out.disjointElements > 0;
}

TensorMap evaluateAll(const Program& p, const TensorMap& inputs, Backend& backend,
                      const std::vector<std::string>& names, EvalDomain domain,
                      const PrecisionModel& precision, std::uint64_t seed,
                      const std::atomic<bool>* cancel, bool orderPerProduct = false) {
  EvalOptions o;
  o.domain = domain;
  o.precision = precision;
  o.seed = seed;
  o.orderPerProduct = orderPerProduct;
  o.outputs = names;
  o.cancel = cancel;
  return evaluate(p, inputs, backend, o).outputs;
}

// Per element [min, max] over `n` randomized executions.
TensorMap ensembleHull(const Program& p, const TensorMap& inputs, Backend& backend,
                       const std::vector<std::string>& names, const OutputComparisonOptions& opt,
                       const PrecisionModel& precision, std::uint64_t salt) {
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> hull;
  TensorMap first;
  for (int i = 0; i < std::max(1, opt.ensembleSize); ++i) {
    const TensorMap run = evaluateAll(p, inputs, backend, names, EvalDomain::Random, precision,
                                      mix(opt.seed ^ salt ^ static_cast<std::uint64_t>(i)),
                                      opt.cancel, opt.ensembleOrder == EnsembleOrder::PerProduct);
    for (const auto& [name, t] : run) {
      auto& [lo, hi] = hull[name];
      const auto v = t.values();
      if (lo.empty()) {
        lo.assign(v.begin(), v.end());
        hi.assign(v.begin(), v.end());
        first.emplace(name, t);
        continue;
      }
      for (std::size_t e = 0; e < v.size(); ++e) {
        lo[e] = std::min(lo[e], v[e]);
        hi[e] = std::max(hi[e], v[e]);
      }
    }
  }
  TensorMap out;
  for (auto& [name, lh] : hull) {
    const Tensor& t = first.at(name);
    out.emplace(name,
                Tensor::interval(t.shape(), t.dtype(), std::move(lh.first), std::move(lh.second)));
  }
  return out;
}

void addBaselines(const Tensor& candidate64, const Tensor& candidateRounded,
                  const Tensor& referenceRounded, const PrecisionModel& precision,
                  OutputComparison& out) {
  const AllcloseOutcome a = allcloseCheck(candidate64.values(), referenceRounded.values());
  const RmseOutcome q = rmseCheck(referenceRounded.values(), candidateRounded.values(),
                                  candidate64.values(), precision.storageFor(candidate64.dtype()));
  out.baselinesComputed = true;
  out.allclosePass = a.pass;
  out.allcloseRatio = a.worstRatio;
  out.rmsePass = q.pass;
  out.rmseError = q.error;
  out.rmseAllowance = q.allowance;
}

}  // namespace

double l1DistanceLowerBound(std::span<const double> a, std::span<const double> b) {
  double sum = 0;
  for (std::size_t e = 0; e < a.size(); ++e) sum += std::abs(a[e] - b[e]);
  if (!std::isfinite(sum)) return sum;
  // Each |a − b| is within u of exact, the sum within γ_{n−1}: the computed sum overestimates the
  // exact one by at most a factor (1 + u)·(1 + γ_{n−1}) <= 1 + γ_{n+1}; divide it out, rounding
  // down.
  const double n = static_cast<double>(a.size()) + 1;
  const double u = 0x1p-53;
  const double gamma = div_up(mul_up(n, u), sub_down(1.0, mul_up(n, u)));
  return div_down(sum, add_up(1.0, gamma));
}

std::vector<OutputComparison> compareOutputs(const Program& candidate,
                                             const TensorMap& candidateInputs,
                                             const Program& reference,
                                             const TensorMap& referenceInputs, Backend& backend,
                                             const OutputComparisonOptions& opt,
                                             std::string* note) {
  const std::vector<std::string> names = sharedOutputs(candidate, reference, note);
  std::vector<OutputComparison> result;
  if (names.empty()) return result;

  // The baselines' values: the candidate program in binary64 and one rounded execution of each
  // program (docs/baselines.md: the reference program's is the value under test), each with one
  // summation order per matrix product, as the loss's.
  std::optional<TensorMap> candidate64, candidateRounded, referenceRounded;
  if (opt.baselines) {
    candidateRounded =
        evaluateAll(candidate, candidateInputs, backend, names, EvalDomain::Random,
                    opt.candidatePrecision, mix(opt.seed ^ 0xc0de), opt.cancel, true);
    referenceRounded =
        evaluateAll(reference, referenceInputs, backend, names, EvalDomain::Random,
                    opt.referencePrecision, mix(opt.seed ^ 0x5eed), opt.cancel, true);
  }

  switch (opt.method) {
    case EnvelopeMethod::Interval:
    case EnvelopeMethod::Ensemble: {
      TensorMap c, r;
      if (opt.method == EnvelopeMethod::Interval) {
        c = evaluateAll(candidate, candidateInputs, backend, names, EvalDomain::Interval,
                        opt.candidatePrecision, 0, opt.cancel);
        r = evaluateAll(reference, referenceInputs, backend, names, EvalDomain::Interval,
                        opt.referencePrecision, 0, opt.cancel);
      } else {
        c = ensembleHull(candidate, candidateInputs, backend, names, opt, opt.candidatePrecision,
                         0xca);
        r = ensembleHull(reference, referenceInputs, backend, names, opt, opt.referencePrecision,
                         0x4e);
      }
      if (opt.baselines)
        candidate64 = evaluateAll(candidate, candidateInputs, backend, names, EvalDomain::Point,
                                  opt.candidatePrecision, 0, opt.cancel);
      for (const std::string& name : names) {
        OutputComparison out;
        out.name = name;
        out.elements = c.at(name).numel();
        if (c.at(name).shape() != r.at(name).shape())
          throw EvaluationError("output '" + name + "': the candidate program gives shape " +
                                shapeString(c.at(name).shape()) + ", the reference program " +
                                shapeString(r.at(name).shape()));
        compareElementwise(c.at(name), r.at(name), out);
        result.push_back(std::move(out));
      }
      break;
    }
    case EnvelopeMethod::FirstOrder:
    case EnvelopeMethod::Probabilistic: {
      EvalOptions eo;
      eo.outputs = names;
      eo.cancel = opt.cancel;
      eo.precision = opt.candidatePrecision;
      LinearizedProgram c(candidate, candidateInputs, backend, eo);
      eo.precision = opt.referencePrecision;
      LinearizedProgram r(reference, referenceInputs, backend, eo);
      if (opt.baselines) {
        candidate64.emplace();
        for (const std::string& name : names) candidate64->emplace(name, c.output(name));
      }
      for (const std::string& name : names) {
        const Tensor& yc = c.output(name);
        const Tensor& yr = r.output(name);
        if (yc.shape() != yr.shape())
          throw EvaluationError("output '" + name + "': the candidate program gives shape " +
                                shapeString(yc.shape()) + ", the reference program " +
                                shapeString(yr.shape()));
        // The sign pattern of the point difference: φ(ŷ_c) − φ(ŷ_r) = ‖ŷ_c − ŷ_r‖₁. Where the
        // points agree the weight is +1, so that φ still sees every element's rounding.
        const auto vc = yc.values(), vr = yr.values();
        std::vector<double> w(vc.size());
        for (std::size_t e = 0; e < w.size(); ++e) w[e] = vc[e] < vr[e] ? -1.0 : 1.0;
        const Tensor weights = Tensor::point(yc.shape(), DType::Float64, std::move(w));
        const FunctionalBound fc = c.functional(name, weights);
        const FunctionalBound fr = r.functional(name, weights);
        auto halfWidth = [&](const FunctionalBound& f) {
          const double b = opt.method == EnvelopeMethod::FirstOrder
                               ? f.bound
                               : probabilisticBound(opt.lambda, f.sumSquares, f.bound);
          const double h = add_up(b, f.pointBound);
          return std::isnan(h) ? kInfinity : h;
        };
        OutputComparison out;
        out.name = name;
        out.elements = yc.numel();
        out.candidateHalfWidth = halfWidth(fc);
        out.referenceHalfWidth = halfWidth(fr);
        out.difference = l1DistanceLowerBound(vc, vr);
        const double sum = add_up(out.candidateHalfWidth, out.referenceHalfWidth);
        out.disjoint = out.difference > sum;
        out.worstMargin = sum > 0 ? out.difference / sum : (out.difference > 0 ? kInfinity : 0.0);
        if (std::isnan(out.worstMargin)) out.worstMargin = 0;
        result.push_back(std::move(out));
      }
      break;
    }
  }
  if (opt.baselines)
    for (OutputComparison& out : result)
      addBaselines(candidate64->at(out.name), candidateRounded->at(out.name),
                   referenceRounded->at(out.name), opt.candidatePrecision, out);
  std::stable_sort(result.begin(), result.end(),
                   [](const OutputComparison& a, const OutputComparison& b) {
                     if (a.disjoint != b.disjoint) return a.disjoint;
                     return a.worstMargin > b.worstMargin;
                   });
  return result;
}

}  // namespace lossbound
