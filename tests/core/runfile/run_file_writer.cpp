#include "tests/core/runfile/run_file_writer.h"

#include <hdf5.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace lossbound::testing {

namespace {

void check(herr_t rc, const std::string& what) {
  if (rc < 0) throw std::runtime_error("HDF5 failure while writing the fixture: " + what);
}
hid_t checkId(hid_t id, const std::string& what) {
  if (id < 0) throw std::runtime_error("HDF5 failure while writing the fixture: " + what);
  return id;
}

void stringAttr(hid_t obj, const char* name, const std::string& value) {
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t a = checkId(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT), name);
  const char* p = value.c_str();
  check(H5Awrite(a, type, &p), name);
  H5Aclose(a);
  H5Sclose(space);
  H5Tclose(type);
}

void intAttr(hid_t obj, const char* name, std::int64_t value) {
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t a = checkId(H5Acreate2(obj, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT), name);
  check(H5Awrite(a, H5T_NATIVE_INT64, &value), name);
  H5Aclose(a);
  H5Sclose(space);
}

// An identity "compression" registered as filter 32000 while writing, so that the file names
// LZF in its filter pipeline; the reader process does not have the filter.
size_t identityFilter(unsigned, size_t, const unsigned[], size_t nbytes, size_t*, void**) {
  return nbytes;
}

hid_t halfType() {
  hid_t t = H5Tcopy(H5T_IEEE_F32LE);
  H5Tset_fields(t, 15, 10, 5, 0, 10);
  H5Tset_size(t, 2);
  H5Tset_ebias(t, 15);
  return t;
}

std::uint16_t toHalfBits(double v) {  // exact for the small test values used here
  if (v == 0) return std::signbit(v) ? 0x8000 : 0;
  const std::uint16_t sign = v < 0 ? 0x8000 : 0;
  int e = 0;
  const double m = std::frexp(std::fabs(v), &e);  // v = m·2^e, m in [0.5, 1)
  const int exponent = e - 1 + 15;
  const auto fraction = static_cast<std::uint16_t>(std::lround((m * 2 - 1) * 1024));
  return static_cast<std::uint16_t>(sign | (exponent << 10) | fraction);
}

void writeDataset(hid_t parent, const std::string& name, const FixtureTensor& t) {
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  std::vector<hsize_t> dims(t.shape.begin(), t.shape.end());
  hid_t space = dims.empty()
                    ? H5Screate(H5S_SCALAR)
                    : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (t.lzf) {
    H5Z_class2_t cls{};
    cls.version = H5Z_CLASS_T_VERS;
    cls.id = 32000;
    cls.encoder_present = 1;
    cls.decoder_present = 1;
    cls.name = "lzf";
    cls.filter = identityFilter;
    check(H5Zregister(&cls), "register the stand-in LZF filter");
    check(H5Pset_chunk(dcpl, static_cast<int>(dims.size()), dims.data()), "chunk");
    check(H5Pset_filter(dcpl, 32000, H5Z_FLAG_MANDATORY, 0, nullptr), "filter");
  }
  hid_t fileType = -1, memType = -1;
  std::vector<unsigned char> buffer;
  auto fill = [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> v(t.values.size());
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<T>(t.values[i]);
    buffer.resize(v.size() * sizeof(T));
    std::memcpy(buffer.data(), v.data(), buffer.size());
  };
  if (t.storage == "f64") {
    fileType = H5Tcopy(H5T_IEEE_F64LE);
    memType = H5Tcopy(H5T_NATIVE_DOUBLE);
    fill(double{});
  } else if (t.storage == "f32") {
    fileType = H5Tcopy(H5T_IEEE_F32LE);
    memType = H5Tcopy(H5T_NATIVE_FLOAT);
    fill(float{});
  } else if (t.storage == "i64") {
    fileType = H5Tcopy(H5T_STD_I64LE);
    memType = H5Tcopy(H5T_NATIVE_INT64);
    fill(std::int64_t{});
  } else if (t.storage == "i32") {
    fileType = H5Tcopy(H5T_STD_I32LE);
    memType = H5Tcopy(H5T_NATIVE_INT32);
    fill(std::int32_t{});
  } else if (t.storage == "u8") {
    fileType = H5Tcopy(H5T_STD_U8LE);
    memType = H5Tcopy(H5T_NATIVE_UINT8);
    fill(std::uint8_t{});
  } else if (t.storage == "u16") {  // bfloat16 bits: the upper half of the float32
    fileType = H5Tcopy(H5T_STD_U16LE);
    memType = H5Tcopy(H5T_NATIVE_UINT16);
    std::vector<std::uint16_t> v(t.values.size());
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<std::uint16_t>(
          std::bit_cast<std::uint32_t>(static_cast<float>(t.values[i])) >> 16);
    buffer.resize(v.size() * 2);
    std::memcpy(buffer.data(), v.data(), buffer.size());
  } else if (t.storage == "f16") {
    fileType = halfType();
    memType = halfType();
    std::vector<std::uint16_t> v(t.values.size());
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = toHalfBits(t.values[i]);
    buffer.resize(v.size() * 2);
    std::memcpy(buffer.data(), v.data(), buffer.size());
  } else {
    throw std::runtime_error("unknown fixture storage " + t.storage);
  }
  hid_t d =
      checkId(H5Dcreate2(parent, name.c_str(), fileType, space, lcpl, dcpl, H5P_DEFAULT), name);
  if (!buffer.empty())
    check(H5Dwrite(d, memType, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data()), name);
  if (!t.dtype.empty()) stringAttr(d, "dtype", t.dtype);
  H5Dclose(d);
  if (t.lzf) H5Zunregister(32000);
  H5Tclose(fileType);
  H5Tclose(memType);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Pclose(lcpl);
}

}  // namespace

