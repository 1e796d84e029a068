// The batch-norm and group-norm rules against PyTorch itself: tests/core/ops/data/
// norm_torch_cases.txt holds fixed inputs and torch's outputs (written by make_norm_torch_cases.py
// with torch 1.13 and 2.x: native_batch_norm and its backward in training and eval, the
// _native_batch_norm_legit family, native_group_norm and its backward; float64, float32,
// bfloat16 and float16 with parameters in the input dtype or float32; contiguous, channels-last
// and transposed inputs; N×C×H×W and N×C×L). Checks:
//  - float64 cases: the rule's binary64 point values equal torch's to 1e-12 (relative to the
//    output's largest magnitude), with the output shapes torch returns;
//  - every case: the interval rule under the traced dtypes encloses torch's outputs (the
//    candidate here is torch's CPU kernel, one of the implementations the contract covers),
//    except torch 1.13's bf16 group norm and strided bf16 batch-norm backward, which accumulate
//    partly in bf16 (outside the precision model; counted and printed);
//  - tightness: interval widths in ulps of the output format at torch's values.
// LOSSBOUND_NORM_TORCH_CASES=<file> runs another case file (make_norm_torch_cases.py --full).
#include "core/interval/precision.h"
#include "tests/core/ops/channel_norm_cases.h"

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

using namespace lossbound;
using namespace lossbound::test;
using namespace lossbound::test::norm;

namespace {

struct TorchCase {
  std::string id, torch, layout;
  OpCase op;
  std::vector<Tensor> outs;
};

DType dtypeNamed(const std::string& s) {
  if (s == "f64") return DType::Float64;
  if (s == "f32") return DType::Float32;
  if (s == "bf16") return DType::BFloat16;
  if (s == "f16") return DType::Float16;
  throw std::runtime_error("unknown dtype " + s);
}

/// Reads "<dtype> <shape> <values...>" (shape "-" for 0-d; f32 values read as binary32).
Tensor readTensor(std::istringstream& in) {
  std::string dt, sh;
  in >> dt >> sh;
  Shape shape;
  if (sh != "-") {
    std::stringstream ss(sh);
    std::string e;
    while (std::getline(ss, e, ',')) shape.push_back(std::stoll(e));
  }
  const DType t = dtypeNamed(dt);
  std::vector<double> v;
  std::string tok;
  while (in >> tok)
    v.push_back(t == DType::Float32 ? static_cast<double>(std::strtof(tok.c_str(), nullptr))
                                    : std::strtod(tok.c_str(), nullptr));
  return Tensor::point(shape, t, std::move(v));
}

std::vector<TorchCase> readCases(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot open " + path);
  std::vector<TorchCase> cases;
  std::string line;
  TorchCase cur;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string kind;
    in >> kind;
    if (kind == "case") {
      cur = TorchCase{};
      in >> cur.id >> cur.op.op >> cur.torch >> cur.layout;
      cur.op.precision = modelFor(std::nullopt);
    } else if (kind == "arg") {
      std::string what;
      in >> what;
      if (what == "tensor") {
        cur.op.inputs.push_back(readTensor(in));
        cur.op.args.push_back(lossbound::test::in(static_cast<int>(cur.op.inputs.size()) - 1));
      } else if (what == "none") {
        cur.op.args.push_back(none());
      } else if (what == "bool") {
        int b = 0;
        in >> b;
        cur.op.args.push_back(flag(b != 0));
      } else if (what == "float") {
        std::string v;
        in >> v;
        cur.op.args.push_back(num(std::strtod(v.c_str(), nullptr)));
      } else if (what == "int") {
        std::int64_t v = 0;
        in >> v;
        cur.op.args.push_back(integer(v));
      } else if (what == "bools") {
        std::string v;
        in >> v;
        std::vector<IrValue> l;
        for (char ch : v)
          if (ch == '0' || ch == '1') l.push_back(flag(ch == '1'));
        cur.op.args.push_back(list(l));
      }
    } else if (kind == "out") {
      cur.outs.push_back(readTensor(in));
      cur.op.outDtypes.push_back(cur.outs.back().dtype());
    } else if (kind == "end") {
      cases.push_back(cur);
    }
  }
  return cases;
}

std::string casesPath() {
  if (const char* p = std::getenv("LOSSBOUND_NORM_TORCH_CASES")) return p;
  return LOSSBOUND_SOURCE_DIR "/tests/core/ops/data/norm_torch_cases.txt";
}

std::vector<Shape> shapesOf(const std::vector<Tensor>& ts) {
  std::vector<Shape> s;
  for (const Tensor& t : ts) s.push_back(t.shape());
  return s;
}

/// Returns the spacing of format f's values at |v| (one ulp), at least the smallest subnormal.
double ulpOf(double v, Format f) {
  const double a = std::fabs(v);
  const double up = roundToFormat(std::nextafter(a, HUGE_VAL), f, RoundingDirection::Up);
  const double down = roundToFormat(a, f, RoundingDirection::Down);
  return std::fmax(up - down, smallestSubnormal(f));
}

}  // namespace

