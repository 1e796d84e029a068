#pragma once
// Test driver shared by the Engine B op-family tests (activation, softmax, norm, embedding, loss):
// runs many random cases of one op per precision through op_harness (zero escapes, local errors)
// and reports tightness (interval width / observed random spread on exact inputs).

#include "tests/core/ops/op_harness.h"

#include <QtTest>

#include <cmath>
#include <functional>
#include <random>
#include <string>

namespace lossbound::test::nn {

/// The four precisions every op is tested in.
inline const Format kFormats[] = {Format::Fp64, Format::Fp32, Format::Bf16, Format::Fp16};

/// Returns a short name of a format for messages.
inline const char* formatName(Format f) {
  switch (f) {
    case Format::Fp64:
      return "fp64";
    case Format::Fp32:
      return "fp32";
    case Format::Tf32:
      return "tf32";
    case Format::Bf16:
      return "bf16";
    case Format::Fp16:
      return "fp16";
  }
  return "?";
}

/// Builds one random case: (format, intervals?) → OpCase.
using CaseMaker = std::function<OpCase(Format, bool, std::mt19937_64&)>;

/// Aggregated results of many cases of one op in one format.
struct Summary {
  int cases = 0, trials = 0, escapes = 0, localViolations = 0;
  std::string firstEscape, firstLocal;
  double widthSum = 0, spreadSum = 0, localMaxRatio = 0;
};

/// Runs `cases` random cases (every third with interval inputs), `execs` random executions
/// each, and a local-error check on every fourth case.
inline Summary runCases(const CaseMaker& make, Format f, int cases, int execs, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Summary s;
  for (int i = 0; i < cases; ++i) {
    const bool intervals = i % 3 == 2;
    const OpCase c = make(f, intervals, rng);
    const EnclosureReport r = checkEnclosure(c, execs, rng);
    ++s.cases;
    s.trials += r.trials;
    s.escapes += r.escapes;
    if (s.firstEscape.empty()) s.firstEscape = r.firstEscape;
    if (!intervals) {
      s.widthSum += r.widthSum;
      s.spreadSum += r.spreadSum;
    }
    if (i % 4 == 0) {
      const LocalErrorReport l = checkLocalError(c, 2, rng);
      s.localViolations += l.violations;
      if (s.firstLocal.empty()) s.firstLocal = l.first;
      s.localMaxRatio = std::fmax(s.localMaxRatio, l.maxRatio);
    }
  }
  return s;
}

/// Runs runCases for every format, prints tightness, and fails on any escape or violation.
inline void checkAllFormats(const std::string& name, const CaseMaker& make, int cases = 1000,
                            int execs = 3) {
  std::uint64_t seed = std::hash<std::string>{}(name);
  for (Format f : kFormats) {
    const Summary s = runCases(make, f, cases, execs, seed++);
    qInfo(
        "%-44s %s: %5d cases %6d runs, escapes %d, local violations %d, width/spread %.3g, "
        "max |random-point|/localError %.3g",
        name.c_str(), formatName(f), s.cases, s.trials, s.escapes, s.localViolations,
        s.spreadSum > 0 ? s.widthSum / s.spreadSum : 0.0, s.localMaxRatio);
    QVERIFY2(s.escapes == 0, (name + " " + formatName(f) + ": " + s.firstEscape).c_str());
    QVERIFY2(s.localViolations == 0, (name + " " + formatName(f) + ": " + s.firstLocal).c_str());
  }
}

/// Checks vjp() against finite differences on `cases` random fp64 point cases.
inline void checkVjpCases(const std::string& name, const CaseMaker& make, int cases = 40,
                          double tol = 1e-5) {
  std::mt19937_64 rng(std::hash<std::string>{}(name) + 7);
  double worst = 0;
  std::string where;
  for (int i = 0; i < cases; ++i) {
    const OpCase c = make(Format::Fp64, false, rng);
    const VjpReport r = checkVjp(c, rng, 2);
    if (r.maxRelError > worst) {
      worst = r.maxRelError;
      where = r.where;
    }
  }
  qInfo("%-44s vjp vs finite differences: max rel error %.3g", name.c_str(), worst);
  QVERIFY2(worst <= tol, (name + ": " + where).c_str());
}

/// Returns a point or interval tensor of values sign·2^U(−spread, spread)·U(1,2) in dtype t.
inline Tensor values(const Shape& s, DType t, bool asInterval, std::mt19937_64& rng,
                     double spread) {
  return asInterval ? randomInterval(s, t, rng, 1e-3, spread) : randomPoint(s, t, rng, spread);
}

/// Returns a tensor of values uniform in [−a, a] rounded to dtype t (point or interval with
/// relative radii up to 1e-3).
inline Tensor uniform(const Shape& s, DType t, bool asInterval, std::mt19937_64& rng, double a,
                      double center = 0.0) {
  std::uniform_real_distribution<double> u(-a, a), r(0.0, 1e-3);
  const Format f = storageFormat(t).value_or(Format::Fp64);
  std::vector<double> lo(static_cast<std::size_t>(numel(s))), hi;
  for (double& x : lo) x = roundToFormat(center + u(rng), f, RoundingDirection::Nearest);
  if (!asInterval) return Tensor::point(s, t, lo);
  hi = lo;
  for (std::size_t i = 0; i < lo.size(); ++i) {
    if (rng() % 4 == 0) continue;
    const double w = r(rng) * std::fabs(lo[i]);
    const Interval x = roundOutward(Interval{lo[i] - w, hi[i] + w}, f);
    lo[i] = x.lo;
    hi[i] = x.hi;
  }
  return Tensor::interval(s, t, lo, hi);
}

/// Returns an interval tensor whose midpoints are uniform in [center − spread, center + spread]
/// and whose radius is `radius` everywhere (rounded outward to dtype t): enclosures wider than
/// the values' own spread, as deep interval programs produce them.
inline Tensor wideIntervals(const Shape& s, DType t, std::mt19937_64& rng, double spread,
                            double radius, double center = 0.0) {
  std::uniform_real_distribution<double> u(-spread, spread);
  const Format f = storageFormat(t).value_or(Format::Fp64);
  std::vector<double> lo(static_cast<std::size_t>(numel(s))), hi(lo.size());
  for (std::size_t i = 0; i < lo.size(); ++i) {
    const double m = center + u(rng);
    const Interval x = roundOutward(Interval{m - radius, m + radius}, f);
    lo[i] = x.lo;
    hi[i] = x.hi;
  }
  return Tensor::interval(s, t, lo, hi);
}

/// Returns true when every endpoint of every floating output is finite.
inline bool allFinite(const std::vector<Tensor>& outs) {
  for (const Tensor& t : outs)
    for (std::size_t e = 0; e < t.lo().size(); ++e)
      if (!std::isfinite(t.lo()[e]) || !std::isfinite(t.hi()[e])) return false;
  return true;
}

}  // namespace lossbound::test::nn
