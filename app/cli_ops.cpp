// `lossbound-cli ops`: lists the op registry. The Markdown form is what
// scripts/update-readme-ops.sh puts in the README's "Supported ops" section.
#include "app/cli_ops.h"

#include "core/ops/registry.h"

#include <set>
#include <string>

namespace lossbound::app {

namespace {

constexpr int kExitBadUsage = 2;

QString q(const std::string& s) { return QString::fromStdString(s); }

/// "aten.add.Tensor" → "add" (the overload dropped); packets ("aten.relu") keep their name.
std::string baseName(const std::string& op) {
  std::string s = op.starts_with("aten.") ? op.substr(5) : op;
  if (const auto dot = s.find('.'); dot != std::string::npos) s.resize(dot);
  return s;
}

/// The table: one row per family, its ops by base name (the in-place `op_` and the `op_copy`
/// forms of an op listed as `op` are left out), and its one-line description.
void printMarkdown(const OpRegistry& r, QTextStream& out) {
  out << "| Family | Ops | Bound |\n|---|---|---|\n";
  for (const OpFamily& f : r.families()) {
    if (f.ops.empty()) continue;
    std::set<std::string> bases;
    for (const std::string& op : f.ops) bases.insert(baseName(op));
    QStringList names;
    for (const std::string& b : bases) {
      const bool inPlace = b.ends_with('_') && bases.count(b.substr(0, b.size() - 1));
      const bool copy = b.ends_with("_copy") && bases.count(b.substr(0, b.size() - 5));
      if (!inPlace && !copy) names << QStringLiteral("`%1`").arg(q(b));
    }
    // A '|' inside a cell would end it.
    const QString description = q(f.description).replace(QLatin1Char('|'), QLatin1String("\\|"));
    out << "| " << q(f.name) << " | " << names.join(QStringLiteral(" ")) << " | " << description
        << " |\n";
  }
}

}  // namespace

int runOpsCommand(const QStringList& args, QTextStream& out, QTextStream& err) {
  bool markdown = false;
  for (const QString& a : args) {
    if (a == QLatin1String("--markdown")) {
      markdown = true;
    } else if (a == QLatin1String("--help") || a == QLatin1String("-h")) {
      out << "usage: lossbound-cli ops [--markdown]\n"
             "prints the aten ops Lossbound can bound, one registry name per line (an overload\n"
             "such as aten.add.Tensor, or a name without overload that matches every overload);\n"
             "--markdown prints a table of the op families instead\n";
      return 0;
    } else {
      err << "lossbound-cli ops: unknown argument '" << a << "' (expected --markdown)\n";
      return kExitBadUsage;
    }
  }
  const OpRegistry& r = opRegistry();
  if (markdown)
    printMarkdown(r, out);
  else
    for (const std::string& name : r.names()) out << q(name) << "\n";
  return 0;
}

}  // namespace lossbound::app
