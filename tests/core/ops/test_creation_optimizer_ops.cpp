#include <QtTest>

class TestCreationOptimizerOps : public QObject {
  Q_OBJECT
 private slots:
  void placeholder() { QVERIFY(true); }
};

QTEST_GUILESS_MAIN(TestCreationOptimizerOps)
#include "test_creation_optimizer_ops.moc"
