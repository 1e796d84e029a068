// Layer norm op rules (native_layer_norm, native_layer_norm_backward): per op and precision,
// 1,000 random cases (1–2 normalized dims of 0..100 elements, leading dims with size 0/1, rows
// with a large mean against a small spread — the case where Welford and the CPU affine form lose
// accuracy —, wide dynamic ranges, weight/bias present or None, random output_mask), zero escapes
// from the interval rule (random executions use two-pass, Welford and pairwise moments), local
// errors, vjp against finite differences.
#include <QtTest>

#include "core/backend.h"
#include "core/ops/registry.h"
#include "tests/core/ops/nn_test_util.h"

using namespace lossbound;
using namespace lossbound::test;
using namespace lossbound::test::nn;

namespace {

struct LnCase {
  Shape x, norm;
};

LnCase lnShape(std::mt19937_64& rng) {
  const std::int64_t ext[] = {1, 2, 3, 8, 33, 100};
  LnCase c;
  c.norm = {ext[rng() % 6]};
  if (rng() % 4 == 0) c.norm = {1 + static_cast<std::int64_t>(rng() % 4), 1 + static_cast<std::int64_t>(rng() % 5)};
  if (rng() % 50 == 0) c.norm = {0};
  c.x = randomShape(static_cast<int>(rng() % 3), rng, 3, 0.05);
  c.x.insert(c.x.end(), c.norm.begin(), c.norm.end());
  return c;
}

Tensor lnValues(const Shape& s, DType t, bool iv, std::mt19937_64& rng, Format f) {
  const double offsets[] = {0.0, 0.0, 3.0, 100.0, -1000.0};
  const double scales[] = {1.0, 0.01, 10.0};
  if (rng() % 4 == 0) return values(s, t, iv, rng, f == Format::Fp16 ? 4.0 : 8.0);
  double off = offsets[rng() % 5];
  if (f == Format::Fp16) off = std::clamp(off, -100.0, 100.0);
  return uniform(s, t, iv, rng, scales[rng() % 3], off);
}

OpCase forwardCase(Format f, bool iv, std::mt19937_64& rng) {
  OpCase c;
  c.op = "aten.native_layer_norm.default";
  c.precision = modelFor(std::nullopt);
  const DType t = dtypeFor(f);
  const LnCase s = lnShape(rng);
  c.inputs = {lnValues(s.x, t, iv, rng, f)};
  c.args = {in(0), ints(s.norm)};
  const bool w = rng() % 3 != 0, b = rng() % 3 != 0;
  int k = 1;
  if (w) c.inputs.push_back(uniform(s.norm, t, iv, rng, 1.0, 1.0));
  c.args.push_back(w ? in(k++) : none());
  if (b) c.inputs.push_back(uniform(s.norm, t, iv, rng, 0.5));
  c.args.push_back(b ? in(k++) : none());
  c.args.push_back(num(1e-5));
  c.outDtypes = {t, t, t};
  return c;
}

OpCase backwardCase(Format f, bool iv, std::mt19937_64& rng) {
  OpCase c;
  c.op = "aten.native_layer_norm_backward.default";
  c.precision = modelFor(std::nullopt);
  const DType t = dtypeFor(f);
  const LnCase s = lnShape(rng);
  const Tensor x = lnValues(s.x, t, false, rng, f);
  // mean and rstd as the forward computes them (point, rounded to the storage format).
  Shape stat = s.x;
  for (std::size_t d = stat.size() - s.norm.size(); d < stat.size(); ++d) stat[d] = 1;
  const std::int64_t n = numel(s.norm), rows = numel(stat);
  std::vector<double> mean(static_cast<std::size_t>(rows)), rstd(mean.size());
  const Format sf = storageFormat(t).value();
  for (std::int64_t r = 0; r < rows; ++r) {
    long double m = 0, v = 0;
    for (std::int64_t j = 0; j < n; ++j) m += x.values()[static_cast<std::size_t>(r * n + j)];
    m /= n > 0 ? n : 1;
    for (std::int64_t j = 0; j < n; ++j) v += (x.values()[static_cast<std::size_t>(r * n + j)] - m) * (x.values()[static_cast<std::size_t>(r * n + j)] - m);
    v /= n > 0 ? n : 1;
    mean[static_cast<std::size_t>(r)] = roundToFormat(static_cast<double>(m), sf, RoundingDirection::Nearest);
    rstd[static_cast<std::size_t>(r)] = roundToFormat(static_cast<double>(1 / std::sqrt(v + 1e-5L)), sf, RoundingDirection::Nearest);
  }
  c.inputs = {values(s.x, t, iv, rng, f == Format::Fp16 ? 3.0 : 6.0), iv ? x.toInterval() : x,
              Tensor::point(stat, t, mean), Tensor::point(stat, t, rstd)};
  c.args = {in(0), in(1), ints(s.norm), in(2), in(3)};
  const bool w = rng() % 3 != 0, b = rng() % 2;
  int k = 4;
  if (w) c.inputs.push_back(uniform(s.norm, t, iv, rng, 1.0, 1.0));
  c.args.push_back(w ? in(k++) : none());
  if (b) c.inputs.push_back(uniform(s.norm, t, false, rng, 0.5));
  c.args.push_back(b ? in(k++) : none());
  c.args.push_back(list({flag(rng() % 4 != 0), flag(rng() % 4 != 0), flag(rng() % 4 != 0)}));
  c.outDtypes = {t, t, t};
  return c;
}

CaseMaker moderate(CaseMaker m) {
  return [m](Format f, bool iv, std::mt19937_64& rng) {
    OpCase c = m(f, iv, rng);
    std::uniform_real_distribution<double> u(-2.0, 2.0);
    for (std::size_t k = 0; k < c.inputs.size(); ++k) {
      Tensor& x = c.inputs[k];
      std::vector<double> v(static_cast<std::size_t>(x.numel()));
      const bool rstd = c.op.find("backward") != std::string::npos && k == 3;
      for (double& e : v) e = rstd ? 1.0 + std::fabs(u(rng)) : u(rng);
      x = Tensor::point(x.shape(), x.dtype(), v);
    }
    return c;
  };
}

}  // namespace

class TestNormOps : public QObject {
  Q_OBJECT
 private slots:
  void layerNorm() {
    checkAllFormats("native_layer_norm", forwardCase);
    checkVjpCases("native_layer_norm", moderate(forwardCase));
  }
  void layerNormBackward() {
    checkAllFormats("native_layer_norm_backward", backwardCase);
    checkVjpCases("native_layer_norm_backward", moderate(backwardCase));
  }
  void badNormalizedShapeIsAnError() {
    std::mt19937_64 rng(4);
    OpCase c = forwardCase(Format::Fp32, false, rng);
    c.args[1] = ints({7, 7, 7, 7, 7});
    QVERIFY_THROWS_EXCEPTION(OpError, checkEnclosure(c, 1, rng));
  }
};

QTEST_GUILESS_MAIN(TestNormOps)
#include "test_norm_ops.moc"
