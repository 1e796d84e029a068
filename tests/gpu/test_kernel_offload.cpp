// The op rules' offers to a backend's interval kernel hooks (core/ops/kernel_offload.h), tested
// on the host: HostKernelBackend runs the hooks with the shared kernel bodies, the CPU backend
// declines them, and both must give the same bits — op by op in every storage format, and for
// whole sample replays. Counters make sure the hooks were really taken.

#include "core/analysis/run_file_replay.h"
#include "core/analysis/step_replay.h"
#include "core/backend.h"
#include "core/host_kernel_backend.h"
#include "core/ops/op_rule.h"
#include "core/ops/registry.h"

#include <QTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using lossbound::DType;
using lossbound::Tensor;
using lossbound::kernels::HostKernelBackend;

namespace {

/// Random finite interval operands of shape [rows, cols]: points, narrow and wide intervals over
/// magnitudes 2^-30..2^30, and huge values near the fp16/bf16 overflow thresholds; `positive`
/// keeps every endpoint > 0 (for log, sqrt, rsqrt).
Tensor randomOperand(std::mt19937_64& rng, std::int64_t rows, std::int64_t cols, bool positive) {
  std::uniform_real_distribution<double> u(-1.0, 1.0), e(-30.0, 30.0);
  std::vector<double> lo, hi;
  for (std::int64_t i = 0; i < rows * cols; ++i) {
    double a = u(rng) * std::exp2(e(rng));
    if (i % 17 == 3) a = 65504.0 * (1.0 + u(rng));  // around fp16's largest finite value
    if (positive) a = std::fabs(a) + 0x1p-40;
    double w = 0.0;
    switch (i % 3) {
      case 0:
        break;  // point
      case 1:
        w = std::fabs(a) * 0x1p-20;
        break;  // narrow
      default:
        w = std::fabs(a) * std::fabs(u(rng));
        break;  // wide
    }
    double l = a - w, h = a + w;
    if (positive && l <= 0.0) l = a * 0.5;
    lo.push_back(l);
    hi.push_back(h);
  }
  return Tensor::interval({rows, cols}, DType::Float32, std::move(lo), std::move(hi));
}

lossbound::IrValue ref(const char* name) {
  lossbound::IrValue v;
  v.kind = lossbound::IrValue::Kind::Ref;
  v.ref.name = name;
  return v;
}

lossbound::IrValue number(double x) {
  lossbound::IrValue v;
  v.kind = lossbound::IrValue::Kind::Float;
  v.floatValue = x;
  return v;
}

lossbound::IrValue integer(std::int64_t x) {
  lossbound::IrValue v;
  v.kind = lossbound::IrValue::Kind::Int;
  v.intValue = x;
  return v;
}

lossbound::IrValue boolean(bool x) {
  lossbound::IrValue v;
  v.kind = lossbound::IrValue::Kind::Bool;
  v.boolValue = x;
  return v;
}

/// Returns the IR list of make(x) for every x of values.
template <typename T, typename Make>
lossbound::IrValue listOf(const std::vector<T>& values, Make make) {
  lossbound::IrValue v;
  v.kind = lossbound::IrValue::Kind::List;
  for (const T& x : values) v.list.push_back(make(x));
  return v;
}

lossbound::IrValue intList(const std::vector<std::int64_t>& values) {
  return listOf(values, integer);
}

lossbound::IrValue boolList(const std::vector<bool>& values) { return listOf(values, boolean); }

lossbound::IrValue text(const char* s) {
  lossbound::IrValue v;
  v.kind = lossbound::IrValue::Kind::String;
  v.stringValue = s;
  return v;
}

bool sameBits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.numel() != b.numel() || a.dtype() != b.dtype()) return false;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const auto x = a.at(i), y = b.at(i);
    if (std::memcmp(&x.lo, &y.lo, sizeof(double)) != 0 ||
        std::memcmp(&x.hi, &y.hi, sizeof(double)) != 0)
      return false;
  }
  return true;
}

}  // namespace

class TestKernelOffload : public QObject {
  Q_OBJECT
 private slots:
  void everyOfferIsBitIdenticalToTheHostRule();
  void wholeSampleReplaysAreBitIdentical();
};

