// `lossbound-cli analyze --png F` renders the loss and margin plots to F: on the hf-bug sample the
// PNG exists, decodes and is not blank, the exit code stays 3 (Type-II), and this works with no
// display and no QT_QPA_PLATFORM (the CLI falls back to the offscreen platform). A PNG that
// cannot be written is exit code 2 and leaves no file behind.
#include <QDir>
#include <QFileInfo>
#include <QImage>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

class TestCliPng : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir mDir;

  QProcess* runCli(const QStringList& extra) {
    auto* p = new QProcess(this);
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    for (const char* v : {"QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY"})
      env.remove(QString::fromLatin1(v));
    env.insert(QStringLiteral("LOSSBOUND_CACHE_DIR"), mDir.filePath(QStringLiteral("cache")));
    p->setProcessEnvironment(env);
    const QString samples = QStringLiteral(LOSSBOUND_SOURCE_DIR "/samples/gradaccum-hf-bug/");
    p->start(QStringLiteral(LOSSBOUND_CLI_PATH),
             QStringList{QStringLiteral("analyze"), QStringLiteral("--reference"),
                         samples + QStringLiteral("reference.h5"), QStringLiteral("--candidate"),
                         samples + QStringLiteral("candidate.h5"), QStringLiteral("--steps"),
                         QStringLiteral("0:3")} +
                 extra);
    p->waitForFinished(280'000);
    return p;
  }

 private slots:
  void initTestCase() { QVERIFY(mDir.isValid()); }

  void pngOfTheHfBugSampleDecodes() {
    const QString png = mDir.filePath(QStringLiteral("hf-bug.png"));
    QProcess* p = runCli({QStringLiteral("--png"), png});
    QCOMPARE(p->exitStatus(), QProcess::NormalExit);
    QVERIFY2(p->exitCode() == 3,
             qPrintable(QStringLiteral("exit %1, stderr: %2")
                            .arg(p->exitCode())
                            .arg(QString::fromUtf8(p->readAllStandardError()))));
    QVERIFY(QFileInfo::exists(png));
    const QImage image(png);
    QVERIFY(!image.isNull());
    QVERIFY(image.width() >= 600 && image.height() >= 400);
    // Not blank: some pixels are far from the white background.
    int dark = 0;
    for (int y = 0; y < image.height(); y += 4)
      for (int x = 0; x < image.width(); x += 4) dark += qGray(image.pixel(x, y)) < 128;
    QVERIFY(dark > 50);
    // No temporary file is left beside it.
    QCOMPARE(QDir(mDir.path()).entryList({QStringLiteral("hf-bug.png*")}, QDir::Files).size(), 1);
  }

  void unwritablePngIsBadInput() {
    const QString png = mDir.filePath(QStringLiteral("no-such-folder/out.png"));
    QProcess* p = runCli({QStringLiteral("--png"), png});
    QCOMPARE(p->exitCode(), 2);
    QVERIFY(QString::fromUtf8(p->readAllStandardError()).contains(QStringLiteral("--png")));
    QVERIFY(!QFileInfo::exists(png));
  }
};

QTEST_GUILESS_MAIN(TestCliPng)
#include "test_cli_png.moc"
