#include "widgets/session_data.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lossbound::widgets {

double LossSeries::lossAt(std::int64_t step) const {
  const auto it = std::lower_bound(steps.begin(), steps.end(), step);
  if (it == steps.end() || *it != step) return std::numeric_limits<double>::quiet_NaN();
  return loss[static_cast<std::size_t>(it - steps.begin())];
}

std::ptrdiff_t LossSeries::nearestIndex(double x) const {
  if (steps.empty()) return -1;
  const auto it = std::lower_bound(steps.begin(), steps.end(), x,
                                   [](std::int64_t s, double v) { return double(s) < v; });
  if (it == steps.begin()) return 0;
  if (it == steps.end()) return std::ptrdiff_t(steps.size()) - 1;
  const auto i = it - steps.begin();
  return (double(*it) - x) < (x - double(steps[std::size_t(i - 1)])) ? i : i - 1;
}

SessionData sessionFromReport(const AnalysisReport& report) {
  SessionData data;
  data.reference.name = QString::fromStdString(report.referenceName);
  data.candidate.name = QString::fromStdString(report.candidateName);
  for (const StepResult& r : report.steps) {  // in increasing step order
    data.reference.steps.push_back(r.step);
    data.reference.loss.push_back(r.referenceLoss);
    data.candidate.steps.push_back(r.step);
    data.candidate.loss.push_back(r.candidateLoss);
    data.checkpointSteps.push_back(r.step);
  }
  return data;
}

std::vector<double> emaSmooth(const std::vector<double>& values, double weight) {
  if (!(weight > 0)) return values;
  weight = std::min(weight, 0.999999);
  std::vector<double> out(values.size());
  double last = 0, weightPower = 1;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double x = values[i];
    if (!std::isfinite(x)) {
      out[i] = x;
      continue;
    }
    last = last * weight + (1 - weight) * x;
    weightPower *= weight;
    // Debiasing as TensorBoard does: the average starts at 0, so divide by the weight it has had.
    out[i] = last / (1 - weightPower);
  }
  return out;
}

}  // namespace lossbound::widgets
