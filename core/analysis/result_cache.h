#pragma once
// The results cache: finished step results of earlier analyses, in an HDF5 file of its own beside
// the session (never inside the run files), so reopening a pair shows them without recomputing.
// Entries are keyed by the analysis settings and the identity of both run files (absolute path,
// size, modification time and a digest of the loss log); a changed file or setting misses.
// Writes go to a temporary file in the same folder (named by host, process and a counter) that is
// then renamed over the cache, so a reader never sees a half-written cache. Writers — processes
// that share the cache file, such as the tasks of a job array — read, merge and rename one at a
// time under a POSIX record lock on "<cache>.lock" (docs/cluster.md), so none loses the entries
// another stored meanwhile. An unreadable or foreign cache file is ignored on load and replaced
// on store.
//
// Layout: / attrs format="lossbound-results-cache", format_version=1;
// /analyses/<16 hex of SHA-256(key)>: attrs key (the key text), updated (ISO 8601); datasets
// steps_json (UTF-8 JSON array of step results) and, for h5dump readers, step, reference_loss,
// candidate_loss, envelope_lo, envelope_hi.

#include "core/analysis/analysis_types.h"

#include <cstdint>
#include <string>
#include <vector>

namespace lossbound {

/// What identifies one run file for the cache.
struct RunIdentity {
  std::string path;          ///< absolute, canonical
  std::int64_t size = 0;     ///< bytes
  std::int64_t mtimeNs = 0;  ///< modification time, nanoseconds since the file clock's epoch
  std::string logDigest;     ///< digest of the loss log (e.g. SHA-256 of steps and losses), or ""
};

/// Returns the identity of the file at `path`; throws std::runtime_error when it does not exist.
RunIdentity runIdentity(const std::string& path, std::string logDigest = {});

/// Returns the engine revision in every key: 16 hex digits of a hash of the sources under core/
/// and gpu/ taken at build time (cmake/engine_revision.cmake), so any engine change misses.
const char* engineRevision();

/// Returns the cache key text: canonical JSON of the settings, both identities and the versions
/// of Lossbound, of the engine (engineRevision) and of the cache format. Settings that do not
/// change results are left out (the ensemble seed, size and order count only for the ensemble
/// method, the
/// confidence only for the probabilistic one, the start node only for the interval one).
std::string analysisKey(const AnalysisSettings& settings, const RunIdentity& reference,
                        const RunIdentity& candidate);

/// A results-cache file.
class ResultCache {
 public:
  /// Maximum number of keyed analyses kept in one file; the least recently updated go first.
  static constexpr int kMaxEntries = 64;

  /// Returns where the cache of a pair lives: $LOSSBOUND_CACHE_DIR when set; else
  /// "<candidate>.lossbound-cache.h5" beside the candidate when its folder is writable; else in
  /// the user cache folder, named by a digest of the candidate's absolute path.
  static std::string defaultPath(const std::string& candidatePath);

  /// Uses the cache file at `path` (created on the first store()).
  explicit ResultCache(std::string path);

  /// Returns the cache file path.
  const std::string& path() const { return mPath; }

  /// Returns the cached step results for `key` (fromCache set), in step order; empty when the
  /// file or the key is missing or unreadable.
  std::vector<StepResult> load(const std::string& key) const;

  /// Merges `steps` into the entry of `key` (a new result for a step replaces the old one) and
  /// rewrites the file through a temporary file and a rename, holding the writers' lock (waits
  /// up to 120 s for it). Throws std::runtime_error naming the file when it cannot be written
  /// or the lock stays taken.
  void store(const std::string& key, const std::vector<StepResult>& steps);

 private:
  std::string mPath;
};

}  // namespace lossbound
