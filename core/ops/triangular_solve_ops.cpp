// Triangular solves: linalg_solve_triangular(A, B, upper, left=True, unitriangular=True), the
// X of A·X = B for a unit triangular A (Qwen3-Next's gated delta rule solves its UT transform so,
// and its backward solves with Aᵀ).
//
// Contract: row i of X is x_i = b_i − Σ_j a_ij·x_j over the rows j solved before it (j < i for a
// lower A, j > i for an upper one), each such dot product of m terms (b_i, exact as 1·b_i, and
// the m − 1 products) computed in any order and bracketing, with or without FMA, in the
// accumulation format, and stored; the rows after it read the stored x_j. Its error is within
// γ_m·(|b_i| + Σ|a_ij||x_j|) + m·η (Higham 2002, eq. 3.5; the forward-substitution analysis of his
// §8.1 rounds every x_i so). This covers a trsm that substitutes row by row, blocked or not: each
// x_i is b_i minus partial sums that its GEMM updates subtract from the stored right-hand side,
// one of those orders, every addition rounded in the storage format, which is the accumulation
// format here (fp32 or fp64: PyTorch solves no 16-bit triangular system). PyTorch's CPU BLAS do
// (MKL, OpenBLAS, the reference BLAS: a review found no value outside the enclosure on ~1,700
// adversarial systems with MKL 2024.2 and the reference BLAS). Not covered: a trsm that inverts
// its diagonal blocks and multiplies (rocBLAS, MAGMA's batched solves; a review built an fp32
// system with off-diagonals near 500 whose emulated result leaves the enclosure), and cuBLAS,
// whose order is undocumented. The interval rule runs the substitution on enclosures; the local
// error is the distance of the binary64 solution to that enclosure on exact inputs, which
// carries each row's rounding through the later rows as the comparison matrix does (Higham
// 2002, Thm. 8.10). Refused, by name: a non-unit diagonal (trsm divides, or multiplies by a
// rounded reciprocal: not modelled yet), left=False, batch dims that differ (broadcasting),
// operands of two dtypes, 16-bit dtypes, a tf32 matmul model (trsm's GEMM updates would round
// their inputs) and truncating accumulation.
//
// vjp: G_B = A⁻ᵀ·G (the transposed solve), G_A = −G_B·Xᵀ on the strict triangle (the unit
// diagonal and the other triangle are not read).
#include "core/interval/format_names.h"
#include "core/interval/interval.h"
#include "core/interval/precision.h"
#include "core/interval/rounding.h"
#include "core/ops/error_bounds.h"
#include "core/ops/families.h"
#include "core/ops/formats.h"
#include "core/ops/nn_support.h"
#include "core/ops/random_arith.h"
#include "core/ops/registry.h"
#include "core/ops/rule_helpers.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

