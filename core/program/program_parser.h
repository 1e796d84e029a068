#pragma once
// Parsing and validation of the step-program IR JSON (docs/run-file-format.md) into a Program.
// Structural problems (malformed JSON, wrong format or version, missing fields, duplicate names,
// dangling or forward references, inconsistent specs) are hard errors: ProgramError. Ops that the
// engine does not support are *findings* (unsupportedOps()): a program that uses them can still be
// listed and summarised, but the evaluator refuses to run them.

#include "core/program/ir.h"

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace lossbound {

/// Thrown for an IR document that cannot be used; the message says where (the program's source
/// and the node / argument path), what was expected and what was found.
class ProgramError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The IR format name and the one IR version this build reads.
inline constexpr std::string_view kIrFormatName = "lossbound-step-program";
/// The IR version this build reads.
inline constexpr int kIrVersion = 1;

/// Parses and validates IR JSON; `source` names the document in messages (e.g.
/// "run.h5:/programs/3fa2…/graph"). Throws ProgramError on any structural problem.
Program parseProgram(std::string_view json, std::string_view source = "step program");

/// Validates an in-memory Program (unique names, references to inputs or earlier nodes, output
/// indices in range, a 0-d floating "loss" output); throws ProgramError naming node and reference.
void validateProgram(const Program& program, std::string_view source = "step program");

/// One node whose op the engine has no rule for.
struct UnsupportedOp {
  std::string node;  ///< the node name ("gelu_3")
  std::string op;    ///< the aten overload ("aten.gelu.default")
};

/// Returns every node whose op is not in opRegistry(), in program order.
std::vector<UnsupportedOp> unsupportedOps(const Program& program);

/// Returns the distinct ops of unsupportedOps(program), sorted.
std::vector<std::string> unsupportedOpNames(const Program& program);

/// Returns the index of the node called `name`, or -1.
int findNode(const Program& program, std::string_view name);

/// Returns the spec of the value `ref` points to (an input or a node output); throws
/// ProgramError when it does not exist.
const TensorSpec& specOf(const Program& program, const ValueRef& ref);

/// Returns "<name>" or "<name>[k]" for messages.
std::string refString(const ValueRef& ref);

}  // namespace lossbound
