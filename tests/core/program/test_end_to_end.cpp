// The end-to-end check of issue 4: for every checkpoint of every sample under samples/*/, the
// recorded program evaluated in binary64 point arithmetic on the recorded inputs reproduces the
// run's logged loss to within 1e-5 relative. The samples are committed: finding fewer than the
// three pairs fails (a data-driven test with no rows would pass without checking anything).
#include "core/backend.h"
#include "core/ir/program_parser.h"
#include "core/program/evaluator.h"
#include "core/runfile/run_file.h"

#include <QDir>
#include <QTest>

#include <cmath>

using namespace lossbound;

// The run files of a sample (not the results caches the CLI writes beside them).
const QStringList kRunFiles{QStringLiteral("reference.h5"), QStringLiteral("candidate.h5")};
// samples/README.md: gradaccum-fixed, gradaccum-hf-bug, kernel-path, two run files each.
constexpr int kMinRunFiles = 6;

// Returns samples/<dir>/<run file> for every sample run file, sorted.
QStringList sampleRunFiles() {
  const QDir samples(QStringLiteral(LOSSBOUND_SOURCE_DIR "/samples"));
  QStringList out;
  for (const QString& dir : samples.entryList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name))
    for (const QString& f :
         QDir(samples.filePath(dir)).entryList(kRunFiles, QDir::Files, QDir::Name))
      out << dir + QLatin1Char('/') + f;
  return out;
}

class TestEndToEnd : public QObject {
  Q_OBJECT

 private slots:
  void recordedLossIsReproduced_data() {
    QTest::addColumn<QString>("file");
    const QStringList files = sampleRunFiles();
    for (const QString& f : files)
      QTest::newRow(qPrintable(f)) << QStringLiteral(LOSSBOUND_SOURCE_DIR "/samples/") + f;
    // Zero rows would run the test function zero times and pass: one failing row instead.
    if (files.isEmpty()) QTest::newRow("no samples") << QString();
  }

  void recordedLossIsReproduced() {
    QFETCH(QString, file);
    QVERIFY2(!file.isEmpty(), "no samples/*/{reference,candidate}.h5 found");
    constexpr double kMaxRelErr = 1e-5;
    const RunFile run = RunFile::open(file.toStdString());
    const auto backend = createCpuBackend();
    const std::vector<std::int64_t> steps = run.checkpointSteps();
    QVERIFY2(!steps.empty(), "a sample without checkpoints cannot be checked");
    double worst = 0;
    for (std::int64_t step : steps) {
      // Only the loss is requested: backward and optimizer nodes are pruned, and an unsupported
      // op on the loss path fails here with the node and op named.
      const auto logged = run.lossAt(step);
      QVERIFY2(logged.has_value(),
               ("checkpoint " + std::to_string(step) + " has no logged loss").c_str());
      const EvalResult r =
          evaluate(run.checkpointProgram(step).program, run.loadCheckpoint(step), *backend);
      const double loss = r.outputs.at("loss").values()[0];
      const double rel = std::fabs(loss - *logged) / std::fabs(*logged);
      worst = std::max(worst, rel);
      QVERIFY2(rel <= kMaxRelErr,
               (file.toStdString() + " step " + std::to_string(step) + ": binary64 loss " +
                std::to_string(loss) + ", logged " + std::to_string(*logged) + ", relative error " +
                std::to_string(rel))
                   .c_str());
    }
    qInfo("%s: %zu checkpoints, worst relative error %.3g", qPrintable(file), steps.size(), worst);
  }

  void samplesExist() {
    const QStringList files = sampleRunFiles();
    QVERIFY2(files.size() >= kMinRunFiles,
             qPrintable(QStringLiteral("expected at least %1 sample run files under samples/, "
                                       "found %2: %3")
                            .arg(kMinRunFiles)
                            .arg(files.size())
                            .arg(files.join(QStringLiteral(", ")))));
  }
};

QTEST_GUILESS_MAIN(TestEndToEnd)
#include "test_end_to_end.moc"
