#include "core/analysis/report_json.h"

#include "core/analysis/qt_text.h"
#include "core/analysis/shard.h"
#include "core/analysis/verdict.h"
#include "core/interval/format_names.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace lossbound {

namespace {

constexpr int kReportVersion = 2;

[[noreturn]] void bad(const char* field, const char* expected, const QJsonValue& found) {
  QString f;
  switch (found.type()) {
    case QJsonValue::Null:
      f = QStringLiteral("null");
      break;
    case QJsonValue::Bool:
      f = found.toBool() ? QStringLiteral("true") : QStringLiteral("false");
      break;
    case QJsonValue::Double:
      f = qNumber(found.toDouble());
      break;
    case QJsonValue::String:
      f = QLatin1Char('"') + found.toString() + QLatin1Char('"');
      break;
    case QJsonValue::Array:
      f = QStringLiteral("an array");
      break;
    case QJsonValue::Object:
      f = QStringLiteral("an object");
      break;
    case QJsonValue::Undefined:
      f = QStringLiteral("nothing");
      break;
  }
  throw std::invalid_argument(std::string("analysis JSON: field '") + field + "': expected " +
                              expected + ", found " + f.toStdString());
}

// `label` names the field in messages when it differs from the key (a nested "shard.index").
std::string stringField(const QJsonObject& o, const char* field, const char* label = nullptr) {
  const QJsonValue v = o.value(QLatin1String(field));
  if (!v.isString()) bad(label ? label : field, "a string", v);
  return v.toString().toStdString();
}

std::int64_t intField(const QJsonObject& o, const char* field, const char* label = nullptr) {
  const QJsonValue v = o.value(QLatin1String(field));
  const double d = v.toDouble(std::nan(""));
  if (!v.isDouble() || d != std::floor(d)) bad(label ? label : field, "an integer", v);
  return static_cast<std::int64_t>(d);
}

bool boolField(const QJsonObject& o, const char* field) {
  const QJsonValue v = o.value(QLatin1String(field));
  if (!v.isBool()) bad(field, "true or false", v);
  return v.toBool();
}

QJsonObject sourceToJson(const RunSource& s) {
  QJsonObject o;
  o[QStringLiteral("path")] = qs(s.path);
  o[QStringLiteral("log_digest")] = qs(s.logDigest);
  return o;
}

RunSource sourceFromJson(const QJsonValue& v, const char* field) {
  if (!v.isObject()) bad(field, "an object {path, log_digest}", v);
  const QJsonObject o = v.toObject();
  RunSource s;
  const std::string f(field);
  s.path = stringField(o, "path", (f + ".path").c_str());
  s.logDigest = stringField(o, "log_digest", (f + ".log_digest").c_str());
  return s;
}

QJsonArray stepsToJson(const std::vector<std::int64_t>& steps) {
  QJsonArray a;
  for (std::int64_t s : steps) a.append(static_cast<double>(s));
  return a;
}

std::vector<std::int64_t> stepsFromJson(const QJsonValue& v, const char* field) {
  if (!v.isArray()) bad(field, "an array of steps", v);
  std::vector<std::int64_t> out;
  for (const QJsonValue& e : v.toArray()) {
    const double d = e.toDouble(-1);
    if (!e.isDouble() || d < 0 || d != std::floor(d)) bad(field, "non-negative integer steps", e);
    if (!out.empty() && static_cast<std::int64_t>(d) <= out.back())
      bad(field, "strictly increasing steps", e);
    out.push_back(static_cast<std::int64_t>(d));
  }
  return out;
}

}  // namespace

QJsonValue numberToJson(double v) {
  if (std::isnan(v)) return QStringLiteral("nan");
  if (std::isinf(v)) return v > 0 ? QStringLiteral("inf") : QStringLiteral("-inf");
  return v;
}

