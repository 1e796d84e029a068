// Sorting and counting: topk, sort (.default, .stable), histc.
//
// topk(self, k, dim=-1, largest=True, sorted=True) and sort(self, dim=-1, descending=False),
// sort.stable(self, *, stable, dim=-1, descending=False) -> (values, indices): selections, no
// arithmetic. Contract: the values output encloses the j-th order statistic along dim of every
// input in the enclosures (it is monotone in each input: [j-th of the lows, j-th of the highs]);
// an index output encloses every element that can stand at position j. PyTorch's kernels order
// NaN above every number and leave the order of equal values unspecified (sort.stable and
// stable=True keep the input order). Element e can stand at positions [cb(e), pb(e)]: cb counts
// the elements certainly before it (lo_m > hi_e), pb those possibly before it (hi_m >= lo_e).
// point: ties by index. random: ties in a random order unless the sort is stable, so the
// executor explores what the kernels leave open. topk with sorted=False returns them sorted (one
// order the kernels may return).
// vjp: the values' adjoint goes to the selected elements (PyTorch's backward, a scatter).
// localError (values): the selection is exact, but where x_i and x_m lie within their roundings
// of each other, inputs x + δ (|δ| <= ρ, one storage rounding of each input: u_s|x|(1 + u_s) +
// η_s/2) may swap them, and position j then holds x_m + δ_m instead of x_i + δ_i. The remainder
// beyond the linearization through i is at most max over m != i of (ρ_i + ρ_m − |x_i − x_m|)₊
// (the order statistic's argument of max_pool_ops.cpp). Larger upstream errors that reorder the
// elements, and the indices (integers, no adjoint: a swap reroutes what they select), are
// outside the first-order model; the interval method covers both.
//
// histc(self, bins=100, min=0, max=0): counts of the elements in bins equal-width bins between
// min and max (both 0, or equal: the data's extrema, widened by 1 when those are equal). The CPU
// kernel searches the edges linspace(min, max, bins + 1) in the dtype (the last edge belongs to
// the last bin); the CUDA kernel computes (int)((x − min)·bins / (max − min)) in the dtype.
// Contract: count[b] is enclosed between the elements certainly in bin b under both kernels and
// those possibly in it. Counts are exact (integers below 2^24 in fp32); no adjoint, no local
// error (moving an element to another bin is outside the first-order model).
#include "core/interval/rounding.h"
#include "core/ops/error_bounds.h"
#include "core/ops/families.h"
#include "core/ops/formats.h"
#include "core/ops/registry.h"
#include "core/ops/rule_helpers.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <set>
#include <string>

