// Creation ops: ones zeros full empty (+ _like and new_ forms), arange (all overloads), eye
// (.default, .m), scalar_tensor, fill and fill_ (Scalar, Tensor), zero_. A constant v stored in a
// floating dtype is RN_F(v) in every implementation (IEEE 754-2019 §5.4.2 conversion); the point
// rule keeps the exact v, so the interval rule is RO_F(v) (which holds both) and the local error
// |RN_F(v) - v|. empty* values are unspecified: they are modelled as zeros (a program that reads
// them before writing is wrong with any arithmetic).
#include "core/ops/families.h"
#include "core/ops/formats.h"
#include "core/ops/registry.h"
#include "core/ops/rule_helpers.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace lossbound {

namespace {

using namespace ops;

/// Where the shape and the fill value of a creation op come from.
enum class Src { Size, Like, NewSize, Scalar, Arange, Fill, Eye };

struct CreateSpec {
  Src src;
  std::optional<double> constant;  // ones/zeros/empty; nullopt: read fill_value
  std::size_t valueIdx = 1;        // position of fill_value (full: 1, full_like: 1, new_full: 2)
};

/// Returns (shape, exact value per element) of the created tensor.
std::pair<Shape, std::vector<double>> created(const CreateSpec& s, const OpArgs& a) {
  Shape shape;
  switch (s.src) {
    case Src::Size:
      shape = a.intListArg(0, "size");
      break;
    case Src::Like:
    case Src::Fill:
      shape = a.tensor(0).shape();
      break;
    case Src::NewSize:
      shape = a.intListArg(1, "size");
      break;
    case Src::Scalar:
      shape = {};
      break;
    case Src::Arange: {
      double start = 0, end, step = 1;
      const std::string& op = a.node().op;
      if (op.ends_with(".start_step")) {
        start = a.numberArg(0, "start");
        end = a.numberArg(1, "end");
        step = a.numberArg(2, "step", 1.0);
      } else if (op.ends_with(".start")) {
        start = a.numberArg(0, "start");
        end = a.numberArg(1, "end");
      } else {
        end = a.numberArg(0, "end");
      }
      if (step == 0 || !std::isfinite(start) || !std::isfinite(end))
        a.fail("arange: invalid range or step");
      const double n = std::ceil((end - start) / step);
      const auto count = static_cast<std::int64_t>(n > 0 ? n : 0);
      std::vector<double> v(static_cast<std::size_t>(count));
      for (std::int64_t i = 0; i < count; ++i)
        v[static_cast<std::size_t>(i)] = start + static_cast<double>(i) * step;
      return {Shape{count}, std::move(v)};
    }
    case Src::Eye: {  // n × m, ones on the diagonal (Kimi Linear's delta rule)
      const std::int64_t n = a.intArg(0, "n");
      const std::int64_t m = a.node().op.ends_with(".m") ? a.intArg(1, "m") : n;
      if (n < 0 || m < 0)
        a.fail("eye: negative size " + std::to_string(n) + " x " + std::to_string(m));
      std::vector<double> v(static_cast<std::size_t>(n * m), 0.0);
      for (std::int64_t i = 0; i < std::min(n, m); ++i) v[static_cast<std::size_t>(i * m + i)] = 1;
      return {Shape{n, m}, std::move(v)};
    }
  }
  for (auto d : shape)
    if (d < 0) a.fail("negative dimension in size " + shapeString(shape));
  double v = 0;
  if (s.constant)
    v = *s.constant;
  else if (s.src == Src::Scalar)
    v = a.numberArg(0, "s");
  else if (s.src == Src::Fill && a.isTensor(1))
    v = a.tensor(1).values()[0];
  else
    v = a.numberArg(s.valueIdx, "fill_value");
  return {shape, std::vector<double>(static_cast<std::size_t>(numel(shape)), v)};
}

double toDtype(double v, DType t) {
  if (t == DType::Bool) return v != 0.0 ? 1.0 : 0.0;
  if (!isFloating(t)) return std::trunc(v);
  return v;
}

/// Creation ops: point keeps the exact constant v, interval is RO_F(v) (or the enclosure of
/// start + i·step for a floating arange), random RN_F(v), localError |RN_F(v) − v|.
class CreateRule final : public OpRule {
 public:
  /// Takes where the shape and value come from: a constant (ones, zeros, empty) or nullopt to
  /// read fill_value at argument valueIdx.
  CreateRule(Src src, std::optional<double> constant, std::size_t valueIdx = 1)
      : mSpec{src, constant, valueIdx} {}

  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    auto [shape, v] = created(mSpec, a);
    const DType t = a.outSpec().dtype;
    for (double& x : v) x = toDtype(x, t);
    return std::vector<Tensor>{Tensor::point(shape, t, std::move(v))};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const DType t = a.outSpec().dtype;
    if (mSpec.src == Src::Arange && isFloating(t)) {
      // start + i·step is computed in binary64 (PyTorch's accscalar) or in opmath: enclose the
      // exact value and round outward to the storage format.
      auto [shape, v] = created(mSpec, a);
      const Format fo = outFormat(a, ctx);
      const std::string& op = a.node().op;
      const double start =
          op.ends_with(".start") || op.ends_with(".start_step") ? a.numberArg(0, "start") : 0.0;
      const double step = op.ends_with(".start_step") ? a.numberArg(2, "step", 1.0) : 1.0;
      std::vector<double> lo(v.size()), hi(v.size());
      for (std::size_t i = 0; i < v.size(); ++i) {
        const Interval e =
            roundOutward(add(lossbound::point(start),
                             mul(lossbound::point(static_cast<double>(i)), lossbound::point(step))),
                         fo);
        lo[i] = e.lo;
        hi[i] = e.hi;
      }
      return std::vector<Tensor>{Tensor::interval(shape, t, std::move(lo), std::move(hi))};
    }
    if (mSpec.src == Src::Fill && a.isTensor(1)) {  // fill_.Tensor with an enclosed value
      const Shape shape = a.tensor(0).shape();
      Interval e = a.tensor(1).at(0);
      e = isFloating(t) ? roundOutward(e, outFormat(a, ctx))
                        : Interval{toDtype(e.lo, t), toDtype(e.hi, t)};
      const auto n = static_cast<std::size_t>(numel(shape));
      return std::vector<Tensor>{
          Tensor::interval(shape, t, std::vector<double>(n, e.lo), std::vector<double>(n, e.hi))};
    }
    // The stored constant RN_F(v) and the exact v (the point rule's value) are both in RO_F(v).
    auto [shape, v] = created(mSpec, a);
    if (!isFloating(t)) {
      for (double& x : v) x = toDtype(x, t);
      return std::vector<Tensor>{Tensor::point(shape, t, v).toInterval()};
    }
    // RO_F has an infinite endpoint in two cases where the stored value is known better: v = ±inf
    // (a causal mask, full(−inf)) is stored exactly, and a finite v just past the format's largest
    // value (finfo.min written with fewer digits) has RN_F(v) = ∓max, finite, so [v, RN_F(v)]
    // holds both. Left as [−inf, −max], such a mask made every softmax row it masks unbounded.
    const Format fo = outFormat(a, ctx);
    Tensor out = roundOutwardTensor(Tensor::point(shape, t, v), fo);
    auto lo = out.mutableLo();
    auto hi = out.mutableHi();
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (std::isfinite(lo[i]) && std::isfinite(hi[i])) continue;
      const double rn = std::isfinite(v[i]) ? roundNearest(v[i], fo) : v[i];
      if (std::isfinite(v[i]) && !std::isfinite(rn)) continue;
      lo[i] = std::min(v[i], rn);
      hi[i] = std::max(v[i], rn);
    }
    return std::vector<Tensor>{std::move(out)};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    auto [shape, v] = stored(a, ctx);
    return std::vector<Tensor>{Tensor::point(shape, a.outSpec().dtype, std::move(v))};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    std::vector<std::optional<Tensor>> out = noGradients(a);
    // fill_.Tensor: the gradient of the fill value is the sum of the output gradient
    if (mSpec.src == Src::Fill && a.isTensor(1) && out.size() == 2 &&
        isFloating(a.tensor(1).dtype())) {
      double s = 0;
      for (double x : g[0].values()) s += x;
      out[1] = Tensor::full(a.tensor(1).shape(), a.tensor(1).dtype(), s);
    }
    return out;
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    auto [shape, v] = stored(a, ctx);
    std::vector<double> e(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) e[i] = std::fabs(v[i] - o[0].values()[i]);
    return std::vector<Tensor>{Tensor::point(shape, o[0].dtype(), std::move(e))};
  }

 private:
  /// Returns the shape and the values as stored: RN in the output format (floats) or converted
  /// to the integer dtype.
  std::pair<Shape, std::vector<double>> stored(const OpArgs& a, OpContext& ctx) const {
    auto [shape, v] = created(mSpec, a);
    const DType t = a.outSpec().dtype;
    const Format fo = outFormat(a, ctx);
    for (double& x : v) x = isFloating(t) ? roundNearest(x, fo) : toDtype(x, t);
    return std::pair{shape, v};
  }

  CreateSpec mSpec;
};

}  // namespace

