#include "core/runfile/run_file.h"

#include "core/runfile/hdf5_support.h"

#include <hdf5.h>

#include <nlohmann/json.hpp>

#if defined(__unix__) || defined(__APPLE__)
#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#define LOSSBOUND_HAVE_FORK 1
#endif

#include <algorithm>
#include <bit>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>

namespace lossbound {

RunFileError::RunFileError(std::string file, std::string path, const std::string& message)
    : std::runtime_error(file + ": " + (path.empty() ? "" : path + ": ") + message),
      mFile(std::move(file)),
      mPath(std::move(path)) {}

double halfBitsToDouble(std::uint16_t bits) {
  const int sign = bits >> 15;
  const int exponent = (bits >> 10) & 0x1f;
  const int fraction = bits & 0x3ff;
  double v = 0;
  if (exponent == 0)
    v = std::ldexp(fraction, -24);  // zero and subnormals: fraction · 2^-24
  else if (exponent == 31)
    v = fraction ? std::nan("") : INFINITY;
  else
    v = std::ldexp(fraction | 0x400, exponent - 25);
  return sign ? -v : v;
}

double bfloat16BitsToDouble(std::uint16_t bits) {
  return static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16));
}

namespace {

std::string typeDescription(hid_t type) {
  const std::size_t size = H5Tget_size(type);
  switch (H5Tget_class(type)) {
    case H5T_INTEGER:
      return std::to_string(8 * size) + "-bit " +
             (H5Tget_sign(type) == H5T_SGN_NONE ? "unsigned " : "") + "integer";
    case H5T_FLOAT:
      return std::to_string(8 * size) + "-bit float";
    case H5T_STRING:
      return "string";
    case H5T_ENUM:
      return std::to_string(8 * size) + "-bit enum";
    case H5T_COMPOUND:
      return "compound";
    case H5T_ARRAY:
      return "array";
    case H5T_VLEN:
      return "variable-length sequence";
    case H5T_OPAQUE:
      return "opaque";
    case H5T_BITFIELD:
      return "bitfield";
    case H5T_REFERENCE:
      return "reference";
    default:
      return "unknown type";
  }
}

struct FilterName {
  H5Z_filter_t id;
  const char* name;
};
constexpr FilterName kFilterNames[] = {
    {1, "gzip/deflate"},   {2, "shuffle"}, {3, "fletcher32"},    {4, "szip"},      {5, "nbit"},
    {6, "scaleoffset"},    {307, "bzip2"}, {32000, "LZF"},       {32001, "Blosc"}, {32004, "LZ4"},
    {32008, "bitshuffle"}, {32013, "zfp"}, {32015, "Zstandard"}, {32017, "SZ"}};

// Reads one HDF5 file: holds the file identifier and the file name for messages.
class Reader {
 public:
  Reader(std::string name, Hdf5Handle file) : mName(std::move(name)), mFile(std::move(file)) {}

  const std::string& name() const { return mName; }
  hid_t file() const { return mFile.get(); }

  [[noreturn]] void fail(const std::string& path, const std::string& message) const {
    throw RunFileError(mName, path, message);
  }
  [[noreturn]] void failHdf5(const std::string& path, const std::string& what) const {
    const std::string reason = hdf5Reason();
    fail(path, what + (reason.empty() ? "" : " (HDF5: " + reason + ")"));
  }

  bool exists(const std::string& path) const {
    // Check every component: H5Lexists fails rather than returns false for a missing parent.
    std::size_t pos = 1;
    while (pos <= path.size()) {
      const std::size_t next = path.find('/', pos);
      const std::string prefix = path.substr(0, next);
      const htri_t e = H5Lexists(file(), prefix.c_str(), H5P_DEFAULT);
      if (e <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return false;
      }
      if (next == std::string::npos) break;
      pos = next + 1;
    }
    return true;
  }

  // Opens an existing object and checks it is a group (or a dataset).
  Hdf5Handle openObject(const std::string& path, H5I_type_t expected) const {
    const hid_t id = H5Oopen(file(), path.c_str(), H5P_DEFAULT);
    if (id < 0) failHdf5(path, "cannot open this object");
    Hdf5Handle h(id, H5Oclose);
    const H5I_type_t t = H5Iget_type(id);
    if (t != expected)
      fail(path, std::string("expected a ") + (expected == H5I_GROUP ? "group" : "dataset") +
                     ", found a " +
                     (t == H5I_GROUP     ? "group"
                      : t == H5I_DATASET ? "dataset"
                                         : "named datatype"));
    return h;
  }

  Hdf5Handle group(const std::string& path) const {
    if (!exists(path)) fail(path, "the group is missing");
    return openObject(path, H5I_GROUP);
  }

  Hdf5Handle dataset(const std::string& path) const {
    if (!exists(path)) fail(path, "the dataset is missing");
    Hdf5Handle h = openObject(path, H5I_DATASET);
    checkFilters(h.get(), path);
    return h;
  }

  std::vector<std::string> children(hid_t group, const std::string& path) const {
    H5G_info_t info{};
    if (H5Gget_info(group, &info) < 0) failHdf5(path, "cannot list the group");
    std::vector<std::string> names;
    for (hsize_t i = 0; i < info.nlinks; ++i) {
      const ssize_t n =
          H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
      if (n < 0) failHdf5(path, "cannot read the name of member " + std::to_string(i));
      std::string s(static_cast<std::size_t>(n) + 1, '\0');
      H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, s.data(), s.size(),
                         H5P_DEFAULT);
      s.resize(static_cast<std::size_t>(n));
      names.push_back(std::move(s));
    }
    return names;
  }

