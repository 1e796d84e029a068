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

namespace lossbound {

std::string outputsCsvHeader() {
  return "step,rank,output,elements,method,how,disjoint,disjoint_elements,worst_margin,difference,"
         "candidate_half_width,reference_half_width,allclose,fp64_rmse";
}

std::string outputsCsv(const std::vector<StepResult>& steps) {
  std::string out = outputsCsvHeader() + '\n';
  for (const StepResult& r : steps) {
    int rank = 0;
    for (const OutputComparison& c : r.outputs) {
      const std::string fields[] = {
          std::to_string(r.step),
          std::to_string(++rank),
          field(c.name),
          std::to_string(c.elements),
          field(methodName(r.method)),
          c.elementwise ? "elementwise" : "functional",
          c.disjoint ? "true" : "false",
          c.elementwise ? std::to_string(c.disjointElements) : std::string(),
          numberText(c.worstMargin),
          numberText(c.difference),
          numberText(c.candidateHalfWidth),
          numberText(c.referenceHalfWidth),
          passText(c.baselinesComputed, c.allclosePass),
          passText(c.baselinesComputed, c.rmsePass)};
      bool first = true;
      for (const std::string& f : fields) {
        if (!first) out += ',';
        out += f;
        first = false;
      }
      out += '\n';
    }
  }
  return out;
}

}  // namespace lossbound
