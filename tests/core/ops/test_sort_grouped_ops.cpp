// The mixture-of-experts routing ops: topk, sort, histc, floor_divide and _grouped_mm, and the
// integer remainder (LongT5). PyTorch's
// values on small cases; zero escapes of the randomized executor (which breaks ties in a random
// order) from the interval rules over random shapes, dims, ties and interval inputs; adjoints
// against finite differences; the order statistics' near-tie term against perturbed inputs; the
// grouped products against a loop of plain products, with empty groups; bad arguments are errors.
#include "core/interval/rounding.h"
#include "core/ops/error_bounds.h"
#include "core/ops/registry.h"
#include "tests/core/ops/op_harness.h"
#include "tests/core/ops/rule_call.h"

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace lossbound;
using namespace lossbound::test;

namespace {

Tensor vec(std::vector<double> v, DType t = DType::Float32) {
  const Shape s{static_cast<std::int64_t>(v.size())};
  return Tensor::point(s, t, std::move(v));
}

std::vector<double> values(const Tensor& t) { return {t.values().begin(), t.values().end()}; }

/// An integer op of x and `other`: a constant, or in(1) with `more` holding that tensor.
OpCase integerCase(const std::string& op, Tensor x, IrValue other, std::vector<Tensor> more = {}) {
  OpCase c;
  c.op = op;
  c.args = {in(0), std::move(other)};
  c.outDtypes = {x.dtype()};
  c.inputs = {std::move(x)};
  for (Tensor& t : more) c.inputs.push_back(std::move(t));
  c.precision = modelFor(std::nullopt);
  return c;
}

/// Checks `op` on 200 random int64 interval operands against the randomized executor: dividends
/// in [-20, 25], divisors in [1, 9] or [-10, -2] (points on odd trials when `pointsToo`).
void checkIntegerEnclosures(const std::string& op, std::mt19937_64& rng, bool pointsToo) {
  for (int t = 0; t < 200; ++t) {
    std::vector<double> alo(6), ahi(6), blo(6), bhi(6);
    for (std::size_t i = 0; i < 6; ++i) {
      alo[i] = static_cast<double>(static_cast<int>(rng() % 41) - 20);
      ahi[i] = alo[i] + static_cast<double>(rng() % 6);
      blo[i] = rng() % 2 ? static_cast<double>(1 + rng() % 5) : -static_cast<double>(6 + rng() % 5);
      bhi[i] = blo[i] + static_cast<double>(pointsToo && t % 2 ? 0 : rng() % 5);
    }
    const OpCase ic = integerCase(op, Tensor::interval({6}, DType::Int64, alo, ahi), in(1),
                                  {Tensor::interval({6}, DType::Int64, blo, bhi)});
    const EnclosureReport r = checkEnclosure(ic, 20, rng);
    QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
  }
}

OpCase orderCase(const std::string& op, Tensor x, std::vector<IrValue> args,
                 std::map<std::string, IrValue> kwargs = {}) {
  OpCase c;
  c.op = op;
  c.args = {in(0)};
  c.args.insert(c.args.end(), args.begin(), args.end());
  c.kwargs = std::move(kwargs);
  c.outDtypes = {x.dtype(), DType::Int64};
  c.inputs = {std::move(x)};
  c.precision = modelFor(std::nullopt);
  return c;
}

/// A random topk / sort / sort.stable case over a random shape and dim; integers with many ties
/// when `ties`.
OpCase randomOrderCase(std::mt19937_64& rng, bool iv, bool ties) {
  const int rank = 1 + static_cast<int>(rng() % 3);
  Shape s = randomShape(rank, rng, 6, 0.03);
  const auto d = static_cast<std::int64_t>(rng() % static_cast<unsigned>(rank));
  const DType t = ties ? DType::Int64 : DType::Float32;
  Tensor x =
      ties ? randomPoint(s, t, rng, 20.0, 3)
           : (iv ? randomInterval(s, t, rng, rng() % 2 ? 1e-3 : 0.5) : randomPoint(s, t, rng));
  const std::int64_t n = s[static_cast<std::size_t>(d)];
  const int which = static_cast<int>(rng() % 3);
  const std::int64_t dimArg = rng() % 2 ? d : d - rank;
  if (which == 0) {
    const std::int64_t k =
        n == 0 ? 0 : static_cast<std::int64_t>(rng() % static_cast<unsigned>(n + 1));
    return orderCase("aten.topk.default", x,
                     {integer(k), integer(dimArg), flag(rng() % 2 == 0), flag(rng() % 3 != 0)});
  }
  if (which == 1) return orderCase("aten.sort.default", x, {integer(dimArg), flag(rng() % 2 == 0)});
  return orderCase("aten.sort.stable", x, {},
                   {{"stable", flag(rng() % 2 == 0)},
                    {"dim", integer(dimArg)},
                    {"descending", flag(rng() % 2 == 0)}});
}

/// A random argmax / argmin case over a random shape: dim None or a dim, keepdim or not.
OpCase randomArgCase(std::mt19937_64& rng, bool iv, bool ties) {
  const int rank = static_cast<int>(rng() % 4);
  Shape s = randomShape(rank, rng, 6, 0.0);
  for (std::int64_t& e : s) e = std::max<std::int64_t>(e, 1);
  const DType t = ties ? DType::Int64 : DType::Float32;
  Tensor x = iv ? randomInterval(s, t, rng, rng() % 2 ? 1e-3 : 0.5) : randomPoint(s, t, rng);
  if (ties) {  // integers in [0, 4), a third of them uncertain by one when `iv`
    std::vector<double> lo(static_cast<std::size_t>(numel(s))), hi(lo.size());
    for (std::size_t i = 0; i < lo.size(); ++i) {
      lo[i] = static_cast<double>(rng() % 4);
      hi[i] = lo[i] + (iv && rng() % 3 == 0 ? 1 : 0);
    }
    x = iv ? Tensor::interval(s, t, lo, hi) : Tensor::point(s, t, lo);
  }
  OpCase c = orderCase(rng() % 2 ? "aten.argmax.default" : "aten.argmin.default", x, {});
  c.outDtypes = {DType::Int64};
  const bool keepdim = rng() % 2;
  if (rank == 0 || rng() % 3 == 0) {
    c.args.push_back(IrValue{});
  } else {
    const auto d = static_cast<std::int64_t>(rng() % static_cast<unsigned>(rank));
    c.args.push_back(integer(rng() % 2 ? d : d - rank));
  }
  c.args.push_back(flag(keepdim));
  return c;
}

Tensor ints32(std::vector<double> v) { return vec(std::move(v), DType::Int32); }

/// The grouped product by a loop of plain products (binary64), for the four modes.
std::vector<double> groupedByLoop(const Tensor& x, const Tensor& y,
                                  const std::vector<double>& offs) {
  const Shape &xs = x.shape(), &ys = y.shape();
  const auto X = x.values(), Y = y.values();
  std::vector<double> out;
  const auto groupOf = [&](std::int64_t i) {
    std::int64_t g = 0;
    while (g < static_cast<std::int64_t>(offs.size()) && i >= offs[static_cast<std::size_t>(g)])
      ++g;
    return g;
  };
  if (xs.size() == 2 && ys.size() == 3) {
    const std::int64_t M = xs[0], K = xs[1], N = ys[2];
    out.assign(static_cast<std::size_t>(M * N), 0.0);
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t j = 0; j < N; ++j)
        for (std::int64_t k = 0; k < K; ++k)
          out[static_cast<std::size_t>(i * N + j)] +=
              X[static_cast<std::size_t>(i * K + k)] *
              Y[static_cast<std::size_t>((groupOf(i) * K + k) * N + j)];
  } else if (xs.size() == 3 && ys.size() == 2) {
    const std::int64_t M = xs[1], K = xs[2], N = ys[1];
    out.assign(static_cast<std::size_t>(M * N), 0.0);
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t j = 0; j < N; ++j)
        for (std::int64_t k = 0; k < K; ++k)
          out[static_cast<std::size_t>(i * N + j)] +=
              X[static_cast<std::size_t>((groupOf(j) * M + i) * K + k)] *
              Y[static_cast<std::size_t>(k * N + j)];
  } else if (xs.size() == 3 && ys.size() == 3) {  // batched
    const std::int64_t G = xs[0], M = xs[1], K = xs[2], N = ys[2];
    out.assign(static_cast<std::size_t>(G * M * N), 0.0);
    for (std::int64_t g = 0; g < G; ++g)
      for (std::int64_t i = 0; i < M; ++i)
        for (std::int64_t j = 0; j < N; ++j)
          for (std::int64_t k = 0; k < K; ++k)
            out[static_cast<std::size_t>((g * M + i) * N + j)] +=
                X[static_cast<std::size_t>((g * M + i) * K + k)] *
                Y[static_cast<std::size_t>((g * K + k) * N + j)];
  } else {  // 2-D × 2-D
    const std::int64_t M = xs[0], K = xs[1], N = ys[1], G = static_cast<std::int64_t>(offs.size());
    out.assign(static_cast<std::size_t>(G * M * N), 0.0);
    for (std::int64_t k = 0; k < K; ++k) {
      const std::int64_t g = groupOf(k);
      if (g >= G) continue;
      for (std::int64_t i = 0; i < M; ++i)
        for (std::int64_t j = 0; j < N; ++j)
          out[static_cast<std::size_t>((g * M + i) * N + j)] +=
              X[static_cast<std::size_t>(i * K + k)] * Y[static_cast<std::size_t>(k * N + j)];
    }
  }
  return out;
}