double numberFromJson(const QJsonValue& v, const char* field) {
  if (v.isDouble()) return v.toDouble();
  if (v.isString()) {
    const QString s = v.toString();
    if (s == QLatin1String("nan")) return std::numeric_limits<double>::quiet_NaN();
    if (s == QLatin1String("inf")) return std::numeric_limits<double>::infinity();
    if (s == QLatin1String("-inf")) return -std::numeric_limits<double>::infinity();
  }
  bad(field, "a number or \"inf\", \"-inf\", \"nan\"", v);
}

QJsonObject settingsToJson(const AnalysisSettings& s) {
  QJsonObject o;
  o[QStringLiteral("method")] = qs(methodName(s.method));
  o[QStringLiteral("precision")] =
      s.precision ? qs(formatName(*s.precision)) : QStringLiteral("recorded");
  o[QStringLiteral("confidence")] = numberToJson(s.confidence);
  o[QStringLiteral("ensemble_size")] = s.ensembleSize;
  o[QStringLiteral("ensemble_order")] = qs(ensembleOrderName(s.ensembleOrder));
  o[QStringLiteral("start_node")] = qs(s.startNode);
  o[QStringLiteral("backend")] = qs(s.backend);
  // 64-bit seeds do not fit a JSON double: written as a decimal string.
  o[QStringLiteral("seed")] = QString::number(s.seed);
  if (s.outputs == OutputScope::All) o[QStringLiteral("outputs")] = QStringLiteral("all");
  return o;
}

AnalysisSettings settingsFromJson(const QJsonObject& o) {
  AnalysisSettings s;
  const std::string method = stringField(o, "method");
  const auto m = parseMethod(method);
  if (!m) bad("method", "interval, first-order, probabilistic or ensemble", o.value("method"));
  s.method = *m;
  const std::string precision = stringField(o, "precision");
  if (precision != "recorded") {
    const auto f = parseFormat(precision);
    if (!f) bad("precision", "recorded, fp32, tf32, bf16, fp16 or fp64", o.value("precision"));
    s.precision = *f;
  }
  s.confidence = numberFromJson(o.value(QStringLiteral("confidence")), "confidence");
  s.ensembleSize = static_cast<int>(intField(o, "ensemble_size"));
  // Reports and cache entries written before the field existed drew an order per element.
  const QJsonValue order = o.value(QStringLiteral("ensemble_order"));
  if (order.isUndefined()) {
    s.ensembleOrder = EnsembleOrder::PerElement;
  } else {
    const auto parsed = parseEnsembleOrder(order.toString().toStdString());
    if (!order.isString() || !parsed) bad("ensemble_order", "per-product or per-element", order);
    s.ensembleOrder = *parsed;
  }
  s.startNode = stringField(o, "start_node");
  s.backend = stringField(o, "backend");
  bool ok = false;
  s.seed = o.value(QStringLiteral("seed")).toString().toULongLong(&ok);
  if (!ok) bad("seed", "a decimal string", o.value("seed"));
  const QJsonValue outputs = o.value(QStringLiteral("outputs"));
  if (outputs == QJsonValue(QStringLiteral("all")))
    s.outputs = OutputScope::All;
  else if (!outputs.isUndefined() && outputs != QJsonValue(QStringLiteral("loss")))
    bad("outputs", "\"loss\" or \"all\"", outputs);
  return s;
}

