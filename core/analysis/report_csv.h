#pragma once
// CSV form of step results, the one writer behind `lossbound-cli analyze --csv` and the GUI's
// step-table export, so both files have the same columns in the same order (ARCHITECTURE §4).

#include "core/analysis/analysis_types.h"

#include <string>
#include <vector>

namespace lossbound {

/// Returns the CSV header line (no newline): step, reference_loss, candidate_loss, envelope_lo,
/// envelope_hi, inside, verdict, method, margin, self_check, self_lo, self_hi, point_loss, note,
/// then the loss baselines: allclose, allclose_ratio, fp64_rmse, fp64_rmse_error,
/// fp64_rmse_allowance, fp64_loss, rounded_loss (empty when not computed).
std::string stepsCsvHeader();

/// Returns the header line and one line per step (each ending in '\n'), in the order given.
/// Numbers are written in full precision (%.17g: they read back exactly), non-finite ones as
/// inf/-inf/nan; inside as true/false; self_check as pass/fail. For a step that was not bounded
/// the envelope, inside, margin and self-check fields are empty. Fields holding a comma, quote or
/// newline are quoted (RFC 4180).
std::string stepsCsv(const std::vector<StepResult>& steps);

/// Returns the header line of outputsCsv() (no newline).
std::string outputsCsvHeader();

/// Returns the header line and one line per (step, output) of the steps' per-output comparisons
/// (`--outputs all`), ranked within each step (rank 1 first): step, rank, output, elements,
/// method, how (elementwise or functional), disjoint, disjoint_elements, worst_margin,
/// difference, candidate_half_width, reference_half_width, allclose, fp64_rmse.
std::string outputsCsv(const std::vector<StepResult>& steps);

}  // namespace lossbound