  H5I_type_t objectType(hid_t group, const std::string& name, const std::string& path) const {
    const hid_t id = H5Oopen(group, name.c_str(), H5P_DEFAULT);
    if (id < 0) failHdf5(path, "cannot open this object");
    Hdf5Handle h(id, H5Oclose);
    return H5Iget_type(id);
  }

  void checkFilters(hid_t dset, const std::string& path) const {
    Hdf5Handle dcpl(H5Dget_create_plist(dset), H5Pclose);
    if (!dcpl.valid()) failHdf5(path, "cannot read the dataset's creation properties");
    const int n = H5Pget_nfilters(dcpl.get());
    for (int i = 0; i < n; ++i) {
      unsigned flags = 0, config = 0;
      std::size_t nValues = 0;
      char stored[256] = {};
      const H5Z_filter_t id = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &nValues,
                                             nullptr, sizeof stored, stored, &config);
      if (id < 0) failHdf5(path, "cannot read filter " + std::to_string(i) + " of the dataset");
      const htri_t avail = H5Zfilter_avail(id);
      H5Eclear2(H5E_DEFAULT);
      if (avail > 0) continue;
      std::string name = stored[0] ? stored : "unknown filter";
      for (const FilterName& f : kFilterNames)
        if (f.id == id) name = f.name;
      fail(path, "dataset " + path + " uses HDF5 filter " + std::to_string(id) + " (" + name +
                     "), which is not available; re-save with gzip (h5py: compression=\"gzip\")");
    }
  }

  struct Extent {
    std::vector<hsize_t> dims;
    hsize_t count = 1;
  };

  Extent extent(hid_t dset, const std::string& path) const {
    Hdf5Handle space(H5Dget_space(dset), H5Sclose);
    if (!space.valid()) failHdf5(path, "cannot read the dataspace");
    return extentOf(space.get(), path);
  }

  Extent extentOf(hid_t space, const std::string& path) const {
    const H5S_class_t cls = H5Sget_simple_extent_type(space);
    if (cls == H5S_NULL) fail(path, "the dataspace is empty (H5S_NULL), expected a tensor");
    if (cls != H5S_SCALAR && cls != H5S_SIMPLE) failHdf5(path, "cannot read the dataspace");
    const int rank = H5Sget_simple_extent_ndims(space);
    if (rank < 0) failHdf5(path, "cannot read the dataspace rank");
    Extent e;
    e.dims.resize(static_cast<std::size_t>(rank));
    if (rank > 0 && H5Sget_simple_extent_dims(space, e.dims.data(), nullptr) < 0)
      failHdf5(path, "cannot read the dataspace dimensions");
    for (hsize_t d : e.dims) {
      if (d != 0 && e.count > (hsize_t{1} << 40) / d)
        fail(path, "the dataset is too large (more than 2^40 elements)");
      e.count *= d;
    }
    return e;
  }

  static std::string dimsString(const std::vector<hsize_t>& dims) {
    Shape s(dims.begin(), dims.end());
    return shapeString(s);
  }

  // Reads a 1-D dataset of any numeric type as doubles (or int64 when `asInt`).
  template <typename T>
  std::vector<T> read1d(const std::string& path, hid_t memType, const char* expected,
                        bool (*typeOk)(hid_t)) const {
    Hdf5Handle d = dataset(path);
    Hdf5Handle type(H5Dget_type(d.get()), H5Tclose);
    if (!typeOk(type.get()))
      fail(path, std::string("expected ") + expected + ", found " + typeDescription(type.get()));
    const Extent e = extent(d.get(), path);
    if (e.dims.size() != 1)
      fail(path, std::string("expected a 1-D dataset, found shape ") + dimsString(e.dims));
    std::vector<T> out(e.count);
    if (e.count > 0 && H5Dread(d.get(), memType, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0)
      failHdf5(path, "cannot read the data");
    return out;
  }

  // Reads a string from an attribute (isAttr) or a dataset: variable or fixed length, scalar.
  std::string readString(hid_t obj, bool isAttr, const std::string& path) const {
    Hdf5Handle type(isAttr ? H5Aget_type(obj) : H5Dget_type(obj), H5Tclose);
    if (!type.valid()) failHdf5(path, "cannot read the datatype");
    if (H5Tget_class(type.get()) != H5T_STRING)
      fail(path, "expected a string, found " + typeDescription(type.get()));
    Hdf5Handle space(isAttr ? H5Aget_space(obj) : H5Dget_space(obj), H5Sclose);
    if (!space.valid()) failHdf5(path, "cannot read the dataspace");
    const hssize_t n = H5Sget_simple_extent_npoints(space.get());
    if (n != 1) fail(path, "expected one string, found " + std::to_string(n) + " elements");
    Hdf5Handle mem(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_cset(mem.get(), H5Tget_cset(type.get()));
    if (H5Tis_variable_str(type.get()) > 0) {
      H5Tset_size(mem.get(), H5T_VARIABLE);
      char* p = nullptr;
      const herr_t rc = isAttr ? H5Aread(obj, mem.get(), &p)
                               : H5Dread(obj, mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &p);
      if (rc < 0) failHdf5(path, "cannot read the string");
      std::string s = p ? p : "";
      if (p) H5free_memory(p);
      return s;
    }
    const std::size_t size = H5Tget_size(type.get());
    if (size == 0 || size > (std::size_t{1} << 30))
      fail(path, "the fixed-length string has size " + std::to_string(size));
    H5Tset_size(mem.get(), size);
    H5Tset_strpad(mem.get(), H5T_STR_NULLPAD);
    std::string s(size, '\0');
    const herr_t rc = isAttr ? H5Aread(obj, mem.get(), s.data())
                             : H5Dread(obj, mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, s.data());
    if (rc < 0) failHdf5(path, "cannot read the string");
    s.resize(std::strlen(s.c_str()));
    return s;
  }

  Hdf5Handle attribute(hid_t obj, const std::string& objPath, const char* name) const {
    const htri_t e = H5Aexists(obj, name);
    if (e < 0) failHdf5(objPath, std::string("cannot check attribute '") + name + "'");
    if (e == 0) return {};
    Hdf5Handle a(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
    if (!a.valid()) failHdf5(objPath, std::string("cannot open attribute '") + name + "'");
    return a;
  }

  static std::string attrPath(const std::string& objPath, const char* name) {
    return objPath + (objPath == "/" ? "" : "/") + "@" + name;
  }

  std::optional<std::string> stringAttr(hid_t obj, const std::string& objPath,
                                        const char* name) const {
    Hdf5Handle a = attribute(obj, objPath, name);
    if (!a.valid()) return std::nullopt;
    return readString(a.get(), true, attrPath(objPath, name));
  }

  std::optional<std::int64_t> intAttr(hid_t obj, const std::string& objPath,
                                      const char* name) const {
    Hdf5Handle a = attribute(obj, objPath, name);
    if (!a.valid()) return std::nullopt;
    const std::string path = attrPath(objPath, name);
    Hdf5Handle type(H5Aget_type(a.get()), H5Tclose);
    if (H5Tget_class(type.get()) != H5T_INTEGER) {
      std::string found = typeDescription(type.get());
      if (H5Tget_class(type.get()) == H5T_STRING)
        found += " \"" + readString(a.get(), true, path) + "\"";
      fail(path, "expected an integer attribute, found " + found);
    }
    Hdf5Handle space(H5Aget_space(a.get()), H5Sclose);
    if (H5Sget_simple_extent_npoints(space.get()) != 1) fail(path, "expected one integer");
    std::int64_t v = 0;
    if (H5Aread(a.get(), H5T_NATIVE_INT64, &v) < 0) failHdf5(path, "cannot read the attribute");
    return v;
  }

 private:
  std::string mName;
  Hdf5Handle mFile;
};

bool isIntegerType(hid_t t) { return H5Tget_class(t) == H5T_INTEGER; }
bool isFloat64Type(hid_t t) { return H5Tget_class(t) == H5T_FLOAT && H5Tget_size(t) == 8; }
bool isNumericType(hid_t t) {
  return H5Tget_class(t) == H5T_FLOAT || H5Tget_class(t) == H5T_INTEGER;
}

// Returns "" when the HDF5 type `t` can store a tensor of `dtype` as the format says, else what
// was expected.
std::string storageMismatch(DType dtype, hid_t t) {
  const H5T_class_t cls = H5Tget_class(t);
  const std::size_t size = H5Tget_size(t);
  const bool sign = H5Tget_sign(t) != H5T_SGN_NONE;
  switch (dtype) {
    case DType::Float64:
      return cls == H5T_FLOAT && size == 8 ? "" : "a 64-bit float";
    case DType::Float32:
      return cls == H5T_FLOAT && size == 4 ? "" : "a 32-bit float";
    case DType::Float16:
      return (cls == H5T_FLOAT || cls == H5T_INTEGER) && size == 2 ? ""
                                                                   : "a 16-bit IEEE half float";
    case DType::BFloat16:
      return cls == H5T_INTEGER && size == 2 ? "" : "16-bit unsigned integers (bfloat16 bits)";
    case DType::Int64:
      return cls == H5T_INTEGER && size == 8 && sign ? "" : "a 64-bit signed integer";
    case DType::Int32:
      return cls == H5T_INTEGER && size == 4 && sign ? "" : "a 32-bit signed integer";
    case DType::Int16:
      return cls == H5T_INTEGER && size == 2 && sign ? "" : "a 16-bit signed integer";
    case DType::Int8:
      return cls == H5T_INTEGER && size == 1 && sign ? "" : "an 8-bit signed integer";
    case DType::UInt8:
      return cls == H5T_INTEGER && size == 1 && !sign ? "" : "an 8-bit unsigned integer";
    case DType::Bool:
      return (cls == H5T_INTEGER || cls == H5T_ENUM) && size == 1 ? ""
                                                                  : "8-bit integers 0/1 (bool)";
  }
  return "a known dtype";
}

struct CheckpointEntry {
  std::string group;  // "/checkpoints/<step>"
  std::size_t program = 0;
};

}  // namespace

struct RunFile::Impl {
  Reader reader;
  RunAttributes attributes;
  RunLog log;
  std::vector<RunProgram> programs;
  std::map<std::int64_t, CheckpointEntry> checkpoints;
  std::vector<std::string> warnings;

  Impl(std::string name, Hdf5Handle file) : reader(std::move(name), std::move(file)) {}

  void validate();
  void readRoot();
  void readLog();
  void readPrograms();
  void readCheckpoints();
  // Opens the dataset of `input` at checkpoint `entry`, checks dtype attribute, storage and shape.
  Hdf5Handle tensorDataset(const CheckpointEntry& entry, const InputSpec& input, std::string& path,
                           Reader::Extent& extent) const;
  Tensor readTensor(const CheckpointEntry& entry, const InputSpec& input) const;
  // Visits the chunk index of every checkpoint tensor: the metadata H5Dread touches beyond what
  // validate() opened (used by the crash-isolated validation, not by open()).
  void walkChunkIndexes() const;
  static std::string datasetPath(const CheckpointEntry& entry, const std::string& input) {
    const bool param = input.starts_with("param:");
    return entry.group + (param ? "/params/" : "/batch/") + input.substr(6);
  }
};

void RunFile::Impl::validate() {
  readRoot();
  readLog();
  readPrograms();
  readCheckpoints();
}

void RunFile::Impl::readRoot() {
  Hdf5Handle root = reader.group("/");
  const auto format = reader.stringAttr(root.get(), "/", "format");
  if (!format)
    reader.fail("/",
                "not a Lossbound run file: the root attribute 'format' is missing (expected \"" +
                    std::string(kRunFormatName) + "\")");
  if (*format != kRunFormatName)
    reader.fail("/@format", "not a Lossbound run file: format is \"" + *format + "\", expected \"" +
                                std::string(kRunFormatName) + "\"");
  attributes.format = *format;
  const auto version = reader.intAttr(root.get(), "/", "format_version");
  if (!version)
    reader.fail("/", "the root attribute 'format_version' is missing (expected the integer 1)");
  if (*version != kRunFormatVersion)
    reader.fail(
        "/@format_version",
        "found format version " + std::to_string(*version) + ", this Lossbound reads version " +
            std::to_string(kRunFormatVersion) +
            (*version > kRunFormatVersion ? " (the file was written by a newer recorder)" : ""));
  attributes.formatVersion = *version;
  auto str = [&](const char* name) {
    return reader.stringAttr(root.get(), "/", name).value_or("");
  };
  attributes.runName = str("run_name");
  attributes.role = str("role");
  attributes.framework = str("framework");
  attributes.device = str("device");
  attributes.created = str("created");
  attributes.notes = str("notes");
  attributes.float32MatmulPrecision = str("float32_matmul_precision");
}

void RunFile::Impl::readLog() {
  Hdf5Handle logGroup = reader.group("/log");
  log.steps =
      reader.read1d<std::int64_t>("/log/step", H5T_NATIVE_INT64, "int64 steps", isIntegerType);
  if (log.steps.empty()) reader.fail("/log/step", "the log is empty, expected at least one step");
  for (std::size_t i = 1; i < log.steps.size(); ++i)
    if (log.steps[i] <= log.steps[i - 1])
      reader.fail("/log/step", "steps must be strictly increasing, found step " +
                                   std::to_string(log.steps[i]) + " at index " + std::to_string(i) +
                                   " after step " + std::to_string(log.steps[i - 1]));
  log.loss = reader.read1d<double>("/log/loss", H5T_NATIVE_DOUBLE, "float64 losses", isFloat64Type);
  if (log.loss.size() != log.steps.size())
    reader.fail("/log/loss", "expected " + std::to_string(log.steps.size()) +
                                 " values (one per /log/step), found " +
                                 std::to_string(log.loss.size()));
  for (std::size_t i = 0; i < log.loss.size(); ++i)
    if (!std::isfinite(log.loss[i]))
      reader.fail("/log/loss", std::string("the loss at index ") + std::to_string(i) + " (step " +
                                   std::to_string(log.steps[i]) + ") is " +
                                   (std::isnan(log.loss[i]) ? "NaN"
                                    : log.loss[i] > 0       ? "+Inf"
                                                            : "-Inf") +
                                   ", expected finite losses");
  for (const std::string& name : reader.children(logGroup.get(), "/log")) {
    if (name == "step" || name == "loss") continue;
    const std::string path = "/log/" + name;
    if (reader.objectType(logGroup.get(), name, path) != H5I_DATASET) {
      warnings.push_back(path + " is not a dataset; ignored");
      continue;
    }
    std::vector<double> values =
        reader.read1d<double>(path, H5T_NATIVE_DOUBLE, "a numeric metric", isNumericType);
    if (values.size() != log.steps.size())
      reader.fail(path, "expected " + std::to_string(log.steps.size()) +
                            " values (one per /log/step), found " + std::to_string(values.size()));
    log.metrics.emplace(name, std::move(values));
  }
}

void RunFile::Impl::readPrograms() {
  if (!reader.exists("/programs")) {
    warnings.push_back("there is no /programs group: no step program was recorded");
    return;
  }
  Hdf5Handle group = reader.group("/programs");
  for (const std::string& id : reader.children(group.get(), "/programs")) {
    const std::string path = "/programs/" + id;
    Hdf5Handle g = reader.group(path);
    const auto version = reader.intAttr(g.get(), path, "ir_version");
    if (!version)
      reader.fail(path, "the attribute 'ir_version' is missing (expected an integer from " +
                            std::to_string(kMinIrVersion) + " to " + std::to_string(kIrVersion) +
                            ")");
    if (*version < kMinIrVersion || *version > kIrVersion)
      reader.fail(path + "/@ir_version", "found IR version " + std::to_string(*version) +
                                             ", this Lossbound reads IR versions " +
                                             std::to_string(kMinIrVersion) + " to " +
                                             std::to_string(kIrVersion));
    Hdf5Handle graph = reader.dataset(path + "/graph");
    const std::string json = reader.readString(graph.get(), false, path + "/graph");
    RunProgram p;
    p.id = id;
    try {
      p.program = parseProgram(json, "");
    } catch (const ProgramError& e) {
      reader.fail(path + "/graph", e.what());
    }
    if (p.program.irVersion != *version)
      reader.fail(path + "/@ir_version", "says IR version " + std::to_string(*version) +
                                             ", the graph says " +
                                             std::to_string(p.program.irVersion));
    p.opCount = static_cast<std::int64_t>(p.program.nodes.size());
    // The name lists in the attributes must agree with the graph.
    auto checkNames = [&](const char* attr, std::vector<std::string> expected) {
      const auto text = reader.stringAttr(g.get(), path, attr);
      if (!text) return;
      const auto doc = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
      std::vector<std::string> found;
      bool ok = doc.is_array();
      for (const auto& v : ok ? doc : nlohmann::json::array()) {
        ok = ok && v.is_string();
        if (v.is_string()) found.push_back(v.get<std::string>());
      }
      if (!ok)
        reader.fail(Reader::attrPath(path, attr),
                    "expected a JSON list of names, found \"" + *text + "\"");
      std::sort(found.begin(), found.end());
      std::sort(expected.begin(), expected.end());
      if (found != expected)
        reader.fail(Reader::attrPath(path, attr),
                    std::string("the names do not match the graph's ") + attr + " (" +
                        std::to_string(found.size()) + " listed, " +
                        std::to_string(expected.size()) + " in the graph)");
    };
    std::vector<std::string> inputNames, outputNames;
    for (const InputSpec& in : p.program.inputs) inputNames.push_back(in.name);
    for (const OutputSpec& out : p.program.outputs) outputNames.push_back(out.name);
    checkNames("inputs", inputNames);
    checkNames("outputs", outputNames);
    if (const auto count = reader.intAttr(g.get(), path, "op_count"); count && *count != p.opCount)
      reader.fail(Reader::attrPath(path, "op_count"), "says " + std::to_string(*count) +
                                                          " ops, the graph has " +
                                                          std::to_string(p.opCount) + " nodes");
    programs.push_back(std::move(p));
  }
  std::sort(programs.begin(), programs.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
}

Hdf5Handle RunFile::Impl::tensorDataset(const CheckpointEntry& entry, const InputSpec& input,
                                        std::string& path, Reader::Extent& extent) const {
  path = datasetPath(entry, input.name);
  if (!reader.exists(path))
    reader.fail(path, "missing dataset for program input '" + input.name + "' (" +
                          shapeString(input.spec.shape) + " " +
                          std::string(dtypeName(input.spec.dtype)) + ")");
  Hdf5Handle d = reader.dataset(path);
  const auto dtypeText = reader.stringAttr(d.get(), path, "dtype");
  if (!dtypeText)
    reader.fail(path, "the attribute 'dtype' is missing (expected \"" +
                          std::string(dtypeName(input.spec.dtype)) + "\")");
  const auto dtype = parseDType(*dtypeText);
  if (!dtype) reader.fail(Reader::attrPath(path, "dtype"), "unknown dtype \"" + *dtypeText + "\"");
  if (*dtype != input.spec.dtype)
    reader.fail(path, "the dataset has dtype " + std::string(dtypeName(*dtype)) +
                          ", the program expects input '" + input.name + "' as " +
                          std::string(dtypeName(input.spec.dtype)));
  Hdf5Handle type(H5Dget_type(d.get()), H5Tclose);
  if (const std::string expected = storageMismatch(*dtype, type.get()); !expected.empty())
    reader.fail(path, "dtype " + std::string(dtypeName(*dtype)) + " must be stored as " + expected +
                          ", found " + typeDescription(type.get()));
  extent = reader.extent(d.get(), path);
  const Shape shape(extent.dims.begin(), extent.dims.end());
  if (shape != input.spec.shape)
    reader.fail(path, "the dataset has shape " + shapeString(shape) +
                          ", the program expects input '" + input.name + "' as " +
                          shapeString(input.spec.shape));
  return d;
}

void RunFile::Impl::readCheckpoints() {
  if (!reader.exists("/checkpoints")) {
    warnings.push_back("there is no /checkpoints group: no step can be replayed");
    return;
  }
  Hdf5Handle group = reader.group("/checkpoints");
  const std::set<std::int64_t> logged(log.steps.begin(), log.steps.end());
  std::vector<std::int64_t> unlogged;
  for (const std::string& name : reader.children(group.get(), "/checkpoints")) {
    const std::string path = "/checkpoints/" + name;
    std::int64_t step = 0;
    const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), step);
    if (ec != std::errc() || end != name.data() + name.size() || name.empty() || name[0] == '+')
      reader.fail(path,
                  "checkpoint groups must be named by their decimal step, found \"" + name + "\"");
    Hdf5Handle g = reader.group(path);
    const auto attrStep = reader.intAttr(g.get(), path, "step");
    if (attrStep && *attrStep != step)
      reader.fail(Reader::attrPath(path, "step"),
                  "is " + std::to_string(*attrStep) + ", but the group is named " + name);
    const auto programId = reader.stringAttr(g.get(), path, "program");
    if (!programId)
      reader.fail(
          path,
          "the attribute 'program' is missing (expected the id of a program under /programs)");
    auto it = std::find_if(programs.begin(), programs.end(),
                           [&](const RunProgram& p) { return p.id == *programId; });
    if (it == programs.end())
      reader.fail(Reader::attrPath(path, "program"),
                  "names program \"" + *programId + "\", which is not stored under /programs");
    CheckpointEntry entry{path, static_cast<std::size_t>(it - programs.begin())};
    // Metadata of every input: present, dtype, storage type, shape, filters (no data is read).
    std::set<std::string> expected;
    for (const InputSpec& in : it->program.inputs) {
      std::string dpath;
      Reader::Extent extent;
      tensorDataset(entry, in, dpath, extent);
      expected.insert(dpath);
    }
    for (const char* part : {"params", "batch"}) {
      const std::string ppath = path + "/" + part;
      if (!reader.exists(ppath)) continue;
      Hdf5Handle pg = reader.group(ppath);
      std::vector<std::string> extra;
      for (const std::string& child : reader.children(pg.get(), ppath))
        if (!expected.count(ppath + "/" + child)) extra.push_back(child);
      if (!extra.empty())
        warnings.push_back(ppath + " holds " + std::to_string(extra.size()) +
                           " dataset(s) that are not program inputs (first: " + extra.front() +
                           ")");
    }
    if (!logged.count(step)) unlogged.push_back(step);
    checkpoints.emplace(step, std::move(entry));
  }
  if (!unlogged.empty())
    warnings.push_back(std::to_string(unlogged.size()) +
                       " checkpoint(s) at steps not in /log/step (first: " +
                       std::to_string(unlogged.front()) + "): their loss cannot be compared");
}

