// Merging report parts. The checks run from the broadest difference to the narrowest (engine,
// run pair, settings, sharding, then the steps of each part), so the message names the cause a
// user would fix first.
#include "core/analysis/report_merge.h"

#include "core/analysis/report_json.h"
#include "core/analysis/shard.h"
#include "core/analysis/verdict.h"

#include <QJsonObject>

#include <algorithm>
#include <map>
#include <set>

namespace lossbound {

namespace {

std::string shortDigest(const std::string& d) {
  return d.empty() ? std::string("(none)") : d.substr(0, 12) + "…";
}

std::string jsonText(const QJsonValue& v) {
  if (v.isString()) return v.toString().toStdString();
  if (v.isDouble()) return QString::number(v.toDouble(), 'g', 17).toStdString();
  if (v.isUndefined()) return "(not set)";
  return "?";
}

/// Appends `text` to `seen` unless it is empty or already there.
void addDistinct(std::vector<std::string>& seen, const std::string& text) {
  if (!text.empty() && std::find(seen.begin(), seen.end(), text) == seen.end())
    seen.push_back(text);
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

void checkSameRun(const ReportPart& first, const ReportPart& p, const char* role,
                  const std::string& firstName, const std::string& name, const RunSource& a,
                  const RunSource& b) {
  if (firstName != name)
    throw MergeError(p.origin + ": another run pair: the " + role + " run is '" + name +
                     "', but it is '" + firstName + "' in " + first.origin);
  if (a.logDigest != b.logDigest)
    throw MergeError(p.origin + ": another run pair: the " + role + " run's loss log differs " +
                     "(digest " + shortDigest(b.logDigest) + " of '" + b.path + "', but " +
                     shortDigest(a.logDigest) + " of '" + a.path + "' in " + first.origin + ")");
}

}  // namespace

std::optional<std::string> settingsDifference(const AnalysisSettings& a, const AnalysisSettings& b,
                                              const std::string& aName, const std::string& bName) {
  const QJsonObject ja = settingsToJson(a), jb = settingsToJson(b);
  // The fields that change results, in the order a user thinks of them (as analysisKey keeps
  // them: the confidence only for the probabilistic method, ...).
  std::vector<const char*> fields = {"method", "precision"};
  const EnvelopeMethod m = a.method;
  if (m == b.method) {
    if (m == EnvelopeMethod::Interval) fields.push_back("start_node");
    if (m == EnvelopeMethod::Probabilistic) fields.push_back("confidence");
    if (m == EnvelopeMethod::Ensemble) {
      fields.push_back("ensemble_size");
      fields.push_back("ensemble_order");
      fields.push_back("seed");
    }
  }
  for (const char* f : fields) {
    const QJsonValue va = ja.value(QLatin1String(f)), vb = jb.value(QLatin1String(f));
    if (va != vb)
      return std::string(f) + ": " + jsonText(va) + " in " + aName + ", " + jsonText(vb) + " in " +
             bName;
  }
  return std::nullopt;
}

AnalysisReport mergeReports(const std::vector<ReportPart>& parts) {
  if (parts.empty()) throw MergeError("merge: expected at least one part, found none");
  for (const ReportPart& p : parts)
    if (!p.report.shard)
      throw MergeError(p.origin +
                       ": not a part of a sharded analysis (expected a report written by "
                       "analyze --shard I/N, found one of a whole analysis)");
  const ReportPart& first = parts.front();
  const AnalysisReport& f = first.report;
  for (const ReportPart& p : parts) {
    const AnalysisReport& r = p.report;
    if (r.lossboundVersion != f.lossboundVersion || r.engineRevision != f.engineRevision)
      throw MergeError(p.origin + ": computed by another engine: Lossbound " + r.lossboundVersion +
                       " (engine revision " + r.engineRevision + "), but " + f.lossboundVersion +
                       " (engine revision " + f.engineRevision + ") in " + first.origin);
    checkSameRun(first, p, "reference", f.referenceName, r.referenceName, f.referenceSource,
                 r.referenceSource);
    checkSameRun(first, p, "candidate", f.candidateName, r.candidateName, f.candidateSource,
                 r.candidateSource);
    if (auto d = settingsDifference(f.settings, r.settings, first.origin, p.origin))
      throw MergeError(p.origin + ": other settings: " + *d);
    const ShardInfo &fs = *f.shard, &rs = *r.shard;
    if (rs.count != fs.count || rs.layout != fs.layout)
      throw MergeError(p.origin + ": another sharding: shard " + shardName(rs) + " (" +
                       std::string(shardLayoutName(rs.layout)) + "), but " + first.origin +
                       " is shard " + shardName(fs) + " (" +
                       std::string(shardLayoutName(fs.layout)) + ")");
    if (rs.selectedSteps != fs.selectedSteps)
      throw MergeError(p.origin + ": another step selection: steps " +
                       describeSteps(rs.selectedSteps) + ", but " +
                       describeSteps(fs.selectedSteps) + " in " + first.origin);
  }

  // One part per shard, each holding its steps.
  std::map<int, const ReportPart*> byIndex;
  for (const ReportPart& p : parts) {
    const auto [it, added] = byIndex.emplace(p.report.shard->index, &p);
    if (!added)
      throw MergeError(it->second->origin + " and " + p.origin + " are both shard " +
                       shardName(*p.report.shard) + ": expected one part per shard");
  }
  std::vector<std::string> missing;
  for (int i = 1; i <= f.shard->count; ++i)
    if (!byIndex.count(i)) {
      ShardInfo s = *f.shard;
      s.index = i;
      missing.push_back("shard " + shardName(s) + " (steps " + describeSteps(shardSteps(s)) + ")");
    }
  if (!missing.empty())
    throw MergeError("missing " + join(missing, ", ") + ": expected one part per shard, found " +
                     std::to_string(byIndex.size()) + " of " + std::to_string(f.shard->count));

  AnalysisReport merged;
  merged.referenceName = f.referenceName;
  merged.candidateName = f.candidateName;
  merged.settings = f.settings;
  merged.referenceSource = f.referenceSource;
  merged.candidateSource = f.candidateSource;
  merged.lossboundVersion = f.lossboundVersion;
  merged.engineRevision = f.engineRevision;
  std::vector<std::string> backends, notes, caches, backendSettings, paths;
  for (const auto& [index, part] : byIndex) {
    const AnalysisReport& r = part->report;
    const std::vector<std::int64_t> expected = shardSteps(*r.shard);
    std::vector<std::int64_t> held;
    for (const StepResult& s : r.steps) held.push_back(s.step);
    std::vector<std::int64_t> extra, absent;
    std::set_difference(held.begin(), held.end(), expected.begin(), expected.end(),
                        std::back_inserter(extra));
    std::set_difference(expected.begin(), expected.end(), held.begin(), held.end(),
                        std::back_inserter(absent));
    if (!extra.empty())
      throw MergeError(part->origin + ": shard " + shardName(*r.shard) + " holds steps " +
                       describeSteps(extra) + ", which are not among its steps (" +
                       describeSteps(expected) + ")");
    if (!absent.empty() && !r.cancelled)
      throw MergeError(part->origin + ": shard " + shardName(*r.shard) + " lacks steps " +
                       describeSteps(absent) + " of its steps " + describeSteps(expected) +
                       " (expected a complete part)");
    merged.cancelled = merged.cancelled || r.cancelled;
    for (const StepResult& s : r.steps) merged.steps.push_back(s);
    addDistinct(backends, r.backendDescription);
    addDistinct(notes, r.note);
    addDistinct(caches, r.cacheFile);
    addDistinct(backendSettings, r.settings.backend);
    addDistinct(paths, r.referenceSource.path + "\n" + r.candidateSource.path);
  }
  std::sort(merged.steps.begin(), merged.steps.end(),
            [](const StepResult& a, const StepResult& b) { return a.step < b.step; });
  merged.firstExit = firstExit(merged.steps);
  merged.backendDescription = join(backends, " | ");
  merged.cacheFile = join(caches, "; ");
  if (backendSettings.size() > 1)
    addDistinct(notes, "The parts ran with other --backend settings (" +
                           join(backendSettings, ", ") + "); the results are comparable.");
  if (paths.size() > 1)
    addDistinct(notes, "The parts read the runs from " + std::to_string(paths.size()) +
                           " different paths (same loss logs); the report names those of " +
                           first.origin + ".");
  merged.note = join(notes, " ");
  return merged;
}

}  // namespace lossbound
