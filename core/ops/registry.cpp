#include "core/ops/registry.h"

#include "core/ops/families.h"

#include <vector>

namespace lossbound {

void OpRegistry::beginFamily(std::string name, std::string description) {
  mFamilies.push_back({std::move(name), std::move(description), {}});
}

void OpRegistry::add(std::string op, std::shared_ptr<const OpRule> rule) {
  if (mRules.count(op))
    for (OpFamily& f : mFamilies) std::erase(f.ops, op);
  if (mFamilies.empty()) beginFamily("Other", "");
  mFamilies.back().ops.push_back(op);
  mRules[std::move(op)] = std::move(rule);
}

const OpRule* OpRegistry::find(std::string_view op) const {
  if (auto it = mRules.find(op); it != mRules.end()) return it->second.get();
  // "aten.add.Tensor" → packet "aten.add"
  const auto lastDot = op.rfind('.');
  if (lastDot != std::string_view::npos && lastDot > 5) {
    if (auto it = mRules.find(op.substr(0, lastDot)); it != mRules.end()) return it->second.get();
  }
  return nullptr;
}

std::vector<std::string> OpRegistry::names() const {
  std::vector<std::string> out;
  out.reserve(mRules.size());
  for (const auto& [name, rule] : mRules) out.push_back(name);
  return out;
}

namespace {

/// A family of op rules: its name, a one-line description and its registration function.
struct FamilyEntry {
  const char* name;
  const char* description;
  void (*registerOps)(OpRegistry&);
};

// The explicit list of op families (each family file registers its ops by name), with the
// one-line summary `lossbound-cli ops --markdown` and the README's "Supported ops" section show.
constexpr FamilyEntry kFamilies[] = {
    {"Elementwise",
     "Arithmetic, exp, expm1, log, log1p, sqrt, sin, cos, pow, comparisons, logical and bitwise "
     "ops, floor, ceil, trunc, round, sign, integer floor and trunc division and remainder "
     "(exact), where, "
     "clamp "
     "(and the in-place op_ forms, here and below): one correctly rounded op in opmath, libm "
     "functions within the published ulps + 1, stored in the dtype",
     registerElementwiseOps},
    {"Matrix products",
     "Midpoint-radius GEMM with the order-free bound γ_n·|x|·|y| (Rump 1999, Jeannerod-Rump 2013)",
     registerMatmulOps},
    {"Reductions",
     "Sums and means in any order, γ_{n-1}·Σ|x| (Higham 2002, eq. 4.4); vector norms of order 2 "
     "(squares summed in any order, with or without FMA: γ_n·Σx², Higham 2002, eq. 3.5), 1 and "
     "inf; extrema and all/any exact",
     registerReductionOps},
    {"Views and casts",
     "Views, copies, flips, rolls, concatenation (and the op_copy forms of the views): exact "
     "index maps; casts correctly rounded",
     registerViewOps},
    {"Creation",
     "ones, zeros, full, empty, arange, fill: constants stored in the dtype (one rounding)",
     registerCreationOps},
    {"Optimizer updates",
     "addcmul, addcdiv, lerp (SGD and AdamW steps): correctly rounded ops in opmath",
     registerOptimizerOps},
    {"Activations",
     "relu, gelu, silu, sigmoid, tanh and their backward ops: libm within the ulp "
     "table, each step rounded",
     registerActivationOps},
    {"Softmax",
     "Softmax and log-softmax with a dependency-aware enclosure (Blanchard, Higham, Higham 2021)",
     registerSoftmaxOps},
    {"Layer norm", "Moments in any order (Welford/pairwise/two-pass), rsqrt within the ulp table",
     registerNormOps},
    {"Batch norm", "Channel moments in any order (training) or the stored statistics (eval)",
     registerBatchNormOps},
    {"Group norm", "Group moments in any order", registerGroupNormOps},
    {"Embedding", "Exact row gather; the backward sums rows in any order", registerEmbeddingOps},
    {"Losses", "nll_loss forward and backward: exact selection; sums and means in any order",
     registerLossOps},
    {"Piecewise activations",
     "hardswish, hardsigmoid, hardtanh (ReLU6), leaky_relu, elu, celu: split at their breakpoints",
     registerPiecewiseActivationOps},
    {"Softplus and mish", "Compositions of libm functions within the ulp table",
     registerSoftplusMishOps},
    {"Max pooling", "Exact selection; ties covered by the local error", registerMaxPoolOps},
    {"Average pooling", "Window sums in any order, then one division", registerAvgPoolOps},
    {"Convolutions",
     "Lowered to the midpoint-radius GEMM; transposed ones as the input gradient of a convolution",
     registerConvOps},
    {"Slice scatters", "Writes through a slice or select: exact", registerSliceScatterOps},
    {"Strided views",
     "as_strided over the input's row-major elements: exact gathers and writes; overlapping "
     "writes take the hull of their candidates",
     registerAsStridedOps},
    {"Padding", "Exact copy; the padding value stored in the dtype", registerPadOps},
    {"Sliding windows",
     "im2col (F.unfold): exact copy; col2im (F.fold): each element's terms summed in any order",
     registerIm2ColOps},
    {"Prefix sums", "Each prefix a sum in any order, γ_i·Σ|x| (Higham 2002, eq. 4.4)",
     registerCumsumOps},
    {"Triangular solves",
     "linalg_solve_triangular with a unit diagonal: each row b_i − Σa_ij·x_j a dot product in any "
     "order, γ_m·(|b_i| + Σ|a_ij||x_j|) (Higham 2002, §8.1), carried through the later rows",
     registerTriangularSolveOps},
    {"Gather and scatter", "Exact selections and writes; accumulating scatters summed in any order",
     registerGatherScatterOps},
    {"Advanced indexing",
     "index, index_put, masked_select, masked_scatter: exact; accumulating writes summed in any "
     "order",
     registerAdvancedIndexOps},
    {"Sorting and counting",
     "topk, sort: exact order statistics, near ties covered by the local error; histc: exact "
     "counts, uncertain elements counted in every bin they may reach",
     registerSortOps},
    {"Resampling",
     "pixel_shuffle, pixel_unshuffle, nearest upsampling: exact index maps (PyTorch's float source "
     "index); bilinear: four weighted terms, the source positions' rounding enclosed; the "
     "backward ops sum each input's gradients in any order",
     registerUpsampleOps},
    {"Grouped products",
     "_grouped_mm (mixture-of-experts layers): each group the midpoint-radius GEMM and its bound",
     registerGroupedMmOps},
};

}  // namespace

const OpRegistry& opRegistry() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    for (const FamilyEntry& f : kFamilies) {
      r.beginFamily(f.name, f.description);
      f.registerOps(r);
    }
    return r;
  }();
  return registry;
}

}  // namespace lossbound
