#pragma once
// The results of an analysis, as plain data: what the CLI prints, the cache stores and the
// widgets draw. Produced by core/analysis (step replay, envelope methods, verdicts).

#include "core/interval/precision.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lossbound {

/// How the envelope of a step is computed (ARCHITECTURE §1).
enum class EnvelopeMethod { Interval, FirstOrder, Probabilistic, Ensemble };

/// The classification of one analysed step.
enum class StepVerdict {
  Rounding,       ///< the reference loss is inside the envelope: rounding explains it (Type-I)
  BugLikely,      ///< outside a non-rigorous envelope (first-order, probabilistic, ensemble)
  BugCertain,     ///< outside the rigorous interval envelope (Type-II for sure)
  Untrustworthy,  ///< the self-check failed: the envelope does not hold the candidate's own loss
  NotBounded,     ///< the step could not be bounded (unsupported op, missing checkpoint, ...)
};

/// How the ensemble method draws the summation order of a matrix product's dot products.
enum class EnsembleOrder {
  PerProduct,  ///< one order per GEMM call, every output a chain in it (as one kernel call sums)
  PerElement,  ///< every output its own order, bracketing and blocking (the randomized executor)
};

/// Returns "interval", "first-order", "probabilistic" or "ensemble".
std::string_view methodName(EnvelopeMethod m);
/// Returns the method for a name as written on the command line, or nothing.
std::optional<EnvelopeMethod> parseMethod(std::string_view name);
/// Returns "per-product" or "per-element".
std::string_view ensembleOrderName(EnsembleOrder o);
/// Returns the order for a name as written on the command line, or nothing.
std::optional<EnsembleOrder> parseEnsembleOrder(std::string_view name);
/// Returns one plain sentence saying what the method guarantees.
std::string_view methodGuarantee(EnvelopeMethod m);
/// Returns "rounding", "bug (likely)", "bug (certain)", "untrustworthy" or "not bounded".
std::string_view verdictName(StepVerdict v);

/// One op's share of the rounding budget at a step (first-order terms |g_k|·r_k summed per node).
struct BudgetShare {
  std::string node;  ///< trace node name, e.g. "mm_7"
  std::string op;    ///< aten op, e.g. "aten.mm.default"
  double bound = 0;  ///< this node's contribution to the bound (absolute loss units)
  double share = 0;  ///< bound / total, in [0, 1]
};

/// Which outputs an analysis bounds.
enum class OutputScope { Loss, All };

/// The settings that produced a result; the cache is keyed by them.
struct AnalysisSettings {
  EnvelopeMethod method = EnvelopeMethod::FirstOrder;
  std::optional<Format> precision;  ///< nothing = as recorded in the trace
  double confidence = 1.0 - 1e-6;   ///< probabilistic method: 1 − δ
  int ensembleSize = 32;            ///< ensemble method: number of randomized executions
  EnsembleOrder ensembleOrder = EnsembleOrder::PerProduct;  ///< ensemble method: order draws
  std::string startNode;         ///< interval method: start bounds here ("" = at the inputs)
  std::string backend = "auto";  ///< "auto", "cpu" or "cuda"
  std::uint64_t seed = 0x5eed;   ///< ensemble randomization
  OutputScope outputs = OutputScope::Loss;  ///< All: also compare every program output
};

/// Returns methodGuarantee(settings.method), followed for an interval method that starts at a
/// node by the caveat that rounding before that node is ignored (so it is not rigorous).
std::string settingsGuarantee(const AnalysisSettings& settings);

/// What allclose and the fp64-RMSE rule say about the loss at one step (docs/baselines.md): the
/// value under test is the reference's logged loss, as for the envelope verdict; the candidate
/// program replayed at the reference's state gives the fp64 value and one rounded execution.
struct LossBaselines {
  bool computed = false;      ///< false: not computed (step not bounded, or replay failed)
  double fp64 = 0;            ///< the candidate program in binary64 at the reference's state
  double rounded = 0;         ///< one execution of it in its modelled precision, random order
  bool allclosePass = true;   ///< allclose(fp64, referenceLoss), rtol 1e-5, atol 1e-8
  double allcloseRatio = 0;   ///< |fp64 − referenceLoss| / (atol + rtol·|referenceLoss|)
  bool rmsePass = true;       ///< |referenceLoss − fp64| <= m·|rounded − fp64| + tol/10
  double rmseError = 0;       ///< |referenceLoss − fp64|
  double rmseAllowance = 0;   ///< m·|rounded − fp64| + tol/10 (tol = 1e-4)
  double rmseMultiplier = 2;  ///< m: 3 for an fp16/bf16 loss, else 2
};

