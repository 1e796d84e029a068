#pragma once
// The soundness harness for op rules, shared by every op-family test. A case is one node whose
// tensor inputs are named "in0", "in1", ... and given as point or interval tensors. The harness
//  - runs the interval rule once, then the random rule many times on point inputs sampled inside
//    the input enclosures, and counts escapes (random results outside the interval result);
//  - checks the vjp rule against central finite differences of the point rule in binary64;
//  - checks |random - point| <= localError for exact point inputs.
// It also measures tightness: interval width over the observed spread of the random results.

#include "core/ir/ir.h"
#include "core/ops/op_rule.h"
#include "core/ops/precision_model.h"
#include "core/tensor/tensor.h"

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace lossbound::test {

/// Returns a reference argument to tensor input `name` ("in0", ...).
IrValue ref(const std::string& name, int index = 0);
/// Returns a reference to input i ("in<i>").
IrValue in(int i);
/// Returns a float constant argument.
IrValue num(double v);
/// Returns an int constant argument.
IrValue integer(std::int64_t v);
/// Returns a bool constant argument.
IrValue flag(bool v);
/// Returns a list-of-ints argument.
IrValue ints(const std::vector<std::int64_t>& v);
/// Returns a list argument of arbitrary values.
IrValue list(std::vector<IrValue> v);
/// Returns a dtype constant argument.
IrValue dtypeValue(DType t);
/// Returns a None argument.
IrValue none();

/// One node applied to concrete inputs under a precision model.
struct OpCase {
  std::string op;                         ///< e.g. "aten.add.Tensor"
  std::vector<IrValue> args;              ///< positional args; tensors as in(i)
  std::map<std::string, IrValue> kwargs;  ///< keyword args
  std::vector<DType> outDtypes;           ///< traced output dtypes (shapes come from point())
  std::vector<Tensor> inputs;             ///< bound to "in0", "in1", ... in order
  PrecisionModel precision;               ///< the modelled arithmetic
};

/// The result of an enclosure check.
struct EnclosureReport {
  int trials = 0;            ///< random executions run
  int escapes = 0;           ///< random output elements outside the interval result
  std::string firstEscape;   ///< description of the first escape
  double widthSum = 0.0;     ///< Σ interval widths over finite output elements
  double spreadSum = 0.0;    ///< Σ observed random spreads over the same elements
  double relWidthMax = 0.0;  ///< max width / max(|mid|, tiny)
};

/// Runs `trials` random executions on inputs sampled inside the input enclosures and counts the
/// output elements outside the interval result; also checks that point() lies inside it when the
/// inputs are points.
EnclosureReport checkEnclosure(const OpCase& c, int trials, std::mt19937_64& rng);

/// Returns the interval rule's outputs for the case (output shapes taken from point()).
std::vector<Tensor> intervalOutputs(const OpCase& c);
/// Returns the point rule's outputs and the local error bounds of each (for exact point inputs,
/// held exactly: OpContext::exactOperands).
std::vector<Tensor> localErrorOutputs(const OpCase& c, std::vector<Tensor>* pointOut = nullptr);

/// The result of a finite-difference check of vjp().
struct VjpReport {
  double maxRelError = 0.0;  ///< max |fd - analytic| / (|fd| + |analytic| + tiny) over checks
  std::string where;         ///< which input had the largest error
};
/// Compares <vjp(g), d> with the central difference of <g, point(x + h d)> for random g, d on
/// every floating input; inputs must be points (midpoints are used otherwise).
VjpReport checkVjp(const OpCase& c, std::mt19937_64& rng, int directions = 3, double h = 1e-6);

/// The result of a local-error check.
struct LocalErrorReport {
  int trials = 0;
  int violations = 0;
  std::string first;
  double maxRatio = 0.0;  ///< max |random - point| / localError
};
/// Checks |random - point| <= localError·(1 + 1e-6) for exact point inputs (for fp64 models the
/// binary64 point evaluation itself has an error of the same bound: then 2·localError).
LocalErrorReport checkLocalError(const OpCase& c, int trials, std::mt19937_64& rng);

/// The result of an adjoint-weighted local-error check.
struct AdjointErrorReport {
  bool hooked = false;         ///< the rule has an adjointLocalError for this case
  int trials = 0;              ///< random executions run (each checked against every adjoint)
  int checks = 0;              ///< (execution, adjoint) pairs checked
  int violations = 0;          ///< pairs with |Σ⟨g, ŷ − y⟩| above the bound
  int probabilisticAbove = 0;  ///< adjoints whose sqrt(sumSquares) exceeds the bound
  std::string first;           ///< description of the first violation
  double maxRatio = 0.0;       ///< max |Σ⟨g, ŷ − y⟩| / bound
  /// The probabilistic term p = sqrt(sumSquares), as checkProbabilisticTerm (rule_call.h)
  /// checks an element's: executions with |Σ⟨g, ŷ − y⟩| > λ·p (λ = 5.39), and the largest
  /// root-mean-square of Σ⟨g, ŷ − y⟩ over the executions, over p, among the adjoints.
  int probabilisticEscapes = 0;
  double maxRmsRatio = 0.0;
};
/// For exact point inputs and four adjoints (random signs, all ones, g ∝ y, one element of
/// output 0), checks |Σ_k ⟨g_k, ŷ_k − y_k⟩| <= adjointLocalError's bound·(1 + 1e-6) for `trials`
/// random executions ŷ and the point outputs y, and sqrt(sumSquares) <= bound; reports the
/// probabilistic term's escapes and root-mean-square ratio (the test asserts them).
AdjointErrorReport checkAdjointLocalError(const OpCase& c, int trials, std::mt19937_64& rng);

/// Returns a random value with a wide dynamic range: sign · 2^U(-spread, spread) · U(1, 2).
double wideValue(std::mt19937_64& rng, double spread = 20.0);
/// Returns a point tensor of random values (wide range for floats, rounded to nearest in the
/// dtype's format; integers in [0, intHigh) for integer dtypes, 0/1 for bool).
Tensor randomPoint(const Shape& s, DType t, std::mt19937_64& rng, double spread = 20.0,
                   std::int64_t intHigh = 8);
/// Returns an interval tensor around randomPoint() values with relative radii up to `rel`
/// (some elements degenerate), endpoints rounded outward to the dtype's format.
Tensor randomInterval(const Shape& s, DType t, std::mt19937_64& rng, double rel = 1e-3,
                      double spread = 20.0);
/// Returns a random shape of the given rank with extents in [0, maxExtent] (0 with probability
/// zeroProb per dim).
Shape randomShape(int rank, std::mt19937_64& rng, int maxExtent = 5, double zeroProb = 0.05);
/// Returns a shape that broadcasts to `s`: some leading dims dropped, some dims set to 1.
Shape broadcastableTo(const Shape& s, std::mt19937_64& rng);
/// Returns a point tensor sampled inside enclosure t: endpoints, midpoint or uniform, rounded to
/// nearest in format `f` when that stays inside.
Tensor sampleInside(const Tensor& t, std::mt19937_64& rng);
/// Returns the storage format of a dtype under a precision model (Fp64 for integers).
Format formatOf(DType t, const PrecisionModel& pm);
/// Returns a precision model that overrides every op to format f (nullopt: the traced dtypes).
PrecisionModel modelFor(std::optional<Format> f);
/// Returns the dtype that stores format f (Tf32 → Float32).
DType dtypeFor(Format f);

}  // namespace lossbound::test