void RunFile::Impl::walkChunkIndexes() const {
  for (const auto& [step, entry] : checkpoints) {
    for (const InputSpec& in : programs[entry.program].program.inputs) {
      std::string path;
      Reader::Extent extent;
      Hdf5Handle d = tensorDataset(entry, in, path, extent);
      Hdf5Handle dcpl(H5Dget_create_plist(d.get()), H5Pclose);
      if (!dcpl.valid()) reader.failHdf5(path, "cannot read the dataset's creation properties");
      if (H5Pget_layout(dcpl.get()) != H5D_CHUNKED) continue;
      Hdf5Handle space(H5Dget_space(d.get()), H5Sclose);  // 1.10 rejects H5S_ALL here
      if (!space.valid()) reader.failHdf5(path, "cannot read the dataspace");
      hsize_t chunks = 0;
      if (H5Dget_num_chunks(d.get(), space.get(), &chunks) < 0)
        reader.failHdf5(path, "cannot read the chunk index");
      for (hsize_t i = 0; i < chunks; ++i) {
        haddr_t address = 0;
        hsize_t bytes = 0;
        if (H5Dget_chunk_info(d.get(), space.get(), i, nullptr, nullptr, &address, &bytes) < 0)
          reader.failHdf5(path, "cannot read chunk " + std::to_string(i) + " of the chunk index");
      }
    }
  }
}

