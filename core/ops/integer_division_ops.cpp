// Integer division: floor_divide (.default, .Scalar, in-place forms) and div.Tensor_mode /
// div.Scalar_mode with rounding_mode 'floor' or 'trunc' on integer tensors: the quotient rounded
// toward −inf (Python's //) or toward 0; remainder (.Tensor, .Scalar, in-place forms: a − b·⌊a/b⌋,
// the sign of the divisor, Python's %; LongT5's block padding). Contract: exact; an operand
// enclosure whose divisor excludes 0 gives the hull of the quotients at its corners (both
// roundings of a/b are monotone in a and in b on each side of 0), and for the remainder the
// remainders of the dividend's ends when they share ⌊a/b⌋ with a point divisor (a − b·k is
// increasing in a there), else every remainder [0, |b|max − 1] with b's sign. Floating operands are
// refused: PyTorch's float kernels (fmod, a rounded division, a correction) are not yet modelled.
// Division by zero is an error, as in PyTorch. No adjoint, no local error. div.Tensor_mode without
// a rounding mode is true division (the elementwise family's rule).
#include "core/ops/arg_readers.h"
#include "core/ops/broadcasting.h"
#include "core/ops/families.h"
#include "core/ops/registry.h"
#include "core/ops/rule_helpers.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>

