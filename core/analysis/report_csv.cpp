#include "core/analysis/report_csv.h"

#include <cmath>
#include <cstdio>

namespace lossbound {

namespace {

std::string num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

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
                                  num(r.referenceLoss),
                                  num(r.candidateLoss),
                                  bounded ? num(r.lo) : std::string(),
                                  bounded ? num(r.hi) : std::string(),
                                  bounded ? (r.inside ? "true" : "false") : std::string(),
                                  field(verdictName(r.verdict)),
                                  field(methodName(r.method)),
                                  bounded ? num(r.margin) : std::string(),
                                  bounded ? (r.selfCheckPassed ? "pass" : "fail") : std::string(),
                                  bounded ? num(r.selfLo) : std::string(),
                                  bounded ? num(r.selfHi) : std::string(),
                                  num(r.pointLoss),
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
