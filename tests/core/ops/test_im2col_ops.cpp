// Sliding-window op rules (im2col = F.unfold, col2im = F.fold): per format, 1,000 random cases
// (3-d and 4-d images, kernel, dilation, padding, stride; point and interval inputs) with zero
// escapes from the interval rule and |random − point| <= localError; vjp against finite
// differences; col2im is im2col's adjoint; known answers printed by PyTorch 1.13 and 2.15
// (identical); non-overlapping fold undoes unfold; bad arguments are errors.
#include "tests/core/ops/nn_test_util.h"
#include "tests/core/ops/rule_call.h"

#include <QtTest>

#include <cmath>

using namespace lossbound;
using namespace lossbound::test;
using namespace lossbound::test::nn;

namespace {

std::int64_t uniformInt(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
  return lo + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(hi - lo + 1));
}

/// One random geometry: the image shape, kernel, dilation, padding, stride, and the windows'
/// output extents (oh, ow).
struct Geometry {
  Shape image;
  std::int64_t kh, kw, dh, dw, ph, pw, sh, sw, oh, ow;
  std::vector<IrValue> args() const {
    return {ints({kh, kw}), ints({dh, dw}), ints({ph, pw}), ints({sh, sw})};
  }
  Shape columns() const {
    const std::int64_t c = image[image.size() - 3];
    if (image.size() == 4) return {image[0], c * kh * kw, oh * ow};
    return {c * kh * kw, oh * ow};
  }
};

Geometry geometry(std::mt19937_64& rng) {
  for (;;) {
    Geometry g;
    g.image = {uniformInt(rng, 1, 3), uniformInt(rng, 1, 6), uniformInt(rng, 1, 6)};
    if (rng() % 2) g.image.insert(g.image.begin(), uniformInt(rng, 1, 2));
    g.kh = uniformInt(rng, 1, 3);
    g.kw = uniformInt(rng, 1, 3);
    g.dh = uniformInt(rng, 1, 2);
    g.dw = uniformInt(rng, 1, 2);
    g.ph = uniformInt(rng, 0, 2);
    g.pw = uniformInt(rng, 0, 2);
    g.sh = uniformInt(rng, 1, 3);
    g.sw = uniformInt(rng, 1, 3);
    const std::int64_t h = g.image[g.image.size() - 2], w = g.image.back();
    const std::int64_t eh = h + 2 * g.ph - (g.dh * (g.kh - 1) + 1);
    const std::int64_t ew = w + 2 * g.pw - (g.dw * (g.kw - 1) + 1);
    if (eh < 0 || ew < 0) continue;
    g.oh = eh / g.sh + 1;
    g.ow = ew / g.sw + 1;
    return g;
  }
}

OpCase im2colCase(const Geometry& g, Tensor x) {
  OpCase c;
  c.op = "aten.im2col.default";
  c.precision = modelFor(std::nullopt);
  c.args = {in(0)};
  for (auto& e : g.args()) c.args.push_back(e);
  c.outDtypes = {x.dtype()};
  c.inputs = {std::move(x)};
  return c;
}

OpCase col2imCase(const Geometry& g, Tensor cols) {
  OpCase c;
  c.op = "aten.col2im.default";
  c.precision = modelFor(std::nullopt);
  c.args = {in(0), ints({g.image[g.image.size() - 2], g.image.back()})};
  for (auto& e : g.args()) c.args.push_back(e);
  c.outDtypes = {cols.dtype()};
  c.inputs = {std::move(cols)};
  return c;
}

Tensor someValues(const Shape& s, Format f, bool iv, std::mt19937_64& rng) {
  return rng() % 2 ? uniform(s, dtypeFor(f), iv, rng, 4.0)
                   : values(s, dtypeFor(f), iv, rng, f == Format::Fp16 ? 4.0 : 12.0);
}

CaseMaker im2col() {
  return [](Format f, bool iv, std::mt19937_64& rng) {
    const Geometry g = geometry(rng);
    return im2colCase(g, someValues(g.image, f, iv, rng));
  };
}

CaseMaker col2im() {
  return [](Format f, bool iv, std::mt19937_64& rng) {
    const Geometry g = geometry(rng);
    return col2imCase(g, someValues(g.columns(), f, iv, rng));
  };
}

