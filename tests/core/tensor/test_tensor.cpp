// Tensors, shapes, broadcasting (including size-0 and size-1 dims) and dtypes.
#include "core/ops/broadcasting.h"
#include "core/tensor/dtype.h"
#include "core/tensor/shape.h"
#include "core/tensor/tensor.h"

#include <QtTest>

#include <stdexcept>

using namespace lossbound;

class TestTensor : public QObject {
  Q_OBJECT

 private slots:
  void construction() {
    const Tensor p = Tensor::point({2, 3}, DType::Float32, {1, 2, 3, 4, 5, 6});
    QCOMPARE(p.numel(), 6);
    QCOMPARE(p.rank(), 2);
    QVERIFY(!p.isInterval());
    QCOMPARE(p.at(4).lo, 5.0);
    QCOMPARE(p.at(4).hi, 5.0);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                             Tensor::point({2, 2}, DType::Float32, {1, 2, 3}));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                             Tensor::interval({1}, DType::Float32, {2}, {1}));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                             Tensor::interval({1}, DType::Float32, {std::nan("")}, {1}));
    const Tensor s = Tensor::scalar(3.5);
    QCOMPARE(s.rank(), 0);
    QCOMPARE(s.numel(), 1);
    const Tensor z = Tensor::full({0, 4}, DType::Float32, 1.0);
    QCOMPARE(z.numel(), 0);
    QCOMPARE(Tensor().numel(), 0);
  }

  void intervalsAndMidpoints() {
    const Tensor i = Tensor::interval({2}, DType::Float64, {1.0, -2.0}, {3.0, -1.0});
    QVERIFY(i.isInterval());
    QCOMPARE(i.midpoint().values()[0], 2.0);
    QCOMPARE(i.midpoint().values()[1], -1.5);
    const Tensor d = Tensor::point({1}, DType::Float32, {7.0}).toInterval();
    QVERIFY(d.isInterval());
    QCOMPARE(d.hi()[0], 7.0);
  }

  void copyOnWrite() {
    Tensor a = Tensor::point({3}, DType::Float32, {1, 2, 3});
    Tensor b = a;
    b.mutableLo()[0] = 10.0;
    QCOMPARE(a.values()[0], 1.0);
    QCOMPARE(b.values()[0], 10.0);
    QVERIFY_THROWS_EXCEPTION(std::logic_error, a.mutableHi());
    const Tensor r = a.reshaped({3, 1});
    QCOMPARE(r.shape(), (Shape{3, 1}));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, a.reshaped({2}));
  }

  void shapes() {
    QCOMPARE(numel({}), 1);
    QCOMPARE(numel({3, 0, 2}), 0);
    QCOMPARE(contiguousStrides({2, 3, 4}), (std::vector<std::int64_t>{12, 4, 1}));
    QCOMPARE(shapeString({4, 12, 16}), std::string("[4, 12, 16]"));
    QCOMPARE(normalizeDim(-1, 3), 2);
    QCOMPARE(normalizeDim(0, 0), 0);  // a scalar accepts dim 0 and -1, as torch does
    QVERIFY_THROWS_EXCEPTION(std::out_of_range, normalizeDim(3, 3));
    QVERIFY_THROWS_EXCEPTION(std::out_of_range, normalizeDim(-4, 3));
  }

  void broadcastRules() {
    QCOMPARE(*broadcastShapes({3, 1}, {1, 4}), (Shape{3, 4}));
    QCOMPARE(*broadcastShapes({}, {2, 3}), (Shape{2, 3}));
    QCOMPARE(*broadcastShapes({5, 1, 4}, {3, 1}), (Shape{5, 3, 4}));
    // size-0 dims broadcast with size-1 dims to size 0, not with other sizes
    QCOMPARE(*broadcastShapes({0}, {1}), (Shape{0}));
    QCOMPARE(*broadcastShapes({1}, {0}), (Shape{0}));
    QCOMPARE(*broadcastShapes({2, 0}, {2, 1}), (Shape{2, 0}));
    QVERIFY(!broadcastShapes({0}, {2}).has_value());
    QVERIFY(!broadcastShapes({3}, {4}).has_value());
  }

  void broadcastIndexAndReduction() {
    const ops::BroadcastIndex ix({2, 3}, {{3}, {2, 1}, {}});
    std::int64_t off[3];
    ix.offsets(4, off);  // element (1, 1)
    QCOMPARE(off[0], 1);
    QCOMPARE(off[1], 1);
    QCOMPARE(off[2], 0);
    QVERIFY(!ix.trivial());
    QVERIFY(ops::BroadcastIndex({2, 3}, {{2, 3}}).trivial());
    QCOMPARE(ops::BroadcastIndex({0, 3}, {{1, 3}}).size(), 0);
    // sumToShape is the adjoint of broadcasting
    const Tensor g = Tensor::point({2, 3}, DType::Float32, {1, 2, 3, 4, 5, 6});
    const Tensor cols = ops::sumToShape(g, {3});
    QCOMPARE(std::vector<double>(cols.values().begin(), cols.values().end()),
             (std::vector<double>{5, 7, 9}));
    QCOMPARE(ops::sumToShape(g, {2, 1}).values()[1], 15.0);
    QCOMPARE(ops::sumToShape(g, {}).values()[0], 21.0);
    QCOMPARE(ops::sumToShape(Tensor::full({0, 3}, DType::Float32, 0), {1, 3}).values()[2], 0.0);
  }

  void dtypes() {
    QCOMPARE(*parseDType("torch.float32"), DType::Float32);
    QCOMPARE(*parseDType("half"), DType::Float16);
    QCOMPARE(*parseDType("bfloat16"), DType::BFloat16);
    QVERIFY(!parseDType("complex64").has_value());
    QVERIFY(isFloating(DType::BFloat16));
    QVERIFY(!isFloating(DType::Int64));
    QCOMPARE(*storageFormat(DType::Float16), Format::Fp16);
    QCOMPARE(dtypeName(DType::Bool), std::string_view("bool"));
  }
};

QTEST_GUILESS_MAIN(TestTensor)
#include "test_tensor.moc"
