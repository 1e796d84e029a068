#include "core/analysis/result_cache.h"

#include "core/analysis/engine_revision.h"  // generated: cmake/engine_revision.cmake
#include "core/analysis/report_json.h"
#include "core/runfile/hdf5_support.h"

#include <QCryptographicHash>
#include <QDateTime>
#include <QDir>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QStandardPaths>

#include <hdf5.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <unistd.h>

namespace lossbound {

namespace {

constexpr const char* kFormat = "lossbound-results-cache";
constexpr int kFormatVersion = 1;

hid_t utf8StringType() {
  const hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  return t;
}

bool readStringAttr(hid_t obj, const char* name, std::string& out) {
  if (H5Aexists(obj, name) <= 0) return false;
  Hdf5Handle a(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  if (!a.valid()) return false;
  Hdf5Handle ftype(H5Aget_type(a.get()), H5Tclose);
  if (!ftype.valid() || H5Tget_class(ftype.get()) != H5T_STRING ||
      H5Tis_variable_str(ftype.get()) <= 0)
    return false;
  Hdf5Handle t(utf8StringType(), H5Tclose);
  char* buf = nullptr;
  if (H5Aread(a.get(), t.get(), &buf) < 0 || !buf) return false;
  out = buf;
  H5free_memory(buf);
  return true;
}

bool writeStringAttr(hid_t obj, const char* name, const std::string& value) {
  Hdf5Handle t(utf8StringType(), H5Tclose);
  Hdf5Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Hdf5Handle a(H5Acreate2(obj, name, t.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  const char* p = value.c_str();
  return a.valid() && H5Awrite(a.get(), t.get(), &p) >= 0;
}

bool readStringDataset(hid_t loc, const char* name, std::string& out) {
  if (H5Lexists(loc, name, H5P_DEFAULT) <= 0) return false;
  Hdf5Handle d(H5Dopen2(loc, name, H5P_DEFAULT), H5Dclose);
  if (!d.valid()) return false;
  Hdf5Handle ftype(H5Dget_type(d.get()), H5Tclose);
  Hdf5Handle space(H5Dget_space(d.get()), H5Sclose);
  if (!ftype.valid() || H5Tget_class(ftype.get()) != H5T_STRING ||
      H5Tis_variable_str(ftype.get()) <= 0 || H5Sget_simple_extent_type(space.get()) != H5S_SCALAR)
    return false;
  Hdf5Handle t(utf8StringType(), H5Tclose);
  char* buf = nullptr;
  if (H5Dread(d.get(), t.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &buf) < 0 || !buf) return false;
  out = buf;
  H5free_memory(buf);
  return true;
}

bool writeStringDataset(hid_t loc, const char* name, const std::string& value) {
  Hdf5Handle t(utf8StringType(), H5Tclose);
  Hdf5Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Hdf5Handle d(H5Dcreate2(loc, name, t.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
               H5Dclose);
  const char* p = value.c_str();
  return d.valid() && H5Dwrite(d.get(), t.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &p) >= 0;
}

template <typename T>
bool writeColumn(hid_t loc, const char* name, hid_t memType, hid_t fileType,
                 const std::vector<T>& values) {
  const hsize_t n = values.size();
  Hdf5Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  Hdf5Handle d(H5Dcreate2(loc, name, fileType, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
               H5Dclose);
  return d.valid() &&
         (n == 0 || H5Dwrite(d.get(), memType, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0);
}

std::string entryName(const std::string& key) {
  const QByteArray h =
      QCryptographicHash::hash(QByteArray::fromStdString(key), QCryptographicHash::Sha256);
  return h.toHex().left(16).toStdString();
}

/// Opens an existing cache read-only; returns an invalid handle when it is not one of ours.
hid_t openCache(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return -1;
  if (H5Fis_hdf5(path.c_str()) <= 0) return -1;
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return -1;
  std::string format;
  if (!readStringAttr(f, "format", format) || format != kFormat) {
    H5Fclose(f);
    return -1;
  }
  return f;
}

std::vector<StepResult> parseSteps(const std::string& json) {
  std::vector<StepResult> out;
  QJsonParseError err{};
  const QJsonDocument doc = QJsonDocument::fromJson(QByteArray::fromStdString(json), &err);
  if (err.error != QJsonParseError::NoError || !doc.isArray()) return out;
  try {
    for (const QJsonValue& v : doc.array()) {
      StepResult r = stepFromJson(v.toObject());
      r.fromCache = true;
      out.push_back(std::move(r));
    }
  } catch (const std::invalid_argument&) {
    return {};  // a cache written by another version: recompute rather than trust it
  }
  return out;
}

bool writeEntry(hid_t file, const std::string& name, const std::string& key,
                const std::vector<StepResult>& steps) {
  Hdf5Handle analyses(H5Gopen2(file, "analyses", H5P_DEFAULT), H5Gclose);
  if (!analyses.valid()) return false;
  Hdf5Handle g(H5Gcreate2(analyses.get(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
               H5Gclose);
  if (!g.valid()) return false;
  QJsonArray arr;
  std::vector<std::int64_t> step;
  std::vector<double> ref, cand, lo, hi;
  for (const StepResult& s : steps) {
    arr.append(stepToJson(s));
    step.push_back(s.step);
    ref.push_back(s.referenceLoss);
    cand.push_back(s.candidateLoss);
    lo.push_back(s.lo);
    hi.push_back(s.hi);
  }
  const std::string json = QJsonDocument(arr).toJson(QJsonDocument::Compact).toStdString();
  const std::string updated =
      QDateTime::currentDateTimeUtc().toString(Qt::ISODateWithMs).toStdString();
  return writeStringAttr(g.get(), "key", key) && writeStringAttr(g.get(), "updated", updated) &&
         writeStringDataset(g.get(), "steps_json", json) &&
         writeColumn(g.get(), "step", H5T_NATIVE_INT64, H5T_STD_I64LE, step) &&
         writeColumn(g.get(), "reference_loss", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, ref) &&
         writeColumn(g.get(), "candidate_loss", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, cand) &&
         writeColumn(g.get(), "envelope_lo", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, lo) &&
         writeColumn(g.get(), "envelope_hi", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, hi);
}

/// The writers' lock of one cache file: a POSIX record lock (fcntl) on "<cache>.lock", so that
/// processes that share the cache — the tasks of a job array, on one machine or on several over
/// NFS — read, merge and rename one after another and no one's new entries are lost. fcntl locks
/// (unlike a lock file created with O_EXCL) are released by the kernel when a process dies, so a
/// crashed writer never blocks the others. They do not exclude threads of one process: the mutex
/// does that. Where the file system has no locks (ENOLCK, EOPNOTSUPP, ...), writers go on without
/// one: the rename still never exposes a half-written cache, but two concurrent writers may drop
/// each other's new entries (they are recomputed next time).
class WriterLock {
 public:
  static constexpr int kWaitSeconds = 120;

  explicit WriterLock(const std::string& cachePath) : mGuard(processMutex()) {
    const std::string path = cachePath + ".lock";
    mFd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (mFd < 0) return;  // no lock file (read-only folder): the store fails anyway
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kWaitSeconds);
    while (::fcntl(mFd, F_SETLK, &fl) < 0) {
      if (errno != EAGAIN && errno != EACCES && errno != EINTR) {
        ::close(mFd);  // no locks on this file system: go on unlocked (see above)
        mFd = -1;
        return;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        ::close(mFd);
        mFd = -1;
        throw std::runtime_error("results cache: '" + path +
                                 "' is locked by another process for more than " +
                                 std::to_string(kWaitSeconds) + " s (expected a writer to finish)");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~WriterLock() {
    if (mFd >= 0) ::close(mFd);  // closing releases the record lock
  }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  static std::mutex& processMutex() {
    static std::mutex m;
    return m;
  }
  std::lock_guard<std::mutex> mGuard;
  int mFd = -1;
};

/// Returns a temporary file name beside `path` that no other writer uses: the host name and the
/// process id tell processes apart on a shared file system, the counter threads.
std::string temporaryName(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return path + ".tmp-" + host + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(counter.fetch_add(1));
}

bool dirWritable(const std::filesystem::path& dir) {
  return !dir.empty() && ::access(dir.c_str(), W_OK | X_OK) == 0;
}

}  // namespace

RunIdentity runIdentity(const std::string& path, std::string logDigest) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(fs::absolute(path), ec);
  if (ec || !fs::is_regular_file(canonical, ec))
    throw std::runtime_error("results cache: expected a run file at '" + path + "', found none");
  RunIdentity id;
  id.path = canonical.string();
  id.size = static_cast<std::int64_t>(fs::file_size(canonical, ec));
  id.mtimeNs = static_cast<std::int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                             fs::last_write_time(canonical, ec).time_since_epoch())
                                             .count());
  id.logDigest = std::move(logDigest);
  return id;
}

const char* engineRevision() { return LOSSBOUND_ENGINE_REVISION; }

std::string analysisKey(const AnalysisSettings& settings, const RunIdentity& reference,
                        const RunIdentity& candidate) {
  QJsonObject s = settingsToJson(settings);
  // Leave out what does not change the results of this method, so equivalent settings share.
  if (settings.method != EnvelopeMethod::Ensemble) {
    s.remove(QStringLiteral("seed"));
    s.remove(QStringLiteral("ensemble_size"));
    s.remove(QStringLiteral("ensemble_order"));
  }
  if (settings.method != EnvelopeMethod::Probabilistic) s.remove(QStringLiteral("confidence"));
  if (settings.method != EnvelopeMethod::Interval) s.remove(QStringLiteral("start_node"));
  auto ident = [](const RunIdentity& id) {
    QJsonObject o;
    o[QStringLiteral("path")] = QString::fromStdString(id.path);
    o[QStringLiteral("size")] = QString::number(id.size);
    o[QStringLiteral("mtime_ns")] = QString::number(id.mtimeNs);
    o[QStringLiteral("log_digest")] = QString::fromStdString(id.logDigest);
    return o;
  };
  QJsonObject key;
  key[QStringLiteral("cache_format_version")] = kFormatVersion;
  key[QStringLiteral("lossbound_version")] = QStringLiteral(LOSSBOUND_VERSION);
  key[QStringLiteral("engine_revision")] = QString::fromLatin1(engineRevision());
  key[QStringLiteral("settings")] = s;
  key[QStringLiteral("reference")] = ident(reference);
  key[QStringLiteral("candidate")] = ident(candidate);
  // QJsonObject keeps keys sorted, so the text is canonical.
  return QJsonDocument(key).toJson(QJsonDocument::Compact).toStdString();
}

std::string ResultCache::defaultPath(const std::string& candidatePath) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path cand = fs::weakly_canonical(fs::absolute(candidatePath), ec);
  const std::string file = cand.stem().string() + ".lossbound-cache.h5";
  const QByteArray envDir = qgetenv("LOSSBOUND_CACHE_DIR");
  const QByteArray digest =
      QCryptographicHash::hash(QByteArray::fromStdString(cand.string()), QCryptographicHash::Sha256)
          .toHex()
          .left(16);
  if (!envDir.isEmpty())
    return (fs::path(envDir.toStdString()) / (digest.toStdString() + "-" + file)).string();
  if (dirWritable(cand.parent_path())) return (cand.parent_path() / file).string();
  QString base = QStandardPaths::writableLocation(QStandardPaths::GenericCacheLocation);
  if (base.isEmpty()) base = QDir::tempPath();
  return (fs::path(base.toStdString()) / "lossbound" / (digest.toStdString() + "-" + file))
      .string();
}

ResultCache::ResultCache(std::string path) : mPath(std::move(path)) {}

std::vector<StepResult> ResultCache::load(const std::string& key) const {
  const Hdf5Lock lock;
  const Hdf5Quiet quiet;
  Hdf5Handle f(openCache(mPath), H5Fclose);
  if (!f.valid()) return {};
  const std::string group = "analyses/" + entryName(key);
  if (H5Lexists(f.get(), "analyses", H5P_DEFAULT) <= 0 ||
      H5Lexists(f.get(), group.c_str(), H5P_DEFAULT) <= 0)
    return {};
  Hdf5Handle g(H5Gopen2(f.get(), group.c_str(), H5P_DEFAULT), H5Gclose);
  std::string storedKey, json;
  if (!g.valid() || !readStringAttr(g.get(), "key", storedKey) || storedKey != key ||
      !readStringDataset(g.get(), "steps_json", json))
    return {};
  auto steps = parseSteps(json);
  std::sort(steps.begin(), steps.end(),
            [](const StepResult& a, const StepResult& b) { return a.step < b.step; });
  return steps;
}

void ResultCache::store(const std::string& key, const std::vector<StepResult>& steps) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target(mPath);
  if (!target.parent_path().empty()) fs::create_directories(target.parent_path(), ec);
  // Read, merge and rename under the writers' lock: without it, two writers that read the same
  // old file would each rename their own merge over it and the first one's entries would be lost.
  const WriterLock writers(mPath);
  const Hdf5Lock lock;
  const Hdf5Quiet quiet;
  std::map<std::int64_t, StepResult> merged;
  for (StepResult& s : load(key)) merged[s.step] = std::move(s);
  for (const StepResult& s : steps) {
    merged[s.step] = s;
    merged[s.step].fromCache = false;
  }
  std::vector<StepResult> all;
  for (auto& [step, r] : merged) all.push_back(std::move(r));

  const std::string tmp = temporaryName(mPath);
  const std::string myName = entryName(key);
  bool ok = false;
  {
    Hdf5Handle out(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    if (!out.valid())
      throw std::runtime_error("results cache: cannot create '" + tmp +
                               "' (expected a writable folder)");
    ok = writeStringAttr(out.get(), "format", kFormat);
    {
      const std::int64_t version = kFormatVersion;
      Hdf5Handle space(H5Screate(H5S_SCALAR), H5Sclose);
      Hdf5Handle a(H5Acreate2(out.get(), "format_version", H5T_STD_I64LE, space.get(), H5P_DEFAULT,
                              H5P_DEFAULT),
                   H5Aclose);
      ok = ok && a.valid() && H5Awrite(a.get(), H5T_NATIVE_INT64, &version) >= 0;
    }
    {
      Hdf5Handle g(H5Gcreate2(out.get(), "analyses", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                   H5Gclose);
      ok = ok && g.valid();
    }
    // Keep the other entries, most recently updated first, up to the limit.
    Hdf5Handle in(openCache(mPath), H5Fclose);
    if (ok && in.valid() && H5Lexists(in.get(), "analyses", H5P_DEFAULT) > 0) {
      Hdf5Handle src(H5Gopen2(in.get(), "analyses", H5P_DEFAULT), H5Gclose);
      H5G_info_t info{};
      std::vector<std::pair<std::string, std::string>> others;  // (updated, name)
      if (src.valid() && H5Gget_info(src.get(), &info) >= 0) {
        for (hsize_t i = 0; i < info.nlinks; ++i) {
          char name[256] = {};
          if (H5Lget_name_by_idx(src.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name,
                                 H5P_DEFAULT) < 0 ||
              name == myName)
            continue;
          Hdf5Handle g(H5Gopen2(src.get(), name, H5P_DEFAULT), H5Gclose);
          std::string updated;
          if (g.valid() && readStringAttr(g.get(), "updated", updated))
            others.emplace_back(updated, name);
        }
      }
      std::sort(others.rbegin(), others.rend());
      if (others.size() > static_cast<std::size_t>(kMaxEntries - 1)) others.resize(kMaxEntries - 1);
      Hdf5Handle dst(H5Gopen2(out.get(), "analyses", H5P_DEFAULT), H5Gclose);
      for (const auto& [updated, name] : others)
        ok = ok && H5Ocopy(src.get(), name.c_str(), dst.get(), name.c_str(), H5P_DEFAULT,
                           H5P_DEFAULT) >= 0;
    }
    ok = ok && writeEntry(out.get(), myName, key, all);
    ok = ok && H5Fflush(out.get(), H5F_SCOPE_GLOBAL) >= 0;
  }
  if (!ok) {
    fs::remove(tmp, ec);
    throw std::runtime_error("results cache: writing '" + tmp + "' failed (HDF5 error)");
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw std::runtime_error("results cache: cannot replace '" + mPath + "': " + ec.message());
  }
}

}  // namespace lossbound
