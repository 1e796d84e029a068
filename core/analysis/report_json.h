#pragma once
// JSON form of analysis results, shared by the results cache and `lossbound-cli analyze --json`.
// Non-finite numbers, which JSON cannot hold, are written as the strings "inf", "-inf" and "nan".

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

/// Returns the whole report (settings, steps, first exit, notes, method guarantee).
QJsonObject reportToJson(const AnalysisReport& r);

/// Returns a number as JSON: a double, or "inf"/"-inf"/"nan".
QJsonValue numberToJson(double v);
/// Returns the number written by numberToJson(); throws std::invalid_argument for anything else.
double numberFromJson(const QJsonValue& v, const char* field);

}  // namespace lossbound