Tensor RunFile::Impl::readTensor(const CheckpointEntry& entry, const InputSpec& input) const {
  std::string path;
  Reader::Extent extent;
  Hdf5Handle d = tensorDataset(entry, input, path, extent);
  Hdf5Handle type(H5Dget_type(d.get()), H5Tclose);
  const std::size_t n = static_cast<std::size_t>(extent.count);
  std::vector<double> values(n);
  auto readAs = [&](hid_t memType, void* buffer) {
    if (n > 0 && H5Dread(d.get(), memType, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer) < 0)
      reader.failHdf5(path, "cannot read the data");
  };
  const DType dtype = input.spec.dtype;
  switch (dtype) {
    case DType::Float64:
    case DType::Float32:
      readAs(H5T_NATIVE_DOUBLE, values.data());
      break;
    case DType::Float16: {
      std::vector<std::uint16_t> bits(n);
      if (H5Tget_class(type.get()) == H5T_FLOAT) {
        // Read the half floats bit for bit (memory type = the file type in little-endian order),
        // after checking that they are IEEE binary16.
        std::size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
        H5Tget_fields(type.get(), &spos, &epos, &esize, &mpos, &msize);
        if (spos != 15 || epos != 10 || esize != 5 || mpos != 0 || msize != 10 ||
            H5Tget_ebias(type.get()) != 15)
          reader.fail(
              path, "expected IEEE binary16 floats, found a 16-bit float type with another layout");
        Hdf5Handle mem(H5Tcopy(type.get()), H5Tclose);
        H5Tset_order(mem.get(), H5T_ORDER_LE);
        readAs(mem.get(), bits.data());
        if constexpr (std::endian::native == std::endian::big)
          for (auto& b : bits) b = static_cast<std::uint16_t>((b >> 8) | (b << 8));
      } else {
        readAs(H5T_NATIVE_UINT16, bits.data());
      }
      for (std::size_t i = 0; i < n; ++i) values[i] = halfBitsToDouble(bits[i]);
      break;
    }
    case DType::BFloat16: {
      std::vector<std::uint16_t> bits(n);
      // A signed 16-bit file type would be clamped by a conversion to uint16: read it as int16.
      readAs(H5Tget_sign(type.get()) == H5T_SGN_NONE ? H5T_NATIVE_UINT16 : H5T_NATIVE_INT16,
             bits.data());
      for (std::size_t i = 0; i < n; ++i) values[i] = bfloat16BitsToDouble(bits[i]);
      break;
    }
    case DType::Int64:
    case DType::Int32:
    case DType::Int16:
    case DType::Int8:
    case DType::UInt8: {
      std::vector<std::int64_t> ints(n);
      readAs(H5T_NATIVE_INT64, ints.data());
      constexpr std::int64_t kExact = std::int64_t{1}
                                      << 53;  // binary64 storage is exact below 2^53
      for (std::size_t i = 0; i < n; ++i) {
        if (ints[i] > kExact || ints[i] < -kExact)
          reader.fail(path,
                      "element " + std::to_string(i) + " is " + std::to_string(ints[i]) +
                          ", beyond ±2^53 (Lossbound stores integers exactly only up to 2^53)");
        values[i] = static_cast<double>(ints[i]);
      }
      break;
    }
    case DType::Bool: {
      std::vector<std::uint8_t> bytes(n);
      if (H5Tget_class(type.get()) == H5T_ENUM) {  // h5py writes numpy bools as an int8 enum
        Hdf5Handle mem(H5Tcopy(type.get()), H5Tclose);
        readAs(mem.get(), bytes.data());
      } else {
        readAs(H5T_NATIVE_UINT8, bytes.data());
      }
      for (std::size_t i = 0; i < n; ++i) {
        if (bytes[i] > 1)
          reader.fail(path, "element " + std::to_string(i) + " is " + std::to_string(bytes[i]) +
                                ", expected 0 or 1 (bool)");
        values[i] = bytes[i];
      }
      break;
    }
  }
  return Tensor::point(input.spec.shape, dtype, std::move(values));
}

