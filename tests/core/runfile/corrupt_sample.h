#pragma once
// Test support: a copy of samples/gradaccum-fixed/candidate.h5 with 20 bytes overwritten where
// libhdf5 1.10.8 crashes (SIGSEGV) while Lossbound validates it; found by a seeded random search
// over 20-byte corruptions (`lossbound-cli info` on each copy).

#include <cstddef>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

namespace lossbound::testing {

/// Writes the crashing corrupt copy of `sample` (gradaccum-fixed/candidate.h5) to `path`; throws
/// std::runtime_error when the sample cannot be read or is not the expected size.
inline void writeCrashingCorruptSample(const std::string& sample, const std::string& path) {
  constexpr std::size_t kSampleSize = 1478919, kOffset = 938950;
  constexpr unsigned char kBytes[20] = {0x93, 0x74, 0xa3, 0x7f, 0x4f, 0x50, 0x82, 0x7f, 0xd2, 0x0f,
                                        0xdb, 0xcb, 0x73, 0x45, 0x24, 0x2b, 0x54, 0xef, 0xc2, 0x70};
  std::ifstream in(sample, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() != kSampleSize)
    throw std::runtime_error(sample + ": expected " + std::to_string(kSampleSize) +
                             " bytes, found " + std::to_string(bytes.size()));
  for (std::size_t i = 0; i < sizeof kBytes; ++i) bytes[kOffset + i] = static_cast<char>(kBytes[i]);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error(path + ": cannot write the corrupt copy");
}

}  // namespace lossbound::testing
