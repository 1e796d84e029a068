// Sorting and counting: topk, sort (.default, .stable), histc, argmax, argmin.
//
// topk(self, k, dim=-1, largest=True, sorted=True) and sort(self, dim=-1, descending=False),
// sort.stable(self, *, stable, dim=-1, descending=False) -> (values, indices): selections, no
// arithmetic. Contract: the values output encloses the j-th order statistic along dim of every
// input in the enclosures (it is monotone in each input: [j-th of the lows, j-th of the highs]);
// an index output encloses every element that can stand at position j. PyTorch's kernels order
// NaN above every number and leave the order of equal values unspecified (sort.stable and
// stable=True keep the input order). Element e can stand at positions [cb(e), pb(e)]: cb counts
// the elements certainly before it (lo_m > hi_e), pb those possibly before it (hi_m >= lo_e).
// A row of points (NaN included) has exact values, and each position the indices of its group of
// equal values (one index when the sort is stable). topk(sorted=False) returns the k in an order
// the kernels leave open: every position encloses any of them. point: sorted, ties by index (topk:
// below). random: ties, and the k of an unsorted topk, in a random order, so the executor explores
// what the kernels leave open. point of topk: ties as PyTorch's CPU kernel breaks them (its partial
// sort or nth_element; cpuTopkOrder), so that a row of ties routes as a CPU recording did.
// vjp: the values' adjoint goes to the selected elements (PyTorch's backward, a scatter).
// localError (values): the selection is exact, but where x_i and x_m lie within their roundings
// of each other, inputs x + δ (|δ| <= ρ, one storage rounding of each input: u_s|x|(1 + u_s) +
// η_s/2) may swap them, and position j then holds x_m + δ_m instead of x_i + δ_i. The remainder
// beyond the linearization through i is at most max over m != i of (ρ_i + ρ_m − |x_i − x_m|)₊
// (the order statistic's argument of max_pool_ops.cpp). Larger upstream errors that reorder the
// elements, and the indices (integers, no adjoint: a swap reroutes what they select), are
// outside the first-order model; the interval method covers both.
//
// argmax(self, dim=None, keepdim=False), argmin: the position of the first extremum along dim
// (over the flattened tensor when dim is None), NaN winning over every number (PyTorch's reductions
// keep the lower index on ties and propagate NaN, on the CPU and on CUDA alike). Contract: the
// index output encloses every position that can hold the first extremum for inputs in the
// enclosures: a row of points (NaN included) has the exact index; otherwise element e can hold
// it only when its key reaches the largest certain lower key, hi_e >= max_m lo_m (keys negated
// for argmin), and the result is the hull of those positions (the whole row when an endpoint is
// NaN). No adjoint and no local error: an upstream rounding that moves the extremum to another
// element is outside the first-order model (as topk's indices); the interval method covers it.
// Mixture-of-experts top-1 routing (Switch Transformers, NLLB-MoE).
//
// histc(self, bins=100, min=0, max=0): counts of the elements in bins equal-width bins between
// min and max (both 0, or equal: the data's extrema, widened by 1 when those are equal). The
// kernels take the bin as the linear position computed in the dtype and truncated (no search of
// the edges, so values next to an edge land where the rounded division puts them), the maximum
// in the last bin: (x − min)·bins/(max − min) on PyTorch 2.x's CPU and on CUDA (point), and
// (x − min)/(max − min)·bins on PyTorch 1.13's CPU; NaN and out-of-range elements are dropped.
// Contract: count[b] is enclosed between the elements certainly in bin b under both formulas and
// those possibly in it, the elements widened by 8u·max(|min|, |max|) for kernels that round the
// position otherwise. Counts are exact: 16-bit dtypes, which PyTorch
// also counts in, and more elements than 1/u are refused. No adjoint, no local error (moving an
// element to another bin is outside the first-order model).
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
#include <utility>

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
  bool sorted = true;    // topk(sorted=False): the k in an order the kernels leave open
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

  /// topk(sorted=False): the kernels return the k selected elements in an order they leave open
  /// (CPU: nth_element when k·64 > n), so every position encloses any of them.
  template <typename Out>
  static void hullOfSelection(const OrderQuery& q, Out out, std::vector<double>& vlo,
                              std::vector<double>& vhi, std::vector<double>& ilo,
                              std::vector<double>& ihi) {
    if (q.k == 0) return;
    double a = vlo[out(0)], b = vhi[out(0)], c = ilo[out(0)], d = ihi[out(0)];
    for (std::int64_t j = 1; j < q.k; ++j) {
      a = std::fmin(a, vlo[out(j)]);
      b = std::fmax(b, vhi[out(j)]);
      c = std::fmin(c, ilo[out(j)]);
      d = std::fmax(d, ihi[out(j)]);
    }
    for (std::int64_t j = 0; j < q.k; ++j) {
      vlo[out(j)] = a;
      vhi[out(j)] = b;
      ilo[out(j)] = c;
      ihi[out(j)] = d;
    }
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
      bool points = true;
      for (std::size_t j = 0; j < n; ++j) {
        const Interval e = x.at(l.at(row, static_cast<std::int64_t>(j)));
        lo[j] = e.lo;
        hi[j] = e.hi;
        points = points && (e.lo == e.hi || (std::isnan(e.lo) && std::isnan(e.hi)));
      }
      const auto out = [&](std::int64_t j) {
        return static_cast<std::size_t>((row / l.post * q.k + j) * l.post + row % l.post);
      };
      if (points) {  // one value per element (NaN included): the order up to ties
        const std::vector<std::int64_t> ord = pointOrder(lo, q, nullptr);
        const auto same = [&](std::size_t p, std::size_t r) {
          const double u = lo[static_cast<std::size_t>(ord[p])],
                       v = lo[static_cast<std::size_t>(ord[r])];
          return u == v || (std::isnan(u) && std::isnan(v));
        };
        for (std::size_t g = 0; g < n && static_cast<std::int64_t>(g) < q.k;) {
          std::size_t e = g + 1;  // [g, e): a group of equal values
          while (e < n && !q.stable && same(g, e)) ++e;
          const auto [mn, mx] = std::minmax_element(ord.begin() + static_cast<std::ptrdiff_t>(g),
                                                    ord.begin() + static_cast<std::ptrdiff_t>(e));
          for (std::size_t j = g; j < e && static_cast<std::int64_t>(j) < q.k; ++j) {
            const auto o = out(static_cast<std::int64_t>(j));
            vlo[o] = vhi[o] = lo[static_cast<std::size_t>(ord[j])];
            ilo[o] = static_cast<double>(*mn);
            ihi[o] = static_cast<double>(*mx);
          }
          g = e;
        }
        if (!q.sorted) hullOfSelection(q, out, vlo, vhi, ilo, ihi);
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
      if (!q.sorted) hullOfSelection(q, out, vlo, vhi, ilo, ihi);
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
      // The full order: the element at output position j (the point's index output: an
      // unsorted topk leaves its k in nth_element's order) stands at rank[i] here, and the
      // elements within rounding of it are its neighbours in this order.
      const std::vector<std::int64_t> ord = pointOrder(row, q, nullptr);
      std::vector<std::int64_t> rank(ord.size());
      for (std::size_t p = 0; p < ord.size(); ++p)
        rank[static_cast<std::size_t>(ord[p])] = static_cast<std::int64_t>(p);
      for (std::int64_t j = 0; j < q.k; ++j) {
        const auto o = static_cast<std::size_t>((r / l.post * q.k + j) * l.post + r % l.post);
        const auto i = static_cast<std::size_t>(outs[1].values()[o]);
        const double xi = row[i];
        if (!std::isfinite(xi)) continue;
        double tie = 0;
        const double reach = add_up(rho[i], rhoMax);
        for (int dir : {-1, 1})
          for (std::int64_t p = rank[i] + dir; p >= 0 && p < l.n; p += dir) {
            const double xm = row[static_cast<std::size_t>(ord[static_cast<std::size_t>(p)])];
            if (!std::isfinite(xm)) break;
            const double gapDown = sub_down(std::fmax(xi, xm), std::fmin(xi, xm));
            if (gapDown > reach) break;  // farther along the order, farther in value
            const double rhoM = rho[static_cast<std::size_t>(ord[static_cast<std::size_t>(p)])];
            const double slack = sub_up(add_up(rho[i], rhoM), gapDown);
            tie = std::fmax(tie, slack);
          }
        err[o] = tie;
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
        q.sorted = a.boolArg(4, "sorted", true);
        break;
      case OrderKind::Sort:
        dim = a.intArg(1, "dim", -1);
        q.largest = a.boolArg(2, "descending", false);
        break;
      case OrderKind::SortStable: {  // sort.stable(self, *, stable, dim=-1, descending=False)
        const auto keyword = [&](const char* name) -> const IrValue* {
          const IrValue* v = a.kwarg(name);
          return v && v->kind != IrValue::Kind::None ? v : nullptr;
        };
        if (const IrValue* v = keyword("dim")) {
          if (v->kind != IrValue::Kind::Int) a.fail("sort.stable: dim should be an int");
          dim = v->intValue;
        }
        if (const IrValue* v = keyword("descending"))
          q.largest = v->kind == IrValue::Kind::Bool && v->boolValue;
        if (const IrValue* v = keyword("stable"))
          q.stable = v->kind == IrValue::Kind::Bool && v->boolValue;
        break;
      }
    }
    q.layout = rowLayout(a, x.shape(), dim);
    q.k = q.layout.n;
    if (mKind == OrderKind::Topk) {
      q.k = a.intArg(1, "k");
      if (x.shape().empty() && q.k != 1)
        a.fail("topk of a 0-d tensor: k = " + std::to_string(q.k) + " (only k = 1 is supported)");
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

  /// Returns the positions of one row as PyTorch's CPU topk kernel leaves them (its first k):
  /// (value, index) pairs, its comparator (NaN first), std::partial_sort when k·64 <= n, else
  /// std::nth_element at k − 1 then std::sort of the k − 1 before it when sorted. Ties (a router
  /// initialised to zero scores every expert alike) then route as the recording did: checked
  /// against torch 1.13 and 2.15 on 6,840 rows of ties (tests: topkPointBreaksTiesAsPyTorch).
  static std::vector<std::int64_t> cpuTopkOrder(const std::vector<double>& row,
                                                const OrderQuery& q) {
    using Pair = std::pair<double, std::int64_t>;
    std::vector<Pair> queue(row.size());
    for (std::size_t j = 0; j < row.size(); ++j) queue[j] = {row[j], static_cast<std::int64_t>(j)};
    const auto cmp = [&](const Pair& u, const Pair& w) {
      return before(u.first, w.first, q.largest);
    };
    const auto k = static_cast<std::ptrdiff_t>(q.k);
    if (k > 0) {
      if (q.k * 64 <= q.layout.n) {
        std::partial_sort(queue.begin(), queue.begin() + k, queue.end(), cmp);
      } else {
        std::nth_element(queue.begin(), queue.begin() + k - 1, queue.end(), cmp);
        if (q.sorted) std::sort(queue.begin(), queue.begin() + k - 1, cmp);
      }
    }
    std::vector<std::int64_t> ord(row.size());
    for (std::size_t j = 0; j < row.size(); ++j) ord[j] = queue[j].second;
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
      std::vector<std::int64_t> ord =
          !rng && mKind == OrderKind::Topk ? cpuTopkOrder(row, q) : pointOrder(row, q, rng);
      if (rng && !q.sorted)
        std::shuffle(ord.begin(), ord.begin() + static_cast<std::ptrdiff_t>(q.k), *rng);
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

/// argmax, argmin: encloses every position of the first extremum (the file comment's contract).
class ArgExtremumRule final : public OpRule {
 public:
  explicit ArgExtremumRule(bool largest) : mLargest(largest) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override { return find(a, false); }

  std::vector<Tensor> interval(const OpArgs& a, OpContext&) const override { return find(a, true); }

  std::vector<Tensor> random(const OpArgs& a, OpContext&) const override { return find(a, false); }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor>, OpContext&) const override {
    return noGradients(a);
  }

  std::vector<Tensor> localError(const OpArgs&, std::span<const Tensor> o,
                                 OpContext&) const override {
    return zeroLocalError(o);
  }

 private:
  std::vector<Tensor> find(const OpArgs& a, bool intervals) const {
    const Tensor& x = a.tensor(0);
    const char* name = mLargest ? "argmax" : "argmin";
    const IrValue* dimArg = a.kwarg("dim");
    if (!dimArg) dimArg = &a.arg(1);
    const bool keepdim = a.boolArg(2, "keepdim", false);
    RowLayout l;
    Shape out;
    if (dimArg->kind == IrValue::Kind::None) {  // over the flattened tensor
      l.n = x.numel();
      if (keepdim) out.assign(x.shape().size(), 1);
    } else {
      const std::int64_t dim = a.intArg(1, "dim");
      l = rowLayout(a, x.shape(), dim);
      out = x.shape();
      if (!out.empty()) {
        const auto d = static_cast<std::size_t>(normalizeDim(dim, out.size()));
        if (keepdim)
          out[d] = 1;
        else
          out.erase(out.begin() + static_cast<std::ptrdiff_t>(d));
      }
    }
    if (l.n == 0)
      a.fail(std::string(name) + " of an empty dimension (shape " + shapeString(x.shape()) +
             "): PyTorch refuses it too");
    const auto lo = x.lo(), hi = x.hi();
    const auto rows = static_cast<std::size_t>(l.rows());
    std::vector<double> ilo(rows), ihi(rows);
    for (std::int64_t r = 0; r < l.rows(); ++r) {
      const auto at = [&](std::int64_t j) { return static_cast<std::size_t>(l.at(r, j)); };
      bool points = true, nanEnd = false;
      for (std::int64_t j = 0; j < l.n; ++j) {
        const double u = lo[at(j)], v = hi[at(j)];
        points = points && (u == v || (std::isnan(u) && std::isnan(v)));
        nanEnd = nanEnd || std::isnan(u) || std::isnan(v);
      }
      const auto ri = static_cast<std::size_t>(r);
      if (!intervals || points) {  // the first extremum of the lower endpoints (the values)
        std::int64_t best = 0;
        for (std::int64_t j = 1; j < l.n; ++j)
          if (wins(lo[at(j)], lo[at(best)])) best = j;
        ilo[ri] = ihi[ri] = static_cast<double>(best);
        continue;
      }
      if (nanEnd) {  // a NaN endpoint in an uncertain row: any position
        ilo[ri] = 0;
        ihi[ri] = static_cast<double>(l.n - 1);
        continue;
      }
      // Keys: larger first. The extremum's key is at least the largest lower key.
      const auto keyLo = [&](std::int64_t j) { return mLargest ? lo[at(j)] : -hi[at(j)]; };
      const auto keyHi = [&](std::int64_t j) { return mLargest ? hi[at(j)] : -lo[at(j)]; };
      double floor = -std::numeric_limits<double>::infinity();
      for (std::int64_t j = 0; j < l.n; ++j) floor = std::fmax(floor, keyLo(j));
      std::int64_t first = l.n, last = -1;
      for (std::int64_t j = 0; j < l.n; ++j)
        if (keyHi(j) >= floor) {
          first = std::min(first, j);
          last = j;
        }
      ilo[ri] = static_cast<double>(first);
      ihi[ri] = static_cast<double>(last);
    }
    if (!intervals) return {Tensor::point(out, DType::Int64, std::move(ilo))};
    return {Tensor::interval(out, DType::Int64, std::move(ilo), std::move(ihi))};
  }

  /// Returns true when a is a strictly better extremum than b; NaN beats every number (both
  /// reductions propagate NaN).
  bool wins(double a, double b) const {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && !std::isnan(b);
    return mLargest ? a > b : a < b;
  }

  bool mLargest;
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
    // The format the kernels compute and count in: the dtype (integers on CUDA: binary64).
    const Format f = ctx.precision.storageFor(x.dtype());
    if (f == Format::Bf16 || f == Format::Fp16)
      a.fail(
          "histc of 16-bit tensors is not supported: PyTorch counts in the tensor's dtype, "
          "which stops counting exactly at 256 (bf16) or 2048 (fp16), and computes the bins "
          "in it");
    if (static_cast<double>(x.numel()) > 1.0 / unitRoundoff(f))
      a.fail("histc: " + std::to_string(x.numel()) + " elements could make a count inexact in " +
             std::string(dtypeName(x.dtype())));
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
    if (!std::isfinite(mn) || !std::isfinite(mx) || !(mn < mx))
      a.fail("histc: the range [" + std::to_string(mn) + ", " + std::to_string(mx) + "] in " +
             std::string(dtypeName(x.dtype())) + " is empty or not finite");
    // The bin: the linear position computed in the dtype and truncated, the maximum in the last
    // bin: (x − min)·bins/(max − min) (PyTorch 2.x's CPU LINEAR_INTERPOLATION, and CUDA), or
    // (x − min)/(max − min)·bins (PyTorch 1.13's CPU kernel).
    const auto binOf = [&](double v, bool scaleFirst) -> std::int64_t {
      const double d = roundNearest(v - mn, f), w = roundNearest(mx - mn, f),
                   b = static_cast<double>(bins);
      const double t = scaleFirst ? roundNearest(roundNearest(d * b, f) / w, f)
                                  : roundNearest(roundNearest(d / w, f) * b, f);
      return std::clamp<std::int64_t>(static_cast<std::int64_t>(t), 0, bins - 1);
    };
    const auto bin = [&](double v) { return binOf(v, true); };
    // Interval margin: a few roundings of the linear position, for kernels that compute it with
    // another bracketing or in a wider format.
    const double margin = 8.0 * unitRoundoff(f) * std::fmax(std::fabs(mn), std::fabs(mx));
    std::vector<double> cLo(static_cast<std::size_t>(bins), 0.0), cHi(cLo);
    for (std::size_t i = 0; i < lo.size(); ++i) {
      if (!intervals) {  // the CPU kernel: NaN and out-of-range elements are dropped
        if (lo[i] >= mn && lo[i] <= mx) cLo[static_cast<std::size_t>(bin(lo[i]))] += 1;
        continue;
      }
      if (std::isnan(lo[i]) || std::isnan(hi[i])) continue;  // a NaN point: dropped
      // The bin is monotone in the value: the candidates span the bins of the ends of the part
      // of [lo − margin, hi + margin] inside [min, max].
      const double l = sub_down(lo[i], margin), h = add_up(hi[i], margin);
      if (hi[i] < mn || lo[i] > mx) continue;  // dropped by both kernels
      const double a0 = std::fmax(l, mn), a1 = std::fmin(h, mx);
      const std::int64_t first = std::min(binOf(a0, true), binOf(a0, false)),
                         last = std::max(binOf(a1, true), binOf(a1, false));
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
  r.add("aten.argmax.default", std::make_shared<const ArgExtremumRule>(true));
  r.add("aten.argmin.default", std::make_shared<const ArgExtremumRule>(false));
}

}  // namespace lossbound