namespace lossbound {

namespace {

using namespace ops;

/// The layout of a tensor around one dim: pre·n·post elements, element (p, j, q) at
/// (p·n + j)·post + q.
struct RowLayout {
  std::int64_t pre = 1, n = 1, post = 1;
  std::int64_t at(std::int64_t row, std::int64_t j) const {
    return ((row / post) * n + j) * post + row % post;
  }
  std::int64_t rows() const { return pre * post; }
};

RowLayout rowLayout(const OpArgs& a, const Shape& s, std::int64_t dim) {
  RowLayout l;
  if (s.empty()) {
    if (dim != 0 && dim != -1)
      a.fail("dim " + std::to_string(dim) + " out of range for a 0-d tensor");
    return l;
  }
  const int d = [&] {
    try {
      return normalizeDim(dim, s.size());
    } catch (const std::out_of_range& e) {
      a.fail(e.what());
    }
  }();
  for (int i = 0; i < d; ++i) l.pre *= s[static_cast<std::size_t>(i)];
  l.n = s[static_cast<std::size_t>(d)];
  for (std::size_t i = static_cast<std::size_t>(d) + 1; i < s.size(); ++i) l.post *= s[i];
  return l;
}

/// What one sort or topk node asks for.
struct OrderQuery {
  std::int64_t k = 0;    // positions returned
  bool largest = false;  // descending
  bool stable = false;   // ties keep the input order
  RowLayout layout;
  Shape outShape;
};

enum class OrderKind { Topk, Sort, SortStable };

/// Returns true when a comes before b in the output order (NaN above every number).
bool before(double a, double b, bool largest) {
  if (std::isnan(a) || std::isnan(b))
    return largest ? std::isnan(a) && !std::isnan(b) : std::isnan(b) && !std::isnan(a);
  return largest ? a > b : a < b;
}

/// sort, sort.stable, topk: order statistics along a dim (the file comment's contract).
class OrderRule final : public OpRule {
 public:
  explicit OrderRule(OrderKind kind) : mKind(kind) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    return select(a, nullptr);
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    return select(a, query(a).stable ? nullptr : ctx.rng);
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext&) const override {
    const OrderQuery q = query(a);
    const Tensor& x = a.tensor(0);
    const RowLayout& l = q.layout;
    const auto total = static_cast<std::size_t>(l.rows() * q.k);
    std::vector<double> vlo(total), vhi(total), ilo(total), ihi(total);
    const auto n = static_cast<std::size_t>(l.n);
    std::vector<double> lo(n), hi(n);
    for (std::int64_t row = 0; row < l.rows(); ++row) {
      bool points = true, unknown = false;
      for (std::size_t j = 0; j < n; ++j) {
        const Interval e = x.at(l.at(row, static_cast<std::int64_t>(j)));
        lo[j] = e.lo;
        hi[j] = e.hi;
        points = points && e.lo == e.hi;
        unknown = unknown || std::isnan(e.lo) || std::isnan(e.hi);
      }
      const auto out = [&](std::int64_t j) {
        return static_cast<std::size_t>((row / l.post * q.k + j) * l.post + row % l.post);
      };
      if (unknown) {  // a NaN endpoint: anything
        for (std::int64_t j = 0; j < q.k; ++j) {
          vlo[out(j)] = -std::numeric_limits<double>::infinity();
          vhi[out(j)] = std::numeric_limits<double>::infinity();
          ilo[out(j)] = 0;
          ihi[out(j)] = static_cast<double>(n - 1);
        }
        continue;
      }
      // Values: the j-th order statistic of the lows and of the highs.
      std::vector<double> slo = lo, shi = hi;
      const auto cmp = [&](double u, double v) { return before(u, v, q.largest); };
      std::sort(slo.begin(), slo.end(), cmp);
      std::sort(shi.begin(), shi.end(), cmp);
      for (std::int64_t j = 0; j < q.k; ++j) {
        const auto js = static_cast<std::size_t>(j);
        vlo[out(j)] = slo[js];
        vhi[out(j)] = shi[js];
      }
      if (points && q.stable) {  // one order: exact indices
        const std::vector<std::int64_t> ord = pointOrder(lo, q, nullptr);
        for (std::int64_t j = 0; j < q.k; ++j)
          ilo[out(j)] = ihi[out(j)] = static_cast<double>(ord[static_cast<std::size_t>(j)]);
        continue;
      }
      // Indices: element e stands at positions [cb(e), pb(e)]; sweep the positions keeping the
      // elements that can stand there. In "key" order: larger key first.
      std::vector<double> klo(n), khi(n);
      for (std::size_t e = 0; e < n; ++e) {
        klo[e] = q.largest ? lo[e] : -hi[e];
        khi[e] = q.largest ? hi[e] : -lo[e];
      }
      std::vector<double> sortedLo = klo, sortedHi = khi;
      std::sort(sortedLo.begin(), sortedLo.end());
      std::sort(sortedHi.begin(), sortedHi.end());
      std::vector<std::vector<std::int64_t>> starts(static_cast<std::size_t>(q.k)),
          ends(static_cast<std::size_t>(q.k));
      for (std::size_t e = 0; e < n; ++e) {
        const auto cb = static_cast<std::int64_t>(
            sortedLo.end() - std::upper_bound(sortedLo.begin(), sortedLo.end(), khi[e]));
        const auto pb = static_cast<std::int64_t>(
            sortedHi.end() - std::lower_bound(sortedHi.begin(), sortedHi.end(), klo[e]) - 1);
        if (cb >= q.k) continue;
        starts[static_cast<std::size_t>(cb)].push_back(static_cast<std::int64_t>(e));
        if (pb + 1 < q.k)
          ends[static_cast<std::size_t>(pb + 1)].push_back(static_cast<std::int64_t>(e));
      }
      std::multiset<std::int64_t> live;
      for (std::int64_t j = 0; j < q.k; ++j) {
        for (std::int64_t e : ends[static_cast<std::size_t>(j)]) live.erase(live.find(e));
        for (std::int64_t e : starts[static_cast<std::size_t>(j)]) live.insert(e);
        // The element at position j of any one realization is live, so live is never empty.
        if (live.empty()) a.fail("sort: no candidate for a position (internal error)");
        ilo[out(j)] = static_cast<double>(*live.begin());
        ihi[out(j)] = static_cast<double>(*live.rbegin());
      }
    }
    return {Tensor::interval(q.outShape, a.outSpec(0).dtype, std::move(vlo), std::move(vhi)),
            Tensor::interval(q.outShape, DType::Int64, std::move(ilo), std::move(ihi))};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor> outs,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    if (!isFloating(x.dtype())) return std::vector<std::optional<Tensor>>{std::nullopt};
    const OrderQuery q = query(a);
    std::vector<double> gx(static_cast<std::size_t>(x.numel()), 0.0);
    for (std::int64_t row = 0; row < q.layout.rows(); ++row)
      for (std::int64_t j = 0; j < q.k; ++j) {
        const auto o = static_cast<std::size_t>((row / q.layout.post * q.k + j) * q.layout.post +
                                                row % q.layout.post);
        const auto e = static_cast<std::int64_t>(outs[1].values()[o]);
        gx[static_cast<std::size_t>(q.layout.at(row, e))] += g[0].values()[o];
      }
    return {Tensor::point(x.shape(), x.dtype(), std::move(gx))};
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> outs,
                                 OpContext& ctx) const override {
    const Tensor& x = a.tensor(0);
    if (!isFloating(x.dtype())) return zeroLocalError(outs);
    const OrderQuery q = query(a);
    const RowLayout& l = q.layout;
    const Format sx = ctx.precision.storageFor(x.dtype());
    std::vector<double> err(static_cast<std::size_t>(outs[0].numel()), 0.0),
        row(static_cast<std::size_t>(l.n)), rho(row.size());
    const auto xv = x.values();
    for (std::int64_t r = 0; r < l.rows(); ++r) {
      double rhoMax = 0;
      for (std::int64_t j = 0; j < l.n; ++j) {
        const auto js = static_cast<std::size_t>(j);
        row[js] = xv[static_cast<std::size_t>(l.at(r, j))];
        rho[js] = std::isfinite(row[js]) ? roundingError(row[js], sx, sx) : 0.0;
        rhoMax = std::fmax(rhoMax, rho[js]);
      }
      // The full order: position j of the output is position j here, and the elements within
      // rounding of it are its neighbours in this order.
      const std::vector<std::int64_t> ord = pointOrder(row, q, nullptr);
      for (std::int64_t j = 0; j < q.k; ++j) {
        const auto i = static_cast<std::size_t>(ord[static_cast<std::size_t>(j)]);
        const double xi = row[i];
        if (!std::isfinite(xi)) continue;
        double tie = 0;
        const double reach = add_up(rho[i], rhoMax);
        for (int dir : {-1, 1})
          for (std::int64_t p = j + dir; p >= 0 && p < l.n; p += dir) {
            const double xm = row[static_cast<std::size_t>(ord[static_cast<std::size_t>(p)])];
            if (!std::isfinite(xm)) break;
            const double gapDown = sub_down(std::fmax(xi, xm), std::fmin(xi, xm));
            if (gapDown > reach) break;  // farther along the order, farther in value
            const double rhoM = rho[static_cast<std::size_t>(ord[static_cast<std::size_t>(p)])];
            const double slack = sub_up(add_up(rho[i], rhoM), gapDown);
            tie = std::fmax(tie, slack);
          }
        err[static_cast<std::size_t>((r / l.post * q.k + j) * l.post + r % l.post)] = tie;
      }
    }
    return {Tensor::point(outs[0].shape(), outs[0].dtype(), std::move(err)),
            Tensor::full(outs[1].shape(), outs[1].dtype(), 0.0)};
  }

