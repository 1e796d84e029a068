#include <QtTest>

class TestOpSupport : public QObject {
  Q_OBJECT
 private slots:
  void placeholder() { QVERIFY(true); }
};

QTEST_GUILESS_MAIN(TestOpSupport)
#include "test_op_support.moc"