/// Random cumulative ends of `groups` groups over `extent` (some groups empty), the last one at
/// the extent when `cover`.
std::vector<double> randomEnds(std::int64_t groups, std::int64_t extent, bool cover,
                               std::mt19937_64& rng) {
  std::vector<double> ends;
  for (std::int64_t g = 0; g < groups; ++g)
    ends.push_back(static_cast<double>(rng() % static_cast<unsigned>(extent + 1)));
  std::sort(ends.begin(), ends.end());
  if (cover && !ends.empty()) ends.back() = static_cast<double>(extent);
  return ends;
}

OpCase groupedCase(std::mt19937_64& rng, int mode, Format f, bool iv) {
  const DType t = dtypeFor(f);
  const auto dim = [&] { return static_cast<std::int64_t>(1 + rng() % 6); };
  const std::int64_t G = 1 + static_cast<std::int64_t>(rng() % 4), M = dim(), K = dim(), N = dim();
  const auto input = [&](const Shape& s) {
    return iv ? randomInterval(s, t, rng, 1e-3, 8.0) : randomPoint(s, t, rng, 8.0);
  };
  OpCase c;
  c.op = "aten._grouped_mm.default";
  c.precision = modelFor(f);
  c.outDtypes = {t};
  c.args = {in(0), in(1), in(2)};
  if (mode == 0) {
    c.inputs = {input({2 * M, K}), input({G, K, N}), ints32(randomEnds(G, 2 * M, true, rng))};
  } else if (mode == 1) {
    c.inputs = {input({G, M, K}), input({K, 2 * N}), ints32(randomEnds(G, 2 * N, true, rng))};
  } else if (mode == 2) {
    const bool cover = rng() % 2 == 0;
    c.inputs = {input({M, 2 * K}), input({2 * K, N}), ints32(randomEnds(G, 2 * K, cover, rng))};
  } else {
    c.inputs = {input({G, M, K}), input({G, K, N})};
    c.args = {in(0), in(1)};
  }
  return c;
}

}  // namespace

