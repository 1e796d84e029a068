#include "app/cli_info.h"

#include "core/analysis/qt_text.h"
#include "core/program/op_coverage.h"
#include "core/runfile/run_file.h"
#include "core/tensor/non_finite.h"

#include <algorithm>
#include <exception>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace lossbound::app {

namespace {

constexpr int kExitInvalid = 2;

// "0-49" or "0-9, 20, 30-31": consecutive steps collapsed into ranges.
QString stepRanges(const std::vector<std::int64_t>& steps) {
  QStringList parts;
  for (std::size_t i = 0; i < steps.size();) {
    std::size_t j = i;
    while (j + 1 < steps.size() && steps[j + 1] == steps[j] + 1) ++j;
    parts << (i == j ? QString::number(steps[i])
                     : QStringLiteral("%1-%2").arg(steps[i]).arg(steps[j]));
    i = j + 1;
  }
  if (parts.size() > 12)
    parts = parts.mid(0, 6) << QStringLiteral("...") << parts.mid(parts.size() - 3);
  return parts.join(QStringLiteral(", "));
}

QString orDash(const std::string& s) { return s.empty() ? QStringLiteral("-") : qs(s); }

void summarise(const RunFile& run, QTextStream& out) {
  const RunAttributes& a = run.attributes();
  const RunLog& log = run.log();
  out << qs(run.path()) << ": valid Lossbound run file (format version " << a.formatVersion
      << ")\n";
  out << "  run:          " << orDash(a.runName) << " (role: " << orDash(a.role) << ")\n";
  out << "  framework:    " << orDash(a.framework) << "; device: " << orDash(a.device);
  if (!a.float32MatmulPrecision.empty())
    out << "; float32 matmul precision: " << qs(a.float32MatmulPrecision);
  out << "\n";
  if (!a.created.empty()) out << "  created:      " << qs(a.created) << "\n";
  if (!a.notes.empty()) out << "  notes:        " << qs(a.notes) << "\n";
  const auto [lo, hi] = std::minmax_element(log.loss.begin(), log.loss.end());
  out << "  steps:        " << log.steps.size() << " logged, " << log.steps.front() << " to "
      << log.steps.back() << "\n";
  out << "  loss:         " << qNumber(*lo, 6) << " to " << qNumber(*hi, 6) << " (first "
      << qNumber(log.loss.front(), 6) << ", last " << qNumber(log.loss.back(), 6) << ")\n";
  if (!log.metrics.empty()) {
    QStringList names;
    for (const auto& [name, values] : log.metrics) names << qs(name);
    out << "  metrics:      " << names.join(QStringLiteral(", ")) << "\n";
  }
  const std::vector<std::int64_t> steps = run.checkpointSteps();
  out << "  checkpoints:  " << steps.size();
  if (!steps.empty()) out << " (steps " << stepRanges(steps) << ")";
  out << "\n";
  out << "  programs:     " << run.programs().size() << "\n";
  for (const RunProgram& p : run.programs()) {
    int uses = 0;
    for (std::int64_t s : steps) uses += run.checkpointProgram(s).id == p.id ? 1 : 0;
    out << "    " << qs(p.id) << ": " << p.opCount << " ops, " << p.program.inputs.size()
        << " inputs, " << p.program.outputs.size() << " outputs, used by " << uses
        << " checkpoint(s)";
    if (!p.program.torchVersion.empty()) out << ", torch " << qs(p.program.torchVersion);
    out << "\n";
    const std::vector<UnsupportedOp> unsupported = unsupportedOps(p.program);
    if (unsupported.empty()) {
      out << "      all ops are supported\n";
    } else {
      std::map<std::string, std::vector<std::string>> byOp;
      for (const UnsupportedOp& u : unsupported) byOp[u.op].push_back(u.node);
      out << "      unsupported ops (" << byOp.size() << "; this program cannot be evaluated):\n";
      for (const auto& [op, nodes] : byOp)
        out << "        " << qs(op) << " (" << nodes.size()
            << " node(s), first: " << qs(nodes.front()) << ")\n";
    }
  }
  for (const std::string& w : run.warnings()) out << "  warning: " << qs(w) << "\n";
}

// The HDF5 dataset of program input `name` ("param:w" → /checkpoints/<step>/params/w).
QString datasetPath(std::int64_t step, const std::string& name) {
  const bool param = name.starts_with("param:");
  return QStringLiteral("/checkpoints/%1/%2/%3")
      .arg(step)
      .arg(param ? QStringLiteral("params") : QStringLiteral("batch"))
      .arg(qs(std::string_view(name).substr(name.find(':') + 1)));
}

// Reads checkpoints in step order, up to `budget` bytes of tensor data after the first one, and
// prints a warning per tensor that holds NaN or ±inf, then how much was checked.
void checkValues(const RunFile& run, std::int64_t budget, QTextStream& out) {
  const std::vector<std::int64_t> steps = run.checkpointSteps();
  if (steps.empty()) return;
  std::int64_t bytes = 0;
  std::vector<std::int64_t> checked;
  QStringList warnings;
  for (std::int64_t step : steps) {
    std::int64_t need = 0;
    for (const InputSpec& in : run.checkpointProgram(step).program.inputs)
      need += numel(in.spec.shape) * static_cast<std::int64_t>(sizeof(double));
    if (!checked.empty() && bytes + need > budget) break;
    for (const NonFiniteValues& v : findNonFinite(run.loadCheckpoint(step)))
      warnings << QStringLiteral("step %1: %2")
                      .arg(step)
                      .arg(qs(describeNonFinite(v, datasetPath(step, v.name).toStdString())));
    bytes += need;
    checked.push_back(step);
  }
  out << "  values:       ";
  if (checked.size() == steps.size())
    out << "every checkpoint checked";
  else
    out << "checkpoints at steps " << stepRanges(checked) << " checked (" << checked.size()
        << " of " << steps.size() << ", " << qNumber(static_cast<double>(bytes) / (1 << 20), 3)
        << " MiB; --check-values checks all)";
  out << (warnings.isEmpty()
              ? QStringLiteral(": all finite\n")
              : QStringLiteral(": %1 tensor(s) hold NaN or inf\n").arg(warnings.size()));
  for (const QString& w : warnings) out << "  warning: " << w << "\n";
}

}  // namespace

