// Unit tests of sharding and merging (issue 18) on synthetic reports: the balanced and interleaved
// slices, "I/N" parsing, the first-exit watch, the report's JSON round trip (bit for bit, shard
// and sources included), and mergeReports: the single report back from parts in any order, and
// each refusal naming the part and the difference.
#include "core/analysis/first_exit_watch.h"
#include "core/analysis/report_json.h"
#include "core/analysis/report_merge.h"
#include "core/analysis/shard.h"
#include "core/analysis/verdict.h"

#include <QJsonDocument>
#include <QTest>

#include <cstring>
#include <numeric>
#include <stdexcept>

using namespace lossbound;

namespace {

std::vector<std::int64_t> range(std::int64_t n) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

StepResult stepAt(std::int64_t step, StepVerdict v) {
  StepResult r;
  r.step = step;
  r.verdict = v;
  r.method = EnvelopeMethod::FirstOrder;
  r.referenceLoss = 1.0 + 1e-9 * static_cast<double>(step);
  r.candidateLoss = r.referenceLoss + 0.1 / 3.0;  // not a short decimal: exercises the round trip
  r.lo = r.candidateLoss - 1e-7;
  r.hi = r.candidateLoss + 1e-7;
  r.margin = 0.25;
  return r;
}

/// The whole analysis of steps 0..9 with an exit at `exit` (if any).
AnalysisReport whole(std::optional<std::int64_t> exit) {
  AnalysisReport r;
  r.referenceName = "ref";
  r.candidateName = "cand";
  r.backendDescription = "CPU";
  r.referenceSource = {"/runs/ref.h5", "aaaa"};
  r.candidateSource = {"/runs/cand.h5", "bbbb"};
  r.engineRevision = "0123456789abcdef";
  for (std::int64_t s : range(10))
    r.steps.push_back(
        stepAt(s, exit && s >= *exit ? StepVerdict::BugLikely : StepVerdict::Rounding));
  r.firstExit = firstExit(r.steps);
  return r;
}

/// Part `index` of `count` of `report` (its steps of that shard only).
ReportPart partOf(const AnalysisReport& report, int index, int count,
                  ShardLayout layout = ShardLayout::Blocks) {
  AnalysisReport part = report;
  std::vector<std::int64_t> all;
  for (const StepResult& s : report.steps) all.push_back(s.step);
  part.shard = ShardInfo{index, count, layout, all};
  const std::vector<std::int64_t> mine = shardSteps(*part.shard);
  part.steps.clear();
  for (const StepResult& s : report.steps)
    if (std::find(mine.begin(), mine.end(), s.step) != mine.end()) part.steps.push_back(s);
  part.firstExit = firstExit(part.steps);
  return {"part-" + std::to_string(index) + ".json", part};
}

/// Returns the MergeError message of merging `parts` ("" when it merged).
std::string mergeError(const std::vector<ReportPart>& parts) {
  try {
    mergeReports(parts);
  } catch (const MergeError& e) {
    return e.what();
  }
  return {};
}

bool contains(const std::string& text, const char* what) {
  if (text.find(what) != std::string::npos) return true;
  qWarning("expected '%s' in '%s'", what, text.c_str());
  return false;
}

}  // namespace

class TestReportMerge : public QObject {
  Q_OBJECT

 private slots:
  void blocksAreBalancedContiguousSlices() {
    const auto steps = range(10);
    QCOMPARE(shardSteps(steps, 1, 3, ShardLayout::Blocks), (std::vector<std::int64_t>{0, 1, 2}));
    QCOMPARE(shardSteps(steps, 2, 3, ShardLayout::Blocks), (std::vector<std::int64_t>{3, 4, 5}));
    QCOMPARE(shardSteps(steps, 3, 3, ShardLayout::Blocks), (std::vector<std::int64_t>{6, 7, 8, 9}));
    // Every step in exactly one part, sizes within one of each other, for many N.
    for (int n = 1; n <= 13; ++n) {
      std::vector<std::int64_t> seen;
      std::size_t lo = 100, hi = 0;
      for (int i = 1; i <= n; ++i) {
        const auto part = shardSteps(steps, i, n, ShardLayout::Blocks);
        lo = std::min(lo, part.size());
        hi = std::max(hi, part.size());
        seen.insert(seen.end(), part.begin(), part.end());
      }
      QCOMPARE(seen, steps);
      QVERIFY(hi - lo <= 1);
    }
    QCOMPARE(shardSteps(steps, 2, 3, ShardLayout::Interleaved),
             (std::vector<std::int64_t>{1, 4, 7}));
    QVERIFY(shardSteps(range(2), 1, 3, ShardLayout::Blocks).empty());  // larger slices last
  }

  void shardTextParses() {
    const ShardInfo s = parseShard("2/8");
    QCOMPARE(s.index, 2);
    QCOMPARE(s.count, 8);
    for (const char* bad : {"0/3", "4/3", "3", "a/3", "1/", "/3", "1/3x", "-1/3"})
      QVERIFY_THROWS_EXCEPTION(std::invalid_argument, parseShard(bad));
    QCOMPARE(describeSteps({0, 1, 2, 5, 7, 8}), std::string("0..2, 5, 7..8"));
    QCOMPARE(describeSteps({}), std::string("none"));
  }