QJsonObject outputToJson(const OutputComparison& c) {
  QJsonObject o;
  o[QStringLiteral("output")] = qs(c.name);
  o[QStringLiteral("elements")] = static_cast<double>(c.elements);
  o[QStringLiteral("elementwise")] = c.elementwise;
  o[QStringLiteral("disjoint")] = c.disjoint;
  o[QStringLiteral("disjoint_elements")] = static_cast<double>(c.disjointElements);
  o[QStringLiteral("worst_margin")] = numberToJson(c.worstMargin);
  o[QStringLiteral("difference")] = numberToJson(c.difference);
  o[QStringLiteral("candidate_half_width")] = numberToJson(c.candidateHalfWidth);
  o[QStringLiteral("reference_half_width")] = numberToJson(c.referenceHalfWidth);
  if (c.baselinesComputed) {
    o[QStringLiteral("allclose")] = c.allclosePass;
    o[QStringLiteral("allclose_ratio")] = numberToJson(c.allcloseRatio);
    o[QStringLiteral("fp64_rmse")] = c.rmsePass;
    o[QStringLiteral("fp64_rmse_error")] = numberToJson(c.rmseError);
    o[QStringLiteral("fp64_rmse_allowance")] = numberToJson(c.rmseAllowance);
  }
  return o;
}

OutputComparison outputFromJson(const QJsonObject& o) {
  OutputComparison c;
  c.name = stringField(o, "output");
  c.elements = intField(o, "elements");
  c.elementwise = boolField(o, "elementwise");
  c.disjoint = boolField(o, "disjoint");
  c.disjointElements = intField(o, "disjoint_elements");
  c.worstMargin = numberFromJson(o.value(QStringLiteral("worst_margin")), "worst_margin");
  c.difference = numberFromJson(o.value(QStringLiteral("difference")), "difference");
  c.candidateHalfWidth =
      numberFromJson(o.value(QStringLiteral("candidate_half_width")), "candidate_half_width");
  c.referenceHalfWidth =
      numberFromJson(o.value(QStringLiteral("reference_half_width")), "reference_half_width");
  if (o.contains(QStringLiteral("allclose"))) {
    c.baselinesComputed = true;
    c.allclosePass = boolField(o, "allclose");
    c.allcloseRatio = numberFromJson(o.value(QStringLiteral("allclose_ratio")), "allclose_ratio");
    c.rmsePass = boolField(o, "fp64_rmse");
    c.rmseError = numberFromJson(o.value(QStringLiteral("fp64_rmse_error")), "fp64_rmse_error");
    c.rmseAllowance =
        numberFromJson(o.value(QStringLiteral("fp64_rmse_allowance")), "fp64_rmse_allowance");
  }
  return c;
}

QJsonObject stepToJson(const StepResult& r) {
  QJsonObject o;
  o[QStringLiteral("step")] = static_cast<double>(r.step);
  o[QStringLiteral("reference_loss")] = numberToJson(r.referenceLoss);
  o[QStringLiteral("candidate_loss")] = numberToJson(r.candidateLoss);
  o[QStringLiteral("envelope_lo")] = numberToJson(r.lo);
  o[QStringLiteral("envelope_hi")] = numberToJson(r.hi);
  o[QStringLiteral("point_loss")] = numberToJson(r.pointLoss);
  o[QStringLiteral("inside")] = r.inside;
  o[QStringLiteral("margin")] = numberToJson(r.margin);
  o[QStringLiteral("verdict")] = qs(verdictName(r.verdict));
  o[QStringLiteral("method")] = qs(methodName(r.method));
  o[QStringLiteral("self_check")] = r.selfCheckPassed;
  o[QStringLiteral("self_lo")] = numberToJson(r.selfLo);
  o[QStringLiteral("self_hi")] = numberToJson(r.selfHi);
  o[QStringLiteral("note")] = qs(r.note);
  o[QStringLiteral("seconds")] = r.seconds;
  o[QStringLiteral("from_cache")] = r.fromCache;
  QJsonArray budget;
  for (const BudgetShare& b : r.budget) {
    QJsonObject e;
    e[QStringLiteral("node")] = qs(b.node);
    e[QStringLiteral("op")] = qs(b.op);
    e[QStringLiteral("bound")] = numberToJson(b.bound);
    e[QStringLiteral("share")] = numberToJson(b.share);
    budget.append(e);
  }
  o[QStringLiteral("budget")] = budget;
  if (r.baselines.computed) {
    const LossBaselines& b = r.baselines;
    QJsonObject e;
    e[QStringLiteral("fp64_loss")] = numberToJson(b.fp64);
    e[QStringLiteral("rounded_loss")] = numberToJson(b.rounded);
    e[QStringLiteral("allclose")] = b.allclosePass;
    e[QStringLiteral("allclose_ratio")] = numberToJson(b.allcloseRatio);
    e[QStringLiteral("fp64_rmse")] = b.rmsePass;
    e[QStringLiteral("fp64_rmse_error")] = numberToJson(b.rmseError);
    e[QStringLiteral("fp64_rmse_allowance")] = numberToJson(b.rmseAllowance);
    e[QStringLiteral("fp64_rmse_multiplier")] = numberToJson(b.rmseMultiplier);
    o[QStringLiteral("baselines")] = e;
  }
  if (!r.outputs.empty()) {
    QJsonArray outputs;
    for (const OutputComparison& c : r.outputs) outputs.append(outputToJson(c));
    o[QStringLiteral("outputs")] = outputs;
    o[QStringLiteral("output_seconds")] = r.outputSeconds;
  }
  return o;
}

