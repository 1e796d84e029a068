#include "core/program/program_parser.h"

#include "core/ops/registry.h"

#include <QByteArray>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QJsonParseError>
#include <QJsonValue>
#include <QVariant>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <unordered_map>

namespace lossbound {

namespace {

// QJsonDocument stores integral doubles ("2.0") as integers, but an IR constant 2.0 is a float and
// 2 an int (they promote differently in torch). Before the second parse, every number token that
// is written as a float is wrapped as {"float": "<token>"}, the IR's own tagged form.
std::string tagFloatLiterals(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"') {  // copy a whole string literal, escapes included
      const std::size_t start = i++;
      while (i < text.size() && text[i] != '"') i += (text[i] == '\\') ? 2 : 1;
      i = std::min(i + 1, text.size());
      out.append(text.substr(start, i - start));
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      const std::size_t start = i;
      bool isFloat = false;
      while (i < text.size() &&
             (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '-' ||
              text[i] == '+' || text[i] == '.' || text[i] == 'e' || text[i] == 'E')) {
        isFloat = isFloat || text[i] == '.' || text[i] == 'e' || text[i] == 'E';
        ++i;
      }
      const std::string_view token = text.substr(start, i - start);
      if (isFloat) {
        out += "{\"float\":\"";
        out.append(token);
        out += "\"}";
      } else {
        out.append(token);
      }
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

// Returns the float of a tagged literal {"float": "..."}, if `v` is one.
std::optional<double> taggedFloat(const QJsonValue& v) {
  if (!v.isObject()) return std::nullopt;
  const QJsonObject o = v.toObject();
  if (o.size() != 1 || !o.contains(QLatin1String("float"))) return std::nullopt;
  const QJsonValue f = o.value(QLatin1String("float"));
  if (f.isDouble()) return f.toDouble();
  if (!f.isString()) return std::nullopt;
  const std::string s = f.toString().toStdString();
  if (s == "inf" || s == "+inf" || s == "Infinity") return std::numeric_limits<double>::infinity();
  if (s == "-inf" || s == "-Infinity") return -std::numeric_limits<double>::infinity();
  if (s == "nan" || s == "NaN" || s == "-nan") return std::numeric_limits<double>::quiet_NaN();
  double d = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return d;
}

// Describes a JSON value for "found ..." in messages.
std::string describe(const QJsonValue& v) {
  if (taggedFloat(v))
    return "the number " + v.toObject().value(QLatin1String("float")).toString().toStdString();
  switch (v.type()) {
    case QJsonValue::Null:
      return "null";
    case QJsonValue::Bool:
      return v.toBool() ? "true" : "false";
    case QJsonValue::Double: {
      const QVariant var = v.toVariant();
      if (var.metaType().id() == QMetaType::LongLong)
        return "the number " + std::to_string(v.toInteger());
      return "the number " + QByteArray::number(v.toDouble(), 'g', 17).toStdString();
    }
    case QJsonValue::String: {
      std::string s = v.toString().toStdString();
      if (s.size() > 60) s = s.substr(0, 57) + "...";
      return "the string \"" + s + "\"";
    }
    case QJsonValue::Array:
      return "a list of " + std::to_string(v.toArray().size()) + " values";
    case QJsonValue::Object: {
      std::string keys;
      for (const QString& k : v.toObject().keys())
        keys += (keys.empty() ? "" : ", ") + k.toStdString();
      return "an object with keys {" + keys + "}";
    }
    case QJsonValue::Undefined:
      return "nothing";
  }
  return "an unknown value";
}

class Parser {
 public:
  explicit Parser(std::string_view source) : mSource(source) {}

  [[noreturn]] void fail(const std::string& where, const std::string& message) const {
    std::string prefix = mSource.empty() ? "" : mSource + ": ";
    if (!where.empty()) prefix += where + ": ";
    throw ProgramError(prefix + message);
  }

  QJsonValue field(const QJsonObject& o, const char* key, const std::string& where,
                   const char* expected) const {
    const QJsonValue v = o.value(QLatin1String(key));
    if (v.isUndefined())
      fail(where, std::string("missing field '") + key + "' (expected " + expected + ")");
    return v;
  }

  std::string stringField(const QJsonObject& o, const char* key, const std::string& where) const {
    const QJsonValue v = field(o, key, where, "a string");
    if (!v.isString())
      fail(where, std::string("field '") + key + "' should be a string, found " + describe(v));
    return v.toString().toStdString();
  }

  static bool isInteger(const QJsonValue& v) {
    return v.isDouble() && v.toVariant().metaType().id() == QMetaType::LongLong;
  }

  std::int64_t integer(const QJsonValue& v, const std::string& where,
                       const std::string& what) const {
    if (!isInteger(v)) fail(where, what + " should be an integer, found " + describe(v));
    return v.toInteger();
  }

  TensorSpec spec(const QJsonValue& v, const std::string& where) const {
    if (!v.isObject())
      fail(where,
           "expected a tensor spec {\"shape\": [...], \"dtype\": \"...\"}, found " + describe(v));
    const QJsonObject o = v.toObject();
    TensorSpec s;
    const QJsonValue shape = field(o, "shape", where, "a list of dimensions");
    if (!shape.isArray())
      fail(where, "field 'shape' should be a list of dimensions, found " + describe(shape));
    const QJsonArray dims = shape.toArray();
    for (qsizetype i = 0; i < dims.size(); ++i) {
      const std::int64_t d = integer(dims.at(i), where, "shape dimension " + std::to_string(i));
      if (d < 0)
        fail(where, "shape dimension " + std::to_string(i) + " is " + std::to_string(d) +
                        ", expected a size >= 0");
      s.shape.push_back(d);
    }
    const std::string dt = stringField(o, "dtype", where);
    const auto parsed = parseDType(dt);
    if (!parsed)
      fail(where,
           "unknown dtype \"" + dt +
               "\" (expected float64, float32, bfloat16, float16, int64, int32, int16, int8, "
               "uint8 or bool)");
    s.dtype = *parsed;
    return s;
  }

  IrValue value(const QJsonValue& v, const std::string& where) const {
    IrValue out;
    if (auto f = taggedFloat(v)) {
      out.kind = IrValue::Kind::Float;
      out.floatValue = *f;
      return out;
    }
    switch (v.type()) {
      case QJsonValue::Null:
      case QJsonValue::Undefined:
        out.kind = IrValue::Kind::None;
        return out;
      case QJsonValue::Bool:
        out.kind = IrValue::Kind::Bool;
        out.boolValue = v.toBool();
        return out;
      case QJsonValue::Double:
        if (isInteger(v)) {
          out.kind = IrValue::Kind::Int;
          out.intValue = v.toInteger();
        } else {  // an integer token beyond int64: keep its value as a float
          out.kind = IrValue::Kind::Float;
          out.floatValue = v.toDouble();
        }
        return out;
      case QJsonValue::String:
        out.kind = IrValue::Kind::String;
        out.stringValue = v.toString().toStdString();
        return out;
      case QJsonValue::Array: {
        out.kind = IrValue::Kind::List;
        const QJsonArray a = v.toArray();
        out.list.reserve(static_cast<std::size_t>(a.size()));
        for (qsizetype i = 0; i < a.size(); ++i)
          out.list.push_back(value(a.at(i), where + "[" + std::to_string(i) + "]"));
        return out;
      }
      case QJsonValue::Object:
        break;
    }
    const QJsonObject o = v.toObject();
    if (o.contains(QLatin1String("ref"))) {
      for (const QString& k : o.keys())
        if (k != QLatin1String("ref") && k != QLatin1String("index"))
          fail(where, "a reference may only have the keys 'ref' and 'index', found key '" +
                          k.toStdString() + "'");
      const QJsonValue r = o.value(QLatin1String("ref"));
      if (!r.isString() || r.toString().isEmpty())
        fail(where, "'ref' should be the name of an input or node, found " + describe(r));
      out.kind = IrValue::Kind::Ref;
      out.ref.name = r.toString().toStdString();
      if (o.contains(QLatin1String("index"))) {
        const std::int64_t idx = integer(o.value(QLatin1String("index")), where, "reference index");
        if (idx < 0 || idx > 1'000'000)
          fail(where,
               "reference index " + std::to_string(idx) + " is out of range (expected >= 0)");
        out.ref.index = static_cast<int>(idx);
      }
      return out;
    }
    static const QStringList kTags{QStringLiteral("float"), QStringLiteral("dtype"),
                                   QStringLiteral("device"), QStringLiteral("layout"),
                                   QStringLiteral("memory_format")};
    if (o.size() == 1 && kTags.contains(o.keys().front())) {
      const QString key = o.keys().front();
      const QJsonValue payload = o.value(key);
      if (key == QLatin1String("float"))
        fail(where,
             "expected a float constant {\"float\": \"inf\" | \"-inf\" | \"nan\" | <number>}, "
             "found " +
                 describe(payload));
      if (!payload.isString())
        fail(where, "tagged constant '" + key.toStdString() + "' should hold a string, found " +
                        describe(payload));
      out.stringValue = payload.toString().toStdString();
      if (key == QLatin1String("dtype")) {
        const auto dt = parseDType(out.stringValue);
        if (!dt) fail(where, "unknown dtype \"" + out.stringValue + "\"");
        out.kind = IrValue::Kind::DType;
        out.dtypeValue = *dt;
        return out;
      }
      if (key == QLatin1String("device"))
        out.kind = IrValue::Kind::Device;
      else if (key == QLatin1String("layout"))
        out.kind = IrValue::Kind::Layout;
      else if (key == QLatin1String("memory_format"))
        out.kind = IrValue::Kind::MemoryFormat;
      if (out.kind != IrValue::Kind::None) return out;
    }
    fail(where,
         "expected a reference {\"ref\": ...} or a tagged constant (float, dtype, device, "
         "layout, memory_format), found " +
             describe(v));
  }

  ValueRef reference(const QJsonValue& v, const std::string& where) const {
    const IrValue r = value(v, where);
    if (r.kind != IrValue::Kind::Ref)
      fail(where, "expected a reference {\"ref\": \"<name>\", \"index\": k}, found " + describe(v));
    return r.ref;
  }

  QJsonArray array(const QJsonObject& o, const char* key, const std::string& where) const {
    const QJsonValue v = field(o, key, where, "a list");
    if (!v.isArray())
      fail(where, std::string("field '") + key + "' should be a list, found " + describe(v));
    return v.toArray();
  }

  Program program(const QJsonObject& root) const {
    Program p;
    const QJsonValue format = field(root, "format", "", "\"lossbound-step-program\"");
    if (!format.isString() || format.toString().toStdString() != kIrFormatName)
      fail("", "field 'format' is " + describe(format) + ", expected \"" +
                   std::string(kIrFormatName) + "\" (is this a step program?)");
    const QJsonValue version = field(root, "ir_version", "", "the integer 1");
    const std::int64_t v = integer(version, "", "field 'ir_version'");
    if (v != kIrVersion)
      fail("", "found IR version " + std::to_string(v) + ", this Lossbound reads IR version " +
                   std::to_string(kIrVersion));
    p.irVersion = static_cast<int>(v);
    if (root.contains(QLatin1String("torch_version")))
      p.torchVersion = stringField(root, "torch_version", "");

    const QJsonArray inputs = array(root, "inputs", "");
    for (qsizetype i = 0; i < inputs.size(); ++i) {
      std::string where = "input #" + std::to_string(i);
      if (!inputs.at(i).isObject())
        fail(where, "expected an object {name, shape, dtype}, found " + describe(inputs.at(i)));
      const QJsonObject o = inputs.at(i).toObject();
      InputSpec in;
      in.name = stringField(o, "name", where);
      where = "input '" + in.name + "'";
      in.spec = spec(o, where);
      p.inputs.push_back(std::move(in));
    }

    const QJsonArray nodes = array(root, "nodes", "");
    p.nodes.reserve(static_cast<std::size_t>(nodes.size()));
    for (qsizetype i = 0; i < nodes.size(); ++i) {
      std::string where = "node #" + std::to_string(i);
      if (!nodes.at(i).isObject())
        fail(where, "expected an object {name, op, args, kwargs, outputs}, found " +
                        describe(nodes.at(i)));
      const QJsonObject o = nodes.at(i).toObject();
      Node n;
      n.name = stringField(o, "name", where);
      where = "node '" + n.name + "' (#" + std::to_string(i) + ")";
      n.op = stringField(o, "op", where);
      where = "node '" + n.name + "' (#" + std::to_string(i) + ", " + n.op + ")";
      const QJsonArray args = array(o, "args", where);
      n.args.reserve(static_cast<std::size_t>(args.size()));
      for (qsizetype a = 0; a < args.size(); ++a)
        n.args.push_back(value(args.at(a), where + ", argument " + std::to_string(a)));
      if (o.contains(QLatin1String("kwargs"))) {
        const QJsonValue kw = o.value(QLatin1String("kwargs"));
        if (!kw.isObject())
          fail(where, "field 'kwargs' should be an object, found " + describe(kw));
        const QJsonObject kwo = kw.toObject();
        for (auto it = kwo.begin(); it != kwo.end(); ++it)
          n.kwargs.emplace(
              it.key().toStdString(),
              value(it.value(), where + ", keyword argument '" + it.key().toStdString() + "'"));
      }
      const QJsonArray outs = array(o, "outputs", where);
      for (qsizetype k = 0; k < outs.size(); ++k) {
        if (outs.at(k).isNull()) {  // a None element of a returned tuple
          TensorSpec none;
          none.none = true;
          n.outputs.push_back(none);
        } else {
          n.outputs.push_back(spec(outs.at(k), where + ", output " + std::to_string(k)));
        }
      }
      p.nodes.push_back(std::move(n));
    }

    const QJsonArray outputs = array(root, "outputs", "");
    for (qsizetype i = 0; i < outputs.size(); ++i) {
      std::string where = "program output #" + std::to_string(i);
      if (!outputs.at(i).isObject())
        fail(where, "expected an object {name, ref}, found " + describe(outputs.at(i)));
      const QJsonObject o = outputs.at(i).toObject();
      OutputSpec out;
      out.name = stringField(o, "name", where);
      where = "program output '" + out.name + "'";
      out.ref = reference(field(o, "ref", where, "a reference"), where);
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

}  // namespace

std::string refString(const ValueRef& ref) {
  return ref.index == 0 ? ref.name : ref.name + "[" + std::to_string(ref.index) + "]";
}

Program parseProgram(std::string_view json, std::string_view source) {
  const Parser parser(source);
  if (json.size() > static_cast<std::size_t>(std::numeric_limits<int>::max() / 2))
    parser.fail("", "the JSON text is too large (" + std::to_string(json.size()) + " bytes)");
  QJsonParseError error{};
  QJsonDocument doc =
      QJsonDocument::fromJson(QByteArray(json.data(), static_cast<qsizetype>(json.size())), &error);
  if (error.error != QJsonParseError::NoError) {
    const std::size_t at = static_cast<std::size_t>(std::max(0, error.offset));
    std::string context(json.substr(at > 20 ? at - 20 : 0, 40));
    std::replace(context.begin(), context.end(), '\n', ' ');
    parser.fail("", "malformed JSON at byte offset " + std::to_string(error.offset) + ": " +
                        error.errorString().toStdString() + " (near \"" + context + "\")");
  }
  if (!doc.isObject())
    parser.fail("", std::string("expected a JSON object at the top level, found ") +
                        (doc.isArray() ? "a list" : "nothing"));
  const std::string tagged = tagFloatLiterals(json);
  doc = QJsonDocument::fromJson(QByteArray(tagged.data(), static_cast<qsizetype>(tagged.size())),
                                &error);
  if (error.error != QJsonParseError::NoError || !doc.isObject())  // cannot happen for valid JSON
    parser.fail(
        "", "internal error: re-parsing the JSON failed at offset " + std::to_string(error.offset));
  Program program = parser.program(doc.object());
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
  std::unordered_map<std::string, int> nodeIndex;
  for (std::size_t i = 0; i < program.nodes.size(); ++i) {
    const Node& n = program.nodes[i];
    if (n.name.empty()) parser.fail("node #" + std::to_string(i), "the node name is empty");
    if (n.op.empty()) parser.fail("node '" + n.name + "'", "the op name is empty");
    if (!nodeIndex.emplace(n.name, static_cast<int>(i)).second || defined.count(n.name))
      parser.fail("node '" + n.name + "' (#" + std::to_string(i) + ")",
                  "duplicate name: an earlier input or node is also called '" + n.name + "'");
  }
  auto checkRef = [&](const ValueRef& ref, const std::string& where) {
    auto in = defined.find(ref.name);
    if (in == defined.end()) {
      auto later = nodeIndex.find(ref.name);
      if (later != nodeIndex.end())
        parser.fail(where,
                    "refers to node '" + ref.name + "' (#" + std::to_string(later->second) +
                        "), which is not computed before it; nodes must be in execution order");
      parser.fail(where, "refers to '" + ref.name + "', but no input or node has that name");
    }
    if (ref.index < 0 || static_cast<std::size_t>(ref.index) >= in->second.second) {
      const std::string what =
          in->second.first < 0
              ? "input '" + ref.name + "' has 1 value"
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

std::vector<UnsupportedOp> unsupportedOps(const Program& program) {
  std::vector<UnsupportedOp> out;
  const OpRegistry& registry = opRegistry();
  for (const Node& n : program.nodes)
    if (!registry.find(n.op)) out.push_back({n.name, n.op});
  return out;
}

std::vector<std::string> unsupportedOpNames(const Program& program) {
  std::set<std::string> names;
  for (const UnsupportedOp& u : unsupportedOps(program)) names.insert(u.op);
  return {names.begin(), names.end()};
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
  const int i = findNode(program, ref.name);
  if (i < 0) throw ProgramError("reference " + refString(ref) + ": no input or node has that name");
  const Node& n = program.nodes[static_cast<std::size_t>(i)];
  if (ref.index < 0 || static_cast<std::size_t>(ref.index) >= n.outputs.size())
    throw ProgramError("reference " + refString(ref) + ": node '" + n.name + "' has " +
                       std::to_string(n.outputs.size()) + " outputs");
  return n.outputs[static_cast<std::size_t>(ref.index)];
}

}  // namespace lossbound