class TestSortGroupedOps : public QObject {
  Q_OBJECT

 private slots:
  void torchValues() {
    const Tensor x = vec({3, 1, 4, 1, 5, 9, 2, 6});
    // torch.topk(x, 3) and torch.sort(x, stable=True) (PyTorch 1.13).
    RuleCall top(orderCase("aten.topk.default", x, {integer(3)}));
    QCOMPARE(values(top.point()[0]), (std::vector<double>{9, 6, 5}));
    QCOMPARE(values(top.point()[1]), (std::vector<double>{5, 7, 4}));
    RuleCall sorted(orderCase("aten.sort.stable", x, {}, {{"stable", flag(true)}}));
    QCOMPARE(values(sorted.point()[0]), (std::vector<double>{1, 1, 2, 3, 4, 5, 6, 9}));
    QCOMPARE(values(sorted.point()[1]), (std::vector<double>{1, 3, 6, 0, 2, 4, 7, 5}));
    // NaN sorts above every number: sort([2, nan, 1], descending=True) -> [nan, 2, 1], [1, 0, 2].
    const double nan = std::numeric_limits<double>::quiet_NaN();
    RuleCall desc(orderCase("aten.sort.default", vec({2, nan, 1}), {integer(-1), flag(true)}));
    QVERIFY(std::isnan(desc.point()[0].values()[0]));
    QCOMPARE(values(desc.point()[1]), (std::vector<double>{1, 0, 2}));
    // The stable sort of exact integers has exact indices; the unstable one spans each tie group.
    const Tensor ids = vec({2, 0, 2, 1}, DType::Int64);
    const auto stable =
        RuleCall(orderCase("aten.sort.stable", ids, {}, {{"stable", flag(true)}})).interval()[1];
    const auto unstable = RuleCall(orderCase("aten.sort.default", ids, {})).interval()[1];
    for (std::int64_t j = 0; j < 4; ++j) {
      const double want[] = {1, 3, 0, 2};
      QCOMPARE(stable.at(j).lo, want[j]);
      QCOMPARE(stable.at(j).hi, want[j]);
    }
    QCOMPARE(unstable.at(2).lo, 0.0);  // the two 2s: elements 0 and 2 at positions 2 and 3
    QCOMPARE(unstable.at(2).hi, 2.0);
    QCOMPARE(unstable.at(0).hi, 1.0);
    // topk(sorted=False) (DeepSeek-V3's router): any of the k at any position; the randomized
    // executor returns them in a random order.
    const OpCase uc =
        orderCase("aten.topk.default", x, {integer(3), integer(0), flag(true), flag(false)});
    const auto uv = RuleCall(uc).interval();
    for (std::int64_t j = 0; j < 3; ++j) {
      QCOMPARE(uv[0].at(j).lo, 5.0);
      QCOMPARE(uv[0].at(j).hi, 9.0);
      QCOMPARE(uv[1].at(j).lo, 4.0);
      QCOMPARE(uv[1].at(j).hi, 7.0);
    }
    std::mt19937_64 rng(1);
    bool reordered = false;
    for (int t = 0; t < 20; ++t) reordered |= RuleCall(uc).random(rng)[0].values()[0] != 9.0;
    QVERIFY(reordered);
    // Rank 0: k = 1 only.
    QVERIFY_THROWS_EXCEPTION(
        OpError, RuleCall(orderCase("aten.topk.default", Tensor::scalar(1.0, DType::Float32),
                                    {integer(0)})));
  }