std::string defaultGraph(const std::string& extraNode) {
  return R"({"format": "lossbound-step-program", "ir_version": 1, "torch_version": "1.13.0",
  "inputs": [{"name": "param:w", "shape": [2, 3], "dtype": "float32"},
             {"name": "batch:x", "shape": [3], "dtype": "float32"}],
  "nodes": [
    {"name": "mul", "op": "aten.mul.Tensor", "args": [{"ref": "param:w"}, {"ref": "batch:x"}],
     "kwargs": {}, "outputs": [{"shape": [2, 3], "dtype": "float32"}]},
    {"name": "sum_1", "op": "aten.sum.default", "args": [{"ref": "mul"}], "kwargs": {},
     "outputs": [{"shape": [], "dtype": "float32"}]})" +
         extraNode + R"(],
  "outputs": [{"name": "loss", "ref": {"ref": "sum_1"}}]})";
}

std::vector<FixtureTensor> defaultTensors(std::int64_t step) {
  const double s = static_cast<double>(step);
  return {{"params/w", "float32", {2, 3}, {0.5 + s, -1.25, 2.0, 0.75, 1.5, -0.5}, "f32", false},
          {"batch/x", "float32", {3}, {1.0, 2.0 - s, 0.25}, "f32", false}};
}

double defaultLoss(std::int64_t step) {
  const auto t = defaultTensors(step);
  double sum = 0;
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c)
      sum += t[0].values[static_cast<std::size_t>(r * 3 + c)] *
             t[1].values[static_cast<std::size_t>(c)];
  return sum;
}