namespace {

constexpr unsigned char kHdf5Signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

// HDF5 looks for its signature at byte 0, 512, 1024, 2048, ... (a user block may precede it).
bool hasHdf5Signature(const unsigned char* data, std::size_t size) {
  for (std::size_t off = 0; off + 8 <= size; off = off ? off * 2 : 512)
    if (std::memcmp(data + off, kHdf5Signature, 8) == 0) return true;
  return false;
}

}  // namespace

RunFile::RunFile(std::unique_ptr<Impl> impl) : mImpl(std::move(impl)) {}
RunFile::RunFile(RunFile&&) noexcept = default;
RunFile& RunFile::operator=(RunFile&& other) noexcept {
  const Hdf5Lock lock;
  const Hdf5Quiet quiet;
  mImpl = std::move(other.mImpl);
  return *this;
}
RunFile::~RunFile() {
  const Hdf5Lock lock;
  const Hdf5Quiet quiet;
  mImpl.reset();
}

RunFile RunFile::open(const std::string& path) {
  const Hdf5Lock lock;
  const Hdf5Quiet quiet;
  return RunFile(openUnlocked(path));
}

std::unique_ptr<RunFile::Impl> RunFile::openUnlocked(const std::string& path) {
  const Hdf5Quiet quiet;
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) throw RunFileError(path, "", "no such file");
  if (std::filesystem::is_directory(status))
    throw RunFileError(path, "", "is a directory, expected an HDF5 run file");
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw RunFileError(path, "", "cannot read the file size: " + ec.message());
  if (size == 0)
    throw RunFileError(path, "", "the file is empty (0 bytes), expected an HDF5 run file");
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw RunFileError(path, "", "cannot open the file for reading");
    std::vector<unsigned char> head(
        static_cast<std::size_t>(std::min<std::uintmax_t>(size, 1 << 20)));
    in.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size()));
    if (!hasHdf5Signature(head.data(), static_cast<std::size_t>(in.gcount())))
      throw RunFileError(path, "",
                         "not an HDF5 file (no HDF5 signature in its " + std::to_string(size) +
                             " bytes), expected a Lossbound run file");
  }
  Hdf5Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG);
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get());
  if (file < 0) {
    const std::string reason = hdf5Reason();
    throw RunFileError(path, "",
                       "HDF5 cannot open the file (damaged or truncated?)" +
                           (reason.empty() ? std::string() : ": " + reason));
  }
  auto impl = std::make_unique<Impl>(path, Hdf5Handle(file, H5Fclose));
  impl->validate();
  return impl;
}