  /// The point topk breaks ties as PyTorch's CPU kernel does (torch 1.13 and 2.15 print these
  /// indices): a router initialised to zero (AFMoE) scores every expert 0.5, and the replay must
  /// route as the recording did. Both the nth_element path and the partial_sort one (k·64 <= n).
  void topkPointBreaksTiesAsPyTorch() {
    const auto idx = [](Tensor x, std::int64_t k, bool largest, bool sorted) {
      return values(RuleCall(orderCase("aten.topk.default", std::move(x),
                                       {integer(k), integer(0), flag(largest), flag(sorted)}))
                        .point()[1]);
    };
    QCOMPARE(idx(vec({0.5, 0.5, 0.5, 0.5}), 2, true, true), (std::vector<double>{2, 3}));
    QCOMPARE(idx(vec({0.5, 0.5, 0.5, 0.5}), 2, true, false), (std::vector<double>{2, 3}));
    QCOMPARE(idx(vec({0.5, 0.5, 0.5, 0.25}), 2, false, true), (std::vector<double>{3, 2}));
    QCOMPARE(idx(vec({0.5, 0.25, 0.5, 0.5, 0.5, 0.5}), 3, true, true),
             (std::vector<double>{3, 5, 4}));
    QCOMPARE(idx(vec({0.75, 0.75, 0.75, 0.25, 0.75, 0.25}), 3, false, true),
             (std::vector<double>{3, 5, 4}));
    std::vector<double> wide(130, 0.5);
    wide[7] = wide[100] = 0.25;
    QCOMPARE(idx(vec(wide), 2, true, true), (std::vector<double>{0, 1}));
    QCOMPARE(idx(vec(wide), 3, false, true), (std::vector<double>{7, 100, 86}));
  }

  void ordersEncloseEveryExecution() {
    std::mt19937_64 rng(20261129);
    for (int trial = 0; trial < 600; ++trial) {
      const bool ties = trial % 3 == 0, iv = trial % 2 == 0;
      const OpCase c = randomOrderCase(rng, iv, ties);
      const EnclosureReport r = checkEnclosure(c, ties ? 30 : 10, rng);
      QVERIFY2(r.escapes == 0, (c.op + ": " + r.firstEscape).c_str());
    }
  }

  void orderAdjointsMatchFiniteDifferences() {
    std::mt19937_64 rng(7);
    for (int trial = 0; trial < 60; ++trial) {
      OpCase c = randomOrderCase(rng, false, false);
      c.inputs[0] = randomPoint(c.inputs[0].shape(), DType::Float64, rng, 4.0);
      const VjpReport r = checkVjp(c, rng);
      QVERIFY2(r.maxRelError < 1e-6, (c.op + " " + r.where).c_str());
    }
  }

  void nearTiesAreInTheLocalError() {
    // x_i + δ_i against the order statistic of x + δ, |δ| <= one storage rounding: the remainder
    // beyond the linearization through the selected element stays within the local error.
    std::mt19937_64 rng(11);
    const PrecisionModel pm = modelFor(std::nullopt);
    int tied = 0;
    for (int trial = 0; trial < 400; ++trial) {
      const std::int64_t n = 2 + static_cast<std::int64_t>(rng() % 6);
      std::vector<double> v(static_cast<std::size_t>(n));
      const double base = 1.0 + static_cast<double>(rng() % 1000) / 1000.0;
      for (double& e : v)  // clustered within a few ulps of one another
        e = static_cast<float>(base + std::ldexp(static_cast<double>(rng() % 5), -23));
      const bool largest = rng() % 2;
      const std::int64_t k = 1 + static_cast<std::int64_t>(rng() % static_cast<unsigned>(n));
      const OpCase c =
          orderCase("aten.topk.default", vec(v), {integer(k), integer(0), flag(largest)});
      RuleCall call(c);
      const auto err = call.localError()[0];
      const auto idx = call.point()[1];
      for (int p = 0; p < 20; ++p) {
        std::vector<double> rho(v.size()), moved(v.size());
        for (std::size_t e = 0; e < v.size(); ++e) {
          rho[e] =
              ops::roundingError(v[e], formatOf(DType::Float32, pm), formatOf(DType::Float32, pm));
          moved[e] = v[e] + rho[e] * (std::uniform_real_distribution<double>(-1, 1)(rng));
        }
        std::vector<double> sortedMoved = moved;
        std::sort(sortedMoved.begin(), sortedMoved.end(),
                  [&](double a, double b) { return largest ? a > b : a < b; });
        for (std::int64_t j = 0; j < k; ++j) {
          const auto i = static_cast<std::size_t>(idx.values()[static_cast<std::size_t>(j)]);
          const double remainder = std::fabs(sortedMoved[static_cast<std::size_t>(j)] - moved[i]);
          QVERIFY2(remainder <= err.values()[static_cast<std::size_t>(j)] * (1 + 1e-12),
                   qPrintable(QStringLiteral("%1 > %2").arg(remainder).arg(err.values()[j])));
          tied += remainder > 0;
        }
      }
    }
    QVERIFY(tied > 100);  // the perturbations do swap elements
    // An unsorted topk leaves its k in nth_element's order (a review's case: torch gives values
    // [2.0000002, 7, 5, 2]): each position's term follows the element it holds.
    const double near2 = static_cast<float>(2.0000002);
    RuleCall unsorted(orderCase("aten.topk.default", vec({near2, 1, 2, 5, 7, 0}),
                                {integer(4), integer(0), flag(true), flag(false)}));
    const Tensor uIdx = unsorted.point()[1], uErr = unsorted.localError()[0];
    for (std::int64_t j = 0; j < 4; ++j) {
      const double e = uIdx.values()[static_cast<std::size_t>(j)];
      const bool tied = e == 0 || e == 2;  // 2.0000002 and 2, one ulp apart
      QVERIFY2(tied == (uErr.values()[static_cast<std::size_t>(j)] > 0),
               qPrintable(QStringLiteral("position %1 holds element %2").arg(j).arg(e)));
    }
    QCOMPARE(uIdx.values()[0], 0.0);  // torch puts 2.0000002 first
    // Well separated values: no term.
    RuleCall far(orderCase("aten.topk.default", vec({1, 2, 4}), {integer(2)}));
    QCOMPARE(values(far.localError()[0]), (std::vector<double>{0, 0}));
  }