/// Small integers in fp64: sums of products are exact.
Tensor smallInts(const Shape& s, std::mt19937_64& rng) {
  std::vector<double> v(static_cast<std::size_t>(numel(s)));
  for (double& e : v) e = static_cast<double>(uniformInt(rng, -8, 8));
  return Tensor::point(s, DType::Float64, v);
}

double dot(const Tensor& a, const Tensor& b) {
  double s = 0.0;
  for (std::size_t i = 0; i < a.values().size(); ++i) s += a.values()[i] * b.values()[i];
  return s;
}

}  // namespace

class TestIm2ColOps : public QObject {
  Q_OBJECT
 private slots:
  void im2colEnclosesEveryExecution() {
    checkAllFormats("im2col", im2col());
    checkVjpCases("im2col", im2col());
  }
  void col2imEnclosesEveryExecution() {
    checkAllFormats("col2im", col2im());
    checkVjpCases("col2im", col2im());
  }
  void col2imIsTheAdjointOfIm2col() {
    // <im2col(x), y> = <x, col2im(y)> exactly for small integers, over random geometries.
    std::mt19937_64 rng(3);
    for (int i = 0; i < 300; ++i) {
      const Geometry g = geometry(rng);
      const Tensor x = smallInts(g.image, rng), y = smallInts(g.columns(), rng);
      const Tensor cx = RuleCall(im2colCase(g, x)).point()[0];
      const Tensor fy = RuleCall(col2imCase(g, y)).point()[0];
      QCOMPARE(cx.shape(), g.columns());
      QCOMPARE(fy.shape(), g.image);
      QCOMPARE(dot(cx, y), dot(x, fy));
    }
  }
  void foldUndoesUnfoldWithoutOverlap() {
    // kernel = stride, no padding or dilation: every element in exactly one window. The
    // interval of fold(unfold(x)) is x's, bit for bit.
    std::mt19937_64 rng(5);
    for (int i = 0; i < 100; ++i) {
      Geometry g;
      g.kh = uniformInt(rng, 1, 3);
      g.kw = uniformInt(rng, 1, 3);
      g.dh = g.dw = 1;
      g.ph = g.pw = 0;
      g.sh = g.kh;
      g.sw = g.kw;
      g.oh = uniformInt(rng, 1, 3);
      g.ow = uniformInt(rng, 1, 3);
      g.image = {uniformInt(rng, 1, 2), uniformInt(rng, 1, 3), g.kh * g.oh, g.kw * g.ow};
      const Tensor x = someValues(g.image, Format::Fp32, true, rng);
      const Tensor cols = RuleCall(im2colCase(g, x)).interval()[0];
      const Tensor back = RuleCall(col2imCase(g, cols)).interval()[0];
      QCOMPARE(back.shape(), x.shape());
      for (std::int64_t k = 0; k < x.numel(); ++k) {
        QCOMPARE(back.at(k).lo, x.at(k).lo);
        QCOMPARE(back.at(k).hi, x.at(k).hi);
      }
    }
  }
  void knownAnswers() {
    // F.unfold / F.fold through torch.ops.aten.im2col / col2im in float64, printed by PyTorch
    // 1.13 and 2.15 (identical): x[i] = (5i mod 13) − 6 in a 1 x 2 x 3 x 4 image, kernel (2, 3),
    // dilation (1, 2), padding (1, 1), stride (2, 1); the fold of 1..48.
    Geometry g;
    g.image = {1, 2, 3, 4};
    g.kh = 2;
    g.kw = 3;
    g.dh = 1;
    g.dw = 2;
    g.ph = g.pw = 1;
    g.sh = 2;
    g.sw = 1;
    g.oh = g.ow = 2;
    std::vector<double> xv(24), gv(48);
    for (int i = 0; i < 24; ++i) xv[static_cast<std::size_t>(i)] = (i * 5) % 13 - 6.0;
    for (int i = 0; i < 48; ++i) gv[static_cast<std::size_t>(i)] = i + 1.0;
    const Tensor cols =
        RuleCall(im2colCase(g, Tensor::point(g.image, DType::Float64, xv))).point()[0];
    const std::vector<double> wantCols{
        0.0,  0.0, 0.0,  1.0, 0.0,  0.0, 6.0,  -2.0, 0.0,  0.0,  3.0,  0.0,  0.0, -6., 0.0, -5.0,
        -1.0, 4.0, 0.0,  5.0, -4.0, 0.0, -3.0, 0.0,  0.0,  0.0,  0.0,  -4.0, 0.0, 0.0, 1.0, 6.0,
        0.0,  0.0, -2.0, 0.0, 0.0,  2.0, 0.0,  3.0,  -6.0, -1.0, -5.0, 0.0,  4.0, 0.0, 5.0, 0.0};
    QCOMPARE(cols.shape(), (Shape{1, 12, 4}));
    for (std::size_t i = 0; i < wantCols.size(); ++i) QCOMPARE(cols.values()[i], wantCols[i]);
    const Tensor fold =
        RuleCall(col2imCase(g, Tensor::point({1, 12, 4}, DType::Float64, gv))).point()[0];
    const std::vector<double> wantFold{14, 17, 18, 21, 4,  7,  8,  11, 16, 19, 20, 23,
                                       38, 41, 42, 45, 28, 31, 32, 35, 40, 43, 44, 47};
    QCOMPARE(fold.shape(), (Shape{1, 2, 3, 4}));
    for (std::size_t i = 0; i < wantFold.size(); ++i) QCOMPARE(fold.values()[i], wantFold[i]);
  }
  void badArgumentsAreErrors() {
    const auto fails = [](const std::string& op, const Shape& s, std::vector<IrValue> args) {
      OpCase c;
      c.op = op;
      c.precision = modelFor(std::nullopt);
      c.inputs = {Tensor::full(s, DType::Float32, 1.0)};
      c.args = {in(0)};
      for (auto& e : args) c.args.push_back(e);
      c.outDtypes = {DType::Float32};
      std::string message;
      try {
        RuleCall(c).point();
      } catch (const OpError& e) {
        message = e.what();
      }
      return message;
    };
    const std::string i2c = "aten.im2col.default", c2i = "aten.col2im.default";
    const auto has = [](const std::string& m, const char* part) {
      return m.find(part) != std::string::npos;
    };
    QVERIFY(has(fails(i2c, {1, 4, 4}, {ints({2, 2, 2}), ints({1, 1}), ints({0, 0}), ints({1, 1})}),
                "kernel_size should have 2 values, found 3"));
    QVERIFY(has(fails(i2c, {1, 4, 4}, {ints({2, 2}), ints({1, 1}), ints({0, 0}), ints({0, 1})}),
                "stride should be positive"));
    QVERIFY(has(fails(i2c, {1, 4, 4}, {ints({3, 3}), ints({2, 2}), ints({0, 0}), ints({1, 1})}),
                "the windows do not fit"));
    QVERIFY(has(fails(i2c, {4, 4}, {ints({2, 2}), ints({1, 1}), ints({0, 0}), ints({1, 1})}),
                "expected a 3-d (C, H, W) or 4-d (N, C, H, W) input"));
    QVERIFY(has(fails(i2c, {0, 4, 4}, {ints({2, 2}), ints({1, 1}), ints({1, 1}), ints({1, 1})}),
                "expected non-zero channels, height and width"));
    QVERIFY(has(
        fails(c2i, {4, 4}, {ints({0, 3}), ints({2, 2}), ints({1, 1}), ints({1, 1}), ints({1, 1})}),
        "output_size should be positive"));
    // 5 rows are not C·kh·kw for a 2 x 2 kernel; 4 rows of 8 windows where 3 x 3 gives 4.
    QVERIFY(has(
        fails(c2i, {5, 4}, {ints({3, 3}), ints({2, 2}), ints({1, 1}), ints({0, 0}), ints({1, 1})}),
        "should be a multiple of kh·kw = 4"));
    QVERIFY(has(
        fails(c2i, {4, 8}, {ints({3, 3}), ints({2, 2}), ints({1, 1}), ints({0, 0}), ints({1, 1})}),
        "the columns should have shape [4, 4]"));
  }
};

QTEST_GUILESS_MAIN(TestIm2ColOps)
#include "test_im2col_ops.moc"