 private:
  OrderQuery query(const OpArgs& a) const {
    const Tensor& x = a.tensor(0);
    OrderQuery q;
    std::int64_t dim = -1;
    switch (mKind) {
      case OrderKind::Topk:
        dim = a.intArg(2, "dim", -1);
        q.largest = a.boolArg(3, "largest", true);
        break;
      case OrderKind::Sort:
        dim = a.intArg(1, "dim", -1);
        q.largest = a.boolArg(2, "descending", false);
        break;
      case OrderKind::SortStable: {
        dim = a.intArg(99, "dim", -1);
        q.largest = a.boolArg(99, "descending", false);
        const IrValue* s = a.kwarg("stable");
        q.stable = s && s->kind != IrValue::Kind::None && a.boolArg(99, "stable");
        break;
      }
    }
    q.layout = rowLayout(a, x.shape(), dim);
    q.k = q.layout.n;
    if (mKind == OrderKind::Topk) {
      q.k = a.intArg(1, "k");
      if (q.k < 0 || q.k > q.layout.n)
        a.fail("topk: k = " + std::to_string(q.k) + " is out of range for a dimension of size " +
               std::to_string(q.layout.n));
    }
    q.outShape = x.shape();
    if (!x.shape().empty()) {
      const int d = normalizeDim(dim, x.shape().size());
      q.outShape[static_cast<std::size_t>(d)] = q.k;
    }
    return q;
  }

