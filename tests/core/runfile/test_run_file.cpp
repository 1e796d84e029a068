// Tests of core/runfile: the reader on good files and on a corpus of bad ones generated in a
// temporary directory (each must give a RunFileError with a useful message, never a crash), dtype
// conversions, lazy checkpoint loading, and the pairing checks.
#include "core/backend.h"
#include "core/program/evaluator.h"
#include "core/program/op_coverage.h"
#include "core/runfile/run_file.h"
#include "core/runfile/run_pair.h"
#include "tests/core/runfile/corrupt_sample.h"
#include "tests/core/runfile/run_file_writer.h"

#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <hdf5.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <random>

using namespace lossbound;
using namespace lossbound::testing;

class TestRunFile : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir mDir;
  std::string path(const char* name) const {
    return mDir.filePath(QString::fromLatin1(name)).toStdString();
  }

  // Writes the fixture, opens it and returns the error message; fails the test if it opens.
  std::string openError(const std::string& file) {
    try {
      RunFile::open(file);
    } catch (const RunFileError& e) {
      return e.what();
    }
    return "<opened without error>";
  }
  std::string fixtureError(const char* name, const RunFixture& f) {
    writeRunFile(path(name), f);
    return openError(path(name));
  }
  static void expectContains(const std::string& message, const std::vector<std::string>& parts) {
    for (const std::string& p : parts)
      QVERIFY2(message.find(p) != std::string::npos,
               ("expected \"" + p + "\" in: " + message).c_str());
  }

 private slots:
  void initTestCase() { QVERIFY(mDir.isValid()); }

  void goodFileSummary() {
    writeRunFile(path("good.h5"), RunFixture{});
    const RunFile run = RunFile::open(path("good.h5"));
    QCOMPARE(run.attributes().runName, std::string("fixture"));
    QCOMPARE(run.log().steps, (std::vector<std::int64_t>{0, 1, 2}));
    QCOMPARE(run.checkpointSteps(), (std::vector<std::int64_t>{0, 1, 2}));
    QCOMPARE(run.programs().size(), std::size_t{1});
    QCOMPARE(run.programs()[0].opCount, std::int64_t{2});
    QVERIFY(unsupportedOps(run.programs()[0].program).empty());
    QCOMPARE(*run.lossAt(1), defaultLoss(1));
    QVERIFY(!run.lossAt(7));
  }

  void lazyLoadAndEvaluate() {
    writeRunFile(path("good.h5"), RunFixture{});
    const RunFile run = RunFile::open(path("good.h5"));
    const TensorMap batch = run.loadCheckpoint(2, CheckpointPart::Batch);
    QCOMPARE(batch.size(), std::size_t{1});
    QVERIFY(batch.count("batch:x"));
    const TensorMap all = run.loadCheckpoint(2);
    QCOMPARE(all.at("param:w").shape(), (Shape{2, 3}));
    QCOMPARE(all.at("param:w").dtype(), DType::Float32);
    QCOMPARE(all.at("param:w").values()[0], 2.5);
    const auto backend = createCpuBackend();
    const EvalResult r = evaluate(run.checkpointProgram(2).program, all, *backend);
    QCOMPARE(r.outputs.at("loss").values()[0], defaultLoss(2));
    try {
      run.loadCheckpoint(99);
      QFAIL("loading a missing checkpoint should throw");
    } catch (const RunFileError& e) {
      expectContains(e.what(), {"/checkpoints/99", "no checkpoint at step 99"});
    }
  }

  void dtypeConversions() {
    // Exact conversions from every storage: float16 (incl. subnormal, inf), bfloat16 bits, ints,
    // bool.
    QCOMPARE(halfBitsToDouble(0x3c00), 1.0);
    QCOMPARE(halfBitsToDouble(0xc000), -2.0);
    QCOMPARE(halfBitsToDouble(0x0001), std::ldexp(1.0, -24));
    QCOMPARE(halfBitsToDouble(0x7bff), 65504.0);
    QVERIFY(std::isinf(halfBitsToDouble(0x7c00)));
    QVERIFY(std::isnan(halfBitsToDouble(0x7e00)));
    QCOMPARE(bfloat16BitsToDouble(0x3f80), 1.0);
    QCOMPARE(bfloat16BitsToDouble(0xc0a0), -5.0);

    RunFixture f;
    f.graph = R"({"format": "lossbound-step-program", "ir_version": 1,
      "inputs": [{"name": "param:h", "shape": [3], "dtype": "float16"},
                 {"name": "param:b", "shape": [2], "dtype": "bfloat16"},
                 {"name": "batch:ids", "shape": [2], "dtype": "int64"},
                 {"name": "batch:i32", "shape": [2], "dtype": "int32"},
                 {"name": "batch:m", "shape": [2], "dtype": "bool"},
                 {"name": "param:s", "shape": [], "dtype": "float64"}],
      "nodes": [], "outputs": [{"name": "loss", "ref": {"ref": "param:s"}}]})";
    f.tensors = {{"params/h", "float16", {3}, {1.5, -0.25, 6.103515625e-05}, "f16", false},
                 {"params/b", "bfloat16", {2}, {1.0, -3.5}, "u16", false},
                 {"batch/ids", "int64", {2}, {7, -9}, "i64", false},
                 {"batch/i32", "int32", {2}, {3, 4}, "i32", false},
                 {"batch/m", "bool", {2}, {1, 0}, "u8", false},
                 {"params/s", "float64", {}, {0.1}, "f64", false}};
    f.loss = {0.1, 0.1, 0.1};
    writeRunFile(path("dtypes.h5"), f);
    const RunFile run = RunFile::open(path("dtypes.h5"));
    const TensorMap t = run.loadCheckpoint(0);
    QCOMPARE(t.at("param:h").dtype(), DType::Float16);
    QCOMPARE(t.at("param:h").values()[0], 1.5);
    QCOMPARE(t.at("param:h").values()[1], -0.25);
    QCOMPARE(t.at("param:h").values()[2], 6.103515625e-05);
    QCOMPARE(t.at("param:b").dtype(), DType::BFloat16);
    QCOMPARE(t.at("param:b").values()[1], -3.5);
    QCOMPARE(t.at("batch:ids").values()[1], -9.0);
    QCOMPARE(t.at("batch:i32").dtype(), DType::Int32);
    QCOMPARE(t.at("batch:m").dtype(), DType::Bool);
    QCOMPARE(t.at("batch:m").values()[0], 1.0);
    QCOMPARE(t.at("param:s").shape(), Shape{});
    QCOMPARE(t.at("param:s").values()[0], 0.1);
  }

  // ---- the bad-input corpus ------------------------------------------------------------------

  void emptyFile() {
    std::ofstream(path("empty.h5")).close();
    expectContains(openError(path("empty.h5")), {"empty.h5", "empty (0 bytes)"});
  }

  void missingFile() { expectContains(openError(path("nope.h5")), {"nope.h5", "no such file"}); }

  void randomBytes() {
    std::mt19937 rng(7);
    std::ofstream out(path("random.h5"), std::ios::binary);
    for (int i = 0; i < 4096; ++i) out.put(static_cast<char>(rng()));
    out.close();
    expectContains(openError(path("random.h5")), {"random.h5", "not an HDF5 file"});
  }

  void truncatedFile() {
    writeRunFile(path("whole.h5"), RunFixture{});
    std::ifstream in(path("whole.h5"), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    QVERIFY(bytes.size() > 2000);
    for (std::size_t keep : {bytes.size() / 2, std::size_t{1500}, std::size_t{100}}) {
      std::ofstream(path("truncated.h5"), std::ios::binary)
          .write(bytes.data(), static_cast<std::streamsize>(keep));
      const std::string m = openError(path("truncated.h5"));
      expectContains(m, {"truncated.h5"});
      QVERIFY2(m != "<opened without error>", m.c_str());
    }
    expectContains(openError(path("truncated.h5")), {"HDF5 cannot open the file"});
  }

  void notALossboundFile() {
    RunFixture f;
    f.format.reset();
    expectContains(fixtureError("other.h5", f),
                   {"other.h5", "not a Lossbound run file", "'format' is missing"});
    f.format = "something-else";
    expectContains(fixtureError("other2.h5", f),
                   {"/@format", "\"something-else\"", "expected \"lossbound-run\""});
  }

  void futureFormatVersion() {
    RunFixture f;
    f.formatVersion = 2;
    expectContains(fixtureError("future.h5", f),
                   {"/@format_version", "found format version 2", "reads version 1"});
    f.formatVersion.reset();
    expectContains(fixtureError("noversion.h5", f), {"'format_version' is missing"});
  }

  void missingLog() {
    RunFixture f;
    f.writeLog = false;
    expectContains(fixtureError("nolog.h5", f), {"/log", "group is missing"});
  }

  void wrongStepDtype() {
    RunFixture f;
    f.stepAsFloat = true;
    expectContains(fixtureError("floatsteps.h5", f),
                   {"/log/step", "expected int64 steps, found 64-bit float"});
  }

  void nonMonotonicSteps() {
    RunFixture f;
    f.steps = {0, 2, 1};
    expectContains(fixtureError("order.h5", f),
                   {"/log/step", "strictly increasing", "step 1 at index 2 after step 2"});
  }

  void nanLoss() {
    RunFixture f;
    f.loss = {1.0, std::nan(""), 2.0};
    expectContains(fixtureError("nan.h5", f), {"/log/loss", "index 1 (step 1) is NaN"});
    f.loss = {1.0, 2.0, -INFINITY};
    expectContains(fixtureError("inf.h5", f), {"index 2 (step 2) is -Inf"});
    f.loss = {1.0, 2.0};
    expectContains(fixtureError("short.h5", f), {"/log/loss", "expected 3 values", "found 2"});
  }

  void malformedJson() {
    RunFixture f;
    f.graph = R"({"format": "lossbound-step-program", "ir_version": 1, "inputs": [)";
    expectContains(fixtureError("json.h5", f),
                   {"/programs/0123456789abcdef/graph", "malformed JSON at byte offset"});
  }

  void danglingReference() {
    RunFixture f;
    f.graph = defaultGraph(
        R"(, {"name": "extra", "op": "aten.mul.Tensor", "args": [{"ref": "mul"}, {"ref": "ghost"}],
      "kwargs": {}, "outputs": [{"shape": [2, 3], "dtype": "float32"}]})");
    expectContains(fixtureError("dangling.h5", f),
                   {"node 'extra'", "aten.mul.Tensor", "'ghost'", "no input, constant or node"});
  }

  void unknownOpIsAFinding() {
    RunFixture f;
    f.graph = defaultGraph(
        R"(, {"name": "weird_1", "op": "aten.frobnicate.default", "args": [{"ref": "mul"}],
      "kwargs": {}, "outputs": [{"shape": [2, 3], "dtype": "float32"}]})");
    writeRunFile(path("unknown_op.h5"), f);
    const RunFile run = RunFile::open(path("unknown_op.h5"));  // listing works
    const auto u = unsupportedOps(run.programs()[0].program);
    QCOMPARE(u.size(), std::size_t{1});
    QCOMPARE(u[0].node, std::string("weird_1"));
    QCOMPARE(u[0].op, std::string("aten.frobnicate.default"));
    // Evaluating the loss prunes the node away; asking for everything refuses, naming node and op.
    const auto backend = createCpuBackend();
    Program p = run.programs()[0].program;
    p.outputs.push_back({"extra", {"weird_1", 0}});
    EvalOptions all;
    all.outputs = {"loss", "extra"};
    try {
      evaluate(p, run.loadCheckpoint(0), *backend, all);
      QFAIL("evaluating an unsupported op should throw");
    } catch (const EvaluationError& e) {
      expectContains(e.what(), {"node 'weird_1'", "aten.frobnicate.default", "unsupported"});
      QCOMPARE(e.node(), std::string("weird_1"));
    }
    QCOMPARE(evaluate(p, run.loadCheckpoint(0), *backend).outputs.at("loss").values()[0],
             defaultLoss(0));
  }

  void wrongTensorDtypeAndShape() {
    RunFixture f;
    f.tensors = defaultTensors(0);
    f.tensors[0].dtype = "float64";
    f.tensors[0].storage = "f64";
    expectContains(fixtureError("dtype.h5", f), {"/checkpoints/0/params/w", "dtype float64",
                                                 "expects input 'param:w' as float32"});
    f.tensors = defaultTensors(0);
    f.tensors[0].storage = "i32";
    expectContains(
        fixtureError("storage.h5", f),
        {"/checkpoints/0/params/w", "must be stored as a 32-bit float", "found 32-bit integer"});
    f.tensors = defaultTensors(0);
    f.tensors[1].shape = {1, 3};
    expectContains(fixtureError("shape.h5", f),
                   {"/checkpoints/0/batch/x", "shape [1, 3]", "as [3]"});
    f.tensors = defaultTensors(0);
    f.tensors.pop_back();
    expectContains(fixtureError("missing.h5", f),
                   {"/checkpoints/0/batch/x", "missing dataset for program input 'batch:x'"});
    f.tensors = defaultTensors(0);
    f.tensors[0].dtype = "";
    expectContains(fixtureError("nodtype.h5", f),
                   {"/checkpoints/0/params/w", "'dtype' is missing"});
  }

  void checkpointProgramMustExist() {
    RunFixture f;
    f.programAttr = "feedfacefeedface";
    expectContains(
        fixtureError("program.h5", f),
        {"/checkpoints/0/@program", "\"feedfacefeedface\"", "not stored under /programs"});
    RunFixture g;
    g.irVersionAttr = 3;
    expectContains(fixtureError("irversion.h5", g),
                   {"/@ir_version", "found IR version 3", "reads IR versions 1 to 2"});
  }

  void lzfFilterIsNamed() {
    RunFixture f;
    f.tensors = defaultTensors(0);
    f.tensors[0].lzf = true;
    expectContains(fixtureError("lzf.h5", f),
                   {"/checkpoints/0/params/w",
                    "uses HDF5 filter 32000 (LZF), which is not available; re-save with gzip"});
  }

  void lzfFromH5py() {
    // h5py's own LZF: the real thing, when Debian's python3-h5py is there (a skip, reported as
    // one by ctest, only when it is not; a failing script is a failure).
    const QString python = QStringLiteral("/usr/bin/python3");
    const QString file = mDir.filePath(QStringLiteral("h5py_lzf.h5"));
    QProcess probe;
    probe.start(python, {QStringLiteral("-c"), QStringLiteral("import h5py, numpy")});
    if (!probe.waitForFinished(60000) || probe.exitStatus() != QProcess::NormalExit ||
        probe.exitCode() != 0)
      QSKIP("/usr/bin/python3 with h5py and numpy is not available to write an LZF dataset");
    QProcess p;
    p.start(python,
            {QStringLiteral("-c"),
             QStringLiteral(
                 "import sys, h5py, numpy as np\n"
                 "f = h5py.File(sys.argv[1], 'w')\n"
                 "f.attrs['format'] = 'lossbound-run'; f.attrs['format_version'] = np.int64(1)\n"
                 "f['log/step'] = np.arange(3, dtype=np.int64)\n"
                 "f.create_dataset('log/loss', data=np.ones(3), compression='lzf')\n"),
             file});
    QVERIFY2(
        p.waitForFinished(60000) && p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0,
        qPrintable(QStringLiteral("h5py could not write the LZF dataset: ") +
                   QString::fromLocal8Bit(p.readAllStandardError())));
    expectContains(openError(file.toStdString()),
                   {"/log/loss", "uses HDF5 filter 32000 (LZF), which is not available"});
  }

  void pairing() {
    writeRunFile(path("a.h5"), RunFixture{});
    RunFixture other;
    other.checkpointSteps = {1, 2, 3};
    other.steps = {0, 1, 2, 3};
    writeRunFile(path("b.h5"), other);
    const RunFile a = RunFile::open(path("a.h5"));
    const RunFile b = RunFile::open(path("b.h5"));
    RunPairCheck check = checkRunPair(a, b, true);
    QVERIFY(check.ok());
    QCOMPARE(check.commonSteps, (std::vector<std::int64_t>{1, 2}));
    QVERIFY(check.warnings.empty());
    QVERIFY(!compareBatches(a, b, 1));

    RunFixture diff;
    diff.tensors = defaultTensors(0);
    diff.tensors[1].values[2] = 0.5;
    writeRunFile(path("c.h5"), diff);
    const RunFile c = RunFile::open(path("c.h5"));
    const auto w = compareBatches(a, c, 0);
    QVERIFY(w.has_value());
    expectContains(*w, {"step 0", "batch input 'batch:x' differs", "element 2",
                        "0.25 in the reference", "0.5 in the candidate"});

    RunFixture shape;
    shape.graph = R"({"format": "lossbound-step-program", "ir_version": 1,
      "inputs": [{"name": "param:w", "shape": [2, 3], "dtype": "float32"}, {"name": "batch:x", "shape": [2, 3], "dtype": "float32"}],
      "nodes": [{"name": "mul", "op": "aten.mul.Tensor", "args": [{"ref": "param:w"}, {"ref": "batch:x"}], "kwargs": {},
                 "outputs": [{"shape": [2, 3], "dtype": "float32"}]},
                {"name": "sum_1", "op": "aten.sum.default", "args": [{"ref": "mul"}], "kwargs": {}, "outputs": [{"shape": [], "dtype": "float32"}]}],
      "outputs": [{"name": "loss", "ref": {"ref": "sum_1"}}]})";
    shape.tensors = defaultTensors(0);
    shape.tensors[1].shape = {2, 3};
    shape.tensors[1].values = {1, 2, 3, 4, 5, 6};
    writeRunFile(path("d.h5"), shape);
    const RunFile d = RunFile::open(path("d.h5"));
    check = checkRunPair(a, d);
    QVERIFY(!check.ok());
    expectContains(
        check.errors.front(),
        {"input 'batch:x': the candidate program expects shape [2, 3], the reference checkpoint "
         "holds [3]"});
  }

  void missingGroups() {
    // No /checkpoints: a log-only run is valid (viewable), with a warning.
    RunFixture logOnly;
    logOnly.checkpointSteps.clear();
    writeRunFile(path("log-only.h5"), logOnly);
    const RunFile run = RunFile::open(path("log-only.h5"));
    QVERIFY(run.checkpointSteps().empty());
    QCOMPARE(run.warnings().size(), std::size_t{1});
    expectContains(run.warnings().front(), {"there is no /checkpoints group"});
    // No /programs while checkpoints name a program: an error at the checkpoint's attribute.
    RunFixture noPrograms;
    noPrograms.writePrograms = false;
    expectContains(fixtureError("no-programs.h5", noPrograms),
                   {"no-programs.h5", "/checkpoints/0/@program",
                    "names program \"0123456789abcdef\"", "not stored under /programs"});
    // Neither: valid, two warnings.
    noPrograms.checkpointSteps.clear();
    writeRunFile(path("neither.h5"), noPrograms);
    const RunFile neither = RunFile::open(path("neither.h5"));
    QVERIFY(neither.programs().empty());
    QCOMPARE(neither.warnings().size(), std::size_t{2});
    expectContains(neither.warnings().front(), {"there is no /programs group"});
  }

  void batchesDifferWarning() {
    writeRunFile(path("a.h5"), RunFixture{});
    RunFixture diff;
    diff.tensors = defaultTensors(0);
    diff.tensors[1].values[2] = 0.5;
    writeRunFile(path("c.h5"), diff);
    const RunPairCheck check =
        checkRunPair(RunFile::open(path("a.h5")), RunFile::open(path("c.h5")), true);
    QVERIFY(check.ok());
    // Steps 0, 1, 2 all hold step 0's tensors in c.h5; x differs from a.h5's at every step.
    QCOMPARE(check.warnings.size(), std::size_t{3});
    expectContains(check.warnings[0],
                   {"step 0: batch input 'batch:x' differs", "0.5 in the candidate"});
    expectContains(check.warnings[1], {"step 1: batch input 'batch:x' differs"});
  }

  // Guards the SIGSEGV inside H5Lget_name_by_idx (libhdf5 1.10.8) on a sample with 20 bytes
  // overwritten: validateIsolated() must turn it into a RunFileError, never a crash.
  void crashingCorruptFileIsACleanError() {
    const std::string sample = LOSSBOUND_SOURCE_DIR "/samples/gradaccum-fixed/candidate.h5";
    writeCrashingCorruptSample(sample, path("corrupt.h5"));
    std::string message = "<validated without error>";
    try {
      RunFile::validateIsolated(path("corrupt.h5"));
    } catch (const RunFileError& e) {
      message = e.what();
      QCOMPARE(e.file(), path("corrupt.h5"));
    }
    expectContains(message, {path("corrupt.h5") + ": "});
#if H5_VERS_MAJOR == 1 && H5_VERS_MINOR == 10 && H5_VERS_RELEASE == 8
#if defined(__SANITIZE_ADDRESS__)
    // AddressSanitizer catches the SIGSEGV, reports it and aborts (ASAN_OPTIONS abort_on_error=1
    // in lb_sanitize_stage), so the child dies of SIGABRT; without abort_on_error it would exit 1.
    const bool segv = message.find("(signal 11 SIGSEGV") != std::string::npos;
    const bool asanAbort = message.find("(signal 6 SIGABRT") != std::string::npos;
    QVERIFY2(segv || asanAbort, message.c_str());
    expectContains(message, {"the HDF5 library crashed reading this file (signal ",
                             " in the validating child process): the file is corrupt"});
#else
    expectContains(
        message, {"the HDF5 library crashed reading this file (signal 11 SIGSEGV in the validating "
                  "child process): the file is corrupt"});
#endif
#endif
    // The child reports the reader's own errors unchanged, with file and path.
    RunFixture bad;
    bad.steps = {0, 2, 1};
    writeRunFile(path("bad.h5"), bad);
    try {
      RunFile::validateIsolated(path("bad.h5"));
      QFAIL("bad.h5 validated without error");
    } catch (const RunFileError& e) {
      QCOMPARE(std::string(e.what()), openError(path("bad.h5")));
      QCOMPARE(e.path(), std::string("/log/step"));
    }
    expectContains(
        [&] {
          try {
            RunFile::validateIsolated(path("nope.h5"));
          } catch (const RunFileError& e) {
            return std::string(e.what());
          }
          return std::string("<validated without error>");
        }(),
        {"nope.h5", "no such file"});
    // A good file validates; report what the isolation costs on the sample.
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    RunFile::validateIsolated(sample);
    const auto t1 = Clock::now();
    const RunFile run = RunFile::open(sample);
    const auto t2 = Clock::now();
    QVERIFY(!run.checkpointSteps().empty());
    qInfo("isolated validation %.1f ms, in-process open %.1f ms (gradaccum-fixed/candidate.h5)",
          std::chrono::duration<double, std::milli>(t1 - t0).count(),
          std::chrono::duration<double, std::milli>(t2 - t1).count());
  }

  // A seeded sweep of 20-byte corruptions over the sample's link storage: each is an error or a
  // valid file, and this process survives them all.
  void corruptionSweepNeverCrashes() {
    const std::string sample = LOSSBOUND_SOURCE_DIR "/samples/gradaccum-fixed/candidate.h5";
    std::ifstream in(sample, std::ios::binary);
    const std::string original((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
    QVERIFY(original.size() > 40000);
    std::mt19937 rng(7);
    int crashed = 0;
    for (int trial = 0; trial < 24; ++trial) {
      std::string bytes = original;
      const std::size_t offset = original.size() - 40000 + rng() % (40000 - 20);
      for (std::size_t i = 0; i < 20; ++i) bytes[offset + i] = static_cast<char>(rng() & 0xff);
      const std::string file = path("sweep.h5");
      std::ofstream(file, std::ios::binary | std::ios::trunc)
          .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      try {
        RunFile::validateIsolated(file);
      } catch (const RunFileError& e) {
        expectContains(e.what(), {file + ": "});
        crashed += std::string(e.what()).find("the HDF5 library crashed") != std::string::npos;
      }
    }
    qInfo("%d of 24 corruptions crashed the HDF5 library in the child process", crashed);
  }

  void openImageMatchesOpen() {
    writeRunFile(path("good.h5"), RunFixture{});
    std::ifstream in(path("good.h5"), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const RunFile run = RunFile::openImage(bytes.data(), bytes.size(), "image");
    QCOMPARE(run.checkpointSteps().size(), std::size_t{3});
    QCOMPARE(run.loadCheckpoint(1).at("batch:x").values()[1], 1.0);
    try {
      RunFile::openImage(bytes.data(), 700, "cut");
      QFAIL("a cut image should not open");
    } catch (const RunFileError& e) {
      expectContains(e.what(), {"cut"});
    }
  }
};

QTEST_GUILESS_MAIN(TestRunFile)
#include "test_run_file.moc"
