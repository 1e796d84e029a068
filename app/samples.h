#pragma once
// The bundled sample sessions (samples/<name>/reference.h5 + candidate.h5) for Help ▸ Samples,
// each with a one-line description taken from the table in samples/README.md.

#include <QString>

#include <vector>

namespace lossbound::app {

/// One sample pair.
struct SampleInfo {
  QString name;         ///< folder name, e.g. "gradaccum-hf-bug"
  QString description;  ///< one line, e.g. "Bug (Type-II). The candidate averages ..."
  QString reference;    ///< absolute path of reference.h5
  QString candidate;    ///< absolute path of candidate.h5
};

/// Returns the samples folder: $LOSSBOUND_SAMPLES_DIR, else the source tree's samples/ this
/// binary was built from, else <binary>/../share/lossbound/samples.
QString samplesDir();

/// Returns the complete sample pairs under `dir`, sorted by name.
std::vector<SampleInfo> findSamples(const QString& dir);

}  // namespace lossbound::app
