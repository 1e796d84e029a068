#pragma once
// The step-program IR in memory: the aten-level graph traced by make_fx, as documented in
// docs/run-file-format.md. Plain data; parsing and validation live in program_parser.h.

#include "core/tensor/dtype.h"
#include "core/tensor/shape.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace lossbound {

/// Shape and dtype of one tensor output or input.
struct TensorSpec {
  Shape shape;
  DType dtype = DType::Float32;
  bool none = false;  ///< a None element of a returned tuple (JSON null); nothing references it
};

/// A reference to output `index` of the input or node called `name`.
struct ValueRef {
  std::string name;
  int index = 0;
};

/// One argument of a node: a constant, a list, or a reference to a tensor.
struct IrValue {
  enum class Kind {
    None,
    Bool,
    Int,
    Float,
    String,
    List,
    Ref,
    DType,
    Device,
    Layout,
    MemoryFormat
  };
  Kind kind = Kind::None;
  bool boolValue = false;
  std::int64_t intValue = 0;
  double floatValue = 0.0;
  std::string stringValue;  // String, Device, Layout and MemoryFormat payloads
  DType dtypeValue = DType::Float32;
  ValueRef ref;
  std::vector<IrValue> list;
};

/// A named program input (`param:<name>` or `batch:<name>`).
struct InputSpec {
  std::string name;
  TensorSpec spec;
};

/// A small tensor captured by the trace and stored in the program (IR version 2): a literal the
/// nodes reference by name like an input.
struct ConstantSpec {
  std::string name;
  TensorSpec spec;
  std::vector<double> data;  ///< numel(spec.shape) values, row-major, exact in binary64
};

/// One aten call: `op` is the overload as torch prints it ("aten.add.Tensor").
struct Node {
  std::string name;
  std::string op;
  std::vector<IrValue> args;
  std::map<std::string, IrValue> kwargs;
  std::vector<TensorSpec> outputs;
};

/// A named program output ("loss", "grad:wte", ...).
struct OutputSpec {
  std::string name;
  ValueRef ref;
};

/// A whole step program; nodes are in a valid execution order.
struct Program {
  int irVersion = 1;
  std::string torchVersion;
  std::vector<InputSpec> inputs;
  std::vector<ConstantSpec> constants;  ///< IR version 2; empty in version 1
  std::vector<Node> nodes;
  std::vector<OutputSpec> outputs;
};

}  // namespace lossbound
