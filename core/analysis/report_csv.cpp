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

}  // namespace

std::string stepsCsvHeader() {
  return "step,reference_loss,candidate_loss,envelope_lo,envelope_hi,inside,verdict,method,"
         "margin,self_check,self_lo,self_hi,point_loss,note";
}

std::string stepsCsv(const std::vector<StepResult>& steps) {
  std::string out = stepsCsvHeader() + '\n';
  for (const StepResult& r : steps) {
    const bool bounded = r.verdict != StepVerdict::NotBounded;
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
                                  field(r.note)};
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