  /// Returns the positions of one row in output order: ties by index, or in a random order
  /// when rng is given.
  static std::vector<std::int64_t> pointOrder(const std::vector<double>& row, const OrderQuery& q,
                                              std::mt19937_64* rng) {
    std::vector<std::int64_t> ord(row.size());
    std::iota(ord.begin(), ord.end(), 0);
    if (rng) std::shuffle(ord.begin(), ord.end(), *rng);
    std::stable_sort(ord.begin(), ord.end(), [&](std::int64_t i, std::int64_t j) {
      return before(row[static_cast<std::size_t>(i)], row[static_cast<std::size_t>(j)], q.largest);
    });
    return ord;
  }

  std::vector<Tensor> select(const OpArgs& a, std::mt19937_64* rng) const {
    const OrderQuery q = query(a);
    const Tensor& x = a.tensor(0);
    const RowLayout& l = q.layout;
    const auto total = static_cast<std::size_t>(l.rows() * q.k);
    std::vector<double> v(total), idx(total), row(static_cast<std::size_t>(l.n));
    const auto xv = x.values();
    for (std::int64_t r = 0; r < l.rows(); ++r) {
      for (std::int64_t j = 0; j < l.n; ++j)
        row[static_cast<std::size_t>(j)] = xv[static_cast<std::size_t>(l.at(r, j))];
      const std::vector<std::int64_t> ord = pointOrder(row, q, rng);
      for (std::int64_t j = 0; j < q.k; ++j) {
        const auto o = static_cast<std::size_t>((r / l.post * q.k + j) * l.post + r % l.post);
        const auto e = ord[static_cast<std::size_t>(j)];
        v[o] = row[static_cast<std::size_t>(e)];
        idx[o] = static_cast<double>(e);
      }
    }
    return {Tensor::point(q.outShape, a.outSpec(0).dtype, std::move(v)),
            Tensor::point(q.outShape, DType::Int64, std::move(idx))};
  }

