#include "core/ir/program_parser.h"

#include "core/interval/number_text.h"
#include "core/interval/precision.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

namespace lossbound {

namespace {

// nlohmann::json keeps the lexical kind of a number: "2" is an integer, "2.0" or "2e0" a float.
// The IR relies on that rule (an int and a float constant promote differently in torch).
using Json = nlohmann::json;

// Nesting deeper than this is refused before parsing: the IR never nests more than a few levels
// (lists of lists of references), and the value reader below recurses.
constexpr int kMaxNesting = 64;

// Returns the deepest nesting of [ and { outside string literals.
int nestingDepth(std::string_view text) {
  int depth = 0, deepest = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {  // skip a string literal, escapes included
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\') ++i;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

// Returns the float of a tagged literal {"float": "..."} or {"float": <number>}, if `v` is one.
std::optional<double> taggedFloat(const Json& v) {
  if (!v.is_object() || v.size() != 1 || !v.contains("float")) return std::nullopt;
  const Json& f = v["float"];
  if (f.is_number()) return f.get<double>();
  if (!f.is_string()) return std::nullopt;
  const std::string s = f.get<std::string>();
  if (s == "inf" || s == "+inf" || s == "Infinity") return std::numeric_limits<double>::infinity();
  if (s == "-inf" || s == "-Infinity") return -std::numeric_limits<double>::infinity();
  if (s == "nan" || s == "NaN" || s == "-nan") return std::numeric_limits<double>::quiet_NaN();
  double d = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return d;
}

// Describes a JSON value for "found ..." in messages.
std::string describe(const Json& v) {
  if (const auto f = taggedFloat(v)) return "the number " + numberText(*f);
  switch (v.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return v.get<bool>() ? "true" : "false";
    case Json::value_t::number_integer:
      return "the number " + std::to_string(v.get<std::int64_t>());
    case Json::value_t::number_unsigned:
      return "the number " + std::to_string(v.get<std::uint64_t>());
    case Json::value_t::number_float:
      return "the number " + numberText(v.get<double>());
    case Json::value_t::string: {
      std::string s = v.get<std::string>();
      if (s.size() > 60) s = s.substr(0, 57) + "...";
      return "the string \"" + s + "\"";
    }
    case Json::value_t::array:
      return "a list of " + std::to_string(v.size()) + " values";
    case Json::value_t::object: {
      std::string keys;
      for (const auto& item : v.items()) keys += (keys.empty() ? "" : ", ") + item.key();
      return "an object with keys {" + keys + "}";
    }
    case Json::value_t::binary:
    case Json::value_t::discarded:
      break;
  }
  return "an unknown value";
}

// Returns true for an integer token that fits int64 (larger integer tokens are read as floats).
bool isInteger(const Json& v) {
  if (v.is_number_integer() && !v.is_number_unsigned()) return true;
  return v.is_number_unsigned() &&
         v.get<std::uint64_t>() <=
             static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
}

class Parser {
 public:
  explicit Parser(std::string_view source) : mSource(source) {}

  [[noreturn]] void fail(const std::string& where, const std::string& message) const {
    std::string prefix = mSource.empty() ? "" : mSource + ": ";
    if (!where.empty()) prefix += where + ": ";
    throw ProgramError(prefix + message);
  }

  const Json& field(const Json& o, const char* key, const std::string& where,
                    const char* expected) const {
    const auto it = o.find(key);
    if (it == o.end())
      fail(where, std::string("missing field '") + key + "' (expected " + expected + ")");
    return *it;
  }

  std::string stringField(const Json& o, const char* key, const std::string& where) const {
    const Json& v = field(o, key, where, "a string");
    if (!v.is_string())
      fail(where, std::string("field '") + key + "' should be a string, found " + describe(v));
    return v.get<std::string>();
  }

  std::int64_t integer(const Json& v, const std::string& where, const std::string& what) const {
    if (!isInteger(v)) fail(where, what + " should be an integer, found " + describe(v));
    return v.get<std::int64_t>();
  }

  TensorSpec spec(const Json& v, const std::string& where) const {
    if (!v.is_object())
      fail(where,
           "expected a tensor spec {\"shape\": [...], \"dtype\": \"...\"}, found " + describe(v));
    TensorSpec s;
    const Json& dims = field(v, "shape", where, "a list of dimensions");
    if (!dims.is_array())
      fail(where, "field 'shape' should be a list of dimensions, found " + describe(dims));
    for (std::size_t i = 0; i < dims.size(); ++i) {
      const std::int64_t d = integer(dims[i], where, "shape dimension " + std::to_string(i));
      if (d < 0)
        fail(where, "shape dimension " + std::to_string(i) + " is " + std::to_string(d) +
                        ", expected a size >= 0");
      s.shape.push_back(d);
    }
    const std::string dt = stringField(v, "dtype", where);
    const auto parsed = parseDType(dt);
    if (!parsed)
      fail(where,
           "unknown dtype \"" + dt +
               "\" (expected float64, float32, bfloat16, float16, int64, int32, int16, int8, "
               "uint8 or bool)");
    s.dtype = *parsed;
    return s;
  }

  IrValue value(const Json& v, const std::string& where) const {
    IrValue out;
    if (auto f = taggedFloat(v)) {
      out.kind = IrValue::Kind::Float;
      out.floatValue = *f;
      return out;
    }
    switch (v.type()) {
      case Json::value_t::null:
        out.kind = IrValue::Kind::None;
        return out;
      case Json::value_t::boolean:
        out.kind = IrValue::Kind::Bool;
        out.boolValue = v.get<bool>();
        return out;
      case Json::value_t::number_integer:
      case Json::value_t::number_unsigned:
      case Json::value_t::number_float:
        if (isInteger(v)) {
          out.kind = IrValue::Kind::Int;
          out.intValue = v.get<std::int64_t>();
        } else {  // a float token, or an integer token beyond int64: keep its value as a float
          out.kind = IrValue::Kind::Float;
          out.floatValue = v.get<double>();
        }
        return out;
      case Json::value_t::string:
        out.kind = IrValue::Kind::String;
        out.stringValue = v.get<std::string>();
        return out;
      case Json::value_t::array:
        out.kind = IrValue::Kind::List;
        out.list.reserve(v.size());
        for (std::size_t i = 0; i < v.size(); ++i)
          out.list.push_back(value(v[i], where + "[" + std::to_string(i) + "]"));
        return out;
      case Json::value_t::object:
        break;
      case Json::value_t::binary:
      case Json::value_t::discarded:
        fail(where, "unexpected JSON value");
    }
    if (v.contains("ref")) {
      for (const auto& item : v.items())
        if (item.key() != "ref" && item.key() != "index")
          fail(where, "a reference may only have the keys 'ref' and 'index', found key '" +
                          item.key() + "'");
      const Json& r = v["ref"];
      if (!r.is_string() || r.get<std::string>().empty())
        fail(where, "'ref' should be the name of an input, constant or node, found " + describe(r));
      out.kind = IrValue::Kind::Ref;
      out.ref.name = r.get<std::string>();
      if (v.contains("index")) {
        const std::int64_t idx = integer(v["index"], where, "reference index");
        if (idx < 0 || idx > 1'000'000)
          fail(where,
               "reference index " + std::to_string(idx) + " is out of range (expected >= 0)");
        out.ref.index = static_cast<int>(idx);
      }
      return out;
    }
    if (v.size() == 1) {
      const std::string key = v.begin().key();
      const Json& payload = v.begin().value();
      if (key == "float")
        fail(where,
             "expected a float constant {\"float\": \"inf\" | \"-inf\" | \"nan\" | <number>}, "
             "found " +
                 describe(payload));
      if (key == "dtype" || key == "device" || key == "layout" || key == "memory_format") {
        if (!payload.is_string())
          fail(where,
               "tagged constant '" + key + "' should hold a string, found " + describe(payload));
        out.stringValue = payload.get<std::string>();
        if (key == "dtype") {
          const auto dt = parseDType(out.stringValue);
          if (!dt) fail(where, "unknown dtype \"" + out.stringValue + "\"");
          out.kind = IrValue::Kind::DType;
          out.dtypeValue = *dt;
        } else {
          out.kind = key == "device"   ? IrValue::Kind::Device
                     : key == "layout" ? IrValue::Kind::Layout
                                       : IrValue::Kind::MemoryFormat;
        }
        return out;
      }
    }
    fail(where,
         "expected a reference {\"ref\": ...} or a tagged constant (float, dtype, device, "
         "layout, memory_format), found " +
             describe(v));
  }

  ValueRef reference(const Json& v, const std::string& where) const {
    const IrValue r = value(v, where);
    if (r.kind != IrValue::Kind::Ref)
      fail(where, "expected a reference {\"ref\": \"<name>\", \"index\": k}, found " + describe(v));
    return r.ref;
  }

  const Json& array(const Json& o, const char* key, const std::string& where) const {
    const Json& v = field(o, key, where, "a list");
    if (!v.is_array())
      fail(where, std::string("field '") + key + "' should be a list, found " + describe(v));
    return v;
  }

  // One element of a constant's data: a number, a tagged non-finite float, or a bool.
  double element(const Json& v, const std::string& where) const {
    if (const auto f = taggedFloat(v)) return *f;
    if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
    if (v.is_number()) return v.get<double>();
    fail(where, "expected a number, {\"float\": \"inf\" | \"-inf\" | \"nan\"} or a bool, found " +
                    describe(v));
  }

  ConstantSpec constant(const Json& v, const std::string& index) const {
    std::string where = "constant #" + index;
    if (!v.is_object())
      fail(where, "expected an object {name, shape, dtype, data}, found " + describe(v));
    ConstantSpec c;
    c.name = stringField(v, "name", where);
    where = "constant '" + c.name + "'";
    c.spec = spec(v, where);
    const Json& data = array(v, "data", where);
    c.data.reserve(data.size());
    for (std::size_t i = 0; i < data.size(); ++i)
      c.data.push_back(element(data[i], where + ", data[" + std::to_string(i) + "]"));
    return c;
  }

  Program program(const Json& root) const {
    Program p;
    const Json& format = field(root, "format", "", "\"lossbound-step-program\"");
    if (!format.is_string() || format.get<std::string>() != kIrFormatName)
      fail("", "field 'format' is " + describe(format) + ", expected \"" +
                   std::string(kIrFormatName) + "\" (is this a step program?)");
    const Json& version = field(root, "ir_version", "", "an integer");
    const std::int64_t v = integer(version, "", "field 'ir_version'");
    if (v < kMinIrVersion || v > kIrVersion)
      fail("", "found IR version " + std::to_string(v) + ", this Lossbound reads IR versions " +
                   std::to_string(kMinIrVersion) + " to " + std::to_string(kIrVersion) +
                   (v > kIrVersion ? " (the recorder is newer: update Lossbound)" : ""));
    p.irVersion = static_cast<int>(v);
    if (root.contains("torch_version")) p.torchVersion = stringField(root, "torch_version", "");

    const Json& inputs = array(root, "inputs", "");
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      std::string where = "input #" + std::to_string(i);
      if (!inputs[i].is_object())
        fail(where, "expected an object {name, shape, dtype}, found " + describe(inputs[i]));
      InputSpec in;
      in.name = stringField(inputs[i], "name", where);
      where = "input '" + in.name + "'";
      in.spec = spec(inputs[i], where);
      p.inputs.push_back(std::move(in));
    }

    if (root.contains("constants")) {
      if (p.irVersion < 2)
        fail("", "field 'constants' needs IR version 2, the program says version " +
                     std::to_string(p.irVersion));
      const Json& constants = array(root, "constants", "");
      for (std::size_t i = 0; i < constants.size(); ++i)
        p.constants.push_back(constant(constants[i], std::to_string(i)));
    }

    const Json& nodes = array(root, "nodes", "");
    p.nodes.reserve(nodes.size());
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      std::string where = "node #" + std::to_string(i);
      const Json& o = nodes[i];
      if (!o.is_object())
        fail(where, "expected an object {name, op, args, kwargs, outputs}, found " + describe(o));
      Node n;
      n.name = stringField(o, "name", where);
      where = "node '" + n.name + "' (#" + std::to_string(i) + ")";
      n.op = stringField(o, "op", where);
      where = "node '" + n.name + "' (#" + std::to_string(i) + ", " + n.op + ")";
      const Json& args = array(o, "args", where);
      n.args.reserve(args.size());
      for (std::size_t a = 0; a < args.size(); ++a)
        n.args.push_back(value(args[a], where + ", argument " + std::to_string(a)));
      if (o.contains("kwargs")) {
        const Json& kw = o["kwargs"];
        if (!kw.is_object())
          fail(where, "field 'kwargs' should be an object, found " + describe(kw));
        for (const auto& item : kw.items())
          n.kwargs.emplace(item.key(),
                           value(item.value(), where + ", keyword argument '" + item.key() + "'"));
      }
      const Json& outs = array(o, "outputs", where);
      for (std::size_t k = 0; k < outs.size(); ++k) {
        if (outs[k].is_null()) {  // a None element of a returned tuple
          TensorSpec none;
          none.none = true;
          n.outputs.push_back(none);
        } else {
          n.outputs.push_back(spec(outs[k], where + ", output " + std::to_string(k)));
        }
      }
      p.nodes.push_back(std::move(n));
    }

    const Json& outputs = array(root, "outputs", "");
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      std::string where = "program output #" + std::to_string(i);
      if (!outputs[i].is_object())
        fail(where, "expected an object {name, ref}, found " + describe(outputs[i]));
      OutputSpec out;
      out.name = stringField(outputs[i], "name", where);
      where = "program output '" + out.name + "'";
      out.ref = reference(field(outputs[i], "ref", where, "a reference"), where);
      p.outputs.push_back(std::move(out));
    }
    return p;
  }

