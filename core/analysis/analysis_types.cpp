#include "core/analysis/analysis_types.h"

namespace lossbound {

std::string_view methodName(EnvelopeMethod m) {
  switch (m) {
    case EnvelopeMethod::Interval:
      return "interval";
    case EnvelopeMethod::FirstOrder:
      return "first-order";
    case EnvelopeMethod::Probabilistic:
      return "probabilistic";
    case EnvelopeMethod::Ensemble:
      return "ensemble";
  }
  return "first-order";
}

std::optional<EnvelopeMethod> parseMethod(std::string_view name) {
  for (auto m : {EnvelopeMethod::Interval, EnvelopeMethod::FirstOrder,
                 EnvelopeMethod::Probabilistic, EnvelopeMethod::Ensemble})
    if (methodName(m) == name) return m;
  if (name == "first_order" || name == "firstorder") return EnvelopeMethod::FirstOrder;
  return std::nullopt;
}

std::string_view ensembleOrderName(EnsembleOrder o) {
  return o == EnsembleOrder::PerElement ? "per-element" : "per-product";
}

std::optional<EnsembleOrder> parseEnsembleOrder(std::string_view name) {
  for (auto o : {EnsembleOrder::PerProduct, EnsembleOrder::PerElement})
    if (ensembleOrderName(o) == name) return o;
  return std::nullopt;
}

std::string_view methodGuarantee(EnvelopeMethod m) {
  switch (m) {
    case EnvelopeMethod::Interval:
      return "Rigorous: contains every loss the candidate program could compute from this state "
             "under the precision model, in any reduction order.";
    case EnvelopeMethod::FirstOrder:
      return "Linearized worst case: sound up to second-order terms in the unit roundoff "
             "(O(u^2)), for any reduction order.";
    case EnvelopeMethod::Probabilistic:
      return "Probabilistic (Higham–Mary): holds with the chosen confidence if rounding errors "
             "are independent and mean-zero; not a guarantee.";
    case EnvelopeMethod::Ensemble:
      return "Observed: the spread of randomized re-executions; shows typical run-to-run noise, "
             "guarantees nothing.";
  }
  return {};
}

std::string settingsGuarantee(const AnalysisSettings& settings) {
  std::string out(methodGuarantee(settings.method));
  if (settings.method == EnvelopeMethod::Interval && !settings.startNode.empty())
    out += " Bounds start at node " + settings.startNode +
           ": rounding before it is ignored, so the envelope is not rigorous.";
  return out;
}

std::string_view verdictName(StepVerdict v) {
  switch (v) {
    case StepVerdict::Rounding:
      return "rounding";
    case StepVerdict::BugLikely:
      return "bug (likely)";
    case StepVerdict::BugCertain:
      return "bug (certain)";
    case StepVerdict::Untrustworthy:
      return "untrustworthy";
    case StepVerdict::NotBounded:
      return "not bounded";
  }
  return "rounding";
}

}  // namespace lossbound
