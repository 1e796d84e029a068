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

std::vector<std::string> inputDifferences(const Program& reference, const Program& candidate) {
  std::map<std::string, TensorSpec> ref, cand;
  for (const InputSpec& in : reference.inputs) ref.emplace(in.name, in.spec);
  for (const InputSpec& in : candidate.inputs) cand.emplace(in.name, in.spec);
  std::vector<std::string> out;
  for (const auto& [name, spec] : cand) {
    auto it = ref.find(name);
    if (it == ref.end())
      out.push_back("input '" + name + "' (" + specString(spec) +
                    ") of the candidate program is not an input of the reference program");
    else if (it->second.shape != spec.shape || it->second.dtype != spec.dtype)
      out.push_back("input '" + name + "' is " + specString(it->second) + " in the reference but " +
                    specString(spec) + " in the candidate");
  }
  for (const auto& [name, spec] : ref)
    if (!cand.count(name))
      out.push_back("input '" + name + "' (" + specString(spec) +
                    ") of the reference program is not an input of the candidate program");
  return out;
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
    for (const std::string& d : inputDifferences(rp.program, cp.program))
      check.errors.push_back("step " + std::to_string(step) + " (reference program " + rp.id +
                             ", candidate program " + cp.id + "): " + d);
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