void RunFile::validate(const std::string& path) {
  const Hdf5Lock lock;
  const Hdf5Quiet quiet;
  openUnlocked(path)->walkChunkIndexes();
}

void RunFile::validateIsolated(const std::string& path, int timeoutSeconds) {
#ifdef LOSSBOUND_HAVE_FORK
  int fds[2];
  if (pipe(fds) != 0) return;  // no isolation possible; the caller's own open() still validates
  pid_t pid = -1;
  {
    // Holding the lock across fork() means no other thread is inside HDF5, so the child inherits
    // a consistent library state (the child must not lock: the owner is the parent's thread).
    const Hdf5Lock lock;
    const Hdf5Quiet quiet;
    pid = fork();
  }
  if (pid == 0) {
    close(fds[0]);
    // The child reports "O" or "E<path>\0<message>" and leaves with _exit: no atexit handlers,
    // no stdio flush, no Qt teardown of state it shares with the parent.
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) signal(sig, SIG_DFL);
    if (const int null = ::open("/dev/null", O_WRONLY); null >= 0)
      dup2(null, STDERR_FILENO);  // glibc's abort text
    const rlimit noCore{0, 0};
    setrlimit(RLIMIT_CORE, &noCore);
    std::string report = "O";
    try {
      openUnlocked(path)->walkChunkIndexes();  // not validate(): the child must not lock
    } catch (const RunFileError& e) {
      const std::string what = e.what();
      const std::size_t prefix = e.file().size() + 2 + (e.path().empty() ? 0 : e.path().size() + 2);
      report = "E" + e.path() + '\0' + what.substr(std::min(prefix, what.size()));
    } catch (const std::exception& e) {
      report = std::string("E") + '\0' + e.what();
    } catch (...) {
      report = std::string("E") + '\0' + "unexpected failure while validating the file";
    }
    for (std::size_t done = 0; done < report.size();) {
      const ssize_t n = write(fds[1], report.data() + done, report.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) _exit(1);
      done += static_cast<std::size_t>(n);
    }
    _exit(0);
  }
  close(fds[1]);
  if (pid < 0) {  // cannot fork (out of processes or memory): no isolation, as documented
    close(fds[0]);
    return;
  }
  // Read the report until the child closes the pipe, at most timeoutSeconds in all; a child
  // that hangs (a pathological file) is killed.
  std::string report;
  char buffer[4096];
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(std::max(1, timeoutSeconds));
  bool timedOut = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      timedOut = true;
      break;
    }
    pollfd pfd{fds[0], POLLIN, 0};
    const int ready = poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) continue;
    const ssize_t n = read(fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    report.append(buffer, static_cast<std::size_t>(n));
  }
  close(fds[0]);
  if (timedOut) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timedOut)
    throw RunFileError(path, "",
                       "validating the file did not finish within " +
                           std::to_string(timeoutSeconds) +
                           " s (the validating child process was stopped): the file may be "
                           "corrupt or on a stalled file system");
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = sig == SIGSEGV   ? " SIGSEGV"
                       : sig == SIGBUS  ? " SIGBUS"
                       : sig == SIGABRT ? " SIGABRT"
                       : sig == SIGFPE  ? " SIGFPE"
                       : sig == SIGILL  ? " SIGILL"
                       : sig == SIGKILL ? " SIGKILL"
                                        : "";
    throw RunFileError(path, "",
                       "the HDF5 library crashed reading this file (signal " + std::to_string(sig) +
                           name + " in the validating child process): the file is corrupt");
  }
  if (report == "O") return;
  if (report.starts_with("E")) {
    const std::size_t zero = report.find('\0');
    if (zero != std::string::npos)
      throw RunFileError(path, report.substr(1, zero - 1), report.substr(zero + 1));
  }
  throw RunFileError(path, "",
                     "the validating child process ended without a result (exit status " +
                         std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")");
