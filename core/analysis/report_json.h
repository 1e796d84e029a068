#pragma once
// JSON form of analysis results, shared by the results cache, `lossbound-cli analyze --json`, the
// parts that `lossbound-cli merge` combines and the GUI's File > Open report. Non-finite numbers,
// which JSON cannot hold, are written as the strings "inf", "-inf" and "nan"; numbers are written
// in the shortest form that reads back to the same double, so a report survives a round trip
// bit for bit.
//
// Report versions: 1 (before sharding) has no run sources, engine identity or shard; 2 adds
// "reference_file"/"candidate_file" ({path, log_digest}), "lossbound_version", "engine_revision"
// and, for one part of a sharded analysis, "shard" ({index, count, layout, selected_steps}).
// Both are read; version 2 is written.

#include "core/analysis/analysis_types.h"

#include <QJsonObject>

#include <string>

namespace lossbound {

/// Returns the settings as a JSON object (precision "recorded" when not overridden).
QJsonObject settingsToJson(const AnalysisSettings& s);
/// Returns the settings read from settingsToJson(); throws std::invalid_argument naming the bad
/// field, what was expected and what was found.
AnalysisSettings settingsFromJson(const QJsonObject& o);

/// Returns one output comparison as a JSON object (one row of --outputs all).
QJsonObject outputToJson(const OutputComparison& c);
/// Returns the comparison read from outputToJson(); throws std::invalid_argument on a bad field.
OutputComparison outputFromJson(const QJsonObject& o);
/// Returns one step result as a JSON object (verdict and method by name).
QJsonObject stepToJson(const StepResult& r);
/// Returns the step read from stepToJson(); throws std::invalid_argument on a bad field.
StepResult stepFromJson(const QJsonObject& o);

/// Returns the whole report (settings, steps, first exit, notes, method guarantee, run sources,
/// engine identity, shard).
QJsonObject reportToJson(const AnalysisReport& r);
/// Returns the report read from reportToJson() (version 1 or 2); throws std::invalid_argument
/// naming the bad field, what was expected and what was found.
AnalysisReport reportFromJson(const QJsonObject& o);
/// Returns the report in the JSON file at `path`; throws std::runtime_error starting with the
/// path for a missing or unreadable file, text that is not JSON (with the parse error and its
/// offset), another kind of file or a bad field.
AnalysisReport readReportFile(const std::string& path);

/// Returns a number as JSON: a double, or "inf"/"-inf"/"nan".
QJsonValue numberToJson(double v);
/// Returns the number written by numberToJson(); throws std::invalid_argument for anything else.
double numberFromJson(const QJsonValue& v, const char* field);

}  // namespace lossbound