StepResult stepFromJson(const QJsonObject& o) {
  StepResult r;
  r.step = intField(o, "step");
  r.referenceLoss = numberFromJson(o.value(QStringLiteral("reference_loss")), "reference_loss");
  r.candidateLoss = numberFromJson(o.value(QStringLiteral("candidate_loss")), "candidate_loss");
  r.lo = numberFromJson(o.value(QStringLiteral("envelope_lo")), "envelope_lo");
  r.hi = numberFromJson(o.value(QStringLiteral("envelope_hi")), "envelope_hi");
  r.pointLoss = numberFromJson(o.value(QStringLiteral("point_loss")), "point_loss");
  r.inside = boolField(o, "inside");
  r.margin = numberFromJson(o.value(QStringLiteral("margin")), "margin");
  const std::string verdict = stringField(o, "verdict");
  bool found = false;
  for (auto v : {StepVerdict::Rounding, StepVerdict::BugLikely, StepVerdict::BugCertain,
                 StepVerdict::Untrustworthy, StepVerdict::NotBounded})
    if (verdictName(v) == verdict) r.verdict = v, found = true;
  if (!found) bad("verdict", "a verdict name", o.value("verdict"));
  const auto m = parseMethod(stringField(o, "method"));
  if (!m) bad("method", "a method name", o.value("method"));
  r.method = *m;
  r.selfCheckPassed = boolField(o, "self_check");
  r.selfLo = numberFromJson(o.value(QStringLiteral("self_lo")), "self_lo");
  r.selfHi = numberFromJson(o.value(QStringLiteral("self_hi")), "self_hi");
  r.note = stringField(o, "note");
  r.seconds = numberFromJson(o.value(QStringLiteral("seconds")), "seconds");
  if (o.contains(QStringLiteral("from_cache"))) r.fromCache = boolField(o, "from_cache");
  const QJsonValue budget = o.value(QStringLiteral("budget"));
  if (!budget.isArray()) bad("budget", "an array", budget);
  for (const QJsonValue& v : budget.toArray()) {
    const QJsonObject e = v.toObject();
    r.budget.push_back({stringField(e, "node"), stringField(e, "op"),
                        numberFromJson(e.value(QStringLiteral("bound")), "budget.bound"),
                        numberFromJson(e.value(QStringLiteral("share")), "budget.share")});
  }
  // Absent in results written before the baselines existed: left as not computed.
  const QJsonValue baselines = o.value(QStringLiteral("baselines"));
  if (baselines.isObject()) {
    const QJsonObject e = baselines.toObject();
    LossBaselines& b = r.baselines;
    b.computed = true;
    b.fp64 = numberFromJson(e.value(QStringLiteral("fp64_loss")), "baselines.fp64_loss");
    b.rounded = numberFromJson(e.value(QStringLiteral("rounded_loss")), "baselines.rounded_loss");
    b.allclosePass = boolField(e, "allclose");
    b.allcloseRatio =
        numberFromJson(e.value(QStringLiteral("allclose_ratio")), "baselines.allclose_ratio");
    b.rmsePass = boolField(e, "fp64_rmse");
    b.rmseError =
        numberFromJson(e.value(QStringLiteral("fp64_rmse_error")), "baselines.fp64_rmse_error");
    b.rmseAllowance = numberFromJson(e.value(QStringLiteral("fp64_rmse_allowance")),
                                     "baselines.fp64_rmse_allowance");
    b.rmseMultiplier = numberFromJson(e.value(QStringLiteral("fp64_rmse_multiplier")),
                                      "baselines.fp64_rmse_multiplier");
  } else if (!baselines.isUndefined()) {
    bad("baselines", "an object", baselines);
  }
  const QJsonValue outputs = o.value(QStringLiteral("outputs"));
  if (outputs.isArray()) {
    for (const QJsonValue& v : outputs.toArray()) r.outputs.push_back(outputFromJson(v.toObject()));
    r.outputSeconds = numberFromJson(o.value(QStringLiteral("output_seconds")), "output_seconds");
  } else if (!outputs.isUndefined()) {
    bad("outputs", "an array", outputs);
  }
  return r;
}