  void orderErrors() {
    std::mt19937_64 rng(1);
    QVERIFY_THROWS_EXCEPTION(
        OpError, checkEnclosure(orderCase("aten.topk.default", vec({1, 2}), {integer(3)}), 1, rng));
    QVERIFY_THROWS_EXCEPTION(
        OpError, checkEnclosure(orderCase("aten.sort.default", vec({1, 2}), {integer(2)}), 1, rng));
  }

  /// argmax / argmin (Switch Transformers' and NLLB-MoE's top-1 routers): PyTorch's values (the
  /// first extremum, NaN winning), the hull of the possible positions for intervals, no escape
  /// of the randomized executor, no gradient, errors.
  void argExtrema() {
    const auto arg = [](const char* op, Tensor x, std::vector<IrValue> args = {}) {
      OpCase c = orderCase(op, std::move(x), std::move(args));
      c.outDtypes = {DType::Int64};
      return c;
    };
    const char* amax = "aten.argmax.default";
    const char* amin = "aten.argmin.default";
    // torch.argmax / argmin (PyTorch 1.13 and 2.15 agree).
    const Tensor x = vec({3, 1, 4, 1, 5, 9, 2, 6, 9});
    QCOMPARE(values(RuleCall(arg(amax, x)).point()[0]), (std::vector<double>{5}));
    QCOMPARE(values(RuleCall(arg(amin, x)).point()[0]), (std::vector<double>{1}));
    QVERIFY(RuleCall(arg(amax, x)).point()[0].shape().empty());
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (const char* op : {amax, amin})
      QCOMPARE(values(RuleCall(arg(op, vec({1, nan, 2, nan}))).point()[0]),
               (std::vector<double>{1}));
    const Tensor m = Tensor::point({2, 3}, DType::Float32, {1, 5, 5, 7, 0, 7});
    QCOMPARE(values(RuleCall(arg(amax, m, {integer(1)})).point()[0]), (std::vector<double>{1, 0}));
    QCOMPARE(values(RuleCall(arg(amin, m, {integer(0)})).point()[0]),
             (std::vector<double>{0, 1, 0}));
    const Tensor kept = RuleCall(arg(amax, m, {integer(-1), flag(true)})).point()[0];
    QCOMPARE(kept.shape(), (Shape{2, 1}));
    const Tensor flat = RuleCall(arg(amax, m, {IrValue{}, flag(true)})).point()[0];
    QCOMPARE(flat.shape(), (Shape{1, 1}));
    QCOMPARE(values(flat), (std::vector<double>{3}));
    // Intervals: the positions whose upper end reaches the largest lower end, as a hull.
    const Tensor iv = Tensor::interval({4}, DType::Float32, {0, 2.5, 3, -1}, {1, 4, 3.5, -0.5});
    const Tensor r = RuleCall(arg(amax, iv)).interval()[0];
    QCOMPARE(r.at(0).lo, 1.0);
    QCOMPARE(r.at(0).hi, 2.0);
    const Tensor rmin = RuleCall(arg(amin, iv)).interval()[0];  // certainly the lowest
    QCOMPARE(rmin.at(0).lo, 3.0);
    QCOMPARE(rmin.at(0).hi, 3.0);
    std::mt19937_64 rng(20261130);
    for (int trial = 0; trial < 600; ++trial) {
      const OpCase c = randomArgCase(rng, trial % 2 == 0, trial % 3 == 0);
      const EnclosureReport e = checkEnclosure(c, 10, rng);
      QVERIFY2(e.escapes == 0, (c.op + ": " + e.firstEscape).c_str());
      RuleCall call(c);
      const auto g = call.vjp({Tensor::full(call.point()[0].shape(), DType::Float32, 1.0)})[0];
      for (double v : g ? g->values() : std::span<const double>{}) QCOMPARE(v, 0.0);
      const Tensor err = call.localError()[0];
      for (double v : err.values()) QCOMPARE(v, 0.0);
    }
    QVERIFY_THROWS_EXCEPTION(
        OpError, RuleCall(arg(amax, Tensor::point({2, 0}, DType::Float32, {}), {integer(1)})));
    QVERIFY_THROWS_EXCEPTION(OpError, RuleCall(arg(amin, m, {integer(2)})));
  }

