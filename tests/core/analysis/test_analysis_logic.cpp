// Unit tests of the analysis decision rules on synthetic numbers: step selection, the Hoeffding λ,
// the margin, the verdict tiers, the first exit, the budget attribution, the JSON form and the
// results-cache keying.
#include "core/analysis/baselines.h"
#include "core/analysis/overall_verdict.h"
#include "core/analysis/report_json.h"
#include "core/analysis/result_cache.h"
#include "core/analysis/step_selection.h"
#include "core/analysis/verdict.h"
#include "core/interval/interval.h"

#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>

using namespace lossbound;

namespace {

StepResult stepAt(std::int64_t step, StepVerdict v) {
  StepResult r;
  r.step = step;
  r.verdict = v;
  return r;
}

}  // namespace

class TestAnalysisLogic : public QObject {
  Q_OBJECT

 private slots:
  void stepSelectionParses() {
    QCOMPARE(StepSelection::parse("all").kind(), StepSelection::Kind::All);
    QCOMPARE(StepSelection::parse("").kind(), StepSelection::Kind::All);
    const std::vector<std::int64_t> avail = {0, 2, 4, 6, 8, 10};
    QCOMPARE(StepSelection::parse("all").resolve(avail), avail);
    QCOMPARE(StepSelection::parse("3:8").resolve(avail), (std::vector<std::int64_t>{4, 6, 8}));
    QCOMPARE(StepSelection::parse("4:4").resolve(avail), (std::vector<std::int64_t>{4}));
    QCOMPARE(StepSelection::parse("6:").resolve(avail), (std::vector<std::int64_t>{6, 8, 10}));
    QCOMPARE(StepSelection::parse(":2").resolve(avail), (std::vector<std::int64_t>{0, 2}));
    QCOMPARE(StepSelection::parse("8, 2,8").resolve(avail), (std::vector<std::int64_t>{2, 8}));
    QCOMPARE(StepSelection::parse("8,2").toString(), std::string("2,8"));
    QCOMPARE(StepSelection::parse("3:8").toString(), std::string("3:8"));
  }