void TestKernelOffload::everyOfferIsBitIdenticalToTheHostRule() {
  struct Case {
    std::string op;
    std::vector<lossbound::IrValue> args;
    bool positive = false;
    bool offered = true;  // false: a broadcast the hooks do not take (the host rule must run)
    int calls = 1;        // hook calls when offered (addmm: the bias gather and the product)
    bool intOut = false;  // the traced outputs are int64 (a count)
    char castTo = 0;      // _to_copy's output: 'f' another float dtype, 'i' int64, 'b' bool
  };
  const std::vector<Case> cases = {
      {"aten.neg.default", {ref("x")}},
      {"aten.abs.default", {ref("x")}},
      {"aten.reciprocal.default", {ref("x")}},
      {"aten.sqrt.default", {ref("x")}, true},
      {"aten.rsqrt.default", {ref("x")}, true},
      {"aten.exp.default", {ref("x")}},
      {"aten.log.default", {ref("x")}, true},
      {"aten.sigmoid.default", {ref("x")}},
      {"aten.tanh.default", {ref("x")}},
      {"aten.relu.default", {ref("x")}},
      {"aten.gelu.default", {ref("x")}},
      {"aten.gelu.default", {ref("x"), text("tanh")}},
      {"aten.silu.default", {ref("x")}},
      {"aten.sin.default", {ref("x")}},
      {"aten.cos.default", {ref("x")}},
      {"aten.hardswish.default", {ref("x")}},  // the CPU and CUDA variants' hull
      {"aten.hardsigmoid.default", {ref("x")}},
      {"aten.hardswish_backward.default", {ref("x"), ref("y")}},
      {"aten.hardsigmoid_backward.default", {ref("x"), ref("y")}},
      {"aten.hardtanh.default", {ref("x"), number(0.0), number(6.0)}},   // ReLU6
      {"aten.hardtanh.default", {ref("x"), number(-0.3), number(0.7)}},  // inexact in fp32
      {"aten.hardtanh_backward.default", {ref("x"), ref("y"), number(0.0), number(6.0)}},
      {"aten.hardtanh_backward.default", {ref("x"), ref("y"), number(-0.3), number(0.7)}},
      // Exact roundings to an integer, and clamps with Python bounds (absent ones: ±inf).
      {"aten.floor.default", {ref("x")}},
      {"aten.ceil.default", {ref("x")}},
      {"aten.trunc.default", {ref("x")}},
      {"aten.round.default", {ref("x")}},
      {"aten.clamp.default", {ref("x"), number(-0.3), number(0.7)}},
      {"aten.clamp.default", {ref("x"), lossbound::IrValue{}, number(0.7)}},
      {"aten.clamp_min.default", {ref("x"), number(1e-12)}},  // F.normalize's eps
      {"aten.clamp_max.default", {ref("x"), number(4.6)}},    // Swin V2's logit scale
      {"aten.pow.Tensor_Scalar", {ref("x"), number(2.0)}},
      {"aten.pow.Tensor_Scalar", {ref("x"), number(3.0)}},  // libm pow, exponent in the model
      {"aten.pow.Tensor_Scalar", {ref("x"), number(1.0)}},  // rounded once (PyTorch: a copy)
      {"aten.pow.Tensor_Scalar", {ref("x"), number(-2.0)}},
      {"aten.pow.Tensor_Scalar", {ref("x"), number(0.5)}, true},
      {"aten.pow.Tensor_Scalar", {ref("x"), number(1.7)}, true},  // exp(p·log x)
      {"aten.add.Tensor", {ref("x"), ref("y")}},
      {"aten.sub.Tensor", {ref("x"), ref("y")}},
      {"aten.mul.Tensor", {ref("x"), ref("y")}},
      {"aten.div.Tensor", {ref("x"), ref("y")}},
      {"aten.mul.Tensor", {ref("x"), ref("s")}},     // a one-element tensor broadcast
      {"aten.div.Tensor", {ref("x"), ref("z")}},     // a 0-d divisor: the reciprocal variant too
      {"aten.div.Scalar", {ref("x"), number(0.3)}},  // a Python scalar divisor likewise
      {"aten.add.Tensor", {ref("x"), ref("b")}},     // a bias row [33] over [7, 33]
      {"aten.add.Tensor", {ref("b"), ref("x")}},     // the same, swapped (add commutes)
      {"aten.mul.Tensor", {ref("b"), ref("x")}},     // mul commutes too
      {"aten.div.Tensor", {ref("x"), ref("b")}},
      // Other broadcasts: the broadcast operand is gathered to the full shape first.
      {"aten.sub.Tensor", {ref("b"), ref("x")}, false, true, 2},  // no swap for sub
      {"aten.add.Tensor", {ref("x"), ref("c")}, false, true, 2},  // a column [7, 1]
      {"aten.mul.Tensor", {ref("c"), ref("b")}, false, true, 3},  // [7, 1] · [33]: both
      {"aten.add.Tensor", {ref("x"), number(0.1)}},               // a Python scalar
      // Selections: a condition that is false, true or either ([0, 1]) per element; masked_fill
      // with an exact -inf and a mask row repeated along the leading dim.
      {"aten.where.self", {ref("M"), ref("x"), ref("y")}},
      {"aten.masked_fill.Scalar", {ref("x"), ref("M"), number(-HUGE_VAL)}},
      {"aten.masked_fill.Scalar", {ref("x"), ref("R"), number(0.25)}},
      // A condition column [7, 1] (broadcast along the trailing dim): gathered, then selected.
      {"aten.where.self", {ref("Mc"), ref("x"), ref("y")}, false, true, 2},
      {"aten.masked_fill.Scalar", {ref("x"), ref("Mc"), number(0.25)}, false, true, 2},
      {"aten.where.self", {ref("M"), ref("c"), ref("y")}, false, true, 2},   // a gathered
      {"aten.where.self", {ref("Mc"), ref("x"), ref("c")}, false, true, 3},  // cond and b
      // x[mask] = v with one value v: a selection in binary64 (exact), over a mask of x's shape
      // and over the leading dim (gathered first); exact masks, as the point rule, which gives
      // the shapes here, needs them (tests/core/ops/test_index_ops: uncertain ones).
      {"aten.index_put.default", {ref("x"), listOf(std::vector<const char*>{"Me"}, ref), ref("z")}},
      {"aten.index_put.default",
       {ref("x"), listOf(std::vector<const char*>{"Mr"}, ref), ref("z")},
       false,
       true,
       2},
      {"aten.index_put.default",  // a value of shape [1, 1]: one value all the same
       {ref("x"), listOf(std::vector<const char*>{"Mr"}, ref), ref("s")},
       false,
       true,
       2},
      // Casts: to another float format (rounded outward), to int64 (truncated), to bool.
      {"aten._to_copy.default", {ref("x")}, false, true, 1, false, 'f'},
      {"aten._to_copy.default", {ref("x")}, false, true, 1, true, 'i'},
      {"aten._to_copy.default", {ref("x")}, false, true, 1, false, 'b'},
      // Constant padding: one gather with the stored fill (a crop too), and int64 labels.
      {"aten.constant_pad_nd.default", {ref("x"), intList({1, 2}), number(0.1)}},
      {"aten.constant_pad_nd.default", {ref("x"), intList({-1, 2, 1, 0}), number(-3.0)}},
      {"aten.constant_pad_nd.default",
       {ref("E"), intList({0, 1}), number(-100.0)},
       false,
       true,
       1,
       true},
      // Comparisons (exact: 1, 0 or [0, 1]): overlapping operands, equal points, a bias row, an
      // integer tensor against a Python number, swapped operands (eq and ne commute, gt does
      // not).
      {"aten.lt.Tensor", {ref("x"), ref("y")}},
      {"aten.eq.Tensor", {ref("x"), ref("x")}},
      {"aten.ge.Tensor", {ref("x"), ref("b")}},
      {"aten.ne.Scalar", {ref("E"), integer(3)}},
      {"aten.le.Scalar", {ref("x"), number(0.0)}},
      {"aten.eq.Tensor", {ref("b"), ref("x")}},
      {"aten.gt.Tensor", {ref("b"), ref("x")}, false, true, 2},
      // amax/amin over trailing dims (rows folded in order, exact selections, stored), over the
      // leading dim (gathered into rows first), and of an integer tensor (not rounded).
      {"aten.amax.default", {ref("x"), intList({-1}), boolean(false)}},
      {"aten.amin.default", {ref("x"), intList({1}), boolean(true)}},
      {"aten.amax.default", {ref("x"), intList({0}), boolean(false)}, false, true, 2},
      {"aten.amax.default", {ref("E"), intList({-1}), boolean(false)}, false, true, 1, true},
      // Vector norms: ord 2, 1 and inf over trailing dims, over the leading dim (gathered into
      // rows first), and over every element (norm.Scalar).
      {"aten.linalg_vector_norm.default", {ref("x"), number(2.0), intList({-1}), boolean(false)}},
      {"aten.linalg_vector_norm.default", {ref("x"), number(1.0), intList({-1}), boolean(true)}},
      {"aten.linalg_vector_norm.default",
       {ref("x"), number(HUGE_VAL), intList({-1}), boolean(false)}},
      {"aten.linalg_vector_norm.default",
       {ref("x"), number(2.0), intList({0}), boolean(false)},
       false,
       true,
       2},
      {"aten.norm.Scalar", {ref("x"), number(2.0)}},
      // Nearest upsampling's backward at an integer scale (every input element sums the same
      // number of gradients: gathered into rows, then row sums), 2d at scale 2 and 1d at scale
      // 3; at a fractional scale the counts differ and the host rule runs.
      {"aten.upsample_nearest2d_backward.vec",
       {ref("G44"), intList({4, 6}), intList({2, 4, 2, 3}), lossbound::IrValue{}},
       false,
       true,
       2},
      {"aten.upsample_nearest1d_backward.vec",
       {ref("X3"), intList({33}), intList({3, 7, 11}), lossbound::IrValue{}},
       false,
       true,
       2},
      {"aten.upsample_nearest1d_backward.vec",
       {ref("X3"), intList({33}), intList({3, 7, 10}), lossbound::IrValue{}},
       false,
       false},
      // x[idx] with one integer index on the leading dim: rows taken as embedding takes them,
      // from a 2-d and a 3-d table; a negative index is declined (the host rule wraps it).
      {"aten.index.Tensor", {ref("x"), listOf(std::vector<const char*>{"E"}, ref)}},
      {"aten.index.Tensor", {ref("X3"), listOf(std::vector<const char*>{"E3"}, ref)}},
      {"aten.index.Tensor", {ref("x"), listOf(std::vector<const char*>{"En"}, ref)}, false, false},
      // Integer sums (a token count): exact.
      {"aten.sum.default", {ref("E")}, false, true, 1, true},
      {"aten.sum.dim_IntList", {ref("M"), intList({-1})}, false, true, 1, true},
      // nll_loss over log-probabilities [7, 33], targets [7] with an ignored one; reductions
      // none, mean and sum, with and without a class weight, ignore_index 5 (targets T3);
      // nll_loss2d over [2, 4, 5, 5].
      {"aten.nll_loss_forward.default",
       {ref("x"), ref("T"), lossbound::IrValue{}, integer(0), integer(-100)}},
      {"aten.nll_loss_forward.default",
       {ref("x"), ref("T"), lossbound::IrValue{}, integer(1), integer(-100)}},
      {"aten.nll_loss_forward.default",
       {ref("x"), ref("T"), lossbound::IrValue{}, integer(2), integer(-100)}},
      {"aten.nll_loss_forward.default", {ref("x"), ref("T"), ref("b"), integer(0), integer(-100)}},
      {"aten.nll_loss_forward.default", {ref("x"), ref("T"), ref("b"), integer(1), integer(-100)}},
      {"aten.nll_loss_forward.default", {ref("x"), ref("T3"), ref("b"), integer(2), integer(5)}},
      {"aten.nll_loss2d_forward.default",
       {ref("I4"), ref("T2"), lossbound::IrValue{}, integer(1), integer(-100)}},
      // nll_loss backward (grad, self, target, weight, reduction, ignore_index, total_weight).
      {"aten.nll_loss_backward.default",
       {ref("z"), ref("x"), ref("T"), lossbound::IrValue{}, integer(1), integer(-100), ref("P1")}},
      {"aten.nll_loss_backward.default",
       {ref("z"), ref("x"), ref("T"), ref("b"), integer(1), integer(-100), ref("P1")}},
      {"aten.nll_loss_backward.default",
       {ref("z"), ref("x"), ref("T3"), ref("b"), integer(2), integer(5), ref("P1")}},
      {"aten.nll_loss_backward.default",
       {ref("G7"), ref("x"), ref("T"), ref("b"), integer(0), integer(-100), ref("P1")}},
      {"aten.nll_loss2d_backward.default",
       {ref("z"), ref("I4"), ref("T2"), lossbound::IrValue{}, integer(1), integer(-100),
        ref("P1")}},
      // Embedding rows by integer indices (a [7, 33] table, indices [2, 3]).
      {"aten.embedding.default", {ref("x"), ref("E")}},
      {"aten.sum.dim_IntList", {ref("x"), intList({-1})}},
      {"aten.sum.default", {ref("x")}},
      {"aten.mean.dim", {ref("x"), intList({-1})}},  // a row sum, then the mean's finish
      {"aten.mean.default", {ref("x")}},
      // Sums and means over leading dims (a bias gradient): a gather into rows, then the rows.
      {"aten.sum.dim_IntList", {ref("x"), intList({0})}, false, true, 2},
      {"aten.sum.dim_IntList", {ref("X3"), intList({0, 1})}, false, true, 2},
      {"aten.mean.dim", {ref("X3"), intList({1})}, false, true, 2},
      // The hooks of the device-resident replay: views through their index map, products.
      {"aten.t.default", {ref("x")}},
      {"aten.transpose.int", {ref("x"), integer(0), integer(1)}},
      {"aten.expand.default", {ref("b"), intList({7, 33})}},
      // cat and stack: one gather per part, each over the parts before it.
      {"aten.cat.default",
       {listOf(std::vector<const char*>{"x", "y"}, ref), integer(1)},
       false,
       true,
       2},
      {"aten.cat.default",
       {listOf(std::vector<const char*>{"x", "c", "y"}, ref), integer(-1)},
       false,
       true,
       3},
      {"aten.cat.default",
       {listOf(std::vector<const char*>{"x", "y"}, ref), integer(0)},
       false,
       true,
       2},
      {"aten.stack.default",
       {listOf(std::vector<const char*>{"x", "y", "x"}, ref), integer(1)},
       false,
       true,
       3},
      // Softmax and log-softmax backward rows (grad x, output y): contiguous rows to the row
      // kernel; rows along dim 0 are strided and stay on the host.
      {"aten._softmax_backward_data.default", {ref("x"), ref("y"), integer(-1), integer(6)}},
      {"aten._log_softmax_backward_data.default", {ref("x"), ref("y"), integer(1), integer(6)}},
      {"aten._softmax_backward_data.default",
       {ref("x"), ref("y"), integer(0), integer(6)},
       false,
       false},
      // Embedding backward: grad rows summed into weight rows by index (targets T3 as indices
      // into 33 rows), without and with a padding row.
      {"aten.embedding_dense_backward.default",
       {ref("x"), ref("T3"), integer(33), integer(-1), boolean(false)}},
      {"aten.embedding_dense_backward.default",
       {ref("x"), ref("T3"), integer(33), integer(5), boolean(false)}},
      // Layer-norm backward over the last dim (mean and rstd: 7 values each): grad_input rows,
      // grad_weight and grad_bias columns; with and without a weight.
      {"aten.native_layer_norm_backward.default",
       {ref("x"), ref("y"), intList({33}), ref("c"), ref("G7"), ref("b"), ref("b")}},
      {"aten.native_layer_norm_backward.default",
       {ref("x"), ref("y"), intList({33}), ref("c"), ref("G7"), lossbound::IrValue{},
        lossbound::IrValue{}}},
      // gelu's backward (erf form: erf's and exp's ulps in the model); a bias row of grad,
      // gathered to the full shape first.
      {"aten.gelu_backward.default", {ref("x"), ref("y")}},
      {"aten.gelu_backward.default", {ref("b"), ref("y")}, false, true, 2},
      // The other activations' backward ops (core/kernels/smooth_activation.h).
      {"aten.gelu_backward.default", {ref("x"), ref("y"), text("tanh")}},
      {"aten.sigmoid_backward.default", {ref("x"), ref("y")}},
      {"aten.tanh_backward.default", {ref("x"), ref("y")}},
      {"aten.silu_backward.default", {ref("x"), ref("y")}},
      // relu's backward: self > threshold (a comparison), then a selection of grad or 0.
      {"aten.threshold_backward.default", {ref("x"), ref("y"), number(0.0)}, false, true, 2},
      {"aten.threshold_backward.default", {ref("x"), ref("y"), number(0.25)}, false, true, 2},
      // Writes through a slice or select: one gather over self (or zeros).
      {"aten.slice_scatter.default", {ref("x"), ref("c"), integer(1), integer(3), integer(4)}},
      {"aten.select_scatter.default", {ref("x"), ref("b"), integer(0), integer(2)}},
      {"aten.slice_backward.default",
       {ref("c"), intList({7, 33}), integer(1), integer(3), integer(4), integer(1)}},
      {"aten.select_backward.default", {ref("b"), intList({7, 33}), integer(0), integer(-1)}},
      // A strided view (one gather through a map made from the IR arguments).
      {"aten.as_strided.default", {ref("x"), intList({5, 3}), intList({1, 33}), integer(2)}},
      // Writes through a strided view, no position twice: a gather of src over base.
      {"aten.as_strided_scatter.default",
       {ref("x"), ref("S53"), intList({5, 3}), intList({1, 33}), integer(2)}},
      {"aten.mm.default", {ref("x"), ref("w")}},
      {"aten.addmm.default", {ref("v"), ref("x"), ref("w")}, false, true, 2},
      // Batched products: one offer for the whole batch (bmm, baddbmm with its bias gather, a
      // matmul whose right operand is shared by every product of the batch).
      {"aten.bmm.default", {ref("X3"), ref("W3")}},
      {"aten.baddbmm.default", {ref("v"), ref("X3"), ref("W3")}, false, true, 2},
      {"aten.matmul.default", {ref("X3"), ref("w")}},
      // Convolutions through the same hooks: im2col and weight gathers (per group), the bias
      // rows, one batched product per lowered product (forward: 3 gathers + 1 product; backward:
      // grad_input, grad_weight, grad_bias, 3 calls each). Input [2, 4, 5, 5], weight
      // [6, 2, 3, 3], two groups, stride 1, padding 1.
      {"aten.convolution.default",
       {ref("I4"), ref("K4"), ref("B6"), intList({1}), intList({1}), intList({1}), boolean(false),
        intList({0}), integer(2)},
       false,
       true,
       4},
      {"aten.convolution_backward.default",
       {ref("G4"), ref("I4"), ref("K4"), intList({6}), intList({1}), intList({1}), intList({1}),
        boolean(false), intList({0}), integer(2), boolList({true, true, true})},
       false,
       true,
       9},
      // Max pooling: the windows gathered into rows (padding: shorter windows), one row kernel.
      {"aten.max_pool2d_with_indices.default",
       {ref("I4"), intList({3, 3}), intList({2, 2}), intList({1, 1}), intList({1, 1}),
        boolean(false)},
       false,
       true,
       2},
      {"aten.max_pool2d_with_indices.default",
       {ref("I4"), intList({2, 2}), intList({2, 2}), intList({0, 0}), intList({1, 1}),
        boolean(true)},
       false,
       true,
       2},
      // Average pooling: the windows gathered into rows, one row kernel; padding counted or not,
      // ceil mode, a divisor override, and adaptive windows of two sizes (overlapping).
      {"aten.avg_pool2d.default",
       {ref("I4"), intList({3, 3}), intList({2, 2}), intList({1, 1}), boolean(false),
        boolean(true)},
       false,
       true,
       2},
      {"aten.avg_pool2d.default",
       {ref("I4"), intList({2, 2}), intList({2, 2}), intList({1, 1}), boolean(true),
        boolean(false)},
       false,
       true,
       2},
      {"aten.avg_pool2d.default",
       {ref("I4"), intList({2, 3}), intList({1, 2}), intList({0, 1}), boolean(false), boolean(true),
        integer(5)},
       false,
       true,
       2},
      {"aten._adaptive_avg_pool2d.default", {ref("I4"), intList({2, 3})}, false, true, 2},
      // im2col (F.unfold) with padding: one gather; col2im (F.fold) of non-overlapping 2 x 2
      // windows (I4 as 2 x 100 x 1 columns: every pixel one term): a gather into rows, row sums.
      {"aten.im2col.default",
       {ref("I4"), intList({2, 2}), intList({1, 2}), intList({1, 1}), intList({2, 1})},
       false,
       true,
       1},
      {"aten.col2im.default",
       {ref("C100"), intList({2, 2}), intList({2, 2}), intList({1, 1}), intList({0, 0}),
        intList({2, 2})},
       false,
       true,
       2},
      // 3-d average pooling (I4 as two batches of two 2 x 5 x 5 volumes): the same row kernel.
      {"aten.avg_pool3d.default",
       {ref("V5"), intList({2, 3, 3}), intList({1, 2, 2}), intList({1, 1, 1}), boolean(true),
        boolean(false)},
       false,
       true,
       2},
      // Their backward ops: one thread per input, its windows in order (shape-only lists);
      // overlapping windows with padding counted or not, a divisor override with stride 3 over
      // kernel 2 (inputs no window contains), and adaptive windows.
      {"aten.avg_pool2d_backward.default",
       {ref("G3"), ref("I4"), intList({3, 3}), intList({2, 2}), intList({1, 1}), boolean(false),
        boolean(true), lossbound::IrValue{}}},
      {"aten.avg_pool2d_backward.default",
       {ref("G3"), ref("I4"), intList({3, 3}), intList({2, 2}), intList({1, 1}), boolean(false),
        boolean(false), lossbound::IrValue{}}},
      {"aten.avg_pool2d_backward.default",
       {ref("G2"), ref("I4"), intList({2, 2}), intList({3, 3}), intList({0, 0}), boolean(false),
        boolean(true), integer(5)}},
      {"aten._adaptive_avg_pool2d_backward.default", {ref("G23"), ref("I4")}},
      {"aten.avg_pool3d_backward.default",
       {ref("G5"), ref("V5"), intList({2, 3, 3}), intList({1, 2, 2}), intList({1, 1, 1}),
        boolean(false), boolean(true), lossbound::IrValue{}}},
      // Max-pool backward (grad [2, 4, 3, 3], self I4, kernel 3, stride 2, padding 1, indices
      // X9: points and intervals, some spanning several offsets, clipped at the plane's end):
      // one thread per plane, the outputs in order.
      {"aten.max_pool2d_with_indices_backward.default",
       {ref("G3"), ref("I4"), intList({3, 3}), intList({2, 2}), intList({1, 1}), intList({1, 1}),
        boolean(false), ref("X9")}},
      // A batch norm, training then eval: the channels gathered into rows, one row kernel, gathered
      // back.
      {"aten.native_batch_norm.default",
       {ref("I4"), ref("C4"), ref("D4"), ref("C4"), ref("P4"), boolean(true), number(0.1),
        number(1e-5)},
       false,
       true,
       3},
      {"aten.native_batch_norm.default",
       {ref("I4"), ref("C4"), ref("D4"), ref("C4"), ref("P4"), boolean(false), number(0.1),
        number(1e-5)},
       false,
       true,
       3},
      // Batch-norm backward (grad_out and input I4, weight, running mean and var,
      // save_mean and save_invstd, train, eps): dy and x gathered into channel rows, one row
      // kernel, grad_input gathered back; training, eval, and training without a weight.
      {"aten.native_batch_norm_backward.default",
       {ref("I4"), ref("I4"), ref("C4"), ref("D4"), ref("P4"), ref("D4"), ref("P4"), boolean(true),
        number(1e-5)},
       false,
       true,
       4},
      {"aten.native_batch_norm_backward.default",
       {ref("I4"), ref("I4"), ref("C4"), ref("D4"), ref("P4"), ref("D4"), ref("P4"), boolean(false),
        number(1e-5)},
       false,
       true,
       4},
      {"aten.native_batch_norm_backward.default",
       {ref("I4"), ref("I4"), lossbound::IrValue{}, ref("D4"), ref("P4"), ref("C4"), ref("P4"),
        boolean(true), number(1e-5)},
       false,
       true,
       4},
      // Group norm: rows (n, g) of D·HxW elements, one row kernel; weight and bias per channel
      // (2 groups of 2 channels), none, and one group.
      {"aten.native_group_norm.default",
       {ref("I4"), ref("C4"), ref("D4"), integer(2), integer(4), integer(25), integer(2),
        number(1e-5)}},
      {"aten.native_group_norm.default",
       {ref("I4"), lossbound::IrValue{}, lossbound::IrValue{}, integer(2), integer(4), integer(25),
        integer(4), number(1e-5)}},
      {"aten.native_group_norm.default",
       {ref("I4"), ref("C4"), lossbound::IrValue{}, integer(2), integer(4), integer(25), integer(1),
        number(1e-5)}},
      // Group-norm backward (dy, x I4, mean and rstd per (sample, group), weight, N, C, HxW,
      // group, mask): ds/db per (sample, channel), then weight columns and input rows; with and
      // without a weight, one sample of 4 one-channel groups, grad_weight masked off.
      {"aten.native_group_norm_backward.default",
       {ref("I4"), ref("I4"), ref("C4"), ref("P4"), ref("D4"), integer(2), integer(4), integer(25),
        integer(2), boolList({true, true, true})}},
      {"aten.native_group_norm_backward.default",
       {ref("I4"), ref("I4"), ref("C4"), ref("P4"), lossbound::IrValue{}, integer(2), integer(4),
        integer(25), integer(2), boolList({true, true, true})}},
      {"aten.native_group_norm_backward.default",
       {ref("I4"), ref("I4"), ref("D4"), ref("P4"), ref("C4"), integer(1), integer(4), integer(50),
        integer(4), boolList({true, false, true})}},
  };
  std::mt19937_64 rng(20261123);
  const lossbound::PrecisionModel precision;
  const auto cpu = lossbound::createCpuBackend();
  HostKernelBackend host;
  int offered = 0;
  for (DType dtype : {DType::Float64, DType::Float32, DType::BFloat16, DType::Float16}) {
    for (const Case& c : cases) {
      const lossbound::OpRule* rule = lossbound::opRegistry().find(c.op);
      QVERIFY2(rule, c.op.c_str());
      const Tensor x = randomOperand(rng, 7, 33, c.positive).withDtype(dtype);
      const Tensor y = randomOperand(rng, 7, 33, c.positive).withDtype(dtype);
      const Tensor s = randomOperand(rng, 1, 1, c.positive).withDtype(dtype);
      const Tensor z = randomOperand(rng, 1, 1, c.positive).reshaped({}).withDtype(dtype);
      const Tensor bias = randomOperand(rng, 1, 33, c.positive).reshaped({33}).withDtype(dtype);
      const Tensor col = randomOperand(rng, 7, 1, c.positive).withDtype(dtype);
      const Tensor w = randomOperand(rng, 33, 5, c.positive).withDtype(dtype);
      const Tensor v = randomOperand(rng, 1, 5, c.positive).reshaped({5}).withDtype(dtype);
      const Tensor x3 =
          randomOperand(rng, 3 * 7, 33, c.positive).reshaped({3, 7, 33}).withDtype(dtype);
      const Tensor w3 =
          randomOperand(rng, 3 * 33, 5, c.positive).reshaped({3, 33, 5}).withDtype(dtype);
      const Tensor i4 =
          randomOperand(rng, 2 * 4 * 5, 5, c.positive).reshaped({2, 4, 5, 5}).withDtype(dtype);
      const Tensor k4 =
          randomOperand(rng, 6 * 2 * 3, 3, c.positive).reshaped({6, 2, 3, 3}).withDtype(dtype);
      const Tensor b6 = randomOperand(rng, 1, 6, c.positive).reshaped({6}).withDtype(dtype);
      std::vector<double> mlo(7 * 33), mhi(7 * 33);
      for (std::size_t i = 0; i < mlo.size(); ++i) {
        mlo[i] = i % 3 == 1 ? 1.0 : 0.0;
        mhi[i] = i % 3 == 0 ? 0.0 : 1.0;
      }
      const Tensor mask = Tensor::interval({7, 33}, DType::Bool, mlo, mhi);
      const Tensor maskRow =
          Tensor::interval({33}, DType::Bool, std::vector<double>(mlo.begin(), mlo.begin() + 33),
                           std::vector<double>(mlo.begin(), mlo.begin() + 33));
      const Tensor maskCol =
          Tensor::interval({7, 1}, DType::Bool, {0, 1, 0, 0, 1, 0, 0}, {0, 1, 1, 0, 1, 1, 0});
      const Tensor maskRows = Tensor::point({7}, DType::Bool, {0, 1, 1, 0, 1, 0, 0});
      const Tensor maskExact = Tensor::point({7, 33}, DType::Bool, mlo);
      const Tensor tokens = Tensor::point({2, 3}, DType::Int64, {0, 6, 3, 3, 1, 5});
      const Tensor rows3 = Tensor::point({4}, DType::Int64, {2, 0, 1, 1});
      const Tensor negative = Tensor::point({3}, DType::Int64, {0, -1, 3});
      const Tensor targets = Tensor::point({7}, DType::Int64, {3, -100, 32, 0, 5, 5, 17});
      const Tensor g7 = randomOperand(rng, 1, 7, c.positive).reshaped({7}).withDtype(dtype);
      const Tensor p1 = randomOperand(rng, 1, 1, true).reshaped({}).withDtype(dtype);
      const Tensor targets3 = Tensor::point({7}, DType::Int64, {3, 5, 32, 0, 5, 5, 17});
      std::vector<double> t2(2 * 5 * 5);
      for (std::size_t i = 0; i < t2.size(); ++i) t2[i] = i % 9 == 4 ? -100.0 : double(i % 4);
      const Tensor targets2 = Tensor::point({2, 5, 5}, DType::Int64, t2);
      const Tensor c4 = randomOperand(rng, 1, 4, c.positive).reshaped({4}).withDtype(dtype);
      const Tensor d4 = randomOperand(rng, 1, 4, c.positive).reshaped({4}).withDtype(dtype);
      const Tensor p4 = randomOperand(rng, 1, 4, true).reshaped({4}).withDtype(dtype);
      const Tensor g4 =
          randomOperand(rng, 2 * 6 * 5, 5, c.positive).reshaped({2, 6, 5, 5}).withDtype(dtype);
      const Tensor s53 = randomOperand(rng, 5, 3, c.positive).withDtype(dtype);
      const Tensor g44 =
          randomOperand(rng, 2 * 4 * 4, 6, c.positive).reshaped({2, 4, 4, 6}).withDtype(dtype);
      const Tensor g3 =
          randomOperand(rng, 2 * 4 * 3, 3, c.positive).reshaped({2, 4, 3, 3}).withDtype(dtype);
      const Tensor g2 =
          randomOperand(rng, 2 * 4 * 2, 2, c.positive).reshaped({2, 4, 2, 2}).withDtype(dtype);
      const Tensor g23 =
          randomOperand(rng, 2 * 4 * 2, 3, c.positive).reshaped({2, 4, 2, 3}).withDtype(dtype);
      std::vector<double> xlo(2 * 4 * 3 * 3), xhi(xlo.size());
      for (std::size_t i = 0; i < xlo.size(); ++i) {
        xlo[i] = double((i * 7) % 25);
        xhi[i] = i % 3 == 1 ? std::min(xlo[i] + 6.0, 30.0) : xlo[i];  // 30: past the plane
      }
      const Tensor x9 = Tensor::interval({2, 4, 3, 3}, DType::Int64, xlo, xhi);
      const Tensor v5 = i4.reshaped({2, 2, 2, 5, 5});
      const Tensor c100 = i4.reshaped({2, 100, 1});
      const Tensor g5 = randomOperand(rng, 2 * 2 * 3 * 3, 3, c.positive)
                            .reshaped({2, 2, 3, 3, 3})
                            .withDtype(dtype);
      lossbound::Node node;
      node.name = "node0";
      node.op = c.op;
      node.args = c.args;
      auto lookup = [&](const lossbound::ValueRef& r) -> const Tensor& {
        if (r.name == "x") return x;
        if (r.name == "y") return y;
        if (r.name == "b") return bias;
        if (r.name == "w") return w;
        if (r.name == "v") return v;
        if (r.name == "X3") return x3;
        if (r.name == "W3") return w3;
        if (r.name == "I4") return i4;
        if (r.name == "V5") return v5;
        if (r.name == "C100") return c100;
        if (r.name == "G5") return g5;
        if (r.name == "K4") return k4;
        if (r.name == "B6") return b6;
        if (r.name == "G4") return g4;
        if (r.name == "G3") return g3;
        if (r.name == "G2") return g2;
        if (r.name == "G23") return g23;
        if (r.name == "S53") return s53;
        if (r.name == "G44") return g44;
        if (r.name == "X9") return x9;
        if (r.name == "C4") return c4;
        if (r.name == "D4") return d4;
        if (r.name == "P4") return p4;
        if (r.name == "z") return z;
        if (r.name == "M") return mask;
        if (r.name == "E") return tokens;
        if (r.name == "E3") return rows3;
        if (r.name == "En") return negative;
        if (r.name == "R") return maskRow;
        if (r.name == "Mc") return maskCol;
        if (r.name == "Mr") return maskRows;
        if (r.name == "Me") return maskExact;
        if (r.name == "T") return targets;
        if (r.name == "T2") return targets2;
        if (r.name == "T3") return targets3;
        if (r.name == "G7") return g7;
        if (r.name == "P1") return p1;
        return r.name == "c" ? col : s;
      };
      // The traced output spec: what the point rule computes (shape) in the operand dtype.
      lossbound::OpContext cpuCtx{precision, *cpu, nullptr};
      // Up to three traced outputs (shapes fixed below from the point rule).
      node.outputs.assign(3, {x.shape(), c.intOut ? DType::Int64 : dtype});
      if (c.castTo == 'f')
        node.outputs[0].dtype = dtype == DType::Float16 ? DType::BFloat16 : DType::Float16;
      if (c.castTo == 'b') node.outputs[0].dtype = DType::Bool;
      {
        const lossbound::OpArgs args(node, lookup);
        const auto points = rule->point(args, cpuCtx);
        node.outputs.resize(points.size(), node.outputs[0]);
        for (std::size_t k = 0; k < points.size(); ++k) node.outputs[k].shape = points[k].shape();
      }
      const lossbound::OpArgs args(node, lookup);
      const auto calls = [&] {
        return host.unaryCalls + host.binaryCalls + host.rowSumCalls + host.gatherCalls +
               host.gemmCalls + host.rowKernelCalls + host.selectCalls;
      };
      const int before = calls();
      lossbound::OpContext hostCtx{precision, host, nullptr};
      const auto a = rule->interval(args, cpuCtx);
      const auto b = rule->interval(args, hostCtx);
      const QString where = QStringLiteral("%1 (%2 args) in %3")
                                .arg(QString::fromStdString(c.op))
                                .arg(c.args.size())
                                .arg(QString::fromUtf8(lossbound::dtypeName(dtype).data()));
      QVERIFY2(calls() == before + (c.offered ? c.calls : 0),
               qPrintable(where +
                          (c.offered ? QStringLiteral(": the rule did not offer its work")
                                     : QStringLiteral(": an unsupported broadcast was offered"))));
      QCOMPARE(a.size(), b.size());
      for (std::size_t k = 0; k < a.size(); ++k)
        QVERIFY2(sameBits(a[k], b[k]),
                 qPrintable(where + QStringLiteral(": bits differ (output %1)").arg(k)));
      offered += c.offered ? 1 : 0;
    }
  }
  qInfo("%d op/format cases offered to the host kernels, all bit-identical", offered);
}