#else
  (void)path;
#endif
}

RunFile RunFile::openImage(const void* data, std::size_t size, const std::string& name) {
  const Hdf5Lock lock;
  const Hdf5Quiet quiet;
  if (size == 0)
    throw RunFileError(name, "", "the file is empty (0 bytes), expected an HDF5 run file");
  if (!hasHdf5Signature(static_cast<const unsigned char*>(data), size))
    throw RunFileError(name, "",
                       "not an HDF5 file (no HDF5 signature in its " + std::to_string(size) +
                           " bytes), expected a Lossbound run file");
  Hdf5Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5Pset_fapl_core(fapl.get(), 1 << 16, false);
  H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG);
  if (H5Pset_file_image(fapl.get(), const_cast<void*>(data), size) < 0)
    throw RunFileError(name, "", "cannot use the file image: " + hdf5Reason());
  const hid_t file = H5Fopen(name.c_str(), H5F_ACC_RDONLY, fapl.get());
  if (file < 0) {
    const std::string reason = hdf5Reason();
    throw RunFileError(name, "",
                       "HDF5 cannot open the file (damaged or truncated?)" +
                           (reason.empty() ? std::string() : ": " + reason));
  }
  auto impl = std::make_unique<Impl>(name, Hdf5Handle(file, H5Fclose));
  impl->validate();
  return RunFile(std::move(impl));
}