  void histcCounts() {
    const auto histc = [](Tensor x, std::vector<IrValue> args) {
      OpCase c;
      c.op = "aten.histc.default";
      c.args = {in(0)};
      c.args.insert(c.args.end(), args.begin(), args.end());
      c.outDtypes = {x.dtype()};
      c.inputs = {std::move(x)};
      c.precision = modelFor(std::nullopt);
      return c;
    };
    // torch.histc values (PyTorch 1.13): out-of-range elements dropped, the max in the last bin,
    // min == max taking the data's range (widened by 1 when the data are equal).
    QCOMPARE(values(RuleCall(histc(vec({0, 1, 2, 3, 3, 1, -0.5, 3.5, 0.75, 2.25}),
                                   {integer(4), num(0), num(3)}))
                        .point()[0]),
             (std::vector<double>{1, 3, 1, 3}));
    QCOMPARE(values(RuleCall(histc(vec({2, 2, 2}), {integer(3)})).point()[0]),
             (std::vector<double>{0, 3, 0}));
    QCOMPARE(values(RuleCall(histc(vec({1, 5, 2, 9}), {integer(4)})).point()[0]),
             (std::vector<double>{2, 0, 1, 1}));
    // Values one ulp around every edge of 7 bins over [-1.3, 2.9] in fp32: torch.histc counts
    // [3, 2, 4, 2, 3, 3, 5] on PyTorch 2.15 ((x − min)·bins/(max − min) in float, no search of
    // the edges) and [4, 4, 1, 2, 3, 3, 5] on 1.13 ((x − min)/(max − min)·bins); the point is
    // 2.x's, the interval holds both.
    const std::vector<double> nearEdges = {
        -1.3000000715255737,  -1.2999999523162842, -1.2999998331069946,  -0.7000000476837158,
        -0.699999988079071,   -0.6999999284744263, -0.10000003129243851, -0.10000002384185791,
        -0.10000001639127731, 0.49999991059303284, 0.4999999403953552,   0.4999999701976776,
        1.100000023841858,    1.1000001430511475,  1.100000262260437,    1.7000000476837158,
        1.7000001668930054,   1.700000286102295,   2.299999952316284,    2.3000001907348633,
        2.3000004291534424,   2.8999998569488525,  2.9000000953674316,   2.9000003337860107};
    const OpCase edgeCase = histc(vec(nearEdges), {integer(7), num(-1.3), num(2.9)});
    QCOMPARE(values(RuleCall(edgeCase).point()[0]), (std::vector<double>{3, 2, 4, 2, 3, 3, 5}));
    const Tensor edgeIv = RuleCall(edgeCase).interval()[0];
    for (std::int64_t b = 0; b < 7; ++b) {
      const double torch2[] = {3, 2, 4, 2, 3, 3, 5}, torch113[] = {4, 4, 1, 2, 3, 3, 5};
      QVERIFY(edgeIv.at(b).lo <= torch2[b] && torch2[b] <= edgeIv.at(b).hi);
      QVERIFY(edgeIv.at(b).lo <= torch113[b] && torch113[b] <= edgeIv.at(b).hi);
    }
    // 16-bit tensors (PyTorch counts in bf16: 1000 zeros give 512) and a range that collapses in
    // the dtype are refused.
    QVERIFY_THROWS_EXCEPTION(
        OpError, RuleCall(histc(vec({0, 0}, DType::BFloat16), {integer(2), num(0), num(1)})));
    QVERIFY_THROWS_EXCEPTION(OpError,
                             RuleCall(histc(vec({1, 1}), {integer(2), num(1.0), num(1.00000001)})));
    // Uncertain elements: counted in every bin they may reach.
    std::mt19937_64 rng(3);
    for (int trial = 0; trial < 200; ++trial) {
      const Shape s{static_cast<std::int64_t>(rng() % 12)};
      const Tensor x = trial % 2 ? randomInterval(s, DType::Float32, rng, 0.3, 2.0)
                                 : randomPoint(s, DType::Float32, rng, 2.0);
      const EnclosureReport r = checkEnclosure(
          histc(x, {integer(1 + static_cast<std::int64_t>(rng() % 6)), num(-2), num(3)}), 20, rng);
      QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
    }
    const Tensor wide = Tensor::interval({2}, DType::Float32, {0.0, 0.5}, {0.1, 2.5});
    const Tensor c = RuleCall(histc(wide, {integer(3), num(0), num(3)})).interval()[0];
    QCOMPARE(c.at(0).lo, 1.0);  // [0, 0.1] certainly in bin 0
    QCOMPARE(c.at(0).hi, 2.0);
    QCOMPARE(c.at(2).lo, 0.0);  // [0.5, 2.5] reaches all three bins
    QCOMPARE(c.at(2).hi, 1.0);
    // The data's range needs exact data.
    QVERIFY_THROWS_EXCEPTION(OpError, RuleCall(histc(wide, {integer(3)})).interval());
    QVERIFY_THROWS_EXCEPTION(OpError, RuleCall(histc(vec({1}), {integer(0)})));
  }

