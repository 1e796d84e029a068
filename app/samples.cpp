#include "app/samples.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QRegularExpression>

namespace lossbound::app {

QString samplesDir() {
  const QString env = qEnvironmentVariable("LOSSBOUND_SAMPLES_DIR");
  if (!env.isEmpty()) return env;
  const QString source = QStringLiteral(LOSSBOUND_SAMPLES_DIR);
  if (QDir(source).exists()) return source;
  return QDir(QCoreApplication::applicationDirPath())
      .absoluteFilePath(QStringLiteral("../share/lossbound/samples"));
}

std::vector<SampleInfo> findSamples(const QString& dir) {
  // Descriptions: rows "| `name/` | **Verdict.** First sentence. More ... |" of README.md.
  QHash<QString, QString> descriptions;
  QFile readme(QDir(dir).filePath(QStringLiteral("README.md")));
  if (readme.open(QIODevice::ReadOnly)) {
    static const QRegularExpression row(
        QStringLiteral(R"(^\|\s*`([^`/]+)/?`\s*\|\s*(.+?)\s*\|\s*$)"));
    for (const QString& line : QString::fromUtf8(readme.readAll()).split(QLatin1Char('\n'))) {
      const auto m = row.match(line);
      if (!m.hasMatch()) continue;
      QString text = m.captured(2);
      text.remove(QStringLiteral("**")).remove(QLatin1Char('`'));
      // The verdict and the first sentence after it.
      const int firstStop = text.indexOf(QStringLiteral(". "));
      const int secondStop = firstStop < 0 ? -1 : text.indexOf(QStringLiteral(". "), firstStop + 2);
      if (secondStop > 0) text = text.left(secondStop + 1);
      if (text.size() > 160) text = text.left(157) + QStringLiteral("...");
      descriptions.insert(m.captured(1), text);
    }
  }
  std::vector<SampleInfo> out;
  const QDir root(dir);
  for (const QString& name : root.entryList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name)) {
    const QDir d(root.filePath(name));
    if (!d.exists(QStringLiteral("reference.h5")) || !d.exists(QStringLiteral("candidate.h5")))
      continue;
    out.push_back({name, descriptions.value(name, name),
                   d.absoluteFilePath(QStringLiteral("reference.h5")),
                   d.absoluteFilePath(QStringLiteral("candidate.h5"))});
  }
  return out;
}

}  // namespace lossbound::app