  void stepSelectionRejects() {
    for (const char* bad : {"a", "1:2:3", ":", "5:3", "1,,2", "-1", "1.5", "2,x", "1:b"}) {
      bool threw = false;
      try {
        StepSelection::parse(bad);
      } catch (const std::invalid_argument& e) {
        threw = true;
        QVERIFY2(std::string(e.what()).find("expected") != std::string::npos, e.what());
      }
      QVERIFY2(threw, bad);
    }
    // A listed step without a checkpoint names the available ones; an empty range too.
    try {
      StepSelection::parse("3").resolve({0, 2});
      QFAIL("missing step accepted");
    } catch (const std::invalid_argument& e) {
      QVERIFY2(std::string(e.what()).find("0,2") != std::string::npos, e.what());
    }
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, StepSelection::parse("5:9").resolve({0, 2}));
  }

  void hoeffdingLambdaValues() {
    // λ = sqrt(2 ln(2/δ)): δ = 1e-6 → 5.38677; δ = 0.05 → 2.71620.
    QVERIFY(std::abs(hoeffdingLambda(1 - 1e-6) - std::sqrt(2 * std::log(2e6))) < 1e-9);
    QVERIFY(std::abs(hoeffdingLambda(1 - 1e-6) - 5.38677) < 1e-5);
    QVERIFY(std::abs(hoeffdingLambda(0.95) - 2.71620) < 1e-4);
    QVERIFY(hoeffdingLambda(0.999) > hoeffdingLambda(0.99));
    for (double bad : {0.0, 1.0, -0.5, 1.5, std::nan("")})
      QVERIFY_THROWS_EXCEPTION(std::invalid_argument, hoeffdingLambda(bad));
  }

  void marginAndInside() {
    QCOMPARE(envelopeMargin(1.0, 0.0, 2.0), 0.0);
    QCOMPARE(envelopeMargin(2.0, 0.0, 2.0), 1.0);
    QCOMPARE(envelopeMargin(0.0, 0.0, 2.0), -1.0);
    QCOMPARE(envelopeMargin(5.0, 0.0, 2.0), 4.0);
    QCOMPARE(envelopeMargin(-3.0, 0.0, 2.0), -4.0);
    QCOMPARE(envelopeMargin(1.0, 1.0, 1.0), 0.0);
    QCOMPARE(envelopeMargin(1.5, 1.0, 1.0), kInf);
    QCOMPARE(envelopeMargin(0.5, 1.0, 1.0), -kInf);
    QCOMPARE(envelopeMargin(7.0, -kInf, kInf), 0.0);
    QCOMPARE(envelopeMargin(7.0, 0.0, kInf), 0.0);
    QCOMPARE(envelopeMargin(-7.0, 0.0, kInf), -kInf);
    QVERIFY(std::isnan(envelopeMargin(std::nan(""), 0.0, 1.0)));
    // No overflow for huge endpoints.
    QCOMPARE(envelopeMargin(1.7e308, -1.7e308, 1.7e308), 1.0);
    QVERIFY(insideEnvelope(1.0, 1.0, 2.0));
    QVERIFY(insideEnvelope(2.0, 1.0, 2.0));
    QVERIFY(!insideEnvelope(std::nextafter(2.0, 3.0), 1.0, 2.0));
    QVERIFY(!insideEnvelope(std::nan(""), 1.0, 2.0));
  }

  void verdictTiers() {
    QVERIFY(isRigorous(EnvelopeMethod::Interval, ""));
    QVERIFY(!isRigorous(EnvelopeMethod::Interval, "logits"));
    QVERIFY(!isRigorous(EnvelopeMethod::FirstOrder, ""));
    QCOMPARE(decideVerdict(true, true, true, true), StepVerdict::Rounding);
    QCOMPARE(decideVerdict(true, true, false, true), StepVerdict::BugCertain);
    QCOMPARE(decideVerdict(true, true, false, false), StepVerdict::BugLikely);
    // A failed self-check is never a bug, whatever the reference does.
    QCOMPARE(decideVerdict(true, false, false, true), StepVerdict::Untrustworthy);
    QCOMPARE(decideVerdict(true, false, true, false), StepVerdict::Untrustworthy);
    QCOMPARE(decideVerdict(false, true, false, true), StepVerdict::NotBounded);

    StepResult r;
    r.lo = 1.0;
    r.hi = 2.0;
    r.selfLo = 1.0;
    r.selfHi = 2.0;
    r.candidateLoss = 1.5;
    r.referenceLoss = 2.5;
    classifyStep(r, false);
    QVERIFY(!r.inside);
    QCOMPARE(r.margin, 2.0);  // centre 1.5, half-width 0.5
    QCOMPARE(r.verdict, StepVerdict::BugLikely);
    classifyStep(r, true);
    QCOMPARE(r.verdict, StepVerdict::BugCertain);
    r.referenceLoss = 1.25;
    classifyStep(r, true);
    QVERIFY(r.inside);
    QCOMPARE(r.margin, -0.5);
    QCOMPARE(r.verdict, StepVerdict::Rounding);
    r.referenceLoss = 2.5;
    r.candidateLoss = 0.5;  // outside its own envelope
    classifyStep(r, true);
    QVERIFY(!r.selfCheckPassed);
    QCOMPARE(r.verdict, StepVerdict::Untrustworthy);

    // An unbounded envelope proves no rounding (an overflowed bound); an exit beyond its finite
    // endpoint still counts.
    r.candidateLoss = 1.5;
    r.note.clear();
    r.lo = -std::numeric_limits<double>::infinity();
    r.hi = std::numeric_limits<double>::infinity();
    r.selfLo = r.lo;
    r.selfHi = r.hi;
    classifyStep(r, true);
    QCOMPARE(r.verdict, StepVerdict::NotBounded);
    QVERIFY(r.note.find("unbounded") != std::string::npos);
    QVERIFY(!r.selfCheckPassed);  // an unbounded self-check is no pass either ...
    QVERIFY(r.note.find("Self-check") == std::string::npos);  // ... but the envelope is the reason
    r.lo = 3.0;
    r.selfLo = 1.0;
    r.selfHi = 2.0;
    r.note.clear();
    classifyStep(r, true);
    QCOMPARE(r.verdict, StepVerdict::BugCertain);

    // A self-check envelope that proves nothing ([-inf, inf] from a NaN in the candidate's
    // checkpoint) is not a pass: neither rounding nor a bug, whatever the reference does.
    for (double ref : {1.5, 2.5}) {
      r.lo = 1.0;
      r.hi = 2.0;
      r.referenceLoss = ref;
      for (auto [selfLo, selfHi] :
           {std::pair{-kInf, kInf}, std::pair{0.0, kInf}, std::pair{std::nan(""), std::nan("")}}) {
        r.selfLo = selfLo;
        r.selfHi = selfHi;
        r.note.clear();
        classifyStep(r, false);
        QVERIFY(!r.selfCheckPassed);
        QCOMPARE(r.verdict, StepVerdict::Untrustworthy);
        QVERIFY2(r.note.find("Self-check proves nothing") != std::string::npos, r.note.c_str());
      }
    }

    markNotBounded(r, "unsupported op: aten.foo.default (node foo)");
    QCOMPARE(r.verdict, StepVerdict::NotBounded);
    QVERIFY(!r.inside);
    QVERIFY(std::isnan(r.lo));
    QCOMPARE(r.note, std::string("unsupported op: aten.foo.default (node foo)"));
  }

  void overallVerdict() {
    auto report = [](std::vector<StepResult> steps) {
      AnalysisReport r;
      r.steps = std::move(steps);
      return r;
    };
    auto bounded = [](std::int64_t step, StepVerdict v) {
      StepResult r = stepAt(step, v);
      r.lo = r.selfLo = 1.0;
      r.hi = r.selfHi = 2.0;
      return r;
    };
    OverallSummary o = summarizeReport(report({}));
    QCOMPARE(o.verdict, OverallVerdict::NotAnalysed);
    QCOMPARE(o.exitCode, kExitNoExit);
    o = summarizeReport(report({bounded(0, StepVerdict::Rounding)}));
    QCOMPARE(o.verdict, OverallVerdict::Rounding);
    QCOMPARE(o.exitCode, kExitNoExit);
    const AnalysisReport withExit =
        report({bounded(0, StepVerdict::Untrustworthy), bounded(3, StepVerdict::BugLikely),
                bounded(5, StepVerdict::BugCertain), bounded(6, StepVerdict::NotBounded)});
    o = summarizeReport(withExit);
    QCOMPARE(o.verdict, OverallVerdict::BugLikely);  // as the first exit says
    QCOMPARE(*o.firstExit, std::int64_t{3});
    QCOMPARE(o.exitCode, kExitTypeII);
    o = summarizeReport(
        report({bounded(0, StepVerdict::Rounding), bounded(1, StepVerdict::Untrustworthy)}));
    QCOMPARE(o.verdict, OverallVerdict::Untrustworthy);
    QCOMPARE(o.exitCode, kExitNotBounded);
    o = summarizeReport(
        report({bounded(0, StepVerdict::Rounding), bounded(1, StepVerdict::NotBounded)}));
    QCOMPARE(o.verdict, OverallVerdict::Inconclusive);
    QCOMPARE(o.exitCode, kExitNotBounded);
    o = summarizeReport(report({bounded(1, StepVerdict::NotBounded)}));
    QCOMPARE(o.verdict, OverallVerdict::NotBounded);
    QCOMPARE(o.exitCode, kExitNotBounded);
    // A "rounding" step of a report from elsewhere whose envelope or self-check envelope is
    // unbounded proves nothing: never exit 0.
    StepResult openEnvelope = bounded(0, StepVerdict::Rounding);
    openEnvelope.hi = kInf;
    o = summarizeReport(report({openEnvelope}));
    QCOMPARE(o.verdict, OverallVerdict::NotBounded);
    QCOMPARE(o.exitCode, kExitNotBounded);
    StepResult openSelfCheck = bounded(0, StepVerdict::Rounding);
    openSelfCheck.selfLo = -kInf;
    o = summarizeReport(report({openSelfCheck, bounded(1, StepVerdict::Rounding)}));
    QCOMPARE(o.verdict, OverallVerdict::Untrustworthy);
    QCOMPARE(o.untrustworthy, 1);
    QCOMPARE(o.exitCode, kExitNotBounded);
  }

  void firstExitIsEarliestBug() {
    QVERIFY(!firstExit({}).has_value());
    QVERIFY(!firstExit({stepAt(0, StepVerdict::Rounding), stepAt(1, StepVerdict::Untrustworthy),
                        stepAt(2, StepVerdict::NotBounded)})
                 .has_value());
    QCOMPARE(*firstExit({stepAt(9, StepVerdict::BugCertain), stepAt(3, StepVerdict::Rounding),
                         stepAt(5, StepVerdict::BugLikely), stepAt(7, StepVerdict::BugCertain)}),
             std::int64_t{5});
  }

  void budgetAttribution() {
    const std::vector<BudgetTerm> terms = {{"a", "aten.add.Tensor", 1.0},
                                           {"mm_7", "aten.mm.default", 6.0},
                                           {"z", "aten.view.default", 0.0},
                                           {"sm", "aten._softmax.default", 2.0},
                                           {"b", "aten.mul.Tensor", 1.0}};
    const auto shares = budgetShares(terms, 3);
    QCOMPARE(shares.size(), std::size_t{3});
    QCOMPARE(shares[0].node, std::string("mm_7"));
    QCOMPARE(shares[0].share, 0.6);
    QCOMPARE(shares[1].node, std::string("sm"));
    QCOMPARE(shares[1].share, 0.2);
    QCOMPARE(shares[2].node, std::string("a"));  // ties keep program order
    QCOMPARE(shares[2].share, 0.1);
    QCOMPARE(budgetSummary(shares, 2),
             std::string("60% mm_7 (aten.mm.default), 20% sm (aten._softmax.default)"));
    QCOMPARE(budgetShares(terms, 10).size(), std::size_t{4});  // the zero term is dropped
  }

  // allclose as torch.allclose (|a − b| <= atol + rtol·|b|, NaN never close); the fp64-RMSE rule
  // as torch._dynamo.utils.same (m = 3 for fp16/bf16, else 2; tol/10 added).
  void baselines() {
    const std::vector<double> b{1.0, -2.0, 0.0};
    QVERIFY(allcloseCheck(std::vector<double>{1.0 + 9e-6, -2.0, 5e-9}, b).pass);
    const AllcloseOutcome far = allcloseCheck(std::vector<double>{1.0 + 2.1e-5, -2.0, 0.0}, b);
    QVERIFY(!far.pass);
    QVERIFY(far.worstRatio > 2.0 && far.worstRatio < 2.2);
    QVERIFY(!allcloseCheck(std::vector<double>{std::nan(""), -2.0, 0.0}, b).pass);
    QVERIFY(allcloseCheck(std::vector<double>{kInf}, std::vector<double>{kInf}).pass);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, allcloseCheck(std::vector<double>{1.0}, b));

    QCOMPARE(rmseMultiplier(Format::Fp32), 2.0);
    QCOMPARE(rmseMultiplier(Format::Bf16), 3.0);
    QCOMPARE(rmseMultiplier(Format::Fp16), 3.0);
    const std::vector<double> fp64{1.0, 1.0}, ref{1.0 + 1e-3, 1.0 - 1e-3};
    // RMSE(ref, fp64) = 1e-3: allowance 2e-3 + 1e-5 (fp32), 3e-3 + 1e-5 (bf16).
    const std::vector<double> res{1.0029, 0.9971};  // RMSE 2.9e-3
    const RmseOutcome fp32 = rmseCheck(res, ref, fp64, Format::Fp32);
    QVERIFY(std::abs(fp32.allowance - 2.01e-3) < 1e-12);
    QVERIFY(std::abs(fp32.error - 2.9e-3) < 1e-12);
    QVERIFY(!fp32.pass);
    QVERIFY(rmseCheck(res, ref, fp64, Format::Bf16).pass);
    QVERIFY(!rmseCheck(std::vector<double>{std::nan(""), 1.0}, ref, fp64, Format::Fp32).pass);
  }

  void jsonRoundTrip() {
    StepResult r;
    r.step = 12;
    r.referenceLoss = 3.25;
    r.candidateLoss = 3.5;
    r.lo = -kInf;
    r.hi = 0.1 + 0.2;
    r.margin = std::nan("");
    r.verdict = StepVerdict::BugLikely;
    r.method = EnvelopeMethod::Probabilistic;
    r.selfCheckPassed = false;
    r.note = "a \"note\", with commas";
    r.budget = {{"mm", "aten.mm.default", 1e-7, 0.75}};
    const StepResult back = stepFromJson(stepToJson(r));
    QCOMPARE(back.step, r.step);
    QCOMPARE(back.lo, -kInf);
    QCOMPARE(back.hi, 0.1 + 0.2);  // shortest round-trip text: bit exact
    QVERIFY(std::isnan(back.margin));
    QCOMPARE(back.verdict, r.verdict);
    QCOMPARE(back.method, r.method);
    QCOMPARE(back.selfCheckPassed, false);
    QCOMPARE(back.note, r.note);
    QCOMPARE(back.budget.size(), std::size_t{1});
    QCOMPARE(back.budget[0].share, 0.75);
    QVERIFY(!back.baselines.computed);  // absent: not computed
    r.baselines.computed = true;
    r.baselines.fp64 = 3.2;
    r.baselines.rmsePass = false;
    r.baselines.rmseAllowance = 1e-5;
    const StepResult withBaselines = stepFromJson(stepToJson(r));
    QVERIFY(withBaselines.baselines.computed);
    QCOMPARE(withBaselines.baselines.fp64, 3.2);
    QCOMPARE(withBaselines.baselines.rmsePass, false);
    QCOMPARE(withBaselines.baselines.rmseAllowance, 1e-5);

    AnalysisSettings s;
    s.method = EnvelopeMethod::Ensemble;
    s.precision = Format::Bf16;
    s.seed = 0xffffffffffffffffull;
    const AnalysisSettings sb = settingsFromJson(settingsToJson(s));
    QCOMPARE(sb.method, s.method);
    QVERIFY(sb.precision == Format::Bf16);
    QCOMPARE(sb.seed, s.seed);
    QCOMPARE(sb.ensembleOrder, EnsembleOrder::PerProduct);
    s.ensembleOrder = EnsembleOrder::PerElement;
    QCOMPARE(settingsFromJson(settingsToJson(s)).ensembleOrder, EnsembleOrder::PerElement);
    // A report or cache entry written before the field existed drew an order per element.
    QJsonObject old = settingsToJson(AnalysisSettings{});
    QCOMPARE(old.value(QStringLiteral("ensemble_order")).toString(), QStringLiteral("per-product"));
    old.remove(QStringLiteral("ensemble_order"));
    QCOMPARE(settingsFromJson(old).ensembleOrder, EnsembleOrder::PerElement);
    old[QStringLiteral("ensemble_order")] = QStringLiteral("per-row");
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, settingsFromJson(old));
    QJsonObject bad = stepToJson(r);
    bad[QStringLiteral("verdict")] = QStringLiteral("maybe");
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, stepFromJson(bad));
  }

  void cacheKeying() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string root = dir.path().toStdString();
    const std::string refPath = root + "/reference.h5", candPath = root + "/candidate.h5";
    std::ofstream(refPath) << "reference bytes";
    std::ofstream(candPath) << "candidate bytes";
    const RunIdentity ref = runIdentity(refPath, "d1"), cand = runIdentity(candPath, "d2");
    QCOMPARE(ref.size, std::int64_t{15});
    AnalysisSettings s;
    s.method = EnvelopeMethod::FirstOrder;
    const std::string key = analysisKey(s, ref, cand);
    QCOMPARE(analysisKey(s, ref, cand), key);  // deterministic
    // The engine revision (a hash of the engine's sources, made by the build) is in every key.
    const std::string revision = engineRevision();
    QCOMPARE(revision.size(), std::size_t{16});
    QVERIFY(revision.find_first_not_of("0123456789abcdef") == std::string::npos);
    QVERIFY(key.find("\"engine_revision\":\"" + revision + "\"") != std::string::npos);
    // Irrelevant settings share the key; relevant ones do not.
    AnalysisSettings s2 = s;
    s2.confidence = 0.9;
    s2.ensembleSize = 7;
    s2.ensembleOrder = EnsembleOrder::PerElement;
    s2.seed = 99;
    QCOMPARE(analysisKey(s2, ref, cand), key);
    // For the ensemble method the order draws change the results.
    AnalysisSettings e1 = s, e2 = s;
    e1.method = e2.method = EnvelopeMethod::Ensemble;
    e2.ensembleOrder = EnsembleOrder::PerElement;
    QVERIFY(analysisKey(e1, ref, cand) != analysisKey(e2, ref, cand));
    QVERIFY(!sameResultSettings(e1, e2));
    AnalysisSettings s3 = s;
    s3.precision = Format::Bf16;
    QVERIFY(analysisKey(s3, ref, cand) != key);
    AnalysisSettings s4 = s;
    s4.method = EnvelopeMethod::Probabilistic;
    AnalysisSettings s5 = s4;
    s5.confidence = 0.9;
    QVERIFY(analysisKey(s4, ref, cand) != analysisKey(s5, ref, cand));
    QVERIFY(analysisKey(s, ref, runIdentity(candPath, "other log")) != key);
    QVERIFY(analysisKey(s, cand, ref) != key);  // roles matter
    QVERIFY_THROWS_EXCEPTION(std::runtime_error, runIdentity(root + "/missing.h5"));

    // Store, reload, merge; other keys survive; the run files are never touched.
    ResultCache cache(root + "/candidate.lossbound-cache.h5");
    QVERIFY(cache.load(key).empty());
    StepResult a = stepAt(3, StepVerdict::Rounding), b = stepAt(1, StepVerdict::BugCertain);
    a.lo = 1;
    a.hi = 2;
    cache.store(key, {a, b});
    auto loaded = cache.load(key);
    QCOMPARE(loaded.size(), std::size_t{2});
    QCOMPARE(loaded[0].step, std::int64_t{1});  // step order
    QCOMPARE(loaded[1].hi, 2.0);
    QVERIFY(loaded[0].fromCache);
    QVERIFY(cache.load(analysisKey(s3, ref, cand)).empty());
    cache.store(analysisKey(s3, ref, cand), {stepAt(5, StepVerdict::Rounding)});
    StepResult a2 = a;
    a2.hi = 4;
    cache.store(key, {a2, stepAt(7, StepVerdict::Rounding)});
    loaded = cache.load(key);
    QCOMPARE(loaded.size(), std::size_t{3});
    QCOMPARE(loaded[1].hi, 4.0);  // replaced
    QCOMPARE(cache.load(analysisKey(s3, ref, cand)).size(), std::size_t{1});
    // A changed candidate file (size and mtime) misses.
    std::ofstream(candPath, std::ios::app) << " more";
    QVERIFY(analysisKey(s, ref, runIdentity(candPath, "d2")) != key);
    // No temporary files are left behind; the writers' lock file stays (an fcntl lock lives on
    // an open file, and removing it could let two writers lock different files).
    int files = 0;
    for (const auto& e : std::filesystem::directory_iterator(root)) {
      ++files;
      QVERIFY2(e.path().string().find(".tmp-") == std::string::npos, e.path().c_str());
    }
    QCOMPARE(files, 4);
    QVERIFY(std::filesystem::exists(cache.path() + ".lock"));
    // A garbage cache file is ignored on load and replaced on store.
    std::ofstream(cache.path(), std::ios::trunc) << "not hdf5";
    QVERIFY(cache.load(key).empty());
    cache.store(key, {a});
    QCOMPARE(cache.load(key).size(), std::size_t{1});
  }

  void cacheLocation() {
    QTemporaryDir dir;
    const std::string cand = dir.path().toStdString() + "/run/candidate.h5";
    std::filesystem::create_directories(dir.path().toStdString() + "/run");
    std::ofstream(cand) << "x";
    qunsetenv("LOSSBOUND_CACHE_DIR");
    QCOMPARE(ResultCache::defaultPath(cand),
             dir.path().toStdString() + "/run/candidate.lossbound-cache.h5");
    qputenv("LOSSBOUND_CACHE_DIR", dir.path().toUtf8() + "/elsewhere");
    const std::string p = ResultCache::defaultPath(cand);
    QVERIFY2(p.rfind(dir.path().toStdString() + "/elsewhere/", 0) == 0, p.c_str());
    QVERIFY(p.find("candidate.lossbound-cache.h5") != std::string::npos);
    qunsetenv("LOSSBOUND_CACHE_DIR");
    // A read-only folder sends the cache to the user cache folder, never beside the run.
    if (::geteuid() != 0) {
      std::filesystem::permissions(dir.path().toStdString() + "/run",
                                   std::filesystem::perms::owner_write,
                                   std::filesystem::perm_options::remove);
      QVERIFY(ResultCache::defaultPath(cand).find(dir.path().toStdString() + "/run/") ==
              std::string::npos);
      std::filesystem::permissions(dir.path().toStdString() + "/run",
                                   std::filesystem::perms::owner_write,
                                   std::filesystem::perm_options::add);
    }
  }
};

QTEST_GUILESS_MAIN(TestAnalysisLogic)
#include "test_analysis_logic.moc"