namespace lossbound {

namespace {

using namespace ops;

/// The geometry of one solve: `batch` systems of n rows and k right-hand sides.
struct Solve {
  std::int64_t batch = 1, n = 0, k = 0;
  bool upper = false;
  /// Offset of A's element (b, i, j) and of B's or X's (b, i, c), row-major.
  std::size_t a(std::int64_t b, std::int64_t i, std::int64_t j) const {
    return static_cast<std::size_t>((b * n + i) * n + j);
  }
  std::size_t x(std::int64_t b, std::int64_t i, std::int64_t c) const {
    return static_cast<std::size_t>((b * n + i) * k + c);
  }
  /// The p-th row in solving order, and whether row j is solved before row i.
  std::int64_t row(std::int64_t p) const { return upper ? n - 1 - p : p; }
  bool before(std::int64_t j, std::int64_t i) const { return upper ? j > i : j < i; }
  /// Calls f(b, c, i) for every system b, right-hand side c and row i, in solving order (the
  /// opposite order for the transposed system).
  template <typename F>
  void forEachRow(F&& f, bool transposed = false) const {
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t c = 0; c < k; ++c)
        for (std::int64_t p = 0; p < n; ++p) f(b, c, row(transposed ? n - 1 - p : p));
  }
};

/// linalg_solve_triangular with a unit diagonal (the file comment's contract).
class TriangularSolveRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const Solve s = geometry(a);
    return {solvePoint(s, a.tensor(0).values(), a.tensor(1).values(), a.tensor(1).shape(),
                       a.outSpec().dtype, false)};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const Solve s = geometry(a);
    const DType t = a.outSpec().dtype;
    const Format store = formatOf(a, ctx), acc = accumulationFormat(ctx.precision, t);
    const Tensor A = roundOutwardTensor(a.tensor(0), store);
    const Tensor B = roundOutwardTensor(a.tensor(1), store);
    const double u = unitRoundoff(acc), eta = smallestSubnormal(acc);
    const double maxAcc = largestFinite(acc);
    std::vector<double> lo(static_cast<std::size_t>(s.batch * s.n * s.k)), hi(lo.size());
    s.forEachRow([&](std::int64_t b, std::int64_t c, std::int64_t i) {
      SumEnclosure sum{sanitize(B.at(static_cast<std::int64_t>(s.x(b, i, c)))), 0.0};
      sum.absSumUp = std::fmax(std::fabs(sum.sum.lo), std::fabs(sum.sum.hi));
      std::int64_t m = 1;
      for (std::int64_t j = 0; j < s.n; ++j) {
        if (!s.before(j, i)) continue;
        const Interval xj{lo[s.x(b, j, c)], hi[s.x(b, j, c)]};
        accumulate(sum, neg(mul(sanitize(A.at(static_cast<std::int64_t>(s.a(b, i, j)))), xj)));
        ++m;
      }
      Interval r = entireInterval();
      if (m == 1) {  // no operation: x_i is b_i
        r = sum.sum;
      } else if (sum.absSumUp <= maxAcc) {
        const double err = dotErrorBound(m, sum.absSumUp, u, eta);
        r = roundOutward({sub_down(sum.sum.lo, err), add_up(sum.sum.hi, err)}, store);
      }
      lo[s.x(b, i, c)] = r.lo;
      hi[s.x(b, i, c)] = r.hi;
    });
    return {Tensor::interval(a.tensor(1).shape(), t, std::move(lo), std::move(hi))};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const Solve s = geometry(a);
    const DType t = a.outSpec().dtype;
    const Format store = formatOf(a, ctx), acc = accumulationFormat(ctx.precision, t);
    const Tensor A = roundNearestTensor(a.tensor(0), store);
    const Tensor B = roundNearestTensor(a.tensor(1), store);
    const auto av = A.values(), bv = B.values();
    std::vector<double> x(bv.size()), coef, val, scratch;
    s.forEachRow([&](std::int64_t b, std::int64_t c, std::int64_t i) {
      coef.assign(1, 1.0);  // b_i, then −a_ij·x_j for the rows solved before
      val.assign(1, bv[s.x(b, i, c)]);
      for (std::int64_t j = 0; j < s.n; ++j)
        if (s.before(j, i)) {
          coef.push_back(-av[s.a(b, i, j)]);
          val.push_back(x[s.x(b, j, c)]);
        }
      x[s.x(b, i, c)] = roundNearest(randomDot(coef, val, acc, *ctx.rng, scratch), store);
    });
    return {Tensor::point(a.tensor(1).shape(), t, std::move(x))};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor> outs,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Solve s = geometry(a);
    const auto av = a.tensor(0).values(), xv = outs[0].values();
    // G_B = A⁻ᵀ·G: the transposed system, solved in the opposite order.
    const Tensor gB =
        solvePoint(s, av, g[0].values(), a.tensor(1).shape(), a.tensor(1).dtype(), true);
    const auto gb = gB.values();
    std::vector<double> gA(av.size(), 0.0);
    for (std::int64_t b = 0; b < s.batch; ++b)
      for (std::int64_t i = 0; i < s.n; ++i)
        for (std::int64_t j = 0; j < s.n; ++j) {
          if (!s.before(j, i)) continue;
          double v = 0.0;
          for (std::int64_t c = 0; c < s.k; ++c) v -= gb[s.x(b, i, c)] * xv[s.x(b, j, c)];
          gA[s.a(b, i, j)] = v;
        }
    return {Tensor::point(a.tensor(0).shape(), a.tensor(0).dtype(), std::move(gA)), gB};
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    return nn::localErrorVia(*this, a, o, ctx);
  }

 private:
  /// Reads and checks the arguments (the refusals of the file comment).
  static Solve geometry(const OpArgs& a) {
    const Tensor &A = a.tensor(0), &B = a.tensor(1);
    if (!a.boolArg(4, "unitriangular", false))
      a.fail(
          "linalg_solve_triangular with a non-unit diagonal is not supported yet (trsm's "
          "division by the diagonal is not modelled); only unitriangular=True is");
    if (!a.boolArg(3, "left", true))
      a.fail("linalg_solve_triangular with left=False (X·A = B) is not supported; only left=True");
    const Shape &sa = A.shape(), &sb = B.shape();
    if (sa.size() < 2 || sb.size() < 2 || sa[sa.size() - 1] != sa[sa.size() - 2])
      a.fail(
          "linalg_solve_triangular expects A of shape (*, n, n) and B of shape (*, n, k), found " +
          shapeString(sa) + " and " + shapeString(sb));
    if (sa.size() != sb.size() || !std::equal(sa.begin(), sa.end() - 2, sb.begin()) ||
        sb[sb.size() - 2] != sa.back())
      a.fail("linalg_solve_triangular: A " + shapeString(sa) + " and B " + shapeString(sb) +
             " must have the same batch dims and B n rows (broadcasting is not supported)");
    if (A.dtype() != B.dtype())
      a.fail("linalg_solve_triangular: A is " + std::string(dtypeName(A.dtype())) + " and B " +
             std::string(dtypeName(B.dtype())) + " (PyTorch requires one dtype)");
    for (DType t : {A.dtype(), B.dtype(), a.outSpec().dtype})
      if (t != DType::Float32 && t != DType::Float64)
        a.fail("linalg_solve_triangular of " + std::string(dtypeName(t)) +
               " is not supported (float32 and float64 only, as PyTorch)");
    Solve s;
    s.upper = a.boolArg(2, "upper");
    s.n = sa.back();
    s.k = sb.back();
    s.batch = numel(Shape(sa.begin(), sa.end() - 2));
    return s;
  }

  /// The storage format, refusing the models trsm is not modelled under.
  static Format formatOf(const OpArgs& a, const OpContext& ctx) {
    const DType t = a.outSpec().dtype;
    const Format store = outFormat(a, ctx);
    if (store != Format::Fp32 && store != Format::Fp64)
      a.fail("linalg_solve_triangular in " + std::string(formatName(store)) +
             " is not modelled (PyTorch solves in float32 or float64)");
    if (ctx.precision.matmulInputFor(t) != store)
      a.fail(
          "linalg_solve_triangular under a tf32 matmul model is not modelled (trsm's GEMM "
          "updates would round their inputs to tf32)");
    if (ctx.precision.truncatingAccumulation)
      a.fail("linalg_solve_triangular with truncating accumulation is not modelled");
    return store;
  }

  /// The binary64 solution of A·X = B (transposed: Aᵀ·X = B, solved in the opposite order).
  static Tensor solvePoint(const Solve& s, std::span<const double> av, std::span<const double> bv,
                           const Shape& shape, DType t, bool transposed) {
    std::vector<double> x(bv.size());
    s.forEachRow(
        [&](std::int64_t b, std::int64_t c, std::int64_t i) {
          double v = bv[s.x(b, i, c)];
          for (std::int64_t j = 0; j < s.n; ++j) {
            if (transposed ? !s.before(i, j) : !s.before(j, i)) continue;
            v -= (transposed ? av[s.a(b, j, i)] : av[s.a(b, i, j)]) * x[s.x(b, j, c)];
          }
          x[s.x(b, i, c)] = v;
        },
        transposed);
    return Tensor::point(shape, t, std::move(x));
  }
};

}  // namespace

void registerTriangularSolveOps(OpRegistry& r) {
  r.add("aten.linalg_solve_triangular.default", std::make_shared<const TriangularSolveRule>());
}

}  // namespace lossbound