 private:
  std::string mSource;
};

void collectRefs(const IrValue& v, std::vector<const ValueRef*>& out) {
  if (v.kind == IrValue::Kind::Ref) out.push_back(&v.ref);
  for (const IrValue& e : v.list) collectRefs(e, out);
}

// Returns what is wrong with value x as an element of dtype t, or "" (x must be exactly what the
// candidate stores: an element of the format, an integer in range, 0 or 1 for bool).
std::string elementProblem(double x, DType t) {
  if (const auto f = storageFormat(t)) {
    if (std::isnan(x) || std::isinf(x)) return "";
    if (roundToFormat(x, *f, RoundingDirection::Nearest) != x)
      return "is not a " + std::string(dtypeName(t)) + " value";
    return "";
  }
  if (!std::isfinite(x) || std::trunc(x) != x) return "is not an integer";
  const auto range = [&]() -> std::pair<double, double> {
    switch (t) {
      case DType::Bool:
        return {0, 1};
      case DType::UInt8:
        return {0, 255};
      case DType::Int8:
        return {-128, 127};
      case DType::Int16:
        return {-32768, 32767};
      case DType::Int32:
        return {-2147483648.0, 2147483647.0};
      default:
        return {-9007199254740992.0, 9007199254740992.0};  // int64 held exactly: |v| <= 2^53
    }
  }();
  if (x < range.first || x > range.second)
    return "is out of range for " + std::string(dtypeName(t));
  return "";
}

}  // namespace