void writeRunFile(const std::string& path, const RunFixture& f) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  hid_t file = checkId(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), path);
  if (f.format) stringAttr(file, "format", *f.format);
  if (f.formatVersion) intAttr(file, "format_version", *f.formatVersion);
  stringAttr(file, "run_name", "fixture");
  stringAttr(file, "role", "reference");
  stringAttr(file, "framework", "pytorch 1.13.0");
  stringAttr(file, "device", "cpu");
  if (f.writeLog) {
    std::vector<double> loss = f.loss;
    if (loss.empty())
      for (std::int64_t s : f.steps) loss.push_back(defaultLoss(s));
    FixtureTensor steps{"", "", {f.steps.size()}, {}, f.stepAsFloat ? "f64" : "i64", false};
    for (std::int64_t s : f.steps) steps.values.push_back(static_cast<double>(s));
    writeDataset(file, "log/step", steps);
    writeDataset(file, "log/loss", {"", "", {loss.size()}, loss, "f64", false});
  }
  const std::string graph = f.graph.empty() ? defaultGraph() : f.graph;
  const std::string id = "0123456789abcdef";
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  if (f.writePrograms) {
    hid_t pg = checkId(H5Gcreate2(file, ("programs/" + id).c_str(), lcpl, H5P_DEFAULT, H5P_DEFAULT),
                       "program group");
    intAttr(pg, "ir_version", f.irVersionAttr);
    {
      hid_t type = H5Tcopy(H5T_C_S1);
      H5Tset_size(type, H5T_VARIABLE);
      H5Tset_cset(type, H5T_CSET_UTF8);
      hid_t space = H5Screate(H5S_SCALAR);
      hid_t d = checkId(H5Dcreate2(pg, "graph", type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                        "graph");
      const char* p = graph.c_str();
      check(H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, &p), "graph");
      H5Dclose(d);
      H5Sclose(space);
      H5Tclose(type);
    }
    H5Gclose(pg);
  }
  for (std::int64_t step : f.checkpointSteps) {
    hid_t cg = checkId(H5Gcreate2(file, ("checkpoints/" + std::to_string(step)).c_str(), lcpl,
                                  H5P_DEFAULT, H5P_DEFAULT),
                       "checkpoint group");
    intAttr(cg, "step", step);
    stringAttr(cg, "program", f.programAttr.empty() ? id : f.programAttr);
    const std::vector<FixtureTensor> tensors = f.tensors.empty() ? defaultTensors(step) : f.tensors;
    for (const FixtureTensor& t : tensors) writeDataset(cg, t.path, t);
    H5Gclose(cg);
  }
  H5Pclose(lcpl);
  H5Fclose(file);
}

void overwriteElement(const std::string& path, const std::string& dataset, std::uint64_t index,
                      double value) {
  const std::string what = path + ": " + dataset + "[" + std::to_string(index) + "]";
  hid_t file = checkId(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), path);
  hid_t d = H5Dopen2(file, dataset.c_str(), H5P_DEFAULT);
  hid_t type = d >= 0 ? H5Dget_type(d) : -1;
  hid_t space = d >= 0 ? H5Dget_space(d) : -1;
  const bool isFloat = type >= 0 && H5Tget_class(type) == H5T_FLOAT;
  const std::size_t size = type >= 0 ? H5Tget_size(type) : 0;
  // The flat index as coordinates, for a dataset of any rank.
  const int rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
  std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(rank, 0))), at(dims.size()),
      one(dims.size(), 1);
  if (rank > 0) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  std::uint64_t rest = index;
  for (std::size_t k = dims.size(); k-- > 0;) {
    at[k] = rest % dims[k];
    rest /= dims[k];
  }
  herr_t rc = isFloat && (size == 4 || size == 8) && rank > 0 && rest == 0 ? 0 : -1;
  if (rc >= 0)
    rc = H5Sselect_hyperslab(space, H5S_SELECT_SET, at.data(), nullptr, one.data(), nullptr);
  if (rc >= 0) {
    const hsize_t n = 1;
    hid_t mem = H5Screate_simple(1, &n, nullptr);
    // Written in the dataset's own precision, so no conversion touches a NaN or an infinity.
    const float asFloat = static_cast<float>(value);
    rc = size == 4 ? H5Dwrite(d, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, &asFloat)
                   : H5Dwrite(d, H5T_NATIVE_DOUBLE, mem, space, H5P_DEFAULT, &value);
    H5Sclose(mem);
  }
  if (space >= 0) H5Sclose(space);
  if (type >= 0) H5Tclose(type);
  if (d >= 0) H5Dclose(d);
  H5Fclose(file);
  check(rc, what + " (expected a float32 or float64 dataset with that element)");
}

}  // namespace lossbound::testing