  void firstExitIsSettledOnlyWhenEarlierStepsAreDone() {
    FirstExitWatch w(range(6));
    QVERIFY(!w.record(4, true));  // 0..3 still pending
    QVERIFY(!w.record(0, false));
    QVERIFY(!w.record(1, false));
    QVERIFY(!w.record(3, false));
    QVERIFY(w.record(2, true));  // an earlier exit, nothing pending before it
    QCOMPARE(*w.earliestExit(), std::int64_t(2));
    FirstExitWatch none(range(2));
    none.record(0, false);
    QVERIFY(!none.record(1, false));  // done, but no exit
  }

  void reportSurvivesJsonBitForBit() {
    ReportPart p = partOf(whole(4), 2, 3);
    const QByteArray text = QJsonDocument(reportToJson(p.report)).toJson();
    const AnalysisReport back = reportFromJson(QJsonDocument::fromJson(text).object());
    QCOMPARE(QJsonDocument(reportToJson(back)).toJson(), text);
    QCOMPARE(back.steps.size(), p.report.steps.size());
    for (std::size_t i = 0; i < back.steps.size(); ++i)
      QVERIFY(std::memcmp(&back.steps[i].candidateLoss, &p.report.steps[i].candidateLoss,
                          sizeof(double)) == 0);
    QVERIFY(back.shard && back.shard->index == 2 && back.shard->count == 3);
    QCOMPARE(back.candidateSource.logDigest, std::string("bbbb"));
    QCOMPARE(back.engineRevision, std::string("0123456789abcdef"));
  }

  void corruptReportIsRefused() {
    QJsonObject o = reportToJson(whole(4));
    o[QStringLiteral("first_exit")] = 7;  // contradicts the steps (exit at 4)
    try {
      reportFromJson(o);
      QFAIL("expected a contradicting first_exit to be refused");
    } catch (const std::invalid_argument& e) {
      QVERIFY(contains(e.what(), "first_exit"));
      QVERIFY(contains(e.what(), "step 4"));
    }
  }

  void partsMergeBackToTheWholeReport() {
    for (ShardLayout layout : {ShardLayout::Blocks, ShardLayout::Interleaved}) {
      const AnalysisReport w = whole(5);
      const AnalysisReport merged =
          mergeReports({partOf(w, 3, 3, layout), partOf(w, 1, 3, layout), partOf(w, 2, 3, layout)});
      QVERIFY(!merged.shard);
      QCOMPARE(merged.firstExit, std::optional<std::int64_t>(5));
      AnalysisReport expected = w;
      expected.note = merged.note;
      QCOMPARE(QJsonDocument(reportToJson(merged)).toJson(),
               QJsonDocument(reportToJson(expected)).toJson());
    }
    // More parts than steps: empty parts merge too.
    const AnalysisReport w = whole(std::nullopt);
    std::vector<ReportPart> parts;
    for (int i = 1; i <= 12; ++i) parts.push_back(partOf(w, i, 12));
    QCOMPARE(mergeReports(parts).steps.size(), std::size_t(10));
  }

  void mergeRefusesPartsThatDoNotBelongTogether() {
    const AnalysisReport w = whole(5);
    const ReportPart p1 = partOf(w, 1, 3), p2 = partOf(w, 2, 3), p3 = partOf(w, 3, 3);
    QVERIFY(contains(mergeError({p1, p3}), "missing shard 2/3 (steps 3..5)"));
    QVERIFY(contains(mergeError({p1, p2, p2, p3}), "are both shard 2/3"));

    ReportPart otherPair = p2;
    otherPair.report.candidateSource.logDigest = "cccc";
    QVERIFY(contains(mergeError({p1, otherPair, p3}),
                     "part-2.json: another run pair: the candidate run's loss log differs"));
    ReportPart otherName = p2;
    otherName.report.referenceName = "other";
    QVERIFY(contains(mergeError({p1, otherName, p3}), "the reference run is 'other'"));

    ReportPart otherSettings = p3;
    otherSettings.report.settings.precision = Format::Bf16;
    QVERIFY(
        contains(mergeError({p1, p2, otherSettings}), "part-3.json: other settings: precision"));
    ReportPart otherBackend = p3;  // does not change results
    otherBackend.report.settings.backend = "cuda";
    QVERIFY(mergeError({p1, p2, otherBackend}).empty());

    ReportPart otherEngine = p2;
    otherEngine.report.engineRevision = "fedcba9876543210";
    QVERIFY(contains(mergeError({p1, otherEngine, p3}), "computed by another engine"));

    ReportPart otherSharding = partOf(w, 2, 4);
    QVERIFY(contains(mergeError({p1, otherSharding, p3}), "another sharding: shard 2/4"));

    ReportPart lacking = p2;
    lacking.report.steps.pop_back();
    QVERIFY(contains(mergeError({p1, lacking, p3}), "lacks steps 5"));
    ReportPart extra = p2;
    extra.report.steps.push_back(stepAt(9, StepVerdict::Rounding));
    QVERIFY(contains(mergeError({p1, extra, p3}), "holds steps 9"));

    ReportPart notAPart{"whole.json", w};
    QVERIFY(contains(mergeError({notAPart}), "whole.json: not a part of a sharded analysis"));
  }
};

QTEST_GUILESS_MAIN(TestReportMerge)
#include "test_report_merge.moc"