void TestKernelOffload::wholeSampleReplaysAreBitIdentical() {
  using namespace lossbound;
  const auto cpu = createCpuBackend();
  HostKernelBackend host;
  for (const char* sample : {"gradaccum-fixed", "gradaccum-hf-bug", "kernel-path"}) {
    const std::string dir = std::string(LOSSBOUND_SOURCE_DIR) + "/samples/" + sample + "/";
    const auto reference = RunFileReplay::open(dir + "reference.h5");
    const auto candidate = RunFileReplay::open(dir + "candidate.h5");
    const auto program = candidate->programAt(0);
    const TensorMap inputs = adaptInputs(*program, reference->inputsAt(0), nullptr);
    ReplayOptions o;
    o.method = EnvelopeMethod::Interval;
    const int before = host.unaryCalls + host.binaryCalls + host.rowSumCalls + host.rowKernelCalls;
    const int rowsBefore = host.rowKernelCalls;
    const Envelope a = replayEnvelope(*program, inputs, *cpu, o);
    const Envelope b = replayEnvelope(*program, inputs, host, o);
    const int calls =
        host.unaryCalls + host.binaryCalls + host.rowSumCalls + host.rowKernelCalls - before;
    const int rowCalls = host.rowKernelCalls - rowsBefore;
    qInfo("%s: %d kernel offers (%d softmax/layer-norm row offers); envelope [%.17g, %.17g]",
          sample, calls, rowCalls, b.lo, b.hi);
    QVERIFY2(calls > 0 && rowCalls > 0, sample);
    QVERIFY2(a.lo == b.lo && a.hi == b.hi,
             qPrintable(QStringLiteral("%1: cpu [%2, %3], host kernels [%4, %5]")
                            .arg(sample)
                            .arg(a.lo, 0, 'g', 17)
                            .arg(a.hi, 0, 'g', 17)
                            .arg(b.lo, 0, 'g', 17)
                            .arg(b.hi, 0, 'g', 17)));
  }
}

QTEST_GUILESS_MAIN(TestKernelOffload)
#include "test_kernel_offload.moc"