  void floorDivide() {
    const auto fd = [](Tensor x, IrValue other, std::vector<Tensor> more = {}) {
      return integerCase("aten.floor_divide.default", std::move(x), std::move(other),
                         std::move(more));
    };
    const Tensor x = vec({-7, 7, -8, 0, 9}, DType::Int64);
    // torch: x // 2 and x // -3 (Python's floor division).
    QCOMPARE(values(RuleCall(fd(x, integer(2))).point()[0]),
             (std::vector<double>{-4, 3, -4, 0, 4}));
    QCOMPARE(values(RuleCall(fd(x, integer(-3))).point()[0]),
             (std::vector<double>{2, -3, 2, 0, -3}));
    QCOMPARE(values(RuleCall(fd(x, in(1), {vec({2, -2, 3, 5, -4}, DType::Int64)})).point()[0]),
             (std::vector<double>{-4, -4, -3, 0, -3}));
    // Interval operands: the hull of the corners' floors, checked against every pair inside.
    const Tensor a = Tensor::interval({1}, DType::Int64, {-5}, {6}),
                 b = Tensor::interval({1}, DType::Int64, {2}, {3});
    const Interval q = RuleCall(fd(a, in(1), {b})).interval()[0].at(0);
    QCOMPARE(q.lo, -3.0);
    QCOMPARE(q.hi, 3.0);
    // div with rounding_mode 'trunc' (JetMoE) and 'floor' on integers; none: true division.
    const auto mode = [&](const char* m, IrValue other) {
      OpCase c = fd(x, std::move(other));
      c.op = "aten.div.Tensor_mode";
      IrValue v;
      v.kind = IrValue::Kind::String;
      v.stringValue = m;
      c.kwargs["rounding_mode"] = v;
      return c;
    };
    QCOMPARE(values(RuleCall(mode("trunc", integer(2))).point()[0]),
             (std::vector<double>{-3, 3, -4, 0, 4}));
    QCOMPARE(values(RuleCall(mode("trunc", integer(-3))).point()[0]),
             (std::vector<double>{2, -2, 2, 0, -3}));
    QCOMPARE(values(RuleCall(mode("floor", integer(-3))).point()[0]),
             (std::vector<double>{2, -3, 2, 0, -3}));
    OpCase trueDiv = fd(vec({3, -1}), integer(2));
    trueDiv.op = "aten.div.Tensor_mode";
    QCOMPARE(values(RuleCall(trueDiv).point()[0]), (std::vector<double>{1.5, -0.5}));
    QVERIFY_THROWS_EXCEPTION(OpError, RuleCall(mode("round", integer(2))));
    QVERIFY_THROWS_EXCEPTION(OpError, RuleCall(fd(x, integer(0))));
    QVERIFY_THROWS_EXCEPTION(OpError, RuleCall(fd(vec({1.5}), integer(2))));
    std::mt19937_64 rng(12);
    checkIntegerEnclosures("aten.floor_divide.default", rng, false);
    const Tensor big = Tensor::point({1}, DType::Int64, {-9223372036854775808.0});
    QVERIFY_THROWS_EXCEPTION(OpError, RuleCall(fd(big, integer(-1))));
    const Tensor z = Tensor::interval({1}, DType::Int64, {-1}, {1});
    QVERIFY_THROWS_EXCEPTION(OpError, RuleCall(fd(a, in(1), {z})).interval());
  }

  /// remainder on integers (LongT5's block padding: arange % 4): Python's %, the sign of the
  /// divisor; intervals against every pair inside, a point divisor within one period exactly.
  void integerRemainder() {
    const auto rem = [](Tensor x, IrValue other, std::vector<Tensor> more = {}) {
      const char* op = more.empty() ? "aten.remainder.Scalar" : "aten.remainder.Tensor";
      return integerCase(op, std::move(x), std::move(other), std::move(more));
    };
    const Tensor x = vec({-7, 7, -8, 0, 9}, DType::Int64);
    // torch 1.13 and 2.15: torch.remainder(x, 2), (x, -3), (x, tensor([2, -2, 3, 5, -4])).
    QCOMPARE(values(RuleCall(rem(x, integer(2))).point()[0]), (std::vector<double>{1, 1, 0, 0, 1}));
    QCOMPARE(values(RuleCall(rem(x, integer(-3))).point()[0]),
             (std::vector<double>{-1, -2, -2, 0, 0}));
    QCOMPARE(values(RuleCall(rem(x, in(1), {vec({2, -2, 3, 5, -4}, DType::Int64)})).point()[0]),
             (std::vector<double>{1, -1, 1, 0, -3}));
    const Tensor within = Tensor::interval({1}, DType::Int64, {9}, {11});
    const Interval w = RuleCall(rem(within, integer(4))).interval()[0].at(0);
    QVERIFY(w.lo == 1.0 && w.hi == 3.0);
    const Interval wn = RuleCall(rem(within, integer(-4))).interval()[0].at(0);
    QVERIFY(wn.lo == -3.0 && wn.hi == -1.0);
    const Tensor across = Tensor::interval({1}, DType::Int64, {10}, {13});
    const Interval c = RuleCall(rem(across, integer(4))).interval()[0].at(0);
    QVERIFY(c.lo == 0.0 && c.hi == 3.0);
    std::mt19937_64 rng(13);
    checkIntegerEnclosures("aten.remainder.Tensor", rng, true);
    QVERIFY_THROWS_EXCEPTION(OpError, RuleCall(rem(x, integer(0))));
    QVERIFY_THROWS_EXCEPTION(OpError, RuleCall(rem(vec({1.5}), integer(2))));
    // INT64_MIN % -1 is 0 in PyTorch 2.15 (the quotient alone overflows; a review found the rule
    // refusing it).
    const Tensor big = Tensor::point({2}, DType::Int64, {-9223372036854775808.0, 5});
    QCOMPARE(values(RuleCall(rem(big, integer(-1))).point()[0]), (std::vector<double>{0, 0}));
    const Interval r1 = RuleCall(rem(big, integer(-1))).interval()[0].at(0);
    QVERIFY(r1.lo == 0.0 && r1.hi == 0.0);
  }