std::string refString(const ValueRef& ref) {
  return ref.index == 0 ? ref.name : ref.name + "[" + std::to_string(ref.index) + "]";
}

Program parseProgram(std::string_view json, std::string_view source) {
  const Parser parser(source);
  if (const int depth = nestingDepth(json); depth > kMaxNesting)
    parser.fail("", "the JSON nests " + std::to_string(depth) +
                        " levels deep; a step program "
                        "nests at most " +
                        std::to_string(kMaxNesting));
  Json doc;
  try {
    doc = Json::parse(json.begin(), json.end());
  } catch (const Json::parse_error& e) {
    const std::size_t at = std::min(e.byte > 0 ? e.byte - 1 : 0, json.size());
    std::string context(json.substr(at > 20 ? at - 20 : 0, 40));
    std::replace(context.begin(), context.end(), '\n', ' ');
    std::string what = e.what();
    if (const auto colon = what.rfind(": "); colon != std::string::npos)
      what = what.substr(colon + 2);
    parser.fail("", "malformed JSON at byte offset " + std::to_string(at) + ": " + what +
                        " (near \"" + context + "\")");
  }
  if (!doc.is_object())
    parser.fail("", "expected a JSON object at the top level, found " + describe(doc));
  Program program = parser.program(doc);
  validateProgram(program, source);
  return program;
}