  OrderKind mKind;
};

/// histc: counts per bin (the file comment's contract).
class HistcRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext& ctx) const override {
    return count(a, ctx, false);
  }
  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    return count(a, ctx, true);
  }
  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    return count(a, ctx, false);
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor>, OpContext&) const override {
    return std::vector<std::optional<Tensor>>(a.tensorInputs().size());
  }

  std::vector<Tensor> localError(const OpArgs&, std::span<const Tensor> o,
                                 OpContext&) const override {
    return zeroLocalError(o);
  }

 private:
  static std::vector<Tensor> count(const OpArgs& a, const OpContext& ctx, bool intervals) {
    const Tensor& x = a.tensor(0);
    const std::int64_t bins = a.intArg(1, "bins", 100);
    if (bins <= 0) a.fail("histc: bins must be positive, found " + std::to_string(bins));
    double mn = a.numberArg(2, "min", 0.0), mx = a.numberArg(3, "max", 0.0);
    if (mn > mx) a.fail("histc: min " + std::to_string(mn) + " is above max " + std::to_string(mx));
    // The format the kernels compute in: the dtype (integers on CUDA: binary64 covers them).
    const Format f = ctx.precision.storageFor(x.dtype());
    const auto lo = x.lo(), hi = x.hi();
    if (mn == mx) {  // the data's extrema
      if (x.numel() > 0) {
        mn = std::numeric_limits<double>::infinity();
        mx = -mn;
        for (std::size_t i = 0; i < lo.size(); ++i) {
          if (lo[i] != hi[i])
            a.fail("histc: min == max takes the range from the data, whose element " +
                   std::to_string(i) + " is not exactly known ([" + std::to_string(lo[i]) + ", " +
                   std::to_string(hi[i]) + "]); give min and max");
          mn = std::fmin(mn, lo[i]);
          mx = std::fmax(mx, lo[i]);
        }
      }
      if (mn == mx) {
        mn -= 1;
        mx += 1;
      }
    }
    mn = roundNearest(mn, f);
    mx = roundNearest(mx, f);
    if (!std::isfinite(mn) || !std::isfinite(mx))
      a.fail("histc: the range [" + std::to_string(mn) + ", " + std::to_string(mx) +
             "] is not finite");
    // linspace(min, max, bins + 1) in the format: from the start below the middle, from the end
    // above it (PyTorch's linspace kernel).
    std::vector<double> edges(static_cast<std::size_t>(bins + 1));
    const double step = roundNearest((mx - mn) / static_cast<double>(bins), f);
    const std::int64_t half = (bins + 1) / 2;
    for (std::int64_t i = 0; i <= bins; ++i)
      edges[static_cast<std::size_t>(i)] =
          i < half ? roundNearest(mn + roundNearest(step * static_cast<double>(i), f), f)
                   : roundNearest(mx - roundNearest(step * static_cast<double>(bins - i), f), f);
    // Bin of a value under the CPU kernel (edge search) and the CUDA kernel; -1: dropped.
    const auto cpuBin = [&](double v) -> std::int64_t {
      if (!(v >= edges.front() && v <= edges.back())) return -1;
      const auto it = std::upper_bound(edges.begin(), edges.end(), v);
      return std::min<std::int64_t>(static_cast<std::int64_t>(it - edges.begin()) - 1, bins - 1);
    };
    const auto cudaBin = [&](double v) -> std::int64_t {
      if (!(v >= mn && v <= mx)) return -1;
      const double t =
          roundNearest(roundNearest(roundNearest(v - mn, f) * static_cast<double>(bins), f) /
                           roundNearest(mx - mn, f),
                       f);
      return std::clamp<std::int64_t>(static_cast<std::int64_t>(t), 0, bins - 1);
    };
    std::vector<double> cLo(static_cast<std::size_t>(bins), 0.0), cHi(cLo);
    for (std::size_t i = 0; i < lo.size(); ++i) {
      if (!intervals) {
        const std::int64_t b = cpuBin(lo[i]);
        if (b >= 0) cLo[static_cast<std::size_t>(b)] += 1;
        continue;
      }
      if (std::isnan(lo[i]) || std::isnan(hi[i])) {
        for (double& c : cHi) c += 1;
        continue;
      }
      // Both kernels' bins are monotone in the value: the candidates span the bins of the ends
      // of the part of [lo, hi] inside [min, max].
      if (hi[i] < mn || lo[i] > mx) continue;  // dropped by both kernels
      const double a0 = std::fmax(lo[i], mn), a1 = std::fmin(hi[i], mx);
      const std::int64_t first = std::min(cpuBin(a0), cudaBin(a0)),
                         last = std::max(cpuBin(a1), cudaBin(a1));
      if (first == last && lo[i] >= mn && hi[i] <= mx) cLo[static_cast<std::size_t>(first)] += 1;
      for (std::int64_t b = first; b <= last; ++b) cHi[static_cast<std::size_t>(b)] += 1;
    }
    const Shape s{bins};
    if (!intervals) return {Tensor::point(s, a.outSpec().dtype, std::move(cLo))};
    return {Tensor::interval(s, a.outSpec().dtype, std::move(cLo), std::move(cHi))};
  }
};

}  // namespace

void registerSortOps(OpRegistry& r) {
  r.add("aten.topk.default", std::make_shared<const OrderRule>(OrderKind::Topk));
  r.add("aten.sort.default", std::make_shared<const OrderRule>(OrderKind::Sort));
  r.add("aten.sort.stable", std::make_shared<const OrderRule>(OrderKind::SortStable));
  r.add("aten.histc.default", std::make_shared<const HistcRule>());
}

}  // namespace lossbound
