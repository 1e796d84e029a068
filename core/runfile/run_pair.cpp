#include "core/runfile/run_pair.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <sstream>

namespace lossbound {

namespace {

std::string specString(const TensorSpec& s) {
  return shapeString(s.shape) + " " + std::string(dtypeName(s.dtype));
}

std::string valueString(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

bool sameBits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0 || (std::isnan(a) && std::isnan(b));
}

}  // namespace

InputFit inputFit(const Program& reference, const Program& candidate) {
  std::map<std::string, TensorSpec> ref, cand;
  for (const InputSpec& in : reference.inputs) ref.emplace(in.name, in.spec);
  for (const InputSpec& in : candidate.inputs) cand.emplace(in.name, in.spec);
  InputFit fit;
  for (const auto& [name, spec] : cand) {
    auto it = ref.find(name);
    if (it == ref.end())
      fit.errors.push_back("the candidate program needs input '" + name + "' (" + specString(spec) +
                           "), the reference checkpoint has none");
    else if (it->second.shape != spec.shape)
      fit.errors.push_back("input '" + name + "': the candidate program expects shape " +
                           shapeString(spec.shape) + ", the reference checkpoint holds " +
                           shapeString(it->second.shape));
    else if (isFloating(it->second.dtype) != isFloating(spec.dtype))
      fit.errors.push_back("input '" + name + "': the candidate program expects " +
                           std::string(dtypeName(spec.dtype)) +
                           ", the reference checkpoint holds " +
                           std::string(dtypeName(it->second.dtype)));
    else if (it->second.dtype != spec.dtype)
      fit.warnings.push_back("input '" + name + "' is " + std::string(dtypeName(it->second.dtype)) +
                             " in the reference and " + std::string(dtypeName(spec.dtype)) +
                             " in the candidate: the replay " +
                             (isFloating(spec.dtype)
                                  ? "rounds the reference's values to nearest in "
                                  : "reads the reference's exact values as ") +
                             std::string(dtypeName(spec.dtype)));
  }
  for (const auto& [name, spec] : ref)
    if (!cand.count(name))
      fit.warnings.push_back("input '" + name + "' (" + specString(spec) +
                             ") of the reference program is not used by the candidate program");
  return fit;
}

RunPairCheck checkRunPair(const RunFile& reference, const RunFile& candidate,
                          bool compareBatchData) {
  RunPairCheck check;
  const std::vector<std::int64_t> refSteps = reference.checkpointSteps();
  const std::vector<std::int64_t> candSteps = candidate.checkpointSteps();
  std::set_intersection(refSteps.begin(), refSteps.end(), candSteps.begin(), candSteps.end(),
                        std::back_inserter(check.commonSteps));
  if (check.commonSteps.empty()) {
    auto range = [](const std::vector<std::int64_t>& s) {
      return s.empty() ? std::string("none")
                       : std::to_string(s.size()) + " from step " + std::to_string(s.front()) +
                             " to " + std::to_string(s.back());
    };
    check.errors.push_back("the runs have no checkpoint step in common (reference: " +
                           range(refSteps) + "; candidate: " + range(candSteps) + ")");
    return check;
  }
  // Compare each distinct pair of programs once, naming the first step where it occurs.
  std::map<std::pair<std::string, std::string>, std::int64_t> seen;
  for (std::int64_t step : check.commonSteps) {
    const RunProgram& rp = reference.checkpointProgram(step);
    const RunProgram& cp = candidate.checkpointProgram(step);
    if (!seen.emplace(std::pair{rp.id, cp.id}, step).second) continue;
    const InputFit fit = inputFit(rp.program, cp.program);
    const std::string where = "step " + std::to_string(step) + " (reference program " + rp.id +
                              ", candidate program " + cp.id + "): ";
    for (const std::string& e : fit.errors) check.errors.push_back(where + e);
    for (const std::string& w : fit.warnings) check.warnings.push_back(where + w);
  }
  for (std::int64_t step : check.commonSteps) {
    if (!reference.lossAt(step) || !candidate.lossAt(step))
      check.warnings.push_back("step " + std::to_string(step) +
                               " has a checkpoint in both runs but no logged loss in " +
                               (!reference.lossAt(step) ? "the reference" : "the candidate"));
  }
  if (compareBatchData && check.errors.empty())
    for (std::int64_t step : check.commonSteps)
      if (auto w = compareBatches(reference, candidate, step)) check.warnings.push_back(*w);
  return check;
}

std::optional<std::string> compareBatches(const RunFile& reference, const RunFile& candidate,
                                          std::int64_t step) {
  const TensorMap ref = reference.loadCheckpoint(step, CheckpointPart::Batch);
  const TensorMap cand = candidate.loadCheckpoint(step, CheckpointPart::Batch);
  const std::string at = "step " + std::to_string(step) + ": ";
  const std::string consequence =
      "; the replay uses the reference's batch, but the two runs did not see the same data here";
  for (const auto& [name, r] : ref) {
    auto it = cand.find(name);
    if (it == cand.end())
      return at + "batch input '" + name + "' is only in the reference" + consequence;
    const Tensor& c = it->second;
    if (r.shape() != c.shape() || r.dtype() != c.dtype())
      return at + "batch input '" + name + "' is " + shapeString(r.shape()) + " " +
             std::string(dtypeName(r.dtype())) + " in the reference but " + shapeString(c.shape()) +
             " " + std::string(dtypeName(c.dtype())) + " in the candidate" + consequence;
    const auto rv = r.values(), cv = c.values();
    for (std::size_t i = 0; i < rv.size(); ++i)
      if (!sameBits(rv[i], cv[i]))
        return at + "batch input '" + name + "' differs between the runs (first at flat element " +
               std::to_string(i) + ": " + valueString(rv[i]) + " in the reference, " +
               valueString(cv[i]) + " in the candidate)" + consequence;
  }
  for (const auto& [name, c] : cand)
    if (!ref.count(name))
      return at + "batch input '" + name + "' is only in the candidate" + consequence;
  return std::nullopt;
}

}  // namespace lossbound