namespace lossbound {

namespace {

using namespace ops;

enum class Rounding { Floor, Trunc, Remainder };

/// floor_divide and div with a rounding mode on integers: the exact quotient (the file comment's
/// contract).
class IntegerDivideRule final : public OpRule {
 public:
  explicit IntegerDivideRule(Rounding mode) : mMode(mode) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const auto [x, y] = operands(a);
    return {mapPoint2(a, x, y, a.outSpec().dtype,
                      [&](double p, double q) { return quotient(a, p, q); })};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext&) const override {
    const auto [x, y] = operands(a);
    return {mapInterval2(a, x, y, a.outSpec().dtype, [&](Interval p, Interval q) -> Interval {
      if (p.lo == p.hi && q.lo == q.hi) return lossbound::point(quotient(a, p.lo, q.lo));
      if (q.lo <= 0 && q.hi >= 0)
        a.fail(what() + ": the divisor [" + std::to_string(q.lo) + ", " + std::to_string(q.hi) +
               "] may be 0");
      if (mMode == Rounding::Remainder) {
        if (q.lo == q.hi && (q.lo == 1.0 || q.lo == -1.0)) return {0.0, 0.0};
        if (q.lo == q.hi && floorQuotient(a, p.lo, q.lo) == floorQuotient(a, p.hi, q.lo))
          return {quotient(a, p.lo, q.lo), quotient(a, p.hi, q.lo)};
        return q.lo > 0 ? Interval{0.0, q.hi - 1} : Interval{q.lo + 1, 0.0};
      }
      const double c[] = {quotient(a, p.lo, q.lo), quotient(a, p.lo, q.hi), quotient(a, p.hi, q.lo),
                          quotient(a, p.hi, q.hi)};
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
  std::string what() const {
    return mMode == Rounding::Floor ? "floor division"
                                    : (mMode == Rounding::Trunc ? "trunc division" : "remainder");
  }

  std::pair<Tensor, Tensor> operands(const OpArgs& a) const {
    Tensor x = a.tensor(0), y = tensorOrScalar(a, 1, DType::Int64);
    if (isFloating(a.outSpec().dtype))
      a.fail(what() +
             " with a floating-point result is not supported (integer tensors only), found " +
             std::string(dtypeName(a.outSpec().dtype)));
    for (const Tensor* t : {&x, &y})
      if (isFloating(t->dtype()))
        a.fail(what() +
               " of floating-point values is not supported (integer tensors only), found " +
               std::string(dtypeName(t->dtype())));
    if (isNumber(a, 1) && a.numberArg(1, "") != std::floor(a.numberArg(1, "")))
      a.fail(what() + " by a non-integer number is not supported");
    return {std::move(x), std::move(y)};
  }

  /// ⌊p/q⌋ of two int64 values held in doubles; a.fail for one outside int64, q = 0 and
  /// INT64_MIN / -1 (which overflows).
  std::int64_t floorQuotient(const OpArgs& a, double p, double q) const {
    constexpr double kRange = 9223372036854775808.0;  // 2^63
    for (double v : {p, q})
      if (!(v >= -kRange && v < kRange))
        a.fail(what() + ": operand " + std::to_string(v) + " is outside int64");
    const auto i = static_cast<std::int64_t>(p), j = static_cast<std::int64_t>(q);
    if (j == 0) a.fail(what() + " by zero");
    if (j == -1 && i == std::numeric_limits<std::int64_t>::min())
      a.fail(what() + ": INT64_MIN / -1 overflows int64");
    std::int64_t d = i / j;  // toward 0
    if ((i % j != 0) && ((i < 0) != (j < 0))) --d;
    return d;
  }

  /// The rule's result for int64 values p and q: ⌊p/q⌋, trunc(p/q) or p − q·⌊p/q⌋.
  double quotient(const OpArgs& a, double p, double q) const {
    // x % ±1 is 0, INT64_MIN % -1 too (PyTorch 2.x; the quotient alone overflows).
    if (mMode == Rounding::Remainder && (q == 1.0 || q == -1.0)) {
      floorQuotient(a, p, 1.0);  // p must be an int64
      return 0.0;
    }
    const std::int64_t d = floorQuotient(a, p, q);
    const auto i = static_cast<std::int64_t>(p), j = static_cast<std::int64_t>(q);
    if (mMode == Rounding::Floor) return static_cast<double>(d);
    if (mMode == Rounding::Trunc) return static_cast<double>(i / j);
    return static_cast<double>(i % j == 0 ? 0 : (i % j) + ((i < 0) != (j < 0) ? j : 0));
  }

  Rounding mMode;
};

/// div.Tensor_mode / div.Scalar_mode: the integer rules for 'floor' and 'trunc', true division
/// (the rule given) without a rounding mode.
class DivModeRule final : public OpRule {
 public:
  explicit DivModeRule(const OpRule& trueDivision) : mTrue(trueDivision) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext& c) const override {
    return rule(a).point(a, c);
  }
  std::vector<Tensor> interval(const OpArgs& a, OpContext& c) const override {
    return rule(a).interval(a, c);
  }
  std::vector<Tensor> random(const OpArgs& a, OpContext& c) const override {
    return rule(a).random(a, c);
  }
  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor> o,
                                         std::span<const Tensor> g, OpContext& c) const override {
    return rule(a).vjp(a, o, g, c);
  }
  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& c) const override {
    return rule(a).localError(a, o, c);
  }
  std::vector<Tensor> probabilisticLocalError(const OpArgs& a, std::span<const Tensor> o,
                                              OpContext& c) const override {
    return rule(a).probabilisticLocalError(a, o, c);
  }

 private:
  const OpRule& rule(const OpArgs& a) const {
    const IrValue* m = a.kwarg("rounding_mode");
    if (!m || m->kind != IrValue::Kind::String) return mTrue;
    if (m->stringValue == "floor") return mFloor;
    if (m->stringValue == "trunc") return mTrunc;
    a.fail("div: unknown rounding_mode '" + m->stringValue + "' (expected 'floor' or 'trunc')");
  }

  const OpRule& mTrue;
  IntegerDivideRule mFloor{Rounding::Floor}, mTrunc{Rounding::Trunc};
};

}  // namespace

void registerIntegerDivisionOps(OpRegistry& r) {
  const auto rule = std::make_shared<const IntegerDivideRule>(Rounding::Floor);
  for (const char* name : {"aten.floor_divide.default", "aten.floor_divide.Scalar",
                           "aten.floor_divide_.Tensor", "aten.floor_divide_.Scalar"})
    r.add(name, rule);
  const auto remainder = std::make_shared<const IntegerDivideRule>(Rounding::Remainder);
  for (const char* name : {"aten.remainder.Tensor", "aten.remainder.Scalar",
                           "aten.remainder_.Tensor", "aten.remainder_.Scalar"})
    r.add(name, remainder);
  const OpRule* trueDivision = r.find("aten.div.Tensor");
  if (!trueDivision) throw std::logic_error("registerIntegerDivisionOps: div.Tensor first");
  const auto mode = std::make_shared<const DivModeRule>(*trueDivision);
  for (const char* name : {"aten.div.Tensor_mode", "aten.div_.Tensor_mode", "aten.div.Scalar_mode",
                           "aten.div_.Scalar_mode"})
    r.add(name, mode);
}

}  // namespace lossbound