class TestNormTorchCases : public QObject {
  Q_OBJECT
 private slots:
  void pointValuesMatchTorchFloat64() {
    const std::vector<TorchCase> cases = readCases(casesPath());
    OpContext ctx{modelFor(std::nullopt), cpuBackend(), nullptr};
    int checked = 0;
    double worst = 0.0;
    for (const TorchCase& tc : cases) {
      if (tc.op.outDtypes[0] != DType::Float64) continue;
      const Bound b(tc.op, shapesOf(tc.outs));
      const std::vector<Tensor> got = b.rule().point(b.args(), ctx);
      QCOMPARE(got.size(), tc.outs.size());
      for (std::size_t k = 0; k < got.size(); ++k) {
        QVERIFY2(got[k].shape() == tc.outs[k].shape(),
                 qPrintable(QString::fromStdString(tc.id + " output " + std::to_string(k) + ": " +
                                                   shapeString(got[k].shape()) + " vs torch " +
                                                   shapeString(tc.outs[k].shape()))));
        double d = 0.0, m = 1e-300;
        for (std::int64_t i = 0; i < got[k].numel(); ++i) {
          d = std::fmax(d, std::fabs(got[k].values()[static_cast<std::size_t>(i)] -
                                     tc.outs[k].values()[static_cast<std::size_t>(i)]));
          m = std::fmax(m, std::fabs(tc.outs[k].values()[static_cast<std::size_t>(i)]));
        }
        worst = std::fmax(worst, d / m);
        QVERIFY2(d <= 1e-12 * m, qPrintable(QString::fromStdString(
                                     tc.id + " (torch " + tc.torch + ") output " +
                                     std::to_string(k) + ": rel diff " + std::to_string(d / m))));
      }
      ++checked;
    }
    qInfo("point values vs torch float64: %d cases, max rel diff %.3g", checked, worst);
    QVERIFY(checked >= 20);
  }

  void intervalsEncloseTorch() {
    const std::vector<TorchCase> cases = readCases(casesPath());
    OpContext ctx{modelFor(std::nullopt), cpuBackend(), nullptr};
    int checked = 0, escapes = 0, outsideEscapes = 0, outsideCases = 0;
    std::string first;
    // Tightness per input dtype: interval width in ulps of the output format at torch's value.
    std::map<std::string, std::vector<double>> widthUlps;
    std::map<std::string, int> unbounded;
    const bool verbose = std::getenv("LOSSBOUND_NORM_TORCH_VERBOSE") != nullptr;
    for (const TorchCase& tc : cases) {
      const Bound b(tc.op, shapesOf(tc.outs));
      const std::vector<Tensor> encl = b.rule().interval(b.args(), ctx);
      QCOMPARE(encl.size(), tc.outs.size());
      const std::string dt = std::string(dtypeName(tc.op.inputs[0].dtype()));
      const bool outside = outsideModel(tc);
      outsideCases += outside;
      for (std::size_t k = 0; k < encl.size(); ++k) {
        QVERIFY2(
            encl[k].shape() == tc.outs[k].shape(),
            qPrintable(QString::fromStdString(tc.id + ": shape of output " + std::to_string(k))));
        const Format f = formatOf(tc.outs[k].dtype(), ctx.precision);
        for (std::int64_t i = 0; i < encl[k].numel(); ++i) {
          const double v = tc.outs[k].values()[static_cast<std::size_t>(i)];
          const Interval e = encl[k].at(i);
          const double w = (e.hi - e.lo) / ulpOf(v, f);
          if (verbose && !contains(e, v))
            qInfo("%s %s out %zu[%lld] torch %.17g outside [%.17g, %.17g]%s", tc.id.c_str(),
                  tc.torch.c_str(), k, static_cast<long long>(i), v, e.lo, e.hi,
                  outside ? " (outside the model)" : "");
          if (!contains(e, v)) {
            ++(outside ? outsideEscapes : escapes);
            if (first.empty() && !outside) {
              std::ostringstream s;
              s.precision(17);
              s << tc.id << " (torch " << tc.torch << ", " << tc.op.op << ") output " << k << "["
                << i << "] = " << v << " outside [" << e.lo << ", " << e.hi << "]";
              first = s.str();
            }
          }
          if (std::isfinite(e.lo) && std::isfinite(e.hi))
            widthUlps[dt].push_back(w);
          else
            ++unbounded[dt];
        }
      }
      ++checked;
    }
    for (auto& [dt, w] : widthUlps) {
      std::sort(w.begin(), w.end());
      qInfo(
          "input %-9s: interval width in ulps of the output format: median %.3g, 90%% %.3g "
          "(%zu elements; %d unbounded)",
          dt.c_str(), w[w.size() / 2], w[w.size() * 9 / 10], w.size(), unbounded[dt]);
    }
    qInfo(
        "torch outputs inside the intervals: %d cases, %d escapes; %d cases outside the "
        "precision model (torch 1.x bf16 group norm), %d escapes there",
        checked, escapes, outsideCases, outsideEscapes);
    QVERIFY2(escapes == 0, first.c_str());
    QVERIFY(checked >= 100);
  }

 private:
  /// Returns true for the cases whose torch kernels fall outside the precision model (reductions
  /// accumulate in fp32 for bf16): torch 1.13's bf16 group norm (forward and backward) and its
  /// bf16 batch-norm backward on strided inputs accumulate partly in bf16 (measured: a 4096-
  /// element bf16 batch-norm gradient sum off by one bf16 ulp, torch 2.15 correctly rounded).
  /// Their escapes are counted and printed, not failed.
  static bool outsideModel(const TorchCase& tc) {
    if (tc.torch.rfind("1.", 0) != 0 || tc.op.inputs[0].dtype() != DType::BFloat16) return false;
    if (tc.op.op.find("group_norm") != std::string::npos) return true;
    return tc.op.op == "aten.native_batch_norm_backward.default" && tc.layout == "strided";
  }
};

QTEST_GUILESS_MAIN(TestNormTorchCases)
#include "test_norm_torch_cases.moc"