void validateProgram(const Program& program, std::string_view source) {
  const Parser parser(source);
  // name → (node index or -1 for inputs, number of outputs)
  std::unordered_map<std::string, std::pair<int, std::size_t>> defined;
  for (std::size_t i = 0; i < program.inputs.size(); ++i) {
    const InputSpec& in = program.inputs[i];
    const std::string where = "input #" + std::to_string(i);
    if (in.name.empty()) parser.fail(where, "the input name is empty");
    if (!in.name.starts_with("param:") && !in.name.starts_with("batch:"))
      parser.fail(
          "input '" + in.name + "'",
          "input names must start with \"param:\" or \"batch:\", found \"" + in.name + "\"");
    if (!defined.emplace(in.name, std::pair{-1, std::size_t{1}}).second)
      parser.fail("input '" + in.name + "'", "duplicate input name");
  }
  for (std::size_t i = 0; i < program.constants.size(); ++i) {
    const ConstantSpec& c = program.constants[i];
    const std::string where = "constant '" + c.name + "'";
    if (c.name.empty()) parser.fail("constant #" + std::to_string(i), "the constant name is empty");
    if (c.name.starts_with("param:") || c.name.starts_with("batch:"))
      parser.fail(where, "a constant name cannot start with \"param:\" or \"batch:\"");
    if (!defined.emplace(c.name, std::pair{-1, std::size_t{1}}).second)
      parser.fail(where, "duplicate name: an input or constant is also called '" + c.name + "'");
    const std::int64_t n = numel(c.spec.shape);
    if (n > kMaxInlineConstant)
      parser.fail(where, "has " + std::to_string(n) + " elements; inline constants hold at most " +
                             std::to_string(kMaxInlineConstant));
    if (static_cast<std::int64_t>(c.data.size()) != n)
      parser.fail(where, "shape " + shapeString(c.spec.shape) + " needs " + std::to_string(n) +
                             " values, 'data' has " + std::to_string(c.data.size()));
    for (std::size_t k = 0; k < c.data.size(); ++k)
      if (const std::string bad = elementProblem(c.data[k], c.spec.dtype); !bad.empty())
        parser.fail(where,
                    "data[" + std::to_string(k) + "] = " + numberText(c.data[k]) + " " + bad);
  }
  std::unordered_map<std::string, int> nodeIndex;
  for (std::size_t i = 0; i < program.nodes.size(); ++i) {
    const Node& n = program.nodes[i];
    if (n.name.empty()) parser.fail("node #" + std::to_string(i), "the node name is empty");
    if (n.op.empty()) parser.fail("node '" + n.name + "'", "the op name is empty");
    if (!nodeIndex.emplace(n.name, static_cast<int>(i)).second || defined.count(n.name))
      parser.fail(
          "node '" + n.name + "' (#" + std::to_string(i) + ")",
          "duplicate name: an earlier input, constant or node is also called '" + n.name + "'");
  }
  auto checkRef = [&](const ValueRef& ref, const std::string& where) {
    auto in = defined.find(ref.name);
    if (in == defined.end()) {
      auto later = nodeIndex.find(ref.name);
      if (later != nodeIndex.end())
        parser.fail(where,
                    "refers to node '" + ref.name + "' (#" + std::to_string(later->second) +
                        "), which is not computed before it; nodes must be in execution order");
      parser.fail(where,
                  "refers to '" + ref.name + "', but no input, constant or node has that name");
    }
    if (ref.index < 0 || static_cast<std::size_t>(ref.index) >= in->second.second) {
      const std::string what =
          in->second.first < 0
              ? "'" + ref.name + "' has 1 value"
              : "node '" + ref.name + "' has " + std::to_string(in->second.second) + " outputs";
      parser.fail(where, "refers to " + refString(ref) + ", but " + what);
    }
    if (in->second.first >= 0 && program.nodes[static_cast<std::size_t>(in->second.first)]
                                     .outputs[static_cast<std::size_t>(ref.index)]
                                     .none)
      parser.fail(where, "refers to " + refString(ref) + ", but output " +
                             std::to_string(ref.index) + " of node '" + ref.name +
                             "' is None (null in the trace)");
  };
  for (std::size_t i = 0; i < program.nodes.size(); ++i) {
    const Node& n = program.nodes[i];
    const std::string where = "node '" + n.name + "' (#" + std::to_string(i) + ", " + n.op + ")";
    std::vector<const ValueRef*> refs;
    for (const IrValue& a : n.args) collectRefs(a, refs);
    for (const auto& [k, v] : n.kwargs) collectRefs(v, refs);
    for (const ValueRef* r : refs) checkRef(*r, where);
    defined.emplace(n.name, std::pair{static_cast<int>(i), n.outputs.size()});
  }
  std::set<std::string> outputNames;
  const OutputSpec* loss = nullptr;
  for (const OutputSpec& out : program.outputs) {
    const std::string where = "program output '" + out.name + "'";
    if (out.name.empty()) parser.fail("program outputs", "an output name is empty");
    if (!outputNames.insert(out.name).second) parser.fail(where, "duplicate output name");
    checkRef(out.ref, where);
    if (out.name == "loss") loss = &out;
  }
  if (!loss) parser.fail("program outputs", "there is no output called \"loss\" (required)");
  const TensorSpec& ls = specOf(program, loss->ref);
  if (!ls.shape.empty() || !isFloating(ls.dtype))
    parser.fail("program output 'loss'",
                "expected a 0-d floating tensor, found " + shapeString(ls.shape) + " " +
                    std::string(dtypeName(ls.dtype)) + " (from " + refString(loss->ref) + ")");
}

