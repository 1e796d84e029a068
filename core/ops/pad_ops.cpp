// Constant padding: constant_pad_nd (F.pad(mode="constant"); Hugging Face shifts labels with it).
//
// aten.constant_pad_nd(x, pad, value): x copied into the middle (negative pads crop), the border
// filled with value stored in the output dtype: static_cast<scalar_t>(value), correctly rounded
// (IEEE 754-2019 §5.4.2; bf16/fp16 through float, so the interval rule encloses it with
// roundOutward(value, F), which holds every rounding of it); copying is exact. The local error is
// that of the stored border value (zero for an exactly representable value such as -100).
#include "core/ops/families.h"
#include "core/ops/formats.h"
#include "core/ops/index_map.h"
#include "core/ops/nn_support.h"
#include "core/ops/registry.h"
#include "core/ops/rule_helpers.h"

#include <memory>
#include <string>

namespace lossbound {

namespace {

using namespace ops;

/// constant_pad_nd(x, pad, value): exact copy plus the stored fill value (file comment).
class ConstantPadRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    const double v = value(a);
    return {applyIndexMap(x, padMap(a, x.shape()), a.outSpec().dtype, Interval{v, v})};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const Tensor& x = a.tensor(0);
    const DType t = a.outSpec().dtype;
    const double v = value(a);
    const Interval fill =
        isIntegral(t) ? Interval{v, v} : roundOutward(lossbound::point(v), outFormat(a, ctx));
    return {gatherVia(ctx.backend, x, padMap(a, x.shape()), t, fill)};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const Tensor& x = a.tensor(0);
    const DType t = a.outSpec().dtype;
    const double v = isIntegral(t) ? value(a) : roundNearest(value(a), outFormat(a, ctx));
    return {applyIndexMap(x, padMap(a, x.shape()), t, Interval{v, v})};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    if (!isFloating(x.dtype())) return {std::nullopt};
    return {scatterAddThrough(g[0], padMap(a, x.shape()), x.shape(), x.dtype())};
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    if (isIntegral(a.outSpec().dtype)) return zeroLocalError(o);
    return nn::localErrorVia(*this, a, o, ctx);
  }

 private:
  static double value(const OpArgs& a) { return a.numberArg(2, "value", 0.0); }

  /// Output element → input offset, -1 for the border.
  static IndexMap padMap(const OpArgs& a, const Shape& s) {
    const auto pad = a.intListArg(1, "pad");
    if (pad.size() % 2 != 0 || pad.size() / 2 > s.size())
      a.fail("pad has " + std::to_string(pad.size()) +
             " entries; expected an even number, at most twice the rank of " + shapeString(s));
    const std::size_t rank = s.size();
    std::vector<std::int64_t> before(rank, 0);
    Shape out = s;
    for (std::size_t k = 0; k < pad.size() / 2; ++k) {
      const std::size_t d = rank - 1 - k;
      before[d] = pad[2 * k];
      out[d] = s[d] + pad[2 * k] + pad[2 * k + 1];
      if (out[d] < 0)
        a.fail("padding " + shapeString(s) + " with " + shapeString(pad) +
               " gives a negative size in dim " + std::to_string(d));
    }
    IndexMap m{out, std::vector<std::int64_t>(static_cast<std::size_t>(numel(out)))};
    const auto inStrides = contiguousStrides(s);
    for (std::size_t i = 0; i < m.offsets.size(); ++i) {
      std::int64_t rem = static_cast<std::int64_t>(i), off = 0;
      bool inside = true;
      for (std::size_t dd = rank; dd-- > 0;) {
        const std::int64_t c = rem % out[dd] - before[dd];
        rem /= out[dd];
        if (c < 0 || c >= s[dd]) inside = false;
        off += c * inStrides[dd];
      }
      m.offsets[i] = inside ? off : -1;
    }
    return m;
  }
};

}  // namespace

void registerPadOps(OpRegistry& r) {
  r.add("aten.constant_pad_nd.default", std::make_shared<const ConstantPadRule>());
}

}  // namespace lossbound