/// How one program output compares between the candidate and the reference program, both
/// evaluated at the reference's state (core/analysis/output_comparison.h).
struct OutputComparison {
  std::string name;           ///< program output, e.g. "grad:h.0.attn.c_attn.weight"
  std::int64_t elements = 0;  ///< its number of elements
  bool elementwise = false;   ///< envelopes per element (interval, ensemble), else a functional
  bool disjoint = false;      ///< the two envelopes are disjoint: this output differs
  std::int64_t disjointElements = -1;  ///< elementwise: elements with disjoint envelopes; else -1
  double worstMargin =
      0;  ///< |centre difference| / (sum of half-widths), worst element; > 1 disjoint
  double difference = 0;  ///< functional: ‖ŷ_c − ŷ_r‖₁ (lower bound); elementwise: max |Δcentre|
  double candidateHalfWidth = 0;  ///< functional: B_c; elementwise: at the worst element
  double referenceHalfWidth = 0;  ///< functional: B_r; elementwise: at the worst element
  bool baselinesComputed = false;
  bool allclosePass = true;  ///< allclose(candidate fp64, reference rounded)
  double allcloseRatio = 0;
  bool rmsePass = true;  ///< RMSE(ref rounded, cand fp64) <= m·RMSE(cand rounded, cand fp64) + 1e-5
  double rmseError = 0;
  double rmseAllowance = 0;
};

/// The outcome at one analysed step.
struct StepResult {
  std::int64_t step = 0;
  double referenceLoss = 0;  ///< logged by the reference run
  double candidateLoss = 0;  ///< logged by the candidate run
  double lo = 0, hi = 0;     ///< envelope of the candidate program on the reference's state
  bool inside = true;        ///< lo <= referenceLoss <= hi
  double margin = 0;         ///< (referenceLoss − centre) / half-width; |margin| > 1 is outside
  StepVerdict verdict = StepVerdict::Rounding;
  EnvelopeMethod method = EnvelopeMethod::FirstOrder;
  bool selfCheckPassed = true;  ///< candidate program on candidate state holds its own loss
  double selfLo = 0, selfHi = 0;
  std::string note;  ///< why a step is untrustworthy or not bounded; upstream-rounding caveats
  std::vector<BudgetShare> budget;  ///< top ops by share of the bound (first-order terms)
  double seconds = 0;               ///< compute time of this step
  double pointLoss = 0;  ///< binary64 point replay of the candidate program on the reference state
  bool fromCache = false;                 ///< read from the results cache instead of computed
  LossBaselines baselines;                ///< allclose and the fp64-RMSE rule on the loss
  std::vector<OutputComparison> outputs;  ///< --outputs all: every output, ranked (else empty)
  double outputSeconds = 0;               ///< time spent on `outputs`
};

/// The run file a report's run was read from, as the analysis saw it.
struct RunSource {
  std::string path;       ///< absolute path ("" for runs not read from a file)
  std::string logDigest;  ///< SHA-256 (hex) of the loss log's steps and losses ("" = unknown)
};

/// How the selected steps of one analysis are dealt to its parts (see core/analysis/shard.h).
enum class ShardLayout {
  Blocks,      ///< part I of N holds the I-th of N balanced contiguous slices (analyze --shard)
  Interleaved  ///< part I of N holds every N-th step starting at the I-th (analyze --mpi ranks)
};

/// Which part of a sharded analysis a report holds.
struct ShardInfo {
  int index = 1;  ///< 1-based part number, 1 <= index <= count
  int count = 1;  ///< number of parts
  ShardLayout layout = ShardLayout::Blocks;
  std::vector<std::int64_t> selectedSteps;  ///< every step of the whole analysis, increasing
};

/// A whole analysis of a run pair.
struct AnalysisReport {
  std::string referenceName, candidateName;
  AnalysisSettings settings;
  std::vector<StepResult> steps;          ///< in increasing step order
  std::optional<std::int64_t> firstExit;  ///< earliest analysed step outside (bug verdicts)
  std::string backendDescription;         ///< e.g. "CPU — no CUDA device: ..."
  std::string note;        ///< caveats for the whole analysis (input rounding, start node, ...)
  bool cancelled = false;  ///< the analysis was cancelled: `steps` holds the finished ones only
  std::string cacheFile;   ///< the results cache used ("" when caching was off)
  RunSource referenceSource, candidateSource;  ///< the files analysed (for reopening and merging)
  std::string lossboundVersion = LOSSBOUND_VERSION;  ///< the version that computed the steps
  std::string engineRevision;      ///< engineRevision() of the build that computed the steps
                                   ///< (result_cache.h); parts of different engines are not merged
  std::optional<ShardInfo> shard;  ///< set for one part of a sharded analysis, else nothing
};

}  // namespace lossbound