int findNode(const Program& program, std::string_view name) {
  for (std::size_t i = 0; i < program.nodes.size(); ++i)
    if (program.nodes[i].name == name) return static_cast<int>(i);
  return -1;
}

const TensorSpec& specOf(const Program& program, const ValueRef& ref) {
  for (const InputSpec& in : program.inputs)
    if (in.name == ref.name) {
      if (ref.index != 0)
        throw ProgramError("reference " + refString(ref) + ": input '" + ref.name +
                           "' has 1 value");
      return in.spec;
    }
  for (const ConstantSpec& c : program.constants)
    if (c.name == ref.name) {
      if (ref.index != 0)
        throw ProgramError("reference " + refString(ref) + ": constant '" + ref.name +
                           "' has 1 value");
      return c.spec;
    }
  const int i = findNode(program, ref.name);
  if (i < 0)
    throw ProgramError("reference " + refString(ref) +
                       ": no input, constant or node has that name");
  const Node& n = program.nodes[static_cast<std::size_t>(i)];
  if (ref.index < 0 || static_cast<std::size_t>(ref.index) >= n.outputs.size())
    throw ProgramError("reference " + refString(ref) + ": node '" + n.name + "' has " +
                       std::to_string(n.outputs.size()) + " outputs");
  return n.outputs[static_cast<std::size_t>(ref.index)];
}

}  // namespace lossbound