const std::string& RunFile::path() const { return mImpl->reader.name(); }
const RunAttributes& RunFile::attributes() const { return mImpl->attributes; }
const RunLog& RunFile::log() const { return mImpl->log; }
const std::vector<RunProgram>& RunFile::programs() const { return mImpl->programs; }
const std::vector<std::string>& RunFile::warnings() const { return mImpl->warnings; }

const RunProgram* RunFile::program(std::string_view id) const {
  for (const RunProgram& p : mImpl->programs)
    if (p.id == id) return &p;
  return nullptr;
}

std::vector<std::int64_t> RunFile::checkpointSteps() const {
  std::vector<std::int64_t> steps;
  steps.reserve(mImpl->checkpoints.size());
  for (const auto& [step, entry] : mImpl->checkpoints) steps.push_back(step);
  return steps;
}

bool RunFile::hasCheckpoint(std::int64_t step) const { return mImpl->checkpoints.count(step) > 0; }

const RunProgram& RunFile::checkpointProgram(std::int64_t step) const {
  auto it = mImpl->checkpoints.find(step);
  if (it == mImpl->checkpoints.end())
    throw RunFileError(path(), "/checkpoints/" + std::to_string(step),
                       "there is no checkpoint at step " + std::to_string(step));
  return mImpl->programs[it->second.program];
}

std::optional<double> RunFile::lossAt(std::int64_t step) const {
  const auto& steps = mImpl->log.steps;
  auto it = std::lower_bound(steps.begin(), steps.end(), step);
  if (it == steps.end() || *it != step) return std::nullopt;
  return mImpl->log.loss[static_cast<std::size_t>(it - steps.begin())];
}

TensorMap RunFile::loadCheckpoint(std::int64_t step, CheckpointPart part) const {
  const Hdf5Lock lock;
  const Hdf5Quiet quiet;
  auto it = mImpl->checkpoints.find(step);
  if (it == mImpl->checkpoints.end())
    throw RunFileError(path(), "/checkpoints/" + std::to_string(step),
                       "there is no checkpoint at step " + std::to_string(step));
  const RunProgram& program = mImpl->programs[it->second.program];
  TensorMap out;
  for (const InputSpec& in : program.program.inputs) {
    const bool param = in.name.starts_with("param:");
    if ((part == CheckpointPart::Params && !param) || (part == CheckpointPart::Batch && param))
      continue;
    out.emplace(in.name, mImpl->readTensor(it->second, in));
  }
  return out;
}

}  // namespace lossbound
