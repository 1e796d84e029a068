#include "core/analysis/step_selection.h"

#include <algorithm>
#include <charconv>
#include <stdexcept>

namespace lossbound {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::int64_t parseStep(std::string_view token, std::string_view whole) {
  token = trim(token);
  std::int64_t v = 0;
  const auto* end = token.data() + token.size();
  const auto [ptr, ec] = std::from_chars(token.data(), end, v);
  if (token.empty() || ec != std::errc() || ptr != end || v < 0)
    throw std::invalid_argument(
        "steps: expected 'all', 'A:B' or 'N,M,...' with non-negative "
        "integer steps, found '" +
        std::string(token) + "' in '" + std::string(whole) + "'");
  return v;
}

std::string joinSteps(const std::vector<std::int64_t>& steps, std::size_t shown = 20) {
  std::string out;
  for (std::size_t i = 0; i < steps.size() && i < shown; ++i) {
    if (i) out += ",";
    out += std::to_string(steps[i]);
  }
  if (steps.size() > shown) out += ",... (" + std::to_string(steps.size()) + " in all)";
  return out.empty() ? "none" : out;
}

}  // namespace

StepSelection StepSelection::all() { return {}; }

StepSelection StepSelection::range(std::optional<std::int64_t> first,
                                   std::optional<std::int64_t> last) {
  if (first && last && *first > *last)
    throw std::invalid_argument("steps: range " + std::to_string(*first) + ":" +
                                std::to_string(*last) + " is empty (expected A <= B)");
  StepSelection s;
  s.mKind = Kind::Range;
  s.mFirst = first;
  s.mLast = last;
  return s;
}

StepSelection StepSelection::list(std::vector<std::int64_t> steps) {
  if (steps.empty()) throw std::invalid_argument("steps: expected at least one step in the list");
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  StepSelection s;
  s.mKind = Kind::List;
  s.mSteps = std::move(steps);
  return s;
}

StepSelection StepSelection::parse(std::string_view text) {
  const std::string_view t = trim(text);
  if (t.empty() || t == "all") return all();
  if (const auto colon = t.find(':'); colon != std::string_view::npos) {
    const std::string_view a = trim(t.substr(0, colon)), b = trim(t.substr(colon + 1));
    if (b.find(':') != std::string_view::npos || (a.empty() && b.empty()))
      throw std::invalid_argument("steps: expected a range 'A:B', found '" + std::string(t) + "'");
    std::optional<std::int64_t> first, last;
    if (!a.empty()) first = parseStep(a, t);
    if (!b.empty()) last = parseStep(b, t);
    return range(first, last);
  }
  std::vector<std::int64_t> steps;
  std::size_t pos = 0;
  while (pos <= t.size()) {
    const auto comma = t.find(',', pos);
    const auto token =
        t.substr(pos, comma == std::string_view::npos ? t.size() - pos : comma - pos);
    steps.push_back(parseStep(token, t));
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return list(std::move(steps));
}

std::vector<std::int64_t> StepSelection::resolve(const std::vector<std::int64_t>& available) const {
  std::vector<std::int64_t> avail = available;
  std::sort(avail.begin(), avail.end());
  avail.erase(std::unique(avail.begin(), avail.end()), avail.end());
  std::vector<std::int64_t> out;
  switch (mKind) {
    case Kind::All:
      out = avail;
      break;
    case Kind::Range:
      for (auto s : avail)
        if ((!mFirst || s >= *mFirst) && (!mLast || s <= *mLast)) out.push_back(s);
      break;
    case Kind::List:
      for (auto s : mSteps) {
        if (!std::binary_search(avail.begin(), avail.end(), s))
          throw std::invalid_argument(
              "steps: step " + std::to_string(s) +
              " has no checkpoint in both runs; checkpointed steps: " + joinSteps(avail));
        out.push_back(s);
      }
      break;
  }
  if (out.empty())
    throw std::invalid_argument(
        "steps: '" + toString() +
        "' selects no checkpointed step; checkpointed steps: " + joinSteps(avail));
  return out;
}

std::string StepSelection::toString() const {
  switch (mKind) {
    case Kind::All:
      return "all";
    case Kind::Range:
      return (mFirst ? std::to_string(*mFirst) : std::string()) + ":" +
             (mLast ? std::to_string(*mLast) : std::string());
    case Kind::List:
      return joinSteps(mSteps, mSteps.size());
  }
  return "all";
}

}  // namespace lossbound
