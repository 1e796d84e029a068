#pragma once
// Which steps of a run pair to analyse, as the user writes it: "all", a range "A:B" (inclusive,
// either end may be left open: "A:", ":B") or a list "N,M,...". Parsing is separate from
// resolving against the steps that have checkpoints, so the CLI can reject bad syntax before any
// file is opened.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lossbound {

/// A parsed step selection; resolve() turns it into concrete steps.
class StepSelection {
 public:
  enum class Kind { All, Range, List };

  /// Returns the selection of every checkpointed step.
  static StepSelection all();
  /// Returns the steps in [first, last] (inclusive); nothing = open end.
  static StepSelection range(std::optional<std::int64_t> first, std::optional<std::int64_t> last);
  /// Returns exactly these steps (sorted, duplicates removed).
  static StepSelection list(std::vector<std::int64_t> steps);

  /// Parses "all", "A:B", "A:", ":B" or "N,M,..."; throws std::invalid_argument with a message
  /// saying what was expected and what was found.
  static StepSelection parse(std::string_view text);

  /// Returns the selected steps among `available` (the steps checkpointed in both runs, any
  /// order), sorted. Throws std::invalid_argument when a listed step is not available or when
  /// nothing is selected; the message lists what is available.
  std::vector<std::int64_t> resolve(const std::vector<std::int64_t>& available) const;

  /// Returns the kind of selection.
  Kind kind() const { return mKind; }
  /// Returns the canonical text ("all", "3:7", "3:", ":7", "1,4,9").
  std::string toString() const;

 private:
  Kind mKind = Kind::All;
  std::optional<std::int64_t> mFirst, mLast;
  std::vector<std::int64_t> mSteps;
};

}  // namespace lossbound