QJsonObject reportToJson(const AnalysisReport& r) {
  QJsonObject o;
  o[QStringLiteral("format")] = QStringLiteral("lossbound-analysis");
  o[QStringLiteral("version")] = kReportVersion;
  o[QStringLiteral("reference")] = qs(r.referenceName);
  o[QStringLiteral("candidate")] = qs(r.candidateName);
  o[QStringLiteral("settings")] = settingsToJson(r.settings);
  o[QStringLiteral("method_guarantee")] = qs(settingsGuarantee(r.settings));
  o[QStringLiteral("backend")] = qs(r.backendDescription);
  o[QStringLiteral("note")] = qs(r.note);
  o[QStringLiteral("cancelled")] = r.cancelled;
  o[QStringLiteral("cache_file")] = qs(r.cacheFile);
  o[QStringLiteral("first_exit")] =
      r.firstExit ? QJsonValue(static_cast<double>(*r.firstExit)) : QJsonValue();
  o[QStringLiteral("reference_file")] = sourceToJson(r.referenceSource);
  o[QStringLiteral("candidate_file")] = sourceToJson(r.candidateSource);
  o[QStringLiteral("lossbound_version")] = qs(r.lossboundVersion);
  o[QStringLiteral("engine_revision")] = qs(r.engineRevision);
  if (r.shard) {
    QJsonObject sh;
    sh[QStringLiteral("index")] = r.shard->index;
    sh[QStringLiteral("count")] = r.shard->count;
    sh[QStringLiteral("layout")] = qs(shardLayoutName(r.shard->layout));
    sh[QStringLiteral("selected_steps")] = stepsToJson(r.shard->selectedSteps);
    o[QStringLiteral("shard")] = sh;
  }
  QJsonArray steps;
  for (const StepResult& s : r.steps) steps.append(stepToJson(s));
  o[QStringLiteral("steps")] = steps;
  return o;
}

