#include "core/analysis/report_csv.h"

#include "core/interval/number_text.h"

#include <cmath>

namespace lossbound {

namespace {

std::string field(std::string_view s) {
  if (s.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(s);
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + '"';
}

std::string passText(bool computed, bool pass) {
  if (!computed) return {};
  return pass ? "pass" : "fail";
}

}  // namespace

std::string stepsCsvHeader() {
  return "step,reference_loss,candidate_loss,envelope_lo,envelope_hi,inside,verdict,method,"
         "margin,self_check,self_lo,self_hi,point_loss,note,allclose,allclose_ratio,fp64_rmse,"
         "fp64_rmse_error,fp64_rmse_allowance,fp64_loss,rounded_loss";
}

std::string stepsCsv(const std::vector<StepResult>& steps) {
  std::string out = stepsCsvHeader() + '\n';
  for (const StepResult& r : steps) {
    const bool bounded = r.verdict != StepVerdict::NotBounded;
    const LossBaselines& b = r.baselines;
    const std::string fields[] = {std::to_string(r.step),
                                  numberText(r.referenceLoss),
                                  numberText(r.candidateLoss),
                                  bounded ? numberText(r.lo) : std::string(),
                                  bounded ? numberText(r.hi) : std::string(),
                                  bounded ? (r.inside ? "true" : "false") : std::string(),
                                  field(verdictName(r.verdict)),
                                  field(methodName(r.method)),
                                  bounded ? numberText(r.margin) : std::string(),
                                  bounded ? (r.selfCheckPassed ? "pass" : "fail") : std::string(),
                                  bounded ? numberText(r.selfLo) : std::string(),
                                  bounded ? numberText(r.selfHi) : std::string(),
                                  numberText(r.pointLoss),
                                  field(r.note),
                                  passText(b.computed, b.allclosePass),
                                  b.computed ? numberText(b.allcloseRatio) : std::string(),
                                  passText(b.computed, b.rmsePass),
                                  b.computed ? numberText(b.rmseError) : std::string(),
                                  b.computed ? numberText(b.rmseAllowance) : std::string(),
                                  b.computed ? numberText(b.fp64) : std::string(),
                                  b.computed ? numberText(b.rounded) : std::string()};
    bool first = true;
    for (const std::string& f : fields) {
      if (!first) out += ',';
      out += f;
      first = false;
    }
    out += '\n';
  }
  return out;
}

}  // namespace lossbound