int runInfoCommand(const QStringList& args, QTextStream& out, QTextStream& err) {
  QStringList files;
  std::int64_t budget = kInfoValueBudgetBytes;
  bool badUsage = false;
  for (qsizetype i = 0; i < args.size(); ++i) {
    if (args[i] == QStringLiteral("--check-values")) {
      budget = std::numeric_limits<std::int64_t>::max();
    } else if (args[i] == QStringLiteral("--value-budget")) {
      bool ok = false;
      const qint64 mib = i + 1 < args.size() ? args[i + 1].toLongLong(&ok) : -1;
      if (!ok || mib < 0 || mib > (std::int64_t{1} << 40)) {
        err << "lossbound-cli info: --value-budget: expected a number of MiB, found '"
            << (i + 1 < args.size() ? args[i + 1] : QString()) << "'\n";
        badUsage = true;
        break;
      }
      budget = std::int64_t{mib} << 20;
      ++i;
    } else {
      files << args[i];
    }
  }
  if (files.isEmpty() || badUsage) {
    err << "usage: lossbound-cli info [--check-values | --value-budget MIB] FILE...\n"
           "validates run files (HDF5, docs/run-file-format.md) and summarises them, with the\n"
           "checkpoint tensors that hold NaN or inf: checkpoints are read in step order up to\n"
           "256 MiB of tensor data (--value-budget MIB: another amount; --check-values: all);\n"
           "exit 0 when all are valid, 2 otherwise\n";
    return kExitInvalid;
  }
  int status = 0;
  for (const QString& file : files) {
    try {
      RunFile::validateIsolated(file.toStdString());  // a crash inside libhdf5 stays in a child
      const RunFile run = RunFile::open(file.toStdString());
      summarise(run, out);
      checkValues(run, budget, out);
    } catch (const std::exception& e) {
      err << "lossbound-cli info: invalid run file: " << e.what() << "\n";
      status = kExitInvalid;
    } catch (...) {
      err << "lossbound-cli info: " << file << ": unexpected failure while reading the file\n";
      status = kExitInvalid;
    }
    out.flush();
    err.flush();
  }
  return status;
}

int runValidateCommand(const QStringList& files, QTextStream& out, QTextStream& err) {
  if (files.isEmpty()) {
    err << "usage: lossbound-cli validate FILE...\n"
           "validates run files in this process; exit 0 when all are valid, 2 otherwise\n";
    return kExitInvalid;
  }
  int status = 0;
  for (const QString& file : files) {
    try {
      RunFile::validate(file.toStdString());
      out << file << ": valid\n";
    } catch (const std::exception& e) {
      err << e.what() << "\n";
      status = kExitInvalid;
    }
    out.flush();
    err.flush();
  }
  return status;
}

}  // namespace lossbound::app
