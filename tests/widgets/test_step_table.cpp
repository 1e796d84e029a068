// Step table: rows per checkpoint filled in by results, numeric sorting through the proxy,
// TSV copy (Ctrl+C), and selection by click and shift-click with its signal.
#include "tests/widgets/synthetic.h"
#include "widgets/step_table.h"

#include <QApplication>
#include <QClipboard>
#include <QHeaderView>
#include <QSignalSpy>
#include <QTest>

using namespace lossbound;
using namespace lossbound::widgets;
using namespace lossbound::widgets::test;

class TestStepTable : public QObject {
  Q_OBJECT

 private:
  static QList<qint64> columnSteps(const StepTableView& view) {
    QList<qint64> out;
    for (int r = 0; r < view.model()->rowCount(); ++r)
      out << view.model()
                 ->index(r, StepTableModel::StepColumn)
                 .data(StepTableModel::kSortRole)
                 .toLongLong();
    return out;
  }

 private slots:
  void rowsFillInAsResultsArrive() {
    StepTableView view;
    StepTableModel* m = view.stepModel();
    const SessionData s = makeSession(1000, 1000, 100);
    m->setSession(s);
    QCOMPARE(m->rowCount(), 10);
    QCOMPARE(m->index(3, StepTableModel::VerdictColumn).data().toString(),
             QStringLiteral("not analysed"));
    QCOMPARE(
        m->index(3, StepTableModel::ReferenceColumn).data(StepTableModel::kSortRole).toDouble(),
        s.reference.loss[300]);
    QVERIFY(!m->index(3, StepTableModel::LoColumn).data(StepTableModel::kSortRole).isValid());
    m->updateResult(makeResult(300, true));
    QCOMPARE(m->index(3, StepTableModel::VerdictColumn).data().toString(),
             QStringLiteral("bug (certain)"));
    QCOMPARE(m->index(3, StepTableModel::MarginColumn).data(StepTableModel::kSortRole).toDouble(),
             3.0);
    // A result for a step without a checkpoint row adds a row in order.
    m->updateResult(makeResult(350, false));
    QCOMPARE(m->rowCount(), 11);
    QCOMPARE(m->stepAt(4), std::int64_t(350));
    QCOMPARE(m->rowOfStep(400), 5);
  }

  void sortsByNumbersNotText() {
    StepTableView view;
    const SessionData s = makeSession(1200, 1200, 100);
    view.stepModel()->setSession(s);
    // Margins 2, 10, -3 sort differently as text ("-3" < "10" < "2").
    StepResult a = makeResult(100, false), b = makeResult(200, false), c = makeResult(300, false);
    a.margin = 2;
    b.margin = 10;
    c.margin = -3;
    view.stepModel()->setResults({a, b, c});
    view.sortByColumn(StepTableModel::MarginColumn, Qt::AscendingOrder);
    QCOMPARE(columnSteps(view).mid(0, 3), (QList<qint64>{300, 100, 200}));
    view.sortByColumn(StepTableModel::StepColumn, Qt::DescendingOrder);
    QCOMPARE(columnSteps(view).front(), qint64(1100));
    QCOMPARE(columnSteps(view).back(), qint64(0));
  }

  void copiesSelectedRowsAsTsv() {
    StepTableView view;
    view.resize(900, 400);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    const SessionData s = makeSession(1000, 1000, 100);
    view.stepModel()->setSession(s);
    view.stepModel()->setResults({makeResult(200, false), makeResult(500, true)});
    view.selectSteps({200, 500});
    QCOMPARE(view.selectedSteps(), (std::vector<std::int64_t>{200, 500}));
    const QString tsv = view.selectionAsTsv();
    const QStringList lines = tsv.trimmed().split(QLatin1Char('\n'));
    QCOMPARE(lines.size(), 3);
    QCOMPARE(lines[0],
             QStringLiteral("step\treference loss\tcandidate loss\tlo\thi\tmargin\tverdict"));
    const QStringList row = lines[2].split(QLatin1Char('\t'));
    QCOMPARE(row.size(), 7);
    QCOMPARE(row[0], QStringLiteral("500"));
    QCOMPARE(row[1].toDouble(), makeResult(500, true).referenceLoss);  // full precision
    QCOMPARE(row[6], QStringLiteral("bug (certain)"));
    QApplication::clipboard()->clear();
    view.setFocus();
    QTest::keySequence(&view, QKeySequence::Copy);
    QCOMPARE(QApplication::clipboard()->text(), tsv);
  }

  void clickAndShiftClickSelectRanges() {
    StepTableView view;
    view.resize(900, 600);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    view.stepModel()->setSession(makeSession(1000, 1000, 100));
    QSignalSpy spy(&view, &StepTableView::selectedStepsChanged);
    QSignalSpy current(&view, &StepTableView::currentStepChanged);
    auto rowCentre = [&](int row) { return view.visualRect(view.model()->index(row, 1)).center(); };
    QTest::mouseClick(view.viewport(), Qt::LeftButton, Qt::NoModifier, rowCentre(2));
    QCOMPARE(view.selectedSteps(), (std::vector<std::int64_t>{200}));
    QVERIFY(spy.count() >= 1);
    QCOMPARE(current.last().at(0).toLongLong(), qint64(200));
    QTest::mouseClick(view.viewport(), Qt::LeftButton, Qt::ShiftModifier, rowCentre(5));
    QCOMPARE(view.selectedSteps(), (std::vector<std::int64_t>{200, 300, 400, 500}));
    QCOMPARE(spy.last().at(0).value<QList<qint64>>(), (QList<qint64>{200, 300, 400, 500}));
    QTest::mouseClick(view.viewport(), Qt::LeftButton, Qt::ControlModifier, rowCentre(8));
    QCOMPARE(view.selectedSteps(), (std::vector<std::int64_t>{200, 300, 400, 500, 800}));
  }
};

QTEST_MAIN(TestStepTable)
#include "test_step_table.moc"