void registerCreationOps(OpRegistry& r) {
  r.add("aten.ones.default", std::make_shared<const CreateRule>(Src::Size, 1.0));
  r.add("aten.zeros.default", std::make_shared<const CreateRule>(Src::Size, 0.0));
  r.add("aten.empty.memory_format", std::make_shared<const CreateRule>(Src::Size, 0.0));
  r.add("aten.full.default", std::make_shared<const CreateRule>(Src::Size, std::nullopt, 1));
  r.add("aten.ones_like.default", std::make_shared<const CreateRule>(Src::Like, 1.0));
  r.add("aten.zeros_like.default", std::make_shared<const CreateRule>(Src::Like, 0.0));
  r.add("aten.empty_like.default", std::make_shared<const CreateRule>(Src::Like, 0.0));
  r.add("aten.full_like.default", std::make_shared<const CreateRule>(Src::Like, std::nullopt, 1));
  r.add("aten.new_zeros.default", std::make_shared<const CreateRule>(Src::NewSize, 0.0));
  r.add("aten.new_ones.default", std::make_shared<const CreateRule>(Src::NewSize, 1.0));
  r.add("aten.new_empty.default", std::make_shared<const CreateRule>(Src::NewSize, 0.0));
  // The strided forms: the IR's tensors are row-major whatever the strides.
  r.add("aten.new_empty_strided.default", std::make_shared<const CreateRule>(Src::NewSize, 0.0));
  r.add("aten.empty_strided.default", std::make_shared<const CreateRule>(Src::Size, 0.0));
  r.add("aten.new_full.default", std::make_shared<const CreateRule>(Src::NewSize, std::nullopt, 2));
  r.add("aten.scalar_tensor.default",
        std::make_shared<const CreateRule>(Src::Scalar, std::nullopt));
  r.add("aten.arange.default", std::make_shared<const CreateRule>(Src::Arange, std::nullopt));
  r.add("aten.arange.start", std::make_shared<const CreateRule>(Src::Arange, std::nullopt));
  r.add("aten.arange.start_step", std::make_shared<const CreateRule>(Src::Arange, std::nullopt));
  r.add("aten.eye.default", std::make_shared<const CreateRule>(Src::Eye, std::nullopt));
  r.add("aten.eye.m", std::make_shared<const CreateRule>(Src::Eye, std::nullopt));
  r.add("aten.fill_.Scalar", std::make_shared<const CreateRule>(Src::Fill, std::nullopt, 1));
  r.add("aten.fill_.Tensor", std::make_shared<const CreateRule>(Src::Fill, std::nullopt, 1));
  r.add("aten.fill.Scalar", std::make_shared<const CreateRule>(Src::Fill, std::nullopt, 1));
  r.add("aten.fill.Tensor", std::make_shared<const CreateRule>(Src::Fill, std::nullopt, 1));
  r.add("aten.zero_.default", std::make_shared<const CreateRule>(Src::Like, 0.0));
  r.add("aten.zero.default", std::make_shared<const CreateRule>(Src::Like, 0.0));
}

}  // namespace lossbound
