// floor_divide (.default, .Scalar, in-place forms) of integer tensors: Python's //, the quotient
// rounded toward −inf. Contract: exact; an operand enclosure whose divisor excludes 0 gives the
// hull of the floors at its corners (floor(a/b) is monotone in a and in b on each side of 0).
// Floating operands are refused: PyTorch's float kernel (fmod, a rounded division, a correction)
// is not yet modelled. Division by zero is an error, as in PyTorch. No adjoint, no local error.
#include "core/ops/arg_readers.h"
#include "core/ops/broadcasting.h"
#include "core/ops/families.h"
#include "core/ops/registry.h"
#include "core/ops/rule_helpers.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

namespace lossbound {

namespace {

using namespace ops;

class FloorDivideRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const auto [x, y] = operands(a);
    return {mapPoint2(a, x, y, a.outSpec().dtype,
                      [&](double p, double q) { return floorDiv(a, p, q); })};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext&) const override {
    const auto [x, y] = operands(a);
    return {mapInterval2(a, x, y, a.outSpec().dtype, [&](Interval p, Interval q) -> Interval {
      if (p.lo == p.hi && q.lo == q.hi) return lossbound::point(floorDiv(a, p.lo, q.lo));
      if (q.lo <= 0 && q.hi >= 0)
        a.fail("floor_divide: the divisor [" + std::to_string(q.lo) + ", " + std::to_string(q.hi) +
               "] may be 0");
      const double c[] = {floorDiv(a, p.lo, q.lo), floorDiv(a, p.lo, q.hi), floorDiv(a, p.hi, q.lo),
                          floorDiv(a, p.hi, q.hi)};
      return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
    })};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    return point(a, ctx);
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
  static std::pair<Tensor, Tensor> operands(const OpArgs& a) {
    Tensor x = a.tensor(0), y = tensorOrScalar(a, 1, DType::Int64);
    for (const Tensor* t : {&x, &y})
      if (isFloating(t->dtype()))
        a.fail(
            "floor_divide of floating-point values is not supported (integer tensors only), "
            "found " +
            std::string(dtypeName(t->dtype())));
    if (isNumber(a, 1) && a.numberArg(1, "") != std::floor(a.numberArg(1, "")))
      a.fail("floor_divide by a non-integer number is not supported");
    return {std::move(x), std::move(y)};
  }

  static double floorDiv(const OpArgs& a, double p, double q) {
    const auto i = static_cast<std::int64_t>(p), j = static_cast<std::int64_t>(q);
    if (j == 0) a.fail("floor_divide: integer division by zero");
    std::int64_t d = i / j;
    if ((i % j != 0) && ((i < 0) != (j < 0))) --d;
    return static_cast<double>(d);
  }
};

}  // namespace

void registerFloorDivideOps(OpRegistry& r) {
  const auto rule = std::make_shared<const FloorDivideRule>();
  for (const char* name : {"aten.floor_divide.default", "aten.floor_divide.Scalar",
                           "aten.floor_divide_.Tensor", "aten.floor_divide_.Scalar"})
    r.add(name, rule);
}

}  // namespace lossbound
