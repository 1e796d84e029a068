#pragma once
// Parsing and validation of the step-program IR JSON (docs/run-file-format.md) into a Program.
// Structural problems (malformed JSON, wrong format or version, missing fields, duplicate names,
// dangling or forward references, inconsistent specs) are hard errors: ProgramError. Whether the
// engine supports the ops is not the parser's business (core/program/op_coverage.h): reading and
// parsing a program needs no op registry.

#include "core/ir/ir.h"

#include <cstdint>
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

/// The IR format name.
inline constexpr std::string_view kIrFormatName = "lossbound-step-program";
/// The newest IR version this build reads (2: inline constants).
inline constexpr int kIrVersion = 2;
/// The oldest IR version this build reads.
inline constexpr int kMinIrVersion = 1;
/// The largest number of elements of an inline constant (IR version 2).
inline constexpr std::int64_t kMaxInlineConstant = 4096;

/// Parses and validates IR JSON; `source` names the document in messages (e.g.
/// "run.h5:/programs/3fa2…/graph"). Throws ProgramError on any structural problem.
Program parseProgram(std::string_view json, std::string_view source = "step program");

/// Validates an in-memory Program (unique names, references to inputs, constants or earlier nodes,
/// output indices in range, constants whose data fit their shape and dtype, a 0-d floating "loss"
/// output); throws ProgramError naming node and reference.
void validateProgram(const Program& program, std::string_view source = "step program");

/// Returns the index of the node called `name`, or -1.
int findNode(const Program& program, std::string_view name);

/// Returns the spec of the value `ref` points to (an input, a constant or a node output); throws
/// ProgramError when it does not exist.
const TensorSpec& specOf(const Program& program, const ValueRef& ref);

/// Returns "<name>" or "<name>[k]" for messages.
std::string refString(const ValueRef& ref);

}  // namespace lossbound