  void groupedMatchesALoopOfProducts() {
    std::mt19937_64 rng(5);
    for (int trial = 0; trial < 80; ++trial) {
      const int mode = trial % 4;
      OpCase c = groupedCase(rng, mode, Format::Fp64, false);
      const std::vector<double> offs = mode == 3 ? std::vector<double>{} : values(c.inputs[2]);
      const std::vector<double> want = groupedByLoop(c.inputs[0], c.inputs[1], offs);
      const std::vector<double> got = values(RuleCall(c).point()[0]);
      QCOMPARE(got.size(), want.size());
      for (std::size_t i = 0; i < got.size(); ++i)
        QVERIFY2(std::fabs(got[i] - want[i]) <= 1e-9 * (std::fabs(want[i]) + 1),
                 qPrintable(QStringLiteral("mode %1 element %2").arg(mode).arg(i)));
    }
  }

  void groupedEnclosesEveryExecution() {
    std::mt19937_64 rng(6);
    const Format formats[] = {Format::Fp32, Format::Bf16, Format::Fp64};
    for (int trial = 0; trial < 120; ++trial) {
      const OpCase c = groupedCase(rng, trial % 4, formats[trial % 3], trial % 2 == 0);
      const EnclosureReport r = checkEnclosure(c, 10, rng);
      QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
      if (trial % 2 == 1) {
        const LocalErrorReport l = checkLocalError(c, 10, rng);
        QVERIFY2(l.violations == 0, l.first.c_str());
      }
    }
  }

  void groupedProbabilisticTermPerGroup() {
    // Per group, the GEMM's root-sum-square term (its own inner dimension): at most the worst
    // case, and it holds the executions' errors at λ and their root-mean-square.
    std::mt19937_64 rng(10);
    int checked = 0;
    for (int trial = 0; trial < 24; ++trial) {
      const OpCase c = groupedCase(rng, trial % 4, Format::Fp32, false);
      const RuleCall call(c);
      const std::vector<Tensor> p = call.probabilisticLocalError(), w = call.localError();
      QCOMPARE(p.size(), std::size_t{1});
      for (std::int64_t i = 0; i < p[0].numel(); ++i)
        QVERIFY(p[0].values()[static_cast<std::size_t>(i)] <=
                w[0].values()[static_cast<std::size_t>(i)]);
      const std::string failure = checkProbabilisticTerm(call, p[0].values(), 200, rng);
      QVERIFY2(failure.empty(), failure.c_str());
      checked += p[0].numel() > 0;
    }
    QVERIFY(checked > 12);
  }

  void groupedAdjointsMatchFiniteDifferences() {
    std::mt19937_64 rng(8);
    for (int trial = 0; trial < 40; ++trial) {
      const VjpReport r = checkVjp(groupedCase(rng, trial % 4, Format::Fp64, false), rng);
      QVERIFY2(r.maxRelError < 1e-6, r.where.c_str());
    }
  }

  void groupedErrors() {
    std::mt19937_64 rng(9);
    OpCase c = groupedCase(rng, 0, Format::Fp32, false);
    // Rows past the last offset are left uninitialized by PyTorch: refused.
    std::vector<double> offs = values(c.inputs[2]);
    offs.back() -= 1;
    c.inputs[2] = ints32(offs);
    QVERIFY_THROWS_EXCEPTION(OpError, RuleCall{c});
    // Decreasing offsets, a wrong number of groups, a bias.
    OpCase d = groupedCase(rng, 2, Format::Fp32, false);
    d.inputs[2] = ints32({2, 1});
    QVERIFY_THROWS_EXCEPTION(OpError, RuleCall{d});
    OpCase e = groupedCase(rng, 0, Format::Fp32, false);
    e.inputs[2] = ints32({1, 1, 1, 1, 1, 1});
    QVERIFY_THROWS_EXCEPTION(OpError, RuleCall{e});
    OpCase f = groupedCase(rng, 3, Format::Fp32, false);
    f.kwargs["bias"] = in(0);
    QVERIFY_THROWS_EXCEPTION(OpError, RuleCall{f});
    OpCase b3 = groupedCase(rng, 3, Format::Fp32, false);
    b3.inputs.push_back(ints32({1}));
    b3.args.push_back(in(2));
    QVERIFY_THROWS_EXCEPTION(OpError, RuleCall{b3});
    OpCase k = groupedCase(rng, 0, Format::Fp32, false);  // offs as a keyword: the same values
    OpCase kw = k;
    kw.args.pop_back();
    kw.kwargs["offs"] = in(2);
    QCOMPARE(values(RuleCall(kw).point()[0]), values(RuleCall(k).point()[0]));
    // Inexact offsets.
    OpCase g = groupedCase(rng, 0, Format::Fp32, false);
    std::vector<double> lo = values(g.inputs[2]), hi = lo;
    hi[0] += 1;
    g.inputs[2] = Tensor::interval(g.inputs[2].shape(), DType::Int32, lo, hi);
    QVERIFY_THROWS_EXCEPTION(OpError, RuleCall{g});
  }
};

QTEST_GUILESS_MAIN(TestSortGroupedOps)
#include "test_sort_grouped_ops.moc"