AnalysisReport reportFromJson(const QJsonObject& o) {
  AnalysisReport r;
  if (o.value(QStringLiteral("format")).toString() != QLatin1String("lossbound-analysis"))
    bad("format", "\"lossbound-analysis\"", o.value(QStringLiteral("format")));
  const std::int64_t version = intField(o, "version");
  if (version < 1 || version > kReportVersion)
    bad("version", "1 or 2 (this build reads report versions up to 2)", o.value("version"));
  r.referenceName = stringField(o, "reference");
  r.candidateName = stringField(o, "candidate");
  const QJsonValue settings = o.value(QStringLiteral("settings"));
  if (!settings.isObject()) bad("settings", "an object", settings);
  r.settings = settingsFromJson(settings.toObject());
  r.backendDescription = stringField(o, "backend");
  r.note = stringField(o, "note");
  r.cancelled = boolField(o, "cancelled");
  r.cacheFile = stringField(o, "cache_file");
  const QJsonValue steps = o.value(QStringLiteral("steps"));
  if (!steps.isArray()) bad("steps", "an array", steps);
  for (const QJsonValue& v : steps.toArray()) {
    if (!v.isObject()) bad("steps[]", "an object", v);
    r.steps.push_back(stepFromJson(v.toObject()));
  }
  for (std::size_t i = 1; i < r.steps.size(); ++i)
    if (r.steps[i].step <= r.steps[i - 1].step)
      bad("steps", "steps in strictly increasing order",
          QJsonValue(static_cast<double>(r.steps[i].step)));
  // The first exit follows from the steps; a stored one that does not is a corrupt report.
  r.firstExit = firstExit(r.steps);
  const QJsonValue exit = o.value(QStringLiteral("first_exit"));
  const bool stored = !exit.isNull() && !exit.isUndefined();
  if (stored != r.firstExit.has_value() ||
      (stored && exit.toDouble(-1) != static_cast<double>(*r.firstExit)))
    bad("first_exit",
        r.firstExit
            ? ("step " + std::to_string(*r.firstExit) + " (the earliest exit among the steps)")
                  .c_str()
            : "null (no step is an exit)",
        exit);
  if (version < 2) {
    r.lossboundVersion.clear();
    r.engineRevision.clear();
    return r;
  }
  r.referenceSource = sourceFromJson(o.value(QStringLiteral("reference_file")), "reference_file");
  r.candidateSource = sourceFromJson(o.value(QStringLiteral("candidate_file")), "candidate_file");
  r.lossboundVersion = stringField(o, "lossbound_version");
  r.engineRevision = stringField(o, "engine_revision");
  const QJsonValue shard = o.value(QStringLiteral("shard"));
  if (!shard.isUndefined() && !shard.isNull()) {
    if (!shard.isObject()) bad("shard", "an object", shard);
    const QJsonObject sh = shard.toObject();
    ShardInfo info;
    info.index = static_cast<int>(intField(sh, "index", "shard.index"));
    info.count = static_cast<int>(intField(sh, "count", "shard.count"));
    if (info.count < 1 || info.index < 1 || info.index > info.count)
      bad("shard.index", "1 <= index <= count", sh.value(QStringLiteral("index")));
    const auto layout = parseShardLayout(stringField(sh, "layout", "shard.layout"));
    if (!layout) bad("shard.layout", "\"blocks\" or \"interleaved\"", sh.value("layout"));
    info.layout = *layout;
    info.selectedSteps =
        stepsFromJson(sh.value(QStringLiteral("selected_steps")), "shard.selected_steps");
    r.shard = std::move(info);
  }
  return r;
}

AnalysisReport readReportFile(const std::string& path) {
  QFile f(QString::fromStdString(path));
  if (!f.exists()) throw std::runtime_error(path + ": no such file");
  if (!f.open(QIODevice::ReadOnly))
    throw std::runtime_error(path + ": cannot read: " + f.errorString().toStdString());
  const QByteArray data = f.readAll();
  QJsonParseError err{};
  const QJsonDocument doc = QJsonDocument::fromJson(data, &err);
  if (err.error != QJsonParseError::NoError)
    throw std::runtime_error(path + ": not a Lossbound analysis report: expected JSON, found a " +
                             "parse error (" + err.errorString().toStdString() + ") at byte " +
                             std::to_string(err.offset) + " of " + std::to_string(data.size()));
  if (!doc.isObject())
    throw std::runtime_error(path +
                             ": not a Lossbound analysis report: expected a JSON object, found "
                             "an array");
  try {
    return reportFromJson(doc.object());
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

}  // namespace lossbound
